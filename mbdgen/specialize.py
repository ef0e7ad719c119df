"""A small model's own entry point, compiled in the background (issue 11, item 3).

A model whose n + m + nd is at most :data:`mbdgen.codegen.abi.UNROLL_LIMIT` steps with
its module's own entry points: the sizes are constants there, LLVM unrolls the small
dense loops, and the step is 1.6-2x faster than through the entry points compiled once
for all models (:mod:`mbdgen.runtime.shared`; HHT on the slider-crank 1.6x, on the PI
pendulum 2.0x).  But its own entry point costs 2-30 s of JIT the first time (HHT's
index-3 loop about 21-23 s on a quiet machine), and that was the first step's latency.

With the policy "background" (the default) the first run of a (model, entry point)
whose own compiled code is neither in memory nor in Numba's disk cache steps through
the shared routine (the same operations in the same order: the same bits) and starts
a detached interpreter (``python -m mbdgen.specialize``) that compiles the own entry
point for exactly the argument types of this run into the cache.  Between chunks the
run looks whether that process has ended and, once the cache holds the code, goes on
with the own entry point; later runs find it in the cache from their first call.  The
JIT is the same work as before, moved off the path to the first step onto the second
core.  The policy "now" (``MBDGEN_SPECIALIZE=now``: the benchmarks, ``mbdgen compile
--jit``) compiles the own entry point in the process at the first call, as before.
The policy "shared" takes the own code where it is compiled or cached and else the
shared routine, and never compiles the own one: for a process that runs many models
and methods once each, where the own loops' JIT (up to 20 s each) would cost more
than their faster steps save — the test suite, whose cold run on two cores took 21
minutes with it against 27 under "now".

A file lock per (module, entry point, argument types) keeps concurrent runs (threads of
a sweep, pytest workers, two shells) from compiling the same code twice; the child's
output goes to a log next to the lock (``specialize_dir()``).  That folder is under the
shared temporary folder, so it is a private one (:func:`mbdgen.private_dir.private_dir`:
0700, this user's, else refused and the run goes on without a background compile), its
logs and locks are opened without following links, and the argument types reach the
child through a pipe, never through a file that another user could swap for a pickle
of their own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from numba._dispatcher import compute_fingerprint
from numba.core.errors import NumbaError

from mbdgen.errors import MbdgenError
from mbdgen.private_dir import open_no_follow, temp_dir

POLICY_ENV = "MBDGEN_SPECIALIZE"
POLICIES = ("background", "now", "shared")

_LOCK = threading.Lock()
#: (module file, entry point, signature) → the background process started for it.
_STARTED: dict[tuple[str, str, str], subprocess.Popen[bytes]] = {}
#: The messages of folders and logs refused in this process (each is said once).
_REFUSED: set[str] = set()


def policy() -> str:
    """The policy of :envvar:`MBDGEN_SPECIALIZE`: "background" (default), "now" or
    "shared"."""
    value = os.environ.get(POLICY_ENV, "background").strip().lower() or "background"
    if value not in POLICIES:
        raise MbdgenError(f"{POLICY_ENV} must be one of {', '.join(POLICIES)}, got {value!r}")
    return value


@contextlib.contextmanager
def policy_set(value: str) -> Iterator[None]:
    """Within the block the policy is ``value`` ("now": own entry points compile in
    this process, as ``mbdgen compile --jit`` needs)."""
    before = os.environ.get(POLICY_ENV)
    os.environ[POLICY_ENV] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(POLICY_ENV, None)
        else:
            os.environ[POLICY_ENV] = before


def specialize_dir() -> Path:
    """Where the locks and the background processes' logs live: the private folder
    ``<tempdir>/mbdgen-specialize-<uid>`` (:class:`MbdgenError` where it is not)."""
    return temp_dir("mbdgen-specialize")


def _refused(exc: MbdgenError) -> None:
    """Say once per process why no background compile starts (a refused folder or
    log): a warning, one line; the run goes on with the shared routine."""
    message = f"{exc}; no background compile (the run goes on as it is)"
    if message not in _REFUSED:  # called under _LOCK
        _REFUSED.add(message)
        warnings.warn(message, stacklevel=3)


def load_cached(dispatcher: Any, signature: Any) -> bool:
    """Whether ``dispatcher`` has compiled code for ``signature`` in memory or in its
    disk cache (then loaded and installed, as Numba's own ``Dispatcher.compile`` does on
    a cache hit, without compiling anything on a miss).

    ``signature`` is the argument types or a full Numba signature.  Numba keys its cache
    by what ``compile`` was given: a call from Python or from jitted code gives it the
    argument types, ``get_compile_result`` (a kernel as a first-class function,
    :class:`mbdgen.runtime.shared.KernelPointer`) the full signature.  The one misses
    what the other saved, so a full signature is looked up under both keys: else a
    kernel this process compiled is compiled again by the kernel helper, and one the
    helper compiled again by the next process."""
    args = tuple(getattr(signature, "args", signature))
    if args in dispatcher.overloads:
        return True
    cache = getattr(dispatcher, "_cache", None)
    if cache is None:
        return False
    from numba.core.compiler_lock import global_compiler_lock

    keys = (signature, args) if hasattr(signature, "args") else (args,)
    try:
        with global_compiler_lock:
            for key in keys:
                cres = cache.load_overload(key, dispatcher.targetctx)
                if cres is not None:
                    break
            else:
                return False
            dispatcher._cache_hits[key] += 1
            dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            dispatcher.add_overload(cres)
    except Exception:  # noqa: BLE001 - an unreadable entry is a miss, never an error
        return False
    return True


def _key(module: Any, name: str, signature: tuple[Any, ...]) -> tuple[str, str, str]:
    """(module file, entry point, digest of both and the signature): a copy of a model
    in another folder is another file to Numba's cache, so another key."""
    path = str(module.__file__)
    text = "\0".join((path, name, repr(signature)))
    return (path, name, hashlib.sha256(text.encode()).hexdigest()[:16])


