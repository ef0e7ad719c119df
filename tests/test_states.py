"""User differential states X (Negrut et al. 2007, Eq. 8a in explicit form Ẋ = f):
front end, derivation, generated kernels, the p = [parameters; X] convention.

* the state kernels f, f_q, f_q̇, f_X and Q_X equal central differences of the generated
  f and Q (element path: models/pi_pendulum.py; flat path: a small nonlinear model
  whose kernels run as plain Python, ``py_func``, so nothing extra is JIT-compiled);
* the element and the flat paths of pi_pendulum agree;
* a model without states gets empty state kernels and p = parameters;
* front-end errors are one line and name the state or element;
* methods that cannot integrate states refuse a stateful model;
* the SciPy reference of the closed loop (tests/pi_pendulum_reference.py) runs, settles
  at the set point, and agrees with the generated kernels integrated on the index-1
  equations with X in the tail of p;
* the index-3 integrators with X (:mod:`mbdgen.runtime.hht`): the states' formula has
  the local error constant C_X and the damping its docstring derives; the Newton matrix
  with the states' rows and columns equals central differences of the discretized
  residual; the closed loop by hht_adaptive and genalpha_adaptive agrees with the SciPy
  reference to 1e-6 in q and X; fixed-step hht and genalpha are second order in q and
  X; results carry X, Ẋ (save, load, CSV, CLI ``--x0``).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from click.testing import CliRunner
from conftest import GENERATED, MODELS, augmented, central_jacobian, stateful_residual
from pi_pendulum_reference import closed_loop

import mbdgen
from mbdgen.cli import main
from mbdgen.codegen.abi import KERNELS, SPARSE_BLOCKS, block_shape
from mbdgen.codegen.emit import render_module
from mbdgen.compiler import import_generated, render
from mbdgen.errors import MbdgenError, ModelError
from mbdgen.inputs import parameter_vector
from mbdgen.methods import METHODS, STATE_FAMILIES
from mbdgen.model import GROUND, Mechanism, Model, forces, planar, speeds, states, t
from mbdgen.runtime import genalpha as ga
from mbdgen.runtime import hht as rt
from mbdgen.symbolic import derive

STATE_KERNELS = ("state_rate", "state_rate_q", "state_rate_qd", "state_rate_x", "force_x")


def _sizes(module) -> tuple[int, int, int]:
    return module.N_COORDINATES, module.N_CONSTRAINTS, module.N_STATES


def _call(module, name, st, python=False, **override):
    spec = next(k for k in KERNELS if k.name == name)
    out = np.full(block_shape(name, *_sizes(module)), np.nan)
    kernel = getattr(module, name)
    (kernel.py_func if python else kernel)(*[override.get(a, st[a]) for a in spec.inputs], out)
    return out


def _fd(fun, x0: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences, columns ∂fun/∂x_j: truncation eps²/6·|f'''| ≈ 1e-13 and
    rounding ≈ 1e-16·|f|/eps ≈ 1e-10·|f|, well inside rtol 1e-6, atol 1e-7."""
    cols = []
    for j in range(x0.size):
        e = np.zeros_like(x0)
        e[j] = eps
        cols.append((fun(x0 + e) - fun(x0 - e)) / (2 * eps))
    return np.array(cols).T if cols else np.zeros((fun(x0).size, 0))


