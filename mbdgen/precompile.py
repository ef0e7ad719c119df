"""Fill Numba's on-disk cache for a model's entry points in a detached process.

``mbdgen compile MODEL --precompile abm,hht`` returns as soon as the module is
written and leaves a background interpreter that runs one short step of each named
method, so that the JIT (5-120 s per method on 2 cores, see the design notes,
"JIT cost per entry point") is paid before the user's first simulation rather than
during it.  Numba writes each cache entry atomically, so a simulation started while
the background process still compiles is correct (it compiles what is not cached
yet itself).

Run directly as ``python -m mbdgen.precompile MODEL OUT_DIR METHOD[,METHOD...]``.
"""

from __future__ import annotations

import os
import subprocess
import sys

from mbdgen.errors import MbdgenError


def parse_methods(text: str) -> tuple[str, ...]:
    """``"abm,hht"`` → ``("abm", "hht")``; every name must be a registered method."""
    from mbdgen.methods import METHODS

    names = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [n for n in names if n not in METHODS]
    if unknown or not names:
        raise MbdgenError(
            f"--precompile: unknown method {', '.join(unknown) or repr(text)} "
            f"(choose from {', '.join(sorted(METHODS))})"
        )
    return names


def start(
    model: str | os.PathLike[str], out_dir: str | os.PathLike[str], methods: tuple[str, ...]
) -> int:
    """Start the detached precompiling process; return its process id."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mbdgen.precompile", str(model), str(out_dir), ",".join(methods)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return proc.pid


def run(model: str, out_dir: str, methods: tuple[str, ...]) -> dict[str, str]:
    """One two-step simulation per method (JIT and cache); a method the model cannot
    run (say, Welch's scheme on a non-SPD model) is recorded, not raised."""
    import mbdgen
    from mbdgen import specialize

    module = mbdgen.compile(model, out_dir, recompile=False)
    done: dict[str, str] = {}
    for method in methods:
        try:
            with specialize.policy_set("now"):  # the module's own entry points, here
                mbdgen.simulate(module, method=method, h=1e-4, t_end=2e-4)
            done[method] = "ok"
        except Exception as error:  # noqa: BLE001 - recorded per method, not fatal
            done[method] = f"{type(error).__name__}: {error}"
    return done


if __name__ == "__main__":  # pragma: no cover - run in the background process
    for name, outcome in run(sys.argv[1], sys.argv[2], parse_methods(sys.argv[3])).items():
        print(f"{name}: {outcome}")