def start(module: Any, name: str, signature: tuple[Any, ...]) -> subprocess.Popen[bytes] | None:
    """Start (once per process) the background compile of ``module.<name>`` for
    ``signature``; None where it cannot start or the policy is not "background" (the
    run goes on with the shared routine)."""
    if policy() != "background":
        return None
    key = _key(module, name, signature)
    with _LOCK:
        proc = _STARTED.get(key)
        if proc is not None:
            return proc
        stem = f"{Path(key[0]).stem}-{name}-{key[2]}"
        try:
            folder = specialize_dir()
            with open_no_follow(folder / f"{stem}.log") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "mbdgen.specialize", key[0], name,
                     str(folder / f"{stem}.lock")],
                    stdin=subprocess.PIPE, stdout=log, stderr=log,
                    start_new_session=True, close_fds=True,
                    env={**os.environ, POLICY_ENV: "now"},
                )  # fmt: skip
            # the argument types through the pipe, never a file: nobody can swap them
            with proc.stdin:  # type: ignore[union-attr]
                proc.stdin.write(pickle.dumps(signature))  # type: ignore[union-attr]
        except MbdgenError as exc:
            _refused(exc)
            return None
        except Exception:  # noqa: BLE001 - no background compile: the run goes on as it is
            return None
        _STARTED[key] = proc
        return proc


def wait_started(timeout: float | None = None) -> None:
    """Wait for the background compiles this process started (benchmarks, tests)."""
    with _LOCK:
        procs = list(_STARTED.values())
    for proc in procs:
        proc.wait(timeout)


class _Choice:
    """The code one signature of a :class:`Specializing` runs: the own entry point or
    the shared routine, and the background compile that may switch it to the own."""

    __slots__ = ("child", "compiled", "signature", "target")

    def __init__(self) -> None:
        self.target: Any = None
        self.signature: tuple[Any, ...] | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.compiled = 0  # the own dispatcher's overloads when last looked at


def _fingerprint(args: tuple[Any, ...]) -> bytes | None:
    """Numba's own fingerprint of the argument types (what its dispatcher keys its
    type lookup on; about 1 µs for an entry point's 20 arguments, against 200 µs for
    ``typeof`` of each), or None for an argument it has none for."""
    try:
        return compute_fingerprint(args)
    except Exception:  # noqa: BLE001 - no fingerprint: the types are found each call
        return None


