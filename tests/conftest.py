"""Shared fixtures: compiled modules are built once per session and reused.

The example models are imported from the committed ``generated/`` (so Numba's disk
cache keyed by those files is shared between test runs and subprocesses); the
test-only models in ``tests/models`` are compiled into ``tests/.generated``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mbdgen.compiler import compile as compile_model
from mbdgen.compiler import import_generated

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
GENERATED = ROOT / "generated"
TEST_MODELS = Path(__file__).resolve().parent / "models"
TEST_GENERATED = Path(__file__).resolve().parent / ".generated"


@pytest.fixture(scope="session")
def slider_crank():
    return import_generated(GENERATED / "slider_crank.py")


@pytest.fixture(scope="session")
def slider_crank_q0(slider_crank):
    """Eq. 75 of Welch et al. (Eq. 37 of Wu et al.) with φ, x, y assembled from
    θ0 = 0.9851 so that Φ(q0) = 0 (the printed four digits leave ‖Φ‖ = 4e-5)."""
    from mbdgen.analysis.assembly import assemble

    return assemble(slider_crank, hold=["theta"]).q


@pytest.fixture(scope="session")
def pendulum():
    return import_generated(GENERATED / "pendulum.py")


@pytest.fixture(scope="session")
def pendulum_reference(pendulum):
    """φ(1) of the reduced equation (J + m l²) φ̈ = −m g l cos φ, solved by DOP853
    at rtol = 2.3e-14 (its floor), atol = 1e-14 (an independent formulation of the
    same motion)."""
    from scipy.integrate import solve_ivp

    m, J, l, g = pendulum.P_DEFAULT
    sol = solve_ivp(
        lambda t, y: [y[1], -m * g * l * np.cos(y[0]) / (J + m * l * l)],
        (0.0, 1.0),
        [0.0, 0.0],
        method="DOP853",
        rtol=2.3e-14,
        atol=1e-14,
    )
    return sol.y[0, -1]


def fitted_order(module, reference, method, k, levels, **options):
    """Slope of log |φ(1) − reference| against log h for h = 0.1 / 2**level."""
    import mbdgen

    hs = np.array([0.1 / 2**i for i in levels])
    errors = [
        abs(mbdgen.simulate(module, method, k, h, 1.0, **options).q[-1, 2] - reference) for h in hs
    ]
    return np.polyfit(np.log(hs), np.log(errors), 1)[0], errors


@pytest.fixture(scope="session")
def rheonomic():
    return compile_model(TEST_MODELS / "rheonomic.py", TEST_GENERATED)


def run_python(code: str, *, env: dict[str, str] | None = None, cwd: Path = ROOT) -> str:
    """Run ``code`` in a fresh interpreter; return stdout, fail the test on error."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="session")
def element_zoo():
    """A test mechanism with many element types, compiled by the element path."""
    return compile_model(TEST_MODELS / "element_zoo.py", TEST_GENERATED)
