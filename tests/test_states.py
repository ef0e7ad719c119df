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
  equations with X in the tail of p.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from conftest import MODELS, augmented
from pi_pendulum_reference import closed_loop

import mbdgen
from mbdgen.codegen.abi import KERNELS, SPARSE_BLOCKS, block_shape
from mbdgen.codegen.emit import render_module
from mbdgen.compiler import import_generated, render
from mbdgen.errors import MbdgenError, ModelError
from mbdgen.inputs import parameter_vector
from mbdgen.methods import METHODS
from mbdgen.model import GROUND, Mechanism, Model, forces, planar, speeds, states, t
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
    assert "'pi_pendulum' has 1 (e_int); no method integrates user states yet" in text


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