class Specializing:
    """A small model's entry point under the policy "background" or "shared": the
    module's own entry point where its code is compiled or cached for the call's
    argument types, else the shared routine (from ``shared_factory()``) — under
    "background" until the background compile has put the own code in the cache.

    One per module and entry point (:func:`mbdgen.steppers._entry_point`): the choice
    is made once per argument types (their Numba fingerprint) and kept for the next
    runs of the process, so that a run of a few steps pays no type resolution."""

    def __init__(self, own: Any, shared_factory: Callable[[], Any], module: Any, name: str):
        self.own = own
        self._shared_factory = shared_factory
        self._module = module
        self._name = name
        self._choices: dict[Any, _Choice] = {}
        self._last = _Choice()
        self.__name__ = name

    @property
    def _target(self) -> Any:
        """What the last call ran: ``own`` or the shared routine."""
        return self._last.target

    def _first_call(self, choice: _Choice, args: tuple[Any, ...]) -> Any:
        choice.signature = tuple(self.own.typeof_pyval(a) for a in args)
        choice.target = self.own
        if load_cached(self.own, choice.signature):
            return self.own(*args)
        try:
            shared_call = self._shared_factory()
            out = None if shared_call is None else shared_call(*args)
        except NumbaError:  # the shared routine does not type for this model: as before
            shared_call = None
        if shared_call is None:
            return self.own(*args)
        choice.target = shared_call
        choice.compiled = len(self.own.overloads)
        # after the shared routine's first call: on a fresh installation that call
        # compiles it, and a background compile would compete with it for the cores
        choice.child = start(self._module, self._name, choice.signature)
        return out

    def _poll(self, choice: _Choice) -> None:
        """Switch to the own code once the background compile has cached it, or once
        this process has compiled it (a run under the policy "now")."""
        if choice.target is self.own:
            return
        child = choice.child
        if child is not None and child.poll() is not None:
            choice.child = None
            if load_cached(self.own, choice.signature):
                choice.target = self.own
                return
        compiled = len(self.own.overloads)
        if compiled != choice.compiled:
            choice.compiled = compiled
            if choice.signature in self.own.overloads:
                choice.target = self.own

    def __call__(self, *args: Any) -> Any:
        key: Any = _fingerprint(args)
        if key is None:  # rare (an argument Numba has no fingerprint for): the types
            key = tuple(self.own.typeof_pyval(a) for a in args)
        choice = self._choices.get(key)
        if choice is None:  # kept once made: an exception in the first call decides nothing
            choice = _Choice()
            out = self._first_call(choice, args)
            self._choices[key] = self._last = choice
            return out
        self._last = choice
        self._poll(choice)
        return choice.target(*args)


# -- a new model's kernels, compiled on two cores -------------------------------------
#
# A new model's first run compiles its kernels one after the other in the user's
# process: the evaluation kernel for the checks at t0, then the blocks its method's
# Newton matrix needs, then the energy check's.  For a spatial model that is most of
# the first step's latency (the flyball governor with HHT: dynamics_values 12.1 s,
# phi_q_lam_q_values 8.8 s, force_q_values 8.4 s, force_qd_values 6.6 s).  Under the
# policy "background" a helper process compiles the kernels the run will need after the
# evaluation kernel, in order, while this process compiles the evaluation kernel and
# then takes the remaining ones from the other end.  A file lock per kernel makes each
# compile happen once: whoever holds it compiles (or finds it cached), the other waits
# for it or moves on, and a kernel the helper compiled is loaded from Numba's cache.

#: module file → the helper started for it (a process starts one per module file).
_HELPERS: dict[str, subprocess.Popen[bytes]] = {}
#: (module file, kernel names) looked at already: compiled, cached, or a helper's.
_CHECKED: set[tuple[str, ...]] = set()


def kernel_lock_path(path: str, name: str, signature: Any) -> Path:
    """The lock of one kernel of the generated module at ``path``."""
    digest = hashlib.sha256("\0".join((path, name, repr(signature))).encode()).hexdigest()[:16]
    return specialize_dir() / f"{Path(path).stem}-{name}-{digest}.klock"


def kernel_log_path(path: str) -> Path:
    """The log of the kernel helper of the generated module at ``path``."""
    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    return specialize_dir() / f"{Path(path).stem}-{digest}-kernels.log"


def _flock(handle: Any, block: bool) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock (Windows): no sharing
        return True
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except OSError:
        return False
    return True


def start_kernels(module: Any, names: list[str], signatures: dict[str, Any]) -> bool:
    """Start the helper that compiles ``names`` of ``module`` (those not compiled or
    cached yet) under the policy "background", where it pays: two or more of them,
    two cores or more.  Returns whether a helper runs for ``module``."""
    path = getattr(module, "__file__", None)
    if path is None or policy() != "background" or (os.cpu_count() or 1) < 2:
        return False
    path = str(path)
    with _LOCK:
        if path in _HELPERS:
            return True
        if (path, *names) in _CHECKED:
            return False
        _CHECKED.add((path, *names))
    todo = [k for k in names if not load_cached(getattr(module, k), signatures[k])]
    if len(todo) < 2:
        return False
    with _LOCK:
        try:
            with open_no_follow(kernel_log_path(path)) as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "mbdgen.specialize", "--kernels", path, *todo],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True, close_fds=True,
                    env={**os.environ, POLICY_ENV: "now"},
                )  # fmt: skip
        except MbdgenError as exc:
            _refused(exc)
            return False
        except Exception:  # noqa: BLE001 - no helper: this process compiles them all
            return False
        _HELPERS[path] = proc
    return True