def _check_state_jacobians(module, st, python=False):
    """f_q, f_q̇, f_X, Q_X against central differences of the generated f and Q, the
    X-columns by perturbing the tail of p; sparse values equal the dense blocks."""
    npar = module.N_PARAMETERS
    p = st["p"]

    def with_x(x):
        return np.concatenate([p[:npar], x])

    def call(name, **override):
        return _call(module, name, st, python, **override)

    tol = dict(rtol=1e-6, atol=1e-7)
    checks = {
        "state_rate_q": _fd(lambda q: call("state_rate", q=q), st["q"]),
        "state_rate_qd": _fd(lambda qd: call("state_rate", qd=qd), st["qd"]),
        "state_rate_x": _fd(lambda x: call("state_rate", p=with_x(x)), p[npar:]),
        "force_x": _fd(lambda x: call("force", p=with_x(x)), p[npar:]),
        "force_q": _fd(lambda q: call("force", q=q), st["q"]),
        "force_qd": _fd(lambda qd: call("force", qd=qd), st["qd"]),
    }
    for name, expected in checks.items():
        np.testing.assert_allclose(call(name), expected, err_msg=name, **tol)
    for block in STATE_KERNELS[1:]:
        rows, cols = (
            getattr(module, f"{block.upper()}_ROWS"),
            getattr(module, f"{block.upper()}_COLS"),
        )
        dense = call(block)
        values = np.full(rows.size, np.nan)
        kernel = getattr(module, f"{block}_values")
        (kernel.py_func if python else kernel)(st["t"], st["q"], st["qd"], p, values)
        np.testing.assert_array_equal(values, dense[rows, cols], err_msg=block)
        mask = np.ones(dense.shape, dtype=bool)
        mask[rows, cols] = False
        assert not dense[mask].any(), f"{block} has entries outside its pattern"


def _random_state(module, rng):
    n, m, nd = _sizes(module)
    p = parameter_vector(module, None)
    p[module.N_PARAMETERS :] = rng.uniform(-1, 1, nd)
    return {
        "t": float(rng.uniform(0, 2)),
        "q": rng.uniform(-1, 1, n),
        "qd": rng.uniform(-1, 1, n),
        "p": p,
    }


def test_pi_pendulum_state_kernels_match_central_differences(pi_pendulum):
    assert _sizes(pi_pendulum) == (3, 2, 1) and pi_pendulum.STATE_NAMES == ("e_int",)
    rng = np.random.default_rng(1)
    for _ in range(2):
        _check_state_jacobians(pi_pendulum, _random_state(pi_pendulum, rng))


# A flat model with nonlinear rates that couple two states, q, q̇, t and parameters.
x_, y_, th = sp.symbols("x y th")
m_, g_, k_, c_ = sp.symbols("m g k c")
xd_, yd_, thd = speeds([x_, y_, th])
v = states.symbol("v")
lag = states.state(v, rate=(sp.sin(th) * thd - v) / c_ + sp.cos(t), x0=0.5)


def _stateful_model(**changes) -> Model:
    w = states.state("w", rate=v * thd**2 - k_ * lag * sp.cos(th), x0=-0.25)
    kwargs = dict(
        name="stateful",
        coordinates=[x_, y_, th],
        parameters={m_: 1.0, g_: 9.81, k_: 2.0, c_: 0.5},
        mass=sp.diag(m_, m_, m_ / 3),
        force=[0, -m_ * g_ + w**2, -k_ * v * thd - sp.sin(w) * th],
        constraints=[x_ - sp.cos(th), y_ - sp.sin(th)],
        q0=[1.0, 0.0, 0.0],
        states=[lag, w],
    )
    kwargs.update(changes)
    return Model(**kwargs)


@pytest.fixture(scope="module")
def stateful_flat(tmp_path_factory):
    """The flat model above, rendered and imported; its kernels run as ``py_func``."""
    path = tmp_path_factory.mktemp("states") / "stateful.py"
    path.write_text(render_module(derive(_stateful_model()), "stateful.py", "0" * 64))
    return import_generated(path)


def test_flat_path_state_kernels_match_central_differences(stateful_flat):
    module = stateful_flat
    assert _sizes(module) == (3, 2, 2) and module.STATE_NAMES == ("v", "w")
    assert module.N_PARAMETERS == 4
    np.testing.assert_array_equal(module.X0, [0.5, -0.25])
    np.testing.assert_array_equal(parameter_vector(module, None), [1.0, 9.81, 2.0, 0.5, 0.5, -0.25])
    rng = np.random.default_rng(2)
    for _ in range(2):
        _check_state_jacobians(module, _random_state(module, rng), python=True)


