"""Exceptions raised by mbdgen, each carrying a message written for the user.

All derive from :class:`MbdgenError`, which the CLI reports as one line; they are
exported from the top-level package (``mbdgen.MbdgenError``, ...).
"""

from __future__ import annotations


class MbdgenError(Exception):
    """Base class: every error the CLI reports as one line without a traceback."""


class ModelError(MbdgenError):
    """The user's model is malformed: wrong shapes, unknown symbols, unsafe names."""


class CompileError(MbdgenError):
    """The model could not be turned into kernels (e.g. an unsupported function)."""


class StaleModuleError(MbdgenError):
    """A generated module does not match its model source or this mbdgen version."""


class OutputError(MbdgenError):
    """A result or plot cannot be written where the user asked (checked before a run)."""


class WriteError(OutputError, OSError):
    """A file could not be written (a full disk, a quota, an I/O error): one line
    naming the file and the cause, ``cannot write '…': No space left on device``.

    It is an :class:`OSError` too (``errno``, ``strerror``, ``filename``), so code that
    handles the operating system's errors handles it.
    """

    def __str__(self) -> str:
        return f"cannot write {self.filename!r}: {self.strerror}"


class ResultFileError(MbdgenError):
    """A file given to :func:`mbdgen.load` is missing, damaged or not an mbdgen result."""


class SimulationError(MbdgenError):
    """A run stopped early.

    ``result`` holds everything computed up to the failure, so nothing is lost.
    ``reason`` says why: ``"failed"`` (a status of the integrator), ``"interrupted"``
    (Ctrl-C, SIGINT) or ``"terminated"`` (SIGTERM).
    """

    def __init__(self, message: str, result: object | None = None, reason: str = "failed") -> None:
        super().__init__(message)
        self.result = result
        self.reason = reason


class Interrupted(KeyboardInterrupt):
    """A termination request (SIGTERM) delivered as an interrupt.

    Subclassing :class:`KeyboardInterrupt` makes every place that keeps the partial
    result on Ctrl-C keep it on SIGTERM too; ``signal_name`` tells them apart.
    """

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
