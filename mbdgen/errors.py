"""Exceptions raised by mbdgen, each carrying a message written for the user."""

from __future__ import annotations


class MbdgenError(Exception):
    """Base class: every error the CLI reports as one line without a traceback."""


class ModelError(MbdgenError):
    """The user's model is malformed: wrong shapes, unknown symbols, unsafe names."""


class CompileError(MbdgenError):
    """The model could not be turned into kernels (e.g. an unsupported function)."""


class StaleModuleError(MbdgenError):
    """A generated module does not match its model source or this mbdgen version."""


class SimulationError(MbdgenError):
    """A run stopped early.

    ``result`` holds everything computed up to the failure, so nothing is lost.
    """

    def __init__(self, message: str, result: object | None = None) -> None:
        super().__init__(message)
        self.result = result
