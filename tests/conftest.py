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

# A small model steps through the integrators compiled once for all models unless its
# own entry point is already compiled or cached (policy "shared", mbdgen.specialize):
# the suite runs dozens of models × methods once each, and compiling each one's own
# loop (up to 20 s) made the cold suite 27 minutes on two cores instead of 21.  Both give
# the same bits (tests/test_shared_entry.py); the tests about the own entry points,
# the benchmarks' and the background policy users get by default set theirs.
os.environ.setdefault("MBDGEN_SPECIALIZE", "shared")


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


def _pendulum_angle(pendulum) -> tuple[float, float]:
    """φ(1), φ̇(1) of the reduced equation (J + m l²) φ̈ = −m g l cos φ, solved by DOP853
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
    return float(sol.y[0, -1]), float(sol.y[1, -1])


@pytest.fixture(scope="session")
def pendulum_solution(pendulum):
    """The pendulum's angle over [0, 10] from its reduced ODE, SciPy's RK45 at
    rtol = atol = 1e-13 (dense output: call it with times)."""
    from scipy.integrate import solve_ivp

    m, J, l, g = pendulum.P_DEFAULT
    return solve_ivp(
        lambda t, y: [y[1], -m * g * l * np.cos(y[0]) / (J + m * l * l)],
        (0.0, 10.0),
        [0.0, 0.0],
        rtol=1e-13,
        atol=1e-13,
        dense_output=True,
    ).sol


@pytest.fixture(scope="session")
def pendulum_reference(pendulum):
    """φ(1) of the pendulum (see :func:`_pendulum_angle`)."""
    return _pendulum_angle(pendulum)[0]


def augmented(module, t, q, qd, p):
    """q̈, λ of the index-1 equations [[M, Φ_qᵀ], [Φ_q, 0]] [q̈; λ] = [Q; γ] (NumPy)."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    mass, force = np.zeros((n, n)), np.zeros(n)
    phi, phi_q, phi_t, gamma = np.zeros(m), np.zeros((m, n)), np.zeros(m), np.zeros(m)
    module.dynamics(t, q, qd, p, mass, force, phi, phi_q, phi_t, gamma)
    A = np.block([[mass, phi_q.T], [phi_q, np.zeros((m, m))]])
    x = np.linalg.solve(A, np.concatenate([force, gamma]))
    return x[:n], x[n:]


@pytest.fixture(scope="session")
def pendulum_exact(pendulum):
    """q, q̇, q̈, λ of the pendulum at t = 1: q, q̇ from :func:`_pendulum_angle`, q̈ and λ
    from the index-1 equations there."""
    l = pendulum.P_DEFAULT[2]
    phi, phid = _pendulum_angle(pendulum)
    q = np.array([l * np.cos(phi), l * np.sin(phi), phi])
    qd = np.array([-l * np.sin(phi) * phid, l * np.cos(phi) * phid, phid])
    qdd, lam = augmented(pendulum, 1.0, q, qd, pendulum.P_DEFAULT)
    return {"q": q, "qd": qd, "qdd": qdd, "lam": lam}