def test_element_and_flat_paths_agree_on_states(pi_pendulum, tmp_path):
    flat_path = tmp_path / "pi_pendulum.py"
    flat_path.write_text(render(MODELS / "pi_pendulum.py", flat=True))
    flat = import_generated(flat_path)
    el = pi_pendulum
    for name in ("N_PARAMETERS", "N_STATES", "STATE_NAMES", "PARAMETER_NAMES"):
        assert tuple(np.atleast_1d(getattr(el, name))) == tuple(np.atleast_1d(getattr(flat, name)))
    np.testing.assert_array_equal(el.X0, flat.X0)
    for block in SPARSE_BLOCKS:
        for axis in ("ROWS", "COLS"):
            key = f"{block.upper()}_{axis}"
            np.testing.assert_array_equal(getattr(el, key), getattr(flat, key), err_msg=key)
    rng = np.random.default_rng(4)
    st = _random_state(el, rng)
    for name in (*STATE_KERNELS, "force", "force_q", "force_qd", "energy"):
        np.testing.assert_allclose(
            _call(el, name, st),
            _call(flat, name, st, python=True),
            rtol=1e-13,
            atol=1e-13,
            err_msg=name,
        )


def test_a_model_without_states_is_unchanged(pendulum):
    """nd = 0: empty state kernels, p is the parameters alone (the other kernels are
    checked unchanged by test_kernels and by `make check-generated`)."""
    assert pendulum.N_STATES == 0 and pendulum.STATE_NAMES == () and pendulum.X0.size == 0
    assert pendulum.N_PARAMETERS == len(pendulum.PARAMETER_NAMES)
    np.testing.assert_array_equal(parameter_vector(pendulum, None), pendulum.P_DEFAULT)
    st = {"t": 0.0, "q": np.array(pendulum.Q0), "qd": np.zeros(3), "p": pendulum.P_DEFAULT}
    for name in STATE_KERNELS:
        assert _call(pendulum, name, st, python=True).size == 0, name
    assert block_shape("force_x", 3, 2) == (3, 0)
    assert derive(_stateful_model(states=[], force=[0, -m_ * g_, 0])).nd == 0


# -- front-end errors ---------------------------------------------------------------------
def _mechanism(rate=None, torque=None, **kwargs):
    bar = planar.body("bar", 1.0, 1.0 / 3.0, q0=(1.0, 0.0, 0.0))
    phi, phid = bar.coordinates[2], bar.velocities[2]
    s = states.state("e_int", rate=phi if rate is None else rate(phi, phid))
    elements = [
        planar.revolute("pivot", GROUND, (0.0, 0.0), bar, (-1.0, 0.0)),
        forces.torque("motor", bar, -s if torque is None else torque(s)),
    ]
    kwargs.setdefault("states", [s])
    return Mechanism("pi", [bar], elements, **kwargs)


BAD = [
    (
        lambda: _mechanism(rate=lambda phi, phid: phi - sp.Symbol("phi_goal")),
        r"state 'e_int': rate .* uses 'phi_goal', which is neither a coordinate, a velocity, "
        r"a parameter, a state nor t",
    ),
    (
        lambda: _mechanism(rate=lambda phi, phid: sp.Symbol("bar_phi_dd")),
        r"state 'e_int': rate .* uses the acceleration 'bar_phi_dd'.* not on q̈ or λ",
    ),
    (
        lambda: _mechanism(rate=lambda phi, phid: phi * sp.Symbol("lam_0")),
        r"state 'e_int': rate .* uses 'lam_0', a Lagrange multiplier",
    ),
    (
        lambda: _mechanism(rate=lambda phi, phid: sp.Function("u")(t)),
        r"state 'e_int': rate .* undefined function u\(t\)",
    ),
    (
        lambda: _mechanism(states=[]),
        r"force 'motor' uses the state 'e_int', which is not among the mechanism's states",
    ),
    (
        lambda: _mechanism(parameters={sp.Symbol("e_int"): 1.0}),
        r"duplicate name 'e_int': used as parameter and as state",
    ),
    (
        lambda: _stateful_model(states=[lag, states.state("v", rate=0)]),
        r"duplicate name 'v': used as state and as state",
    ),
    (
        lambda: _stateful_model(states=[lag]),
        r"force: Q\[1\] uses the state 'w', which is not among the model's states",
    ),
    (
        lambda: _stateful_model(mass=sp.diag(m_, m_, m_ * v)),
        r"mass matrix: M\[2,2\] uses the state 'v'; only the applied force",
    ),
    (
        lambda: _stateful_model(states=lag),
        r"model 'stateful': states must be a list of states",
    ),
    (lambda: states.state("e", rate=0, x0=float("nan")), r"state 'e': x0 = nan is not a finite"),
    (lambda: states.state("lambda", rate=0), r"state name 'lambda' is a Python keyword"),
]


