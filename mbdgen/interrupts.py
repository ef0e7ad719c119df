"""Ctrl-C and SIGTERM as one kind of interrupt, noticed between jitted chunks.

Batch schedulers and CI runners stop a job with SIGTERM; a user presses Ctrl-C.
Both must end a run the same way: the steps computed so far are kept and saved.
:func:`interrupts_as_exceptions` installs handlers that raise
:class:`~mbdgen.errors.Interrupted` (SIGTERM) or :class:`KeyboardInterrupt`
(SIGINT) and remember which signal came, so that an interrupt that a library
(Numba, during compilation) turned into another exception is still recognised.
Python runs signal handlers between bytecodes, so a signal that arrives while a
jitted chunk runs takes effect when the chunk returns.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from mbdgen.errors import Interrupted

try:  # the C module that ``signal`` wraps: its calls take and return plain ints and
    # callables, without the enum conversion that made installing and restoring the
    # three handlers of a run 23 µs (a ValueError raised inside ``signal.signal`` for
    # every previous handler that is a function)
    import _signal
except ImportError:  # pragma: no cover - another Python implementation
    _signal = signal

#: The signals a run turns into exceptions (:func:`interrupts_as_exceptions`).
_GUARDED = tuple(
    int(getattr(signal, name)) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
_IGNORED = int(signal.SIG_IGN)

_received: list[str] = []


def _handler(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    _received.append(name)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(name)


def _quiet_unraisable(
    previous: Callable[[sys.UnraisableHookArgs], object],
) -> Callable[[sys.UnraisableHookArgs], None]:
    """An ``sys.unraisablehook`` that drops our own interrupts and passes the rest on.

    An interrupt raised inside a callback from C (llvmlite notifies its object
    cache through ctypes while Numba compiles) cannot propagate: Python prints it as
    "Exception ignored ..." with a traceback. The signal is recorded all the same,
    and :func:`raise_if_received` raises it again once control is back in Python.
    """

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if isinstance(unraisable.exc_value, (KeyboardInterrupt, Interrupted)) and _received:
            return
        previous(unraisable)

    return hook


def last_signal() -> str | None:
    """The signal that arrived last while handlers were installed ("SIGINT", ...)."""
    return _received[-1] if _received else None


def clear() -> None:
    """Forget the signals received so far."""
    _received.clear()


def count() -> int:
    """How many signals have been received so far: a mark for :func:`since`."""
    return len(_received)


def since(mark: int) -> str | None:
    """The last signal received after ``mark`` (:func:`count`), or None.

    The handler records a signal before it raises, so this knows of a signal whose
    exception was lost: one raised while Python ran a finalizer (``__del__``) or a
    callback from C — during Numba's compilation llvmlite's finalizers run all the
    time — is printed as "ignored", and the run would go on (SIGTERM 0.03-0.05 s
    into the compile: 2 of 92 tries ran to the end and exited 0).
    """
    return _received[-1] if len(_received) > mark else None


def raise_if_received(mark: int) -> None:
    """Raise the interrupt of a signal received after ``mark`` whose exception was lost."""
    name = since(mark)
    if name == "SIGINT":
        raise KeyboardInterrupt
    if name is not None:
        raise Interrupted(name)


def describe(exc: BaseException | None = None) -> str:
    """How a run was stopped, in words: ``interrupted (Ctrl-C)`` or ``terminated (SIGTERM)``."""
    name = exc.signal_name if isinstance(exc, Interrupted) else last_signal()
    if name in (None, "SIGINT"):
        return "interrupted (Ctrl-C)"
    return f"terminated ({name})"


def exit_code(exc: BaseException | None = None) -> int:
    """The shell's convention: 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM)."""
    name = exc.signal_name if isinstance(exc, Interrupted) else last_signal()
    return 128 + int(signal.Signals[name or "SIGINT"])


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back (they arrive when the block ends): for the few
    instructions between creating a resource and taking ownership of it."""
    held = {signal.SIGINT, signal.SIGTERM}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def ignored() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM (main thread): a second Ctrl-C while the first is
    being reported must not turn the report into another failure."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _recorder(signum: int, frame: FrameType | None) -> None:
    _received.append(signal.Signals(signum).name)


@contextlib.contextmanager
def held(reraise: bool = True) -> Iterator[None]:
    """While active (main thread only), SIGINT, SIGTERM and SIGHUP are recorded but
    raise nothing: a result being written is written whole.  When the block ends
    the last one received in it raises its interrupt (``reraise``; a caller that
    is already ending on an interrupt passes False).

    For the CLI's saves: a second Ctrl-C while a stopped run's partial result was
    written (0.1-2 s for 10⁵-10⁶ rows) raised KeyboardInterrupt inside the write,
    and the atomic write then kept the old file, so the steps were lost after all.
    The handler records instead of ignoring (:func:`ignored`), so that the command's
    exit code still says how it was stopped.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mark = count()
    previous = {}
    for sig in _GUARDED:
        with contextlib.suppress(ValueError, OSError):
            if _signal.getsignal(sig) == _IGNORED:
                continue
            previous[sig] = _signal.signal(sig, _recorder)
    try:
        yield
    finally:
        for sig, old in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                _signal.signal(sig, old)
    if reraise:
        raise_if_received(mark)


@contextlib.contextmanager
def interrupts_as_exceptions() -> Iterator[None]:
    """While active (main thread only), SIGTERM and SIGHUP raise Interrupted and SIGINT
    KeyboardInterrupt; the previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in _GUARDED:
        with contextlib.suppress(ValueError, OSError):
            if _signal.getsignal(sig) == _IGNORED:
                continue  # e.g. SIGHUP under nohup: the caller asked not to be stopped
            previous[sig] = _signal.signal(sig, _handler)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _quiet_unraisable(previous_hook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for sig, old in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                _signal.signal(sig, old)
