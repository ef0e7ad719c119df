"""Symbolic derivation: a :class:`Model` → a frozen :class:`SymbolicSystem` (SymPy; the
Jacobians by SymEngine where the round trip is exact, :func:`_engine_jacobian`).

Everything an integrator needs is derived here once, so that the runtime never
differentiates numerically (DESIGN rule 2):

* Φ_q, Φ_t and ν = −Φ_t                                  (Haug 1989, Eqs. 7.2.2-7.2.3)
* γ = −(Φ_q q̇)_q q̇ − 2Φ_qt q̇ − Φ_tt                       (Haug 1989, Eq. 6.3.18 / 7.3.6)
* the Jacobian blocks of the implicit integrators: (M a)_q, (Φ_qᵀλ)_q, Q_q, Q_q̇,
  (Φ_q a)_q, γ_q, γ_q̇               (Negrut et al. 2007, Eq. 12; Haug et al. 1997, Eq. 29)
* the user states' rates f of Ẋ = f(q, q̇, X, t) and their partials f_q, f_q̇, f_X,
  and Q_X: the d = Ẋ − f row of Eq. 12 (d_Ẋ = I, d_X = −f_X, d_q = −f_q, d_q̇ = −f_q̇,
  d_q̈ = d_λ = 0) and the column of Q's dependence on X (the −Π column of Eq. 12,
  with the force states F eliminated)                       (Negrut et al. 2007, Eq. 8a)
* the states' residual d(Ẋ, X, q, q̇, q̈, λ, t) of the implicit form and its partials
  d_q̈, d_q, d_q̇, d_λ, d_Ẋ, d_X: the general third block row of Eq. 12 (an explicit
  state's row is d = Ẋ − f)                                  (Negrut et al. 2007, Eq. 8a)
* the kinetic and potential energy [T, V]                 (Haug 1989, Eq. 7.5.13)
  and the power P = q̇ᵀ(Q + V_qᵀ) of the applied forces V does not account for
  (dampers, motors, time-dependent loads): d(T + V)/dt = P + λᵀΦ_t, the energy
  balance a run is checked against (the constraint term is added at run time)

each with its sparsity pattern (the structurally non-zero entries).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import symengine
import sympy as sp

from mbdgen.model.core import Model, t


def _pattern(mat: sp.Matrix) -> tuple[tuple[int, int], ...]:
    return tuple((i, j) for i in range(mat.rows) for j in range(mat.cols) if mat[i, j] != 0)


#: Functions whose derivatives SymPy and SymEngine write alike (checked in
#: tests/test_derive_engine.py); an expression with any other function, or with an
#: undefined or user-implemented one, is differentiated by SymPy itself.
_ENGINE_FUNCTIONS = frozenset(
    {sp.sin, sp.cos, sp.tan, sp.exp, sp.log, sp.asin, sp.acos, sp.atan, sp.sinh, sp.cosh,
     sp.tanh}
)  # fmt: skip


def _engine_symbols(exprs: Iterable[sp.Basic]) -> dict[str, sp.Symbol] | None:
    """The symbols of ``exprs`` by name, or None if a node cannot cross to SymEngine
    and back exactly: anything but sums, products, powers, rational and float numbers,
    π, e, plain symbols (two of one name included) and :data:`_ENGINE_FUNCTIONS`.

    Walks each shared sub-expression once (``atoms`` and ``free_symbols`` visit a
    subtree as often as it is referenced: 13 s of the flyball governor's derivation).
    """
    symbols: dict[str, sp.Symbol] = {}
    seen: set[int] = set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        kind = type(e)
        if kind is sp.Symbol:
            # equality, not identity: SymPy's cache may hold two equal objects of one
            # symbol (an evicted entry rebuilt), and the choice must not depend on that
            if symbols.setdefault(e.name, e) != e:
                return None
        elif kind in (sp.Add, sp.Mul, sp.Pow) or e.func in _ENGINE_FUNCTIONS:
            stack.extend(e.args)
        elif not (isinstance(e, (sp.Rational, sp.Float)) or e is sp.pi or e is sp.E):
            return None
    return symbols


def _engine_jacobian(vec: sp.Matrix, wrt: sp.Matrix) -> sp.Matrix | None:
    """``vec.jacobian(wrt)`` computed by SymEngine and converted back, or None where the
    round trip is not exact (:func:`_engine_symbols`) or a variable is not a symbol.

    SymPy's ``diff`` asks every sub-expression for its free symbols on the way down
    (``Derivative.__new__``'s test for a zero derivative), which walks the whole
    subtree each time: 44 s of the flyball governor's 70 s compile went into the
    Jacobians of two element types.  SymEngine differentiates the same expressions in
    about a tenth of that.  Symbols cross by name and come back as the original objects,
    with their assumptions.
    """
    if any(type(v) is not sp.Symbol for v in wrt):
        return None
    symbols = _engine_symbols([*vec, *wrt])
    if symbols is None:
        return None
    try:
        rows = [symengine.sympify(e) for e in vec]
        over = symengine.Matrix([symengine.sympify(v) for v in wrt])
        jac = symengine.Matrix(rows).jacobian(over)
        if not {str(s) for s in jac.free_symbols} <= symbols.keys():
            return None
        back = {sp.Symbol(name): s for name, s in symbols.items() if sp.Symbol(name) != s}
        out = [sp.sympify(e) for e in jac]
    except (TypeError, ValueError, RuntimeError, NotImplementedError, AttributeError):
        return None
    if back:
        out = [e.xreplace(back) for e in out]
    return sp.Matrix(vec.rows, wrt.rows, out)


def _jac(vec: sp.Matrix, wrt: sp.Matrix) -> sp.Matrix:
    """∂vec/∂wrt (Jacobian matrix), by SymEngine where :func:`_engine_jacobian` can."""
    if vec.rows == 0 or wrt.rows == 0:
        return sp.zeros(vec.rows, wrt.rows)
    fast = _engine_jacobian(vec, wrt)
    return fast if fast is not None else vec.jacobian(wrt)


@dataclass(frozen=True)
class SymbolicSystem:
    """All expressions of one model, ready for code generation.

    ``q``, ``qd``, ``a`` (an acceleration-like vector, n), ``lam`` (multipliers, m)
    and ``p`` (parameters) are the kernels' argument symbols, in ABI order; ``x``
    (the user states, nd) are read from the tail of the kernels' p: X_k = p[len(p) + k].
    ``blocks`` maps each expression name of the kernel ABI to its matrix (vectors
    are m×1 or n×1 columns); ``patterns`` maps the same names to the structurally
    non-zero (row, column) entries.
    """

    model: Model
    q: sp.Matrix
    qd: sp.Matrix
    a: sp.Matrix
    lam: sp.Matrix
    p: tuple[sp.Symbol, ...]
    blocks: dict[str, sp.Matrix]
    patterns: dict[str, tuple[tuple[int, int], ...]]
    x: sp.Matrix = field(default_factory=lambda: sp.zeros(0, 1))
    #: The residual kernels' symbols: Ẋ (nd), q̈ (n) and λ of each constraint row (m),
    #: as :mod:`mbdgen.model.states` makes them (``xd``, ``qdd``, ``lam`` arguments).
    xd: sp.Matrix = field(default_factory=lambda: sp.zeros(0, 1))
    qdd: sp.Matrix = field(default_factory=lambda: sp.zeros(0, 1))
    multipliers: sp.Matrix = field(default_factory=lambda: sp.zeros(0, 1))
    implicit: bool = False

    def __repr__(self) -> str:  # the matrices can be huge: keep tracebacks readable
        return f"SymbolicSystem({self.model.name!r}, n={self.n}, m={self.m}, nd={self.nd})"

    @property
    def nd(self) -> int:
        return self.x.rows

    @property
    def n(self) -> int:
        return self.q.rows

    @property
    def m(self) -> int:
        return self.lam.rows


def derive_blocks(
    q: sp.Matrix,
    qd: sp.Matrix,
    a: sp.Matrix,
    lam: sp.Matrix,
    M: sp.Matrix,
    Q: sp.Matrix,
    phi: sp.Matrix,
    energy: sp.Matrix,
) -> dict[str, sp.Matrix]:
    """Every ABI block from M, Q, Φ and the energies [T, V], over the symbols given.

    ``energy`` gains a third entry, the non-conservative power P = q̇ᵀ(Q + V_qᵀ).

    Shared by the flat path (global symbols) and the element path (one element
    type's local symbols): the same differentiation, so both give the same numbers.
    """
    n, m = q.rows, phi.rows
    phi_q = _jac(phi, q)
    phi_t = phi.diff(t) if m else sp.zeros(0, 1)
    nu = -phi_t
    if m:
        # γ = −(Φ_q q̇)_q q̇ − 2 Φ_qt q̇ − Φ_tt
        phi_q_qd = phi_q * qd
        phi_qt = phi_q.diff(t)
        gamma = -_jac(phi_q_qd, q) * qd - 2 * phi_qt * qd - phi_t.diff(t)
    else:
        gamma = sp.zeros(0, 1)
    return {
        "phi": phi,
        "phi_q": phi_q,
        "phi_t": phi_t,
        "nu": nu,
        "gamma": gamma,
        "mass": M,
        "force": Q,
        "mass_a_q": _jac(M * a, q),
        "phi_q_lam_q": _jac(phi_q.T * lam, q) if m else sp.zeros(n, n),
        "force_q": _jac(Q, q),
        "force_qd": _jac(Q, qd),
        "phi_q_a_q": _jac(phi_q * a, q),
        "gamma_q": _jac(gamma, q),
        "gamma_qd": _jac(gamma, qd),
        "energy": energy.col_join(sp.Matrix([_power(q, qd, Q, energy[1])])),
    }


def derive_state_blocks(
    q: sp.Matrix, qd: sp.Matrix, x: sp.Matrix, rates: sp.Matrix
) -> dict[str, sp.Matrix]:
    """The user states' blocks: f, f_q, f_q̇, f_X of Ẋ = f(q, q̇, X, t; p).

    With d = Ẋ − f (Negrut et al. 2007, Eq. 8a in explicit form) these are the third
    block row of Eq. 12: d_q̈ + γh d_q̇ + βh² d_q = −(γh f_q̇ + βh² f_q) and
    d_Ẋ + ρh d_X = I − ρh f_X; d_λ = 0.
    """
    return {
        "state_rate": rates,
        "state_rate_q": _jac(rates, q),
        "state_rate_qd": _jac(rates, qd),
        "state_rate_x": _jac(rates, x),
    }


def state_column(states: tuple) -> tuple[sp.Matrix, sp.Matrix]:
    """(X, f) of the user ``states`` as columns (0×1 when there are none); an implicit
    state's f is 0 (its row is the residual's, :func:`derive_residual_blocks`)."""
    if not states:
        return sp.zeros(0, 1), sp.zeros(0, 1)
    rates = [sp.S.Zero if s.rate is None else s.rate for s in states]
    return sp.Matrix([s.symbol for s in states]), sp.Matrix(rates)


def residual_symbols(
    states: tuple, coordinates: tuple, constraint_names: tuple
) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """The columns of Ẋ (nd), q̈ (n) and λ (m) symbols that residuals are written in
    (:func:`mbdgen.model.states.derivative`, ``acceleration``, ``multiplier``)."""
    from mbdgen.model.states import acceleration, derivative, multiplier

    def column(items: list) -> sp.Matrix:
        return sp.Matrix(items) if items else sp.zeros(0, 1)

    return (
        column([derivative(s.name) for s in states]),
        column([acceleration(c.name) for c in coordinates]),
        column([multiplier(name) for name in constraint_names]),
    )


def derive_residual_blocks(
    q: sp.Matrix,
    qd: sp.Matrix,
    qdd: sp.Matrix,
    lam: sp.Matrix,
    x: sp.Matrix,
    xd: sp.Matrix,
    states: tuple,
) -> dict[str, sp.Matrix]:
    """The residual d(Ẋ, X, q, q̇, q̈, λ, t) of the user ``states`` (Negrut et al. 2007,
    Eq. 8a; an explicit state's row is Ẋ − f) and its partials, the blocks of the
    third block row of Eq. 12: [d_q̈ + βh² d_q + γh d_q̇, d_λ, d_Ẋ + ρ′h d_X]."""
    d = sp.Matrix([s.d() for s in states]) if states else sp.zeros(0, 1)
    return {
        "state_residual": d,
        "state_residual_qdd": _jac(d, qdd),
        "state_residual_q": _jac(d, q),
        "state_residual_qd": _jac(d, qd),
        "state_residual_lam": _jac(d, lam),
        "state_residual_xd": _jac(d, xd),
        "state_residual_x": _jac(d, x),
    }


def _power(q: sp.Matrix, qd: sp.Matrix, Q: sp.Matrix, V: sp.Expr) -> sp.Expr:
    """P = q̇ᵀ(Q + V_qᵀ): zero when Q = −V_qᵀ, i.e. when V accounts for every force.

    With M q̈ + Φ_qᵀλ = Q, d(T + V)/dt = q̇ᵀQ − q̇ᵀΦ_qᵀλ + V_q q̇ = P + λᵀΦ_t (the
    quadratic velocity terms of Q do no work), so T + V − ∫(P + λᵀΦ_t) dt is constant.
    """
    if q.rows == 0:
        return sp.S.Zero
    grad = _jac(sp.Matrix([V]), q)
    # no expand/simplify: terms that cancel structurally (gravity against its V) vanish
    # on their own, and the rest costs a few operations instead of a blown-up expression
    return (qd.T * (Q + grad.T))[0, 0] if Q.rows else sp.S.Zero


def derive(model: Model) -> SymbolicSystem:
    """Derive every kernel expression of ``model`` (no numerics, no simplification).

    Only structural zeros are detected (``expr == 0`` after differentiation); no
    ``simplify`` is called, so the cost is that of differentiation and stays
    predictable for large models.
    """
    n, m = model.n, model.m
    q = sp.Matrix(model.coordinates)
    qd = sp.Matrix(model.velocities)
    a = sp.Matrix([sp.Symbol(f"_a_{i}") for i in range(n)])
    lam = sp.Matrix([sp.Symbol(f"_lam_{i}") for i in range(m)])
    energy = sp.Matrix([model.kinetic, model.potential])
    blocks = derive_blocks(
        q,
        qd,
        a,
        lam,
        model.mass,
        model.force,
        model.constraints,
        energy,  # type: ignore[arg-type]
    )
    x, rates = state_column(model.states)  # type: ignore[arg-type]
    blocks.update(derive_state_blocks(q, qd, x, rates))
    blocks["force_x"] = _jac(model.force, x)  # type: ignore[arg-type]
    xd, qdd, mult = residual_symbols(
        model.states,  # type: ignore[arg-type]
        model.coordinates,  # type: ignore[arg-type]
        model.constraint_names,  # type: ignore[arg-type]
    )
    blocks.update(derive_residual_blocks(q, qd, qdd, mult, x, xd, model.states))  # type: ignore[arg-type]
    patterns = {name: _pattern(mat) for name, mat in blocks.items()}
    return SymbolicSystem(
        model=model,
        q=q,
        qd=qd,
        a=a,
        lam=lam,
        p=model.parameter_symbols,
        blocks=blocks,
        patterns=patterns,
        x=x,
        xd=xd,
        qdd=qdd,
        multipliers=mult,
        implicit=any(s.implicit for s in model.states),  # type: ignore[attr-defined]
    )