@pytest.mark.parametrize("build, message", BAD, ids=range(len(BAD)))
def test_front_end_errors_are_one_line_and_name_the_culprit(build, message):
    with pytest.raises(ModelError, match=message) as info:
        build()
    assert "\n" not in str(info.value)


def test_a_state_in_a_joint_is_refused():
    bar = planar.body("bar", 1.0, 1.0)
    s = states.state("e_int", rate=0)
    with pytest.raises(
        ModelError, match=r"driver 'hold' uses the state 'e_int'; only force elements"
    ):
        Mechanism("m", [bar], [planar.angle_driver("hold", bar, s)], states=[s])


def test_a_state_reads_as_a_sympy_symbol():
    s = states.state("e_int", rate=0)
    a = sp.Symbol("a")
    for expr in (2 * s, s * 2, s + 1, 1 - s, -s, s / 2, 2 / s, s**2, 2**s, a * s, s * a, sp.cos(s)):
        assert s.symbol in sp.sympify(expr).free_symbols


# -- methods ------------------------------------------------------------------------------
@pytest.mark.parametrize("method", sorted(n for n, m in METHODS.items() if not m.integrates_states))
def test_methods_that_cannot_integrate_states_refuse_them(pi_pendulum, method):
    with pytest.raises(MbdgenError) as info:
        mbdgen.simulate(pi_pendulum, method, None, 1e-3, 0.01)
    text = str(info.value)
    assert "\n" not in text
    assert f"method {method!r} cannot integrate user states" in text
    able = ", ".join(n for n, m in METHODS.items() if m.family in STATE_FAMILIES)
    assert f"'pi_pendulum' has 1 (e_int); use one of: {able}" in text
    assert set(able.split(", ")) == {"hht", "genalpha", "hht_adaptive", "genalpha_adaptive"}


# -- the closed loop ----------------------------------------------------------------------
def test_scipy_reference_settles_at_the_set_point(pi_pendulum):
    p = dict(zip(pi_pendulum.PARAMETER_NAMES, pi_pendulum.P_DEFAULT, strict=True))
    ref = closed_loop(pi_pendulum, np.linspace(0.0, 8.0, 9))
    # at rest the integral balances gravity: −ki X = m g l cos φ_ref
    x_rest = p["g_y"] * -p["pivot_sjx"] * p["bar_m"] * np.cos(p["phi_ref"]) / p["ki"]
    assert abs(ref["phi"][-1] - p["phi_ref"]) < 1e-4
    assert abs(ref["x"][-1] - x_rest) < 1e-4 and abs(ref["phid"][-1]) < 1e-4
    assert abs(ref["phi"][1] - p["phi_ref"]) > 1e-3  # it does move: not settled at t = 1


def test_generated_kernels_with_x_in_p_reproduce_the_reference(pi_pendulum):
    """The generated index-1 equations (Haug 1989, Eq. 7.3.8 with α = β = 0) and the
    generated rate f, with X written into p[N_PARAMETERS:] at every evaluation as the
    runtime must, integrated by SciPy at rtol = atol = 1e-11, agree with the minimal-
    coordinate reference to 1e-7 in φ and X over 4 s (two DOP853 runs at that tolerance
    differ by ~1e-9; the drift of Φ without stabilization stays ~1e-9 here)."""
    from scipy.integrate import solve_ivp

    module = pi_pendulum
    n, npar = module.N_COORDINATES, module.N_PARAMETERS
    p = parameter_vector(module, None)
    f = np.zeros(module.N_STATES)

    def rhs(time, y):
        q, qd, x = y[:n], y[n : 2 * n], y[2 * n :]
        p[npar:] = x
        qdd, _ = augmented(module, time, q, qd, p)
        module.state_rate(time, q, qd, p, f)
        return np.concatenate([qd, qdd, f])

    times = np.linspace(0.0, 4.0, 9)
    y0 = np.concatenate([module.Q0, module.QD0, module.X0])
    sol = solve_ivp(rhs, (0.0, 4.0), y0, method="DOP853", t_eval=times, rtol=1e-11, atol=1e-11)
    assert sol.success
    ref = closed_loop(module, times)
    np.testing.assert_allclose(sol.y[2], ref["phi"], rtol=0, atol=1e-7)
    np.testing.assert_allclose(sol.y[2 * n], ref["x"], rtol=0, atol=1e-7)
    np.testing.assert_allclose(sol.y[:n].T, ref["q"], rtol=0, atol=1e-7)


