"""Generated kernels checked numerically (STYLE lesson 12), never by their text.

* every kernel against ``sympy.lambdify`` of the same derived expression;
* every Jacobian block against central finite differences of the generated
  lower-level kernels (an independent check of the symbolic derivation);
* the fused ``dynamics`` kernel and the sparse ``*_values`` kernels against the
  single kernels; all at random states.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from conftest import MODELS, TEST_MODELS

from mbdgen.codegen.abi import KERNELS, SPARSE_BLOCKS, block_shape
from mbdgen.model import Mechanism, load_model, t
from mbdgen.symbolic import derive

CASES = [
    ("slider_crank", MODELS),
    ("pendulum", MODELS),
    ("rheonomic", TEST_MODELS),
    ("element_zoo", TEST_MODELS),
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def case(request):
    """A compiled module and the flat derivation of its model.

    For a Mechanism (``element_zoo``) the module comes from the element path and the
    derivation from ``Mechanism.flatten()``: its kernels are checked against the
    lambdified flat derivation, as the issue asks of element kernels.
    """
    name, folder = request.param
    module = request.getfixturevalue(name)
    model = load_model(folder / f"{name}.py")
    if isinstance(model, Mechanism):
        model = model.flatten()
    return module, derive(model)


def _state(module, rng):
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    return {
        "t": float(rng.uniform(-1, 1)),
        "q": rng.uniform(-1, 1, n),
        "qd": rng.uniform(-1, 1, n),
        "a": rng.uniform(-1, 1, n),
        "lam": rng.uniform(-1, 1, m),
        "p": module.P_DEFAULT * rng.uniform(0.5, 1.5, module.P_DEFAULT.size),
        # the states' residual kernels' q̈ and Ẋ (these models have no states)
        "qdd": rng.uniform(-1, 1, n),
        "xd": np.zeros(module.N_STATES),
    }


def _call(module, name: str, st: dict, **override) -> np.ndarray:
    spec = next(k for k in KERNELS if k.name == name)
    args = [override.get(a, st[a]) for a in spec.inputs]
    out = np.full(block_shape(name, module.N_COORDINATES, module.N_CONSTRAINTS), np.nan)
    getattr(module, name)(*args, out)
    return out


_LAMBDIFIED: dict = {}


@pytest.mark.parametrize("seed", range(3))
def test_every_kernel_matches_lambdify(case, seed):
    module, system = case
    rng = np.random.default_rng(seed)
    st = _state(module, rng)
    symbols = [t, list(system.q), list(system.qd), list(system.a), list(system.lam), list(system.p)]
    values = [st["t"], st["q"], st["qd"], st["a"], st["lam"], st["p"]]
    for spec in KERNELS:
        if spec.name in ("dynamics", "dynamics_values"):  # fused kernels: tested below
            continue
        if spec.name in ("state_residual_blocks", "state_residual_blocks_values"):
            continue  # fused, and empty without states (tests/test_implicit_states.py)
        key = (system.model.name, spec.name)
        if key not in _LAMBDIFIED:  # once per model, not per seed (big expressions)
            expr = system.blocks[spec.name]
            _LAMBDIFIED[key] = sp.lambdify(symbols, expr, modules="numpy", cse=True)
        f = _LAMBDIFIED[key]
        expected = np.array(f(*values), dtype=float).reshape(
            block_shape(spec.name, module.N_COORDINATES, module.N_CONSTRAINTS)
        )
        got = _call(module, spec.name, st)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=spec.name)


def _fd(fun, x0: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of a vector function: columns are ∂fun/∂x_j."""
    cols = []
    for j in range(x0.size):
        e = np.zeros_like(x0)
        e[j] = eps
        cols.append((fun(x0 + e) - fun(x0 - e)) / (2 * eps))
    return np.array(cols).T if cols else np.zeros((fun(x0).size, 0))


