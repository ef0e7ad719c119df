"""Integration methods as data, and the registry that names them (STYLE lesson 8).

Adams coefficients are computed exactly (``fractions.Fraction``) from their
defining identities and converted from backward-difference form to ordinate
weights once, in Python; the jitted loops only read the tables.

* Adams–Bashforth γ_i (Haug 1989, Eq. 7.4.12, Table 7.4.4):
  Σ_{j=0}^{i} γ_j / (i + 1 − j) = 1.
* Adams–Moulton γ*_i (Haug 1989, Eq. 7.4.15, Table 7.4.10):
  γ*_0 = 1 and Σ_{j=0}^{i} γ*_j / (i + 1 − j) = 0 for i ≥ 1.

With ∇^i f_n = Σ_j (−1)^j C(i, j) f_{n−j}, AB order k is
x_{n+1} = x_n + h Σ_{j<k} β_{k,j} f_{n−j},  β_{k,j} = (−1)^j Σ_{i=j}^{k−1} γ_i C(i, j).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from math import comb

import numpy as np

#: Highest Adams order supported (AB 5 predictor with AM 6 corrector, as in Haug's tables).
KMAX = 6


def adams_bashforth_gammas(count: int) -> list[Fraction]:
    """γ_0 … γ_{count−1} of Haug 1989, Table 7.4.4 (1, 1/2, 5/12, 3/8, 251/720, 95/288)."""
    return list(_gammas(count, bashforth=True))


def adams_moulton_gammas(count: int) -> list[Fraction]:
    """γ*_0 … γ*_{count−1} of Haug 1989, Table 7.4.10 (1, −1/2, −1/12, −1/24, …)."""
    return list(_gammas(count, bashforth=False))


@cache
def _gammas(count: int, bashforth: bool) -> tuple[Fraction, ...]:
    """The recursions of the module docstring, once per process: the exact sums cost
    0.3 ms at count = 14, and every ``vabm`` run asks for them."""
    g: list[Fraction] = []
    for i in range(count):
        if bashforth:
            g.append(Fraction(1) - sum(g[j] / (i + 1 - j) for j in range(i)))
        else:
            g.append(
                Fraction(1) if i == 0 else -sum((g[j] / (i + 1 - j) for j in range(i)), Fraction(0))
            )
    return tuple(g)


def _ordinates(gammas: list[Fraction], order: int) -> list[Fraction]:
    """Ordinate weights of Σ_{i<order} γ_i ∇^i (newest value first)."""
    return [
        (-1) ** j * sum((gammas[i] * comb(i, j) for i in range(j, order)), Fraction(0))
        for j in range(order)
    ]


def adams_bashforth_weights(k: int) -> list[Fraction]:
    """Ordinate weights of AB k (Eq. 7.4.11): x_{n+1} = x_n + h Σ_{j<k} w_j f_{n−j}."""
    return _ordinates(adams_bashforth_gammas(k), k)


def adams_moulton_weights(order: int) -> list[Fraction]:
    """Ordinate weights of the AM corrector of ``order`` (Eq. 7.4.15), newest first:
    x_{n+1} = x_n + h (w_0 f^p_{n+1} + Σ_{1≤j<order} w_j f_{n+1−j})."""
    return _ordinates(adams_moulton_gammas(order), order)


def mampc_weights(m: int) -> list[Fraction]:
    """Corrector weights of MAMPC_m (Wu, Chiou & Lin 2000, Eqs. 27a-c), newest first.

    y = (W1 y^{AB_m} + W2 y^{AM_{m−1}}) / (W1 + W2) with W1 = −γ*_m, W2 = γ_m
    (Eq. 21), where y^{AB_m} is the predictor and y^{AM_{m−1}} the m-point Adams–
    Moulton corrector evaluated with f^p.  Theorem 1 (Eq. 20) says the result is the
    Adams–Moulton corrector of order m + 1 applied to f^p; the tests check it.
    """
    g, gs = adams_bashforth_gammas(m + 1), adams_moulton_gammas(m + 1)
    w1, w2 = -gs[m], g[m]
    ab = adams_bashforth_weights(m)
    am = adams_moulton_weights(m)
    weights = [w2 * am[0]]
    for j in range(1, m + 1):
        weights.append(w1 * ab[j - 1] + (w2 * am[j] if j < m else Fraction(0)))
    return [w / (w1 + w2) for w in weights]


#: Corrector rules: the weights used after an AB predictor of order kk.
CORRECTORS = {
    "am+1": lambda kk: adams_moulton_weights(kk + 1),  # Haug's PECE, AB k / AM k+1
    "am": adams_moulton_weights,  # AMPC_m of Wu et al.: AB m / AM_(m−1), order m
    "mampc": mampc_weights,  # MAMPC_m of Wu et al., Eq. 27
}


def adams_tables(
    kmax: int = KMAX, start: str = "ramp", corrector: str = "am+1"
) -> tuple[np.ndarray, np.ndarray]:
    """Ordinate weight tables for :func:`mbdgen.runtime.explicit.abm_chunk`.

    Returns ``ab`` of shape (kmax + 1, kmax), row k = AB order k, and ``am`` of
    shape (kmax + 2, kmax + 1), row k + 1 = the corrector used after a predictor of
    order k (newest value, the predicted f^p, first), by the rule ``corrector``
    (see :data:`CORRECTORS`).

    ``start="ramp"`` is the self-starting scheme of Haug 1989 §7.4.4: while only
    k' < k past values exist the step is AB k' / AM k'+1 (Example 7.4.5).

    ``start="haug1989-tables"`` reproduces how the program behind Haug's Tables
    7.4.11 and 7.4.12 started: the corrector has its full order k + 1 from the first
    step, with the not-yet-available backward differences taken as zero, so the
    missing higher differences of f^p all repeat ∇^{k'} f^p.  That start-up makes a
    local error O(h²) and the published PECE results only second-order accurate;
    it is for regression against those tables only (rows depend on the target
    order, so the table is built for one ``kmax`` = k).
    """
    rule = CORRECTORS[corrector]
    gs = adams_moulton_gammas(kmax + 2)
    ab = np.zeros((kmax + 1, kmax))
    am = np.zeros((kmax + 2, kmax + 1))
    for k in range(1, kmax + 1):
        ab[k, :k] = [float(c) for c in adams_bashforth_weights(k)]
    for k in range(1, kmax + 1):
        weights = rule(k)
        am[k + 1, : len(weights)] = [float(c) for c in weights]
    am[1, 0] = 1.0  # order-0 predictor never occurs; keep the row consistent
    if start == "haug1989-tables":
        if corrector != "am+1":
            raise ValueError("the haug1989-tables start-up is defined for AB k / AM k+1 only")
        for kk in range(1, kmax):
            extra = sum(gs[kk + 1 : kmax + 1], Fraction(0))
            weights = _ordinates(gs, kk + 1)
            for j in range(kk + 1):
                weights[j] += extra * (-1) ** j * comb(kk, j)
            am[kk + 1, : kk + 1] = [float(c) for c in weights]
    elif start != "ramp":
        raise ValueError(f"unknown start-up scheme {start!r}")
    return ab, am


def _f(text: str) -> Fraction:
    return Fraction(text)


#: Butcher tableaus (A, b, c) as exact fractions.  RKF45's b is Fehlberg's
#: fifth-order solution (local error O(h⁶)), enough to start ABM 5 (order 6).
RK_TABLEAUS: dict[str, tuple[list[list[Fraction]], list[Fraction], list[Fraction]]] = {
    "euler": ([[]], [_f("1")], [_f("0")]),
    "heun": ([[], [_f("1")]], [_f("1/2"), _f("1/2")], [_f("0"), _f("1")]),
    "midpoint": ([[], [_f("1/2")]], [_f("0"), _f("1")], [_f("0"), _f("1/2")]),
    "ralston": ([[], [_f("2/3")]], [_f("1/4"), _f("3/4")], [_f("0"), _f("2/3")]),
    "rk4": (
        [[], [_f("1/2")], [_f("0"), _f("1/2")], [_f("0"), _f("0"), _f("1")]],
        [_f("1/6"), _f("1/3"), _f("1/3"), _f("1/6")],
        [_f("0"), _f("1/2"), _f("1/2"), _f("1")],
    ),
    "rkf45": (
        [
            [],
            [_f("1/4")],
            [_f("3/32"), _f("9/32")],
            [_f("1932/2197"), _f("-7200/2197"), _f("7296/2197")],
            [_f("439/216"), _f("-8"), _f("3680/513"), _f("-845/4104")],
            [_f("-8/27"), _f("2"), _f("-3544/2565"), _f("1859/4104"), _f("-11/40")],
        ],
        [_f("16/135"), _f("0"), _f("6656/12825"), _f("28561/56430"), _f("-9/50"), _f("2/55")],
        [_f("0"), _f("1/4"), _f("3/8"), _f("12/13"), _f("1"), _f("1/2")],
    ),
}


#: Fehlberg's fourth-order weights, embedded in the "rkf45" tableau: x⁵ − x⁴ is the
#: error estimate of the step-size control (:mod:`mbdgen.runtime.adaptive_rk`).
RKF45_B4: tuple[Fraction, ...] = (
    _f("25/216"),
    _f("0"),
    _f("1408/2565"),
    _f("2197/4104"),
    _f("-1/5"),
    _f("0"),
)


def rk_arrays(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tableau ``name`` as float arrays (A lower-triangular s×s, b, c)."""
    a_rows, b, c = RK_TABLEAUS[name]
    s = len(b)
    a = np.zeros((s, s))
    for i, row in enumerate(a_rows):
        a[i, : len(row)] = [float(v) for v in row]
    return a, np.array([float(v) for v in b]), np.array([float(v) for v in c])


#: Start-up procedures of the Adams methods: name → (runtime code, RK tableau).
STARTS = {"rkf45": (1, "rkf45"), "ramp": (0, "rkf45"), "haug1989-tables": (0, "rkf45")}


#: The families of the index-3 implicit methods (HHT-α, generalized-α).
INDEX3_FAMILIES = ("hht", "genalpha", "hht_adaptive", "genalpha_adaptive")

#: Families that integrate user differential states X (Ẋ = f(q, q̇, X, t)): the index-3
#: methods, with Ẋ as a third Newton unknown (Negrut et al. 2007, Eqs. 9, 12, 13;
#: :mod:`mbdgen.runtime.hht`).  The others refuse a stateful model rather than hold X
#: at X0 and integrate another closed loop.
STATE_FAMILIES: tuple[str, ...] = INDEX3_FAMILIES


@dataclass(frozen=True)
class Method:
    """A registered integration method.

    ``entry`` is the generated-module entry point that runs it.  Adams methods have
    a ``corrector`` rule of :data:`CORRECTORS` (None: predictor alone) and accept
    the step numbers k in ``orders``; Runge–Kutta methods have a ``tableau`` of
    :data:`RK_TABLEAUS` and their one order in ``orders``.
    """

    name: str
    family: str
    entry: str
    description: str
    orders: tuple[int, ...]
    corrector: str | None = None
    tableau: str | None = None

    @property
    def enforces_constraints(self) -> bool:
        """The scheme satisfies the constraints itself (Welch's projections, HHT's
        index-3 Newton, Newmark-GCP's partitioning): it takes no constraint handling, no
        Baumgarte gains."""
        return self.family in ("welch", "newmark_gcp", "radau", *INDEX3_FAMILIES)

    @property
    def error_controlled(self) -> bool:
        """The step size follows a local error estimate (rtol, atol; ``h`` is then the
        output interval), not the user's h."""
        return self.family in ("adaptive", "hht_adaptive", "genalpha_adaptive", "radau")

    @property
    def integrates_states(self) -> bool:
        """The method integrates user differential states X (Negrut et al. 2007, Eq. 9a
        with the third block row of Eq. 12); the others refuse a model that has any."""
        return self.family in STATE_FAMILIES

    @property
    def default_order(self) -> int:
        if self.family == "adaptive":
            return max(self.orders)
        return 4 if 4 in self.orders else self.orders[0]

    def order(self, k: int) -> int:
        """Global order of convergence of the variant ``k``."""
        if self.family in ("rk", "welch", "newmark_gcp", "radau", *INDEX3_FAMILIES):
            return self.orders[0]
        if self.family == "adaptive":  # Adams: k is the highest order allowed
            return self.orders[0] if self.tableau else k + 1
        return k + 1 if self.corrector in ("am+1", "mampc") else k


def _adams(name: str, description: str, corrector: str | None) -> Method:
    return Method(name, "adams", "abm_chunk", description, (1, 2, 3, 4, 5), corrector)


def _rk(name: str, description: str, order: int) -> Method:
    # Runge–Kutta steps run through the Adams loop with an unreachable target order,
    # so that every step is a "start-up" step (see mbdgen.runtime.explicit).
    return Method(name, "rk", "abm_chunk", description, (order,), tableau=name)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        _adams("abm", "Adams–Bashforth k / Adams–Moulton k+1 PECE (Haug 1989 §7.4.4)", "am+1"),
        _adams("ab", "Adams–Bashforth predictor of order k alone (Haug 1989 §7.4.2)", None),
        _adams(
            "ampc", "AMPC_m: AB m / AM (m-1)-step corrector, PECE (Wu et al. 2000, Eqs. 8-9)", "am"
        ),
        _adams("mampc", "MAMPC_m: weighted AB m + AM (m-1)-step (Wu et al. 2000, Eq. 27)", "mampc"),
        Method(
            "vabm",
            "adaptive",
            "vabm_chunk",
            "variable step and order ABM PECE with error control, dense output (Haug 1989 "
            "§7.4.4; Shampine & Gordon's DE); k is the highest order, up to DE's 12",
            tuple(range(1, 13)),
            "am+1",
        ),
        Method(
            "rkf45_adaptive",
            "adaptive",
            "rkf45_adaptive_chunk",
            "Runge–Kutta–Fehlberg 4(5) with step-size control and Hermite dense output "
            "(the reference method)",
            (5,),
            tableau="rkf45",
        ),
        Method(
            "dop853",
            "adaptive",
            "dop853_chunk",
            "Dormand–Prince 8(5,3) with step-size control and dense output of order 7 "
            "(Hairer, Nørsett & Wanner §II.10): tight tolerances on smooth problems",
            (8,),
            tableau="dop853",
        ),
        _rk("rk4", "classical fourth-order Runge–Kutta", 4),
        _rk("rkf45", "Fehlberg's fifth-order formula of RKF45, fixed step", 5),
        _rk("heun", "Heun's two-stage second-order Runge–Kutta (explicit trapezoid)", 2),
        _rk("midpoint", "explicit midpoint two-stage second-order Runge–Kutta", 2),
        _rk("ralston", "Ralston's two-stage second-order Runge–Kutta", 2),
        _rk("euler", "explicit Euler", 1),
        Method(
            "welch2",
            "welch",
            "welch_chunk",
            "parameter-free second-order predictor-corrector (Welch et al. 2007, Eq. 44)",
            (2,),
        ),
        Method(
            "welch1",
            "welch",
            "welch_chunk",
            "parameter-free first-order predictor (Welch et al. 2007, Eq. 44a; Hong et al.)",
            (1,),
        ),
        Method(
            "hht",
            "hht",
            "index3_chunk",
            "HHT-α, implicit, index-3 DAE, Newton on (q̈, λ) and user states' Ẋ "
            "(controllers), fixed step; numerical damping --hht-alpha in [-1/3, 0] "
            "(Negrut et al. 2007, Eqs. 9-14)",
            (2,),
        ),
        Method(
            "genalpha",
            "genalpha",
            "index3_chunk",
            "generalized-α, implicit, index-3 DAE, fixed step: what Exudyn and Chrono "
            "users reach for first; damping by the spectral radius --rho-inf in [0, 1] "
            "(Chung & Hulbert 1993; Arnold & Brüls 2007)",
            (2,),
        ),
        Method(
            "hht_adaptive",
            "hht_adaptive",
            "index3_chunk",
            "HHT-α with error control (rtol, atol) and dense output: local error "
            "estimate, step-size selection, corrector stopping test of Negrut et al. "
            "2007 (Eqs. 25, 34-39, 45), the error held per unit step so that the final "
            "error is about rtol — stiff or long runs at a stated accuracy",
            (2,),
        ),
        Method(
            "genalpha_adaptive",
            "genalpha_adaptive",
            "index3_chunk",
            "generalized-α with HHT's error control (rtol, atol) and dense output",
            (2,),
        ),
        Method(
            "radau5",
            "radau",
            "radau_chunk",
            "Radau IIA of order 5, implicit, index-3 DAE, with error control (rtol, atol) "
            "and dense output: Newton on the stages' q, q̇, λ with RADAU5's real and complex "
            "matrices from the generated blocks (Hairer & Wanner 1996, §IV.8, §VII.4) — "
            "tight tolerances, stiff mechanisms",
            (5,),
        ),
        Method(
            "newmark_gcp",
            "newmark_gcp",
            "newmark_gcp_chunk",
            "implicit trapezoidal Newmark on the state-space ODE of coordinate "
            "partitioning (IMPL), Newton on the independent accelerations with the exact "
            "Jacobian, fixed step: stiff forces, few degrees of freedom (Haug, Negrut & "
            "Iancu 1997, Eqs. 20-39)",
            (2,),
        ),
        Method(
            "newmark_gcp_fv",
            "newmark_gcp",
            "newmark_gcp_chunk",
            "newmark_gcp with Fisette & Vaneghem's quasi-Newton matrix (FV: no N, L, "
            "(Φ_qᵀλ)_q; Haug, Negrut & Iancu 1997, Eq. 40): for comparison",
            (2,),
        ),
    )
}


def get_method(name: str) -> Method:
    """Look a method up by name; the error lists the registered names."""
    try:
        return METHODS[name]
    except KeyError:
        from mbdgen.errors import MbdgenError

        raise MbdgenError(
            f"unknown method {name!r}; choose one of: {', '.join(sorted(METHODS))}"
        ) from None