# -- the index-3 integrators with user states ----------------------------------------------
# The states' formula (mbdgen.runtime.hht, "User differential states"): b_{n+1} averages
# Ẋ as HHT averages the forces (α_m, α_f) = (0, −α), or as generalized-α its a;
# X_{n+1} = X_n + h b_n + ρh (b_{n+1} − b_n), ρ = γ.
STATE_CONTROLS = {
    "hht_alpha_-0.3": rt.control(-0.3, 1e-10, 10),
    "hht_alpha_0": rt.control(0.0, 1e-10, 10),
    "genalpha_rho_0.5": ga.control(0.5, 1e-10, 10),
    "genalpha_rho_0": ga.control(0.0, 1e-10, 10),
}


def _state_step(ctrl, h, X, Xd, xb, xd1):
    """X_{n+1}, b_{n+1} of one step of the states' formula (the runtime's, as plain
    Python), for a scalar state."""
    x1, xb1, p = np.zeros(1), np.zeros(1), np.zeros(1)
    rt.state_update.py_func(
        1, h, ctrl[rt.C_XRHO], ctrl[rt.C_XALPHA_M], ctrl[rt.C_XALPHA_F], np.array([X]),
        np.array([Xd]), np.array([xb]), np.array([xd1]), xb1, x1, p, 0,
    )  # fmt: skip
    return x1[0], xb1[0]


@pytest.mark.parametrize("name", STATE_CONTROLS)
def test_state_formula_has_the_local_error_constant_c_x(name):
    """On Ẋ = g(t) = sin 2t the formula's local error, once the start's transient in b
    has decayed (400 steps), is C_X h³ g''
    (:func:`mbdgen.runtime.hht.state_error_coefficient`: 1/12 − Δ/2 − Δ² + α_m Δ,
    Δ = α_m − α_f), the constant of the error estimate.  h = 1e-3: the O(h) remainder
    is below 3e-3 relative (measured 7e-5, 8e-8, 7e-5, 4.5e-4 in the order of the
    parameters)."""
    ctrl = STATE_CONTROLS[name]
    h, t0 = 1e-3, 0.3
    X, Xd, xb, t1 = -np.cos(2 * t0) / 2, np.sin(2 * t0), np.sin(2 * t0), t0
    for _ in range(400):
        t0, t1 = t1, t1 + h
        x1, xb1 = _state_step(ctrl, h, X, Xd, xb, np.sin(2 * t1))
        local = (x1 - X) - (np.cos(2 * t0) - np.cos(2 * t1)) / 2
        X, Xd, xb = x1, np.sin(2 * t1), xb1
    expected = ctrl[rt.C_XERRCOEF] * h**3 * -4 * np.sin(2 * (t0 + h / 2))
    assert local == pytest.approx(expected, rel=3e-3)
    assert ctrl[rt.C_XRHO] == ctrl[rt.C_GAMMA]  # ρ = γ