@pytest.mark.parametrize("seed", range(3))
def test_jacobian_blocks_match_finite_differences(case, seed):
    module, _ = case
    rng = np.random.default_rng(100 + seed)
    st = _state(module, rng)
    n = module.N_COORDINATES
    tol = dict(rtol=1e-6, atol=1e-7)

    def check(block, fun, x0):
        np.testing.assert_allclose(_call(module, block, st), _fd(fun, x0), err_msg=block, **tol)

    check("phi_q", lambda q: _call(module, "phi", st, q=q), st["q"])
    np.testing.assert_allclose(
        _call(module, "phi_t", st),
        _fd(lambda tt: _call(module, "phi", st, t=float(tt[0])), np.array([st["t"]]))[:, 0],
        **tol,
    )
    np.testing.assert_allclose(_call(module, "nu", st), -_call(module, "phi_t", st), rtol=0)
    check("mass_a_q", lambda q: _call(module, "mass", st, q=q) @ st["a"], st["q"])
    check("phi_q_lam_q", lambda q: _call(module, "phi_q", st, q=q).T @ st["lam"], st["q"])
    check("force_q", lambda q: _call(module, "force", st, q=q), st["q"])
    check("force_qd", lambda qd: _call(module, "force", st, qd=qd), st["qd"])
    check("phi_q_a_q", lambda q: _call(module, "phi_q", st, q=q) @ st["a"], st["q"])
    check("gamma_q", lambda q: _call(module, "gamma", st, q=q), st["q"])
    check("gamma_qd", lambda qd: _call(module, "gamma", st, qd=qd), st["qd"])
    # γ = −d²/ds² Φ(q + s q̇, t + s) at s = 0 (the definition, Haug 1989 Eq. 7.3.6)
    s = 1e-4

    def phi_at(ds: float) -> np.ndarray:
        return _call(module, "phi", st, q=st["q"] + ds * st["qd"], t=st["t"] + ds)

    second = (phi_at(s) - 2 * phi_at(0.0) + phi_at(-s)) / s**2
    np.testing.assert_allclose(_call(module, "gamma", st), -second, rtol=1e-5, atol=1e-5)
    assert n == st["q"].size


def test_fused_dynamics_kernel_equals_single_kernels(case):
    module, _ = case
    st = _state(module, np.random.default_rng(7))
    spec = next(k for k in KERNELS if k.name == "dynamics")
    outs = [
        np.full(block_shape(o.block, module.N_COORDINATES, module.N_CONSTRAINTS), np.nan)
        for o in spec.outputs
    ]
    module.dynamics(st["t"], st["q"], st["qd"], st["p"], *outs)
    # One CSE over all six outputs may associate sums differently from the single
    # kernels' CSE (seen on the element path): equal to rounding, not bit for bit.
    for o, got in zip(spec.outputs, outs, strict=True):
        np.testing.assert_allclose(
            got, _call(module, o.block, st), rtol=1e-14, atol=1e-14, err_msg=o.block
        )
    # the sparse variant: M and Φ_q as values on MASS_ROWS/COLS and PHI_Q_ROWS/COLS
    spec = next(k for k in KERNELS if k.name == "dynamics_values")
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    outs = [
        np.full(getattr(module, f"{o.block.upper()}_ROWS").size, np.nan)
        if o.sparse
        else np.full(block_shape(o.block, n, m), np.nan)
        for o in spec.outputs
    ]
    module.dynamics_values(st["t"], st["q"], st["qd"], st["p"], *outs)
    for o, got in zip(spec.outputs, outs, strict=True):
        dense = _call(module, o.block, st)
        if o.sparse:
            big = o.block.upper()
            dense = dense[getattr(module, f"{big}_ROWS"), getattr(module, f"{big}_COLS")]
        np.testing.assert_allclose(got, dense, rtol=1e-14, atol=1e-14, err_msg=o.block)


def test_sparse_values_match_dense_on_the_pattern(case):
    module, system = case
    st = _state(module, np.random.default_rng(11))
    for block in SPARSE_BLOCKS:
        rows = getattr(module, f"{block.upper()}_ROWS")
        cols = getattr(module, f"{block.upper()}_COLS")
        assert [(int(i), int(j)) for i, j in zip(rows, cols, strict=True)] == list(
            system.patterns[block]
        )
        dense = _call(module, block, st)
        spec = next(k for k in KERNELS if k.name == block)
        values = np.full(rows.size, np.nan)
        getattr(module, f"{block}_values")(*[st[a] for a in spec.inputs], values)
        np.testing.assert_array_equal(values, dense[rows, cols], err_msg=block)
        mask = np.ones(dense.shape, dtype=bool)
        mask[rows, cols] = False
        assert not dense[mask].any(), f"{block} has entries outside its pattern"