def stateful_residual(module, z, x, xb, r_prev, a, t1, h, ctrl, generalized, e3):
    """e = [e1; e2; e3](q̈_{n+1}, λ_{n+1}, Ẋ_{n+1}) of Negrut et al. 2007, Eq. 13, through
    the runtime's updates and residual run as plain Python (``ctrl``: HHT's or, with
    ``generalized``, generalized-α's control vector), for finite differences of the
    Newton matrix of a model with user states.  ``e3(t1, q1, qd1, qdd1, lam1, xd1, p)``
    is the states' block (Ẋ − f explicit, d(…) implicit).  Returns (e, q1, qd1, p, M,
    Φ_q) at the iterate ``z`` = [q̈; λ; Ẋ]."""
    from mbdgen.inputs import parameter_vector
    from mbdgen.runtime import hht as rt

    n, m, nd = module.N_COORDINATES, module.N_CONSTRAINTS, module.N_STATES
    beta, gamma = ctrl[rt.C_BETA], ctrl[rt.C_GAMMA]
    q, qd, qdd = x[:n], x[n : 2 * n], x[2 * n : 3 * n]
    X, Xd = x[3 * n + m : 3 * n + m + nd], x[3 * n + m + nd :]
    qdd1, lam1, xd1 = z[:n].copy(), z[n : n + m].copy(), z[n + m :].copy()
    q1, qd1, a1 = np.zeros(n), np.zeros(n), np.zeros(n)
    if generalized:
        am, af = ctrl[rt.C_ALPHA_M], ctrl[rt.C_ALPHA_F]
        rt.genalpha_update.py_func(n, h, beta, gamma, am, af, q, qd, qdd, a, qdd1, a1, q1, qd1)
        alpha, bh2 = 0.0, beta * h * h * (1 - af) / (1 - am)
    else:
        rt.newmark.py_func(n, h, beta, gamma, q, qd, qdd, qdd1, q1, qd1)
        alpha, bh2 = ctrl[rt.C_ALPHA], beta * h * h
    p = parameter_vector(module, None)
    x1, xb1 = np.zeros(nd), np.zeros(nd)
    rt.state_update.py_func(
        nd, h, ctrl[rt.C_XRHO], ctrl[rt.C_XALPHA_M], ctrl[rt.C_XALPHA_F], X, Xd, xb, xd1,
        xb1, x1, p, module.N_PARAMETERS,
    )  # fmt: skip
    mass, force, phi = np.zeros((n, n)), np.zeros(n), np.zeros(m)
    phi_q, phi_t, gam = np.zeros((m, n)), np.zeros(m), np.zeros(m)
    module.dynamics.py_func(t1, q1, qd1, p, mass, force, phi, phi_q, phi_t, gam)
    e = np.zeros(n + m + nd)
    rt.residual.py_func(
        n, m, alpha, bh2, mass, force, phi, phi_q, qdd1, lam1, r_prev, np.ones(m), e
    )
    e[n + m :] = e3(t1, q1, qd1, qdd1, lam1, xd1, p)
    return e, q1, qd1, p, mass, phi_q


def central_jacobian(residual, z):
    """Central finite differences of ``residual(z)`` (test only: DESIGN rule 2), with
    steps 1e-5·max(1, |z_j|)."""
    columns = []
    for j in range(z.size):
        d = 1e-5 * max(1.0, abs(z[j]))
        zp, zm = z.copy(), z.copy()
        zp[j] += d
        zm[j] -= d
        columns.append((residual(zp) - residual(zm)) / (2.0 * d))
    return np.column_stack(columns)


def fitted_slopes(run, hs, exact):
    """Slopes of log max-norm error at t = 1 against log h of q, q̇, λ and q̈, for
    ``run(h)`` returning a Result that ends at t = 1."""
    errors = {key: [] for key in ("q", "qd", "lam", "qdd")}
    for h in hs:
        result = run(h)
        assert result.t[-1] == pytest.approx(1.0, abs=1e-12)
        for key in errors:
            errors[key].append(np.abs(getattr(result, key)[-1] - exact[key]).max())
    return {key: float(np.polyfit(np.log(hs), np.log(e), 1)[0]) for key, e in errors.items()}


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


def cli(*args: object) -> tuple[int, str]:
    """``mbdgen ARGS`` in this process (click's runner): (exit code, output)."""
    from click.testing import CliRunner

    from mbdgen.cli import main

    res = CliRunner().invoke(main, [str(a) for a in args])
    return res.exit_code, res.output


def one_line_error(output: str, *, only: bool = False) -> str:
    """The CLI's first error line (``only``: its one error line); fails the test on a
    traceback or an 'internal error'."""
    assert "Traceback" not in output and "internal error" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 if only else errors, output
    return errors[0]


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


@pytest.fixture(scope="session")
def pi_pendulum():
    """The pendulum held by a PI(D) torque whose integral is a user state (element path)."""
    return import_generated(GENERATED / "pi_pendulum.py")


@pytest.fixture(scope="session")
def dask_client():
    """A Dask LocalCluster of 2 single-threaded worker processes (the sweep tests),
    started once per session.  ``allowed-failures`` = 1: a task survives one death of
    its worker and is lost at the second (tests/test_sweep_lost_worker.py)."""
    distributed = pytest.importorskip("distributed")
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        with distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster, distributed.Client(cluster) as client:  # fmt: skip
            yield client