@contextlib.contextmanager
def kernel_claimed(module: Any, name: str, signature: Any) -> Iterator[None]:
    """Hold the lock of ``module.<name>`` while the block compiles or loads it, where a
    helper compiles this module's kernels (else nothing to coordinate).  A kernel split
    in parts has them compiled or loaded first, each under its own lock, so that its
    compile finds them in memory."""
    from mbdgen.runtime.shared import kernel_parts

    path = str(getattr(module, "__file__", ""))
    with _LOCK:
        helper = _HELPERS.get(path)
    if helper is None:
        yield
        return
    args = tuple(signature.args)
    for part in kernel_parts(module, name):
        with open_no_follow(kernel_lock_path(path, part, signature)) as lock:
            _flock(lock, block=True)
            if not load_cached(getattr(module, part), args):
                getattr(module, part).compile(args)
    with open_no_follow(kernel_lock_path(path, name, signature)) as lock:
        _flock(lock, block=True)  # the helper's compile of it, if any, ends first
        load_cached(getattr(module, name), signature)
        yield


def compile_claimed(module: Any, name: str, signature: Any) -> None:
    """Compile (or load) ``module.<name>`` for ``signature`` now, under the kernels'
    locks, where a helper compiles this module's kernels: the evaluation kernel, whose
    last parts the helper compiles meanwhile (:func:`mbdgen.runtime.shared.kernel_queue`).
    Without a helper nothing happens here: the kernel's first call compiles it."""
    with _LOCK:
        helper = _HELPERS.get(str(getattr(module, "__file__", "")))
    if helper is None:
        return
    with kernel_claimed(module, name, signature):
        dispatcher = getattr(module, name)
        if not load_cached(dispatcher, signature):
            dispatcher.compile(tuple(signature.args))


def _compile_kernels(path: str, names: list[str]) -> str:
    """The helper: compile the kernels ``names`` of the generated module at ``path`` in
    order, each under its lock; one held by the user's process is skipped."""
    from mbdgen.compiler import import_generated
    from mbdgen.runtime.shared import kernel_parts, kernel_signature

    module = import_generated(Path(path))
    done, ready = [], set()
    for name in names:
        signature = kernel_signature(name)
        if not all(part in ready for part in kernel_parts(module, name)):
            continue  # a part the user's process compiles: it compiles this one after it
        with open_no_follow(kernel_lock_path(path, name, signature)) as lock:
            if not _flock(lock, block=False):
                continue
            dispatcher = getattr(module, name)
            if not load_cached(dispatcher, signature):
                dispatcher.compile(tuple(signature.args))
                done.append(name)
            ready.add(name)
    return f"compiled: {' '.join(done)}"


def _signature_from_pipe(stream: Any) -> Any:
    """The argument types :func:`start` wrote to the background process's input: read
    only from a pipe (the one it opened), never from a file, which might hold another
    user's pickle."""
    if not stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode):
        raise MbdgenError(
            "python -m mbdgen.specialize reads the argument types only from a pipe "
            "(mbdgen starts it), never from a file"
        )
    return pickle.loads(stream.read())  # noqa: S301 - our own parent's pipe


def _compile(path: str, name: str, signature: Any, lock_file: str) -> str:
    """The background process: compile ``name`` of the generated module at ``path`` for
    ``signature`` into Numba's cache, unless another process holds the lock."""
    with open_no_follow(lock_file) as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - no flock (Windows): compile anyway
            pass
        except OSError:
            return "another process compiles it"
        from mbdgen.compiler import import_generated

        dispatcher = getattr(import_generated(Path(path)), name)
        if load_cached(dispatcher, signature):
            return "cached already"
        dispatcher.compile(signature)
        return "compiled"


if __name__ == "__main__":  # pragma: no cover - run in the background process
    if sys.argv[1] == "--kernels":
        print(f"kernels of {sys.argv[2]}: {_compile_kernels(sys.argv[2], sys.argv[3:])}")
    else:
        try:
            _signature = _signature_from_pipe(sys.stdin.buffer)
        except MbdgenError as exc:
            sys.exit(f"error: {exc}")
        path, name, lock_file = sys.argv[1:4]
        print(f"{name} of {path}: {_compile(path, name, _signature, lock_file)}", flush=True)