def _state_amplification(ctrl, h_lambda):
    """The 3 × 3 matrix mapping (X_n, h Ẋ_n, h b_n) to step n + 1 on Ẋ = λX (h = 1),
    column by column from the runtime's formula with Ẋ_{n+1} = λ X_{n+1} solved
    exactly (X_{n+1} is affine in Ẋ_{n+1})."""
    G = np.zeros((3, 3))
    for j in range(3):
        X, Xd, xb = np.eye(3)[j]
        c0, _ = _state_step(ctrl, 1.0, X, Xd, xb, 0.0)
        c1 = _state_step(ctrl, 1.0, X, Xd, xb, 1.0)[0] - c0
        xd1 = h_lambda * c0 / (1.0 - h_lambda * c1)
        x1, xb1 = _state_step(ctrl, 1.0, X, Xd, xb, xd1)
        G[:, j] = x1, xd1, xb1
    return G


@pytest.mark.parametrize("name", STATE_CONTROLS)
def test_state_formula_damps_a_stiff_state(name):
    """Spectral radius at hλ = −1e8 is max(α_f/(1 − α_f), |1 − 1/γ|) (module docstring:
    0.43 for HHT's α = −0.3, ρ∞ for generalized-α's ρ∞ ≥ 0.5, 1 for the trapezoidal
    α = 0, which does not damp), to 1e-6 (the O(1/(hλ)) remainder); at hλ = −1e-3 it is
    e^{hλ} to 1e-6: the formula is consistent and barely damps slow states."""
    ctrl = STATE_CONTROLS[name]
    alpha_f, gamma = ctrl[rt.C_XALPHA_F], ctrl[rt.C_XRHO]
    rho = max(abs(np.linalg.eigvals(_state_amplification(ctrl, -1e8))))
    assert rho == pytest.approx(max(alpha_f / (1 - alpha_f), abs(1 - 1 / gamma)), abs=1e-6)
    assert rho <= 1.0 + 1e-12
    slow = max(abs(np.linalg.eigvals(_state_amplification(ctrl, -1e-3))))
    assert slow == pytest.approx(np.exp(-1e-3), abs=1e-6)


def _stateful_residual(module, z, x, xb, r_prev, a, t1, h, ctrl, generalized):
    """:func:`conftest.stateful_residual` with e3 = Ẋ − f (the explicit form)."""

    def e3(t1, q1, qd1, qdd1, lam1, xd1, p):
        f = np.zeros(module.N_STATES)
        module.state_rate.py_func(t1, q1, qd1, p, f)
        return xd1 - f

    return stateful_residual(module, z, x, xb, r_prev, a, t1, h, ctrl, generalized, e3)


@pytest.mark.parametrize(
    "ctrl, generalized",
    [(rt.control(-0.2, 1e-10, 10), False), (ga.control(0.8, 1e-10, 10), True),
     (ga.control(0.0, 1e-10, 10), True)],
    ids=["hht_alpha_-0.2", "genalpha_rho_0.8", "genalpha_rho_0"],
)  # fmt: skip
def test_newton_matrix_with_states_equals_finite_differences(stateful_flat, ctrl, generalized):
    """The (n + m + nd)² Newton matrix, Eq. 12 with the states' blocks −Q_X ρ′h,
    −(f_q β′h² + f_q̇ γ′h) and I − f_X ρ′h (:func:`mbdgen.runtime.hht.state_matrix`)
    from the generated kernels, against central differences of the discretized residual
    in (q̈, λ, Ẋ), at an unconverged iterate of the flat model with two coupled nonlinear
    states (f_X, f_q, f_q̇ and Q_X all nonzero), h = 0.01.  Relative max difference
    < 1e-6 as for the blocks without states (tests/test_hht.py); measured 3.5e-8,
    1.0e-7, 1.3e-8 (the round-off of Φ/(β′h²) in central differences)."""
    module = stateful_flat
    n, m, nd = _sizes(module)
    h, t1 = 0.01, 0.71
    rng = np.random.default_rng(7)
    th = 0.3
    q = np.array([np.cos(th), np.sin(th), th])
    x = np.concatenate([q, rng.uniform(-1, 1, 2 * n + m + 2 * nd)])
    xb, r_prev, a = rng.uniform(-1, 1, nd), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    z = rng.uniform(-2, 2, n + m + nd)
    _, q1, qd1, p, mass, phi_q = _stateful_residual(
        module, z, x, xb, r_prev, a, t1, h, ctrl, generalized
    )
    scale = (1 - ctrl[rt.C_ALPHA_F]) / (1 - ctrl[rt.C_ALPHA_M]) if generalized else 1.0
    bh2, gh = ctrl[rt.C_BETA] * h * h * scale, ctrl[rt.C_GAMMA] * h * scale
    gx = ctrl[rt.C_XRHO] * h * (1 - ctrl[rt.C_XALPHA_F]) / (1 - ctrl[rt.C_XALPHA_M])
    alpha = 0.0 if generalized else ctrl[rt.C_ALPHA]
    N = n + m + nd
    A = np.zeros((N, N))
    work = [np.zeros((n, n)) for _ in range(4)]
    rt.iteration_matrix.py_func(
        module.mass_a_q.py_func, module.phi_q_lam_q.py_func, module.force_q.py_func,
        module.force_qd.py_func, n, m, t1, q1, qd1, z[:n].copy(), z[n : n + m].copy(), p,
        alpha, bh2, gh, mass, phi_q, *work, np.ones(m), A,
    )  # fmt: skip
    rt.state_matrix.py_func(
        module.state_rate_q.py_func, module.state_rate_qd.py_func,
        module.state_rate_x.py_func, module.force_x.py_func, n, m, nd, t1, q1, qd1, p, bh2,
        gh, gx, np.zeros((nd, n)), np.zeros((nd, n)), np.zeros((nd, nd)), np.zeros((n, nd)),
        A,
    )  # fmt: skip
    fd = central_jacobian(
        lambda zz: _stateful_residual(module, zz, x, xb, r_prev, a, t1, h, ctrl, generalized)[0],
        z,
    )
    difference = np.abs(A - fd).max() / np.abs(A).max()
    assert difference < 1e-6, difference
    # every state block is exercised: Q_X, f_q / f_q̇ and f_X are nonzero here
    assert np.abs(A[:n, n + m :]).max() > 0 and np.abs(A[n + m :, :n]).max() > 0
    assert np.abs(A[n + m :, n + m :] - np.eye(nd)).max() > 0


# The closed loop of models/pi_pendulum.py against the SciPy reference, over 5 s (the
# loop settles to 1e-3 rad in about 5 s).  One compiled module serves every test.
PI_SPAN = 5.0
#: ε of the error-controlled runs: their global error is about ε^(2/3) (error per step
#: of a second-order method; measured max |q error| 1.4e-6 at ε = 1e-8, 2.9e-7 at 1e-9).
PI_TOL = 1e-9


@pytest.fixture(scope="module", params=["hht_adaptive", "genalpha_adaptive"])
def pi_adaptive(request, pi_pendulum):
    result = mbdgen.simulate(
        pi_pendulum, request.param, None, 0.05, PI_SPAN, rtol=PI_TOL, atol=PI_TOL
    )
    return result, closed_loop(pi_pendulum, result.t)


def test_error_controlled_closed_loop_agrees_with_scipy(pi_pendulum, pi_adaptive):
    """The acceptance test of issue 10: the PI loop by hht_adaptive and genalpha_adaptive
    agrees with the independent minimal-coordinate reference (DOP853 at 1e-12) to 1e-6
    in q and X at every output (measured max errors 3.1e-7 / 1.2e-7 for hht_adaptive,
    4.3e-7 / 1.4e-7 for genalpha_adaptive); Ẋ on the grid (linear between steps) to
    1e-5 (measured 2.8e-7, 4.2e-7).  The run does move X: from 0 to −0.19.  The energy
    check passes: the power of the controller's torque is taken with each row's X (with
    X held at X0 the balance would be off by 48 % of the energy exchanged)."""
    result, ref = pi_adaptive
    assert result.state_names == ("e_int",) and result.states.shape == (len(result), 1)
    np.testing.assert_allclose(result.q, ref["q"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(result.state("e_int"), ref["x"], rtol=0, atol=1e-6)
    phi_ref = pi_pendulum.P_DEFAULT[pi_pendulum.PARAMETER_NAMES.index("phi_ref")]
    np.testing.assert_allclose(result.state_rates[:, 0], ref["phi"] - phi_ref, atol=1e-5)
    assert result.states[-1, 0] < -0.15
    # p is the caller's, unwritten: the info still shows X0 after the run
    assert result.info["initial_states"] == {"e_int": 0.0}
    assert result.counters["rejected_steps"] < result.counters["steps"] / 10
    assert result.info["warnings"] == []


def test_fixed_step_is_second_order_in_q_and_x(pi_pendulum):
    """Fixed-step hht (α = −0.05) and genalpha (ρ∞ = 0.9) on the PI loop to t = 2, h =
    0.02 … 0.0025: the fitted slopes of max |q − q_ref| and |X − X_ref| at t = 2 are 2
    within 0.05 (measured 2.00 / 2.00 and 2.00 / 2.00).  Negrut et al.'s Eq. 9a as
    printed (Ẋ in place of b) gives 1.0 in φ here (module docstring)."""
    ref = closed_loop(pi_pendulum, np.array([0.0, 2.0]))
    hs = 0.02 / 2.0 ** np.arange(4)
    for method in ("hht", "genalpha"):
        eq, ex = [], []
        for h in hs:
            r = mbdgen.simulate(pi_pendulum, method, None, h, 2.0)
            eq.append(np.abs(r.q[-1] - ref["q"][-1]).max())
            ex.append(abs(r.states[-1, 0] - ref["x"][-1]))
        slopes = [np.polyfit(np.log(hs), np.log(e), 1)[0] for e in (eq, ex)]
        assert slopes == pytest.approx([2.0, 2.0], abs=0.05), (method, slopes, eq, ex)


def test_x0_and_results_carry_the_states(pi_pendulum, tmp_path):
    """``x0`` by name or in order sets X(0) (the loop then follows the reference from
    there, to 1e-6 at ε = 1e-9); unknown names are one-line errors; the npz round trip
    keeps X, Ẋ and their names, and the CSV names the columns."""
    result = mbdgen.simulate(
        pi_pendulum, "hht_adaptive", None, 0.5, 2.0, rtol=PI_TOL, atol=PI_TOL,
        x0={"e_int": -0.1},
    )  # fmt: skip
    assert result.states[0, 0] == -0.1 and result.info["initial_states"] == {"e_int": -0.1}
    ref = closed_loop(pi_pendulum, result.t, x0=-0.1)
    np.testing.assert_allclose(result.states[:, 0], ref["x"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(result.q, ref["q"], rtol=0, atol=1e-6)
    for bad, message in (({"e": 1.0}, "has no user state 'e'; its states are e_int"),
                         ([1.0, 2.0], "x0 has 2 entries, expected 1")):  # fmt: skip
        with pytest.raises(MbdgenError, match=message) as info:
            mbdgen.simulate(pi_pendulum, "hht", None, 0.1, 0.2, x0=bad)
        assert "\n" not in str(info.value)
    loaded = mbdgen.load(result.save(tmp_path / "r.npz"))
    assert loaded.state_names == ("e_int",)
    np.testing.assert_array_equal(loaded.states, result.states)
    np.testing.assert_array_equal(loaded.state_rates, result.state_rates)
    result.save(tmp_path / "r.csv")
    table = np.genfromtxt(tmp_path / "r.csv", delimiter=",", names=True)
    np.testing.assert_array_equal(table["e_int"], result.states[:, 0])
    np.testing.assert_array_equal(table["e_int_d"], result.state_rates[:, 0])


def test_cli_sets_a_state_with_x0(tmp_path):
    out = tmp_path / "r.npz"
    args = ["simulate", MODELS / "pi_pendulum.py", "--out-dir", GENERATED, "--method"]
    args += ["hht", "--h", "0.01", "--t-end", "0.5", "--no-progress", "--x0", "e_int=0.25"]
    res = CliRunner().invoke(main, [str(a) for a in (*args, "-o", out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    result = mbdgen.load(out)
    assert result.states[0, 0] == 0.25 and result.states.shape == (51, 1)
    res = CliRunner().invoke(main, [str(a) for a in (*args[:-1], "e_int")])
    assert res.exit_code != 0 and "--x0 'e_int': write NAME=VALUE" in res.output
