"""Linear stability of the Adams family and of two constraint treatments.

Part 1 — Adams methods on the test equation z' = λz (Wu, Chiou & Lin 2000, Eq. 31).
With h̄ = hλ and z_n = ζⁿ every Adams or Runge–Kutta method of
:data:`mbdgen.methods.METHODS` becomes a characteristic polynomial in the
amplification root ζ whose coefficients are polynomials in h̄ (degree ≤ 2 for the
Adams family).  They are kept exact (``Fraction``) as a *coefficient table*
``table[i][d]``: the coefficient of ζ^(N−i) h̄^d, N the degree in ζ.

* AB k alone (Eq. 8):  ζ^k − ζ^(k−1) − h̄ Σ_{j<k} b_j ζ^(k−1−j).
* PECE with AB k predictor weights b and corrector weights w (newest first, w_0
  multiplies f^p_{n+1}, w_j multiplies f_{n+1−j}): because the E after C stores
  f_{n+1} = λ z_{n+1} of the *corrected* value,

      P:  z^p_{n+1} = z_n + h̄ Σ_{j<k} b_j z_{n−j}
      C:  z_{n+1}   = z_n + h̄ (w_0 z^p_{n+1} + Σ_{1≤j<c} w_j z_{n+1−j}),

  and eliminating z^p, with N = max(k − 1, c − 2),

      ζ^(N+1) − ζ^N − h̄ (w_0 ζ^N + Σ_{1≤j<c} w_j ζ^(N+1−j)) − h̄² w_0 Σ_{j<k} b_j ζ^(N−j).

* PEC (kept only to show that Wu's Table 2 is *not* PEC): the stored f are those
  of the predicted values, and det[[ζ − 1, −h̄σ_c], [−1, ζ − h̄σ_b]] = 0 with
  σ_b = Σ_j b_j ζ^(−j), σ_c = Σ_j w_j ζ^(1−j) gives, times ζ^N,

      (ζ − 1)(ζ^(N+1) − h̄ Σ_j b_j ζ^(N−j)) − h̄ Σ_j w_j ζ^(N+1−j).

* An explicit Runge–Kutta tableau (A, b): ζ − R(h̄), R(h̄) = 1 + Σ_{j≥1} bᵀA^(j−1)𝟙 h̄^j.

The real stability limit (Wu's "stability limit", Eq. 34 and Table 2) is the
length of the interval (−limit, 0) of the real h̄ axis on which every root has
modulus ≤ 1: :func:`real_stability_limit`.

Part 2 — Welch et al. (2007) §V: the homogeneous linearised system M q̈ + Bᵀλ = 0
with Φ = Bq (Eqs. 52–53) advanced by the paper's parameter-free scheme (Eq. 44,
amplification X of Eq. 61) or by Baumgarte stabilisation (Eq. 45) with the
second-order scheme (amplification Λ of Eq. 64), for the planar double pendulum
of Eqs. 66–69.  Both matrices are polynomials in Γ = M⁻¹BᵀA⁻¹B, A = BM⁻¹Bᵀ (the
paper's definition, stated after Eq. 64).  Γ is idempotent (Γ² = Γ), and
M-symmetric, hence diagonalisable with eigenvalues exactly 0 (n − r times: the
free motions) and 1 (r = rank B times: the constraint violations); each
eigenvalue γ contributes a 2×2 *modal* block in which Γ is replaced by γ, and
ρ(X) is the largest spectral radius of those blocks.  The spectral radii are
computed from the blocks because the free modes are a defective eigenvalue 1
(a 2×2 Jordan block, q = q₀ + t v₀) whose modulus a dense eigensolver returns as
1 + O(√ε) ≈ 1 + 1e-8.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Literal

import numpy as np

from mbdgen.methods import CORRECTORS, RK_TABLEAUS, adams_bashforth_weights, get_method

#: Coefficient table of a characteristic polynomial: ``table[i][d]`` multiplies
#: ζ^(N−i) h̄^d, N = len(table) − 1 (Fractions, or floats for external weights).
CoefficientTable = list[list[Fraction]]

Mode = Literal["PECE", "PEC"]


# -- Part 1: characteristic polynomials on z' = λz -----------------------------------


def _empty_table(degree: int, width: int = 3) -> CoefficientTable:
    return [[Fraction(0)] * width for _ in range(degree + 1)]


def adams_bashforth_table(k: int) -> CoefficientTable:
    """Characteristic polynomial of the AB k predictor alone (Wu Eq. 8 / Eq. 31).

    Parameters
    ----------
    k : int
        Number of steps (= order) of the Adams–Bashforth formula.

    Returns
    -------
    CoefficientTable
        ζ^k − ζ^(k−1) − h̄ Σ_{j<k} b_j ζ^(k−1−j), b = ``adams_bashforth_weights(k)``.
    """
    b = adams_bashforth_weights(k)
    table = _empty_table(k)
    table[0][0] += 1
    table[1][0] -= 1
    for j, bj in enumerate(b):
        table[1 + j][1] -= bj
    return table


def predictor_corrector_table(
    predictor: Sequence[Fraction], corrector: Sequence[Fraction], mode: Mode = "PECE"
) -> CoefficientTable:
    """Characteristic polynomial of an AB predictor / Adams corrector pair.

    Parameters
    ----------
    predictor : sequence of Fraction
        AB ordinate weights b_0 … b_{k−1}, newest first (multiplying f_n … f_{n−k+1}).
    corrector : sequence of Fraction
        Corrector weights w_0 … w_{c−1}, newest first: w_0 multiplies the predicted
        f^p_{n+1}, w_j (j ≥ 1) the stored f_{n+1−j}.
    mode : {"PECE", "PEC"}
        "PECE" (the stored f are those of the corrected values, as in
        :func:`mbdgen.runtime.explicit.abm_chunk` and in Wu et al.) or "PEC" (those
        of the predicted values).

    Returns
    -------
    CoefficientTable
        PECE: ζ^(N+1) − ζ^N − h̄ (w_0 ζ^N + Σ_{j≥1} w_j ζ^(N+1−j)) − h̄² w_0 Σ_j b_j ζ^(N−j),
        N = max(k − 1, c − 2) (derivation in the module docstring).  PEC:
        (ζ − 1)(ζ^(N+1) − h̄ Σ_j b_j ζ^(N−j)) − h̄ Σ_j w_j ζ^(N+1−j).
    """
    b, w = list(predictor), list(corrector)
    k, c = len(b), len(w)
    n = max(k - 1, c - 2)
    if mode == "PECE":
        table = _empty_table(n + 1)  # row i ↔ ζ^(N+1−i)
        table[0][0] += 1
        table[1][0] -= 1
        table[1][1] -= w[0]
        for j in range(1, c):
            table[j][1] -= w[j]
        for j, bj in enumerate(b):
            table[1 + j][2] -= w[0] * bj
        return table
    if mode == "PEC":
        table = _empty_table(n + 2)  # row i ↔ ζ^(N+2−i)
        # (ζ − 1) ζ^(N+1)
        table[0][0] += 1
        table[1][0] -= 1
        # −(ζ − 1) h̄ Σ b_j ζ^(N−j) = −h̄ Σ b_j (ζ^(N+1−j) − ζ^(N−j))
        for j, bj in enumerate(b):
            table[1 + j][1] -= bj
            table[2 + j][1] += bj
        # −h̄ Σ w_j ζ^(N+1−j)
        for j, wj in enumerate(w):
            table[1 + j][1] -= wj
        return table
    raise ValueError(f"unknown predictor-corrector mode {mode!r}; use 'PECE' or 'PEC'")


def runge_kutta_table(tableau: str) -> CoefficientTable:
    """Characteristic polynomial ζ − R(h̄) of an explicit Runge–Kutta tableau.

    Parameters
    ----------
    tableau : str
        A key of :data:`mbdgen.methods.RK_TABLEAUS`.

    Returns
    -------
    CoefficientTable
        Two rows (ζ¹, ζ⁰); R(h̄) = 1 + Σ_{j=1}^{s} bᵀA^(j−1)𝟙 h̄^j, exact (A strictly
        lower triangular, so the series ends at j = s).
    """
    a_rows, b, _ = RK_TABLEAUS[tableau]
    s = len(b)
    a = [[row[j] if j < len(row) else Fraction(0) for j in range(s)] for row in a_rows]
    table = _empty_table(1, s + 1)
    table[0][0] = Fraction(1)
    table[1][0] = Fraction(-1)
    u = [Fraction(1)] * s  # A^(j−1) 𝟙
    for j in range(1, s + 1):
        table[1][j] = -sum((bi * ui for bi, ui in zip(b, u, strict=True)), Fraction(0))
        u = [sum((a[i][m] * u[m] for m in range(s)), Fraction(0)) for i in range(s)]
    return table


def characteristic_table(method_name: str, k: int, mode: Mode = "PECE") -> CoefficientTable:
    """Characteristic polynomial of a registered method (:data:`mbdgen.methods.METHODS`).

    Parameters
    ----------
    method_name : str
        An Adams method — ``"ab"`` (AB k alone), ``"abm"`` (AB k / AM k+1, Haug),
        ``"ampc"`` (AMPC_k of Wu Eqs. 8–9: AB k / AM_(k−1)-step corrector) or
        ``"mampc"`` (MAMPC_k, Wu Eqs. 27a–c), with the corrector weights of
        :data:`mbdgen.methods.CORRECTORS` — or a Runge–Kutta method (its tableau).
    k : int
        Predictor order (Wu's m, the "order k" of Table 2); ignored for Runge–Kutta.
    mode : {"PECE", "PEC"}
        Evaluation mode of the corrector methods (ignored otherwise).

    Returns
    -------
    CoefficientTable

    Raises
    ------
    ValueError
        For a family without a test-equation polynomial (e.g. the Welch schemes,
        which are analysed by :func:`welch_amplification`).
    """
    method = get_method(method_name)
    if method.family == "rk":
        return runge_kutta_table(getattr(method, "tableau", None) or method.name)
    if method.family != "adams":
        raise ValueError(
            f"method {method_name!r} (family {method.family!r}) has no characteristic "
            "polynomial on z' = λz; see welch_amplification for the Welch schemes"
        )
    if method.corrector is None:
        return adams_bashforth_table(k)
    return predictor_corrector_table(
        adams_bashforth_weights(k), CORRECTORS[method.corrector](k), mode
    )


def evaluate_table(table: CoefficientTable, hbar: complex | np.ndarray) -> np.ndarray:
    """Coefficients in ζ (highest power first) of a coefficient table at h̄.

    Parameters
    ----------
    table : CoefficientTable
    hbar : complex or ndarray, shape (s,)
        One value of h̄ = hλ, or s of them.

    Returns
    -------
    ndarray, shape (N + 1,) or (s, N + 1)
        The polynomial ``table`` at each h̄, ready for :func:`numpy.roots`.
    """
    c = np.array([[float(x) for x in row] for row in table])
    h = np.asarray(hbar)
    powers = np.stack([np.ones_like(h), *(h**d for d in range(1, c.shape[1]))], axis=-1)
    return powers @ c.T


def characteristic_polynomial(
    method_name: str, k: int, hbar: complex, mode: Mode = "PECE"
) -> np.ndarray:
    """Coefficients in ζ (highest first) of the characteristic polynomial at h̄ = hλ.

    The roots ζ are the amplification factors of z' = λz (Wu Eq. 31) for step h.
    See :func:`characteristic_table`.
    """
    return evaluate_table(characteristic_table(method_name, k, mode), hbar)


def max_root_modulus(coefficients: np.ndarray) -> np.ndarray:
    """Largest |ζ| of polynomials given by their coefficients (highest first).

    Parameters
    ----------
    coefficients : ndarray, shape (N + 1,) or (s, N + 1)
        One polynomial or s of them, all with a nonzero leading coefficient.

    Returns
    -------
    ndarray, shape () or (s,)
        The spectral radius of each polynomial's companion matrix.
    """
    c = np.atleast_2d(np.asarray(coefficients))
    c = c / c[:, :1]
    n = c.shape[1] - 1
    companion = np.zeros((c.shape[0], n, n), dtype=c.dtype)
    companion[:, 0, :] = -c[:, 1:]
    if n > 1:
        idx = np.arange(n - 1)
        companion[:, idx + 1, idx] = 1.0
    radius = np.abs(np.linalg.eigvals(companion)).max(axis=1)
    return radius if np.ndim(coefficients) > 1 else radius[0]


def _first_boundary(
    radius: Callable[[np.ndarray], np.ndarray],
    grid: np.ndarray,
    tol: float,
    xtol: float,
    chunk: int = 512,
    relative: bool = False,
) -> float:
    """Smallest grid point after which ``radius > 1 + tol``, refined by bisection.

    ``radius`` maps an ascending array of parameter values to spectral radii; the
    grid is walked in chunks so that the scan stops soon after the first unstable
    point.  Bisection stops at width ``xtol`` (``xtol·x`` if ``relative``).
    Returns ``inf`` when every grid point is stable.
    """
    previous = None
    for start in range(0, grid.size, chunk):
        xs = grid[start : start + chunk]
        unstable = np.nonzero(radius(xs) > 1.0 + tol)[0]
        if unstable.size:
            i = unstable[0]
            hi = float(xs[i])
            lo = float(xs[i - 1]) if i > 0 else previous
            if lo is None:
                raise ValueError(f"unstable already at the first sampled value {hi:g}")
            while hi - lo > xtol * (abs(hi) if relative else 1.0):
                mid = 0.5 * (lo + hi)
                if radius(np.array([mid]))[0] > 1.0 + tol:
                    hi = mid
                else:
                    lo = mid
            return 0.5 * (lo + hi)
        previous = float(xs[-1])
    return math.inf


def real_stability_limit(
    method_name: str,
    k: int,
    mode: Mode = "PECE",
    *,
    hbar_max: float = 10.0,
    step: float = 1e-3,
    tol: float = 1e-12,
    xtol: float = 1e-10,
) -> float:
    """Length of the real-axis stability interval of a method (Wu Eq. 34, Table 2).

    The largest L such that for every h̄ ∈ (−L, 0) all roots of the characteristic
    polynomial (:func:`characteristic_table`) have modulus ≤ 1 (+ ``tol``): a
    scan of h̄ = −step, −2 step, … finds the first unstable point and bisection
    refines the boundary to ``xtol``.  Instability intervals narrower than
    ``step`` before the first unstable grid point are not resolved.

    Parameters
    ----------
    method_name, k, mode
        As for :func:`characteristic_table`.
    hbar_max : float
        Largest |h̄| scanned.
    step : float
        Spacing of the scan.
    tol : float
        Allowance on |ζ| ≤ 1 for rounding.
    xtol : float
        Bisection tolerance on L.

    Returns
    -------
    float
        L (``inf`` if no instability is found up to ``hbar_max``).
    """
    table = characteristic_table(method_name, k, mode)
    grid = np.arange(1, int(round(hbar_max / step)) + 1) * step
    return _first_boundary(lambda xs: max_root_modulus(evaluate_table(table, -xs)), grid, tol, xtol)


def unit_root_condition(table: CoefficientTable, zeta: int) -> list[Fraction]:
    """The polynomial in h̄ whose roots put ζ = ±1 on the characteristic curve.

    Parameters
    ----------
    table : CoefficientTable
    zeta : {1, −1}

    Returns
    -------
    list of Fraction
        Coefficients of h̄⁰, h̄¹, … of p(ζ; h̄) at the given ζ, exact.  For the AB
        methods the ζ = −1 condition is linear: the stability limit is then the
        rational number ρ(−1)/σ(−1).
    """
    if zeta not in (1, -1):
        raise ValueError("zeta must be 1 or -1")
    degree = len(table) - 1
    return [
        sum((row[d] * zeta ** (degree - i) for i, row in enumerate(table)), Fraction(0))
        for d in range(len(table[0]))
    ]


# -- Part 2: Welch et al. (2007) §V, the linearised double pendulum ------------------


def double_pendulum(
    length: float = 5.0,
    mass: float = 1.0,
    inertia: float | None = None,
    jacobian: Literal["eq69", "eq68"] = "eq69",
) -> tuple[np.ndarray, np.ndarray]:
    """Mass matrix and constraint Jacobian of Welch et al.'s double pendulum (Eqs. 66–69).

    q = [x1 y1 θ1 x2 y2 θ2] (Eq. 66): the centre-of-mass coordinates and the angle
    of two equal links.  The paper gives "lengths of five units and mass of one
    unit" but no mass matrix; with q at the centres of mass the mass matrix of two
    uniform slender links is M = diag(m, m, J, m, m, J), J = m L²/12 (25/12 for
    L = 5, m = 1), the default here.

    Parameters
    ----------
    length : float
        Link length L (Eq. 69 uses L/2, the centre-to-joint distance).
    mass : float
        Link mass m.
    inertia : float, optional
        Centroidal moment of inertia J; default m L²/12.
    jacobian : {"eq69", "eq68"}
        ``"eq69"``: B as printed in Eq. 69, whose third row has −1 for x2;
        ``"eq68"``: the Jacobian of the linearised constraints of Eq. 68
        (x2 − x1 − L/2 θ1 − L/2 θ2, hence +1 for x2; row 4 is −(row 4 of Eq. 69),
        which changes nothing).  Both have rank 4 and give the same spectra.

    Returns
    -------
    M : ndarray, shape (6, 6)
    B : ndarray, shape (4, 6)
    """
    j = mass * length**2 / 12.0 if inertia is None else inertia
    half = length / 2.0
    m = np.diag([mass, mass, j, mass, mass, j])
    if jacobian == "eq69":
        b = np.array(
            [
                [1.0, 0.0, -half, 0.0, 0.0, 0.0],
                [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                [-1.0, 0.0, -half, -1.0, 0.0, -half],
                [0.0, 1.0, 0.0, 0.0, -1.0, 0.0],
            ]
        )
    elif jacobian == "eq68":
        b = np.array(
            [
                [1.0, 0.0, -half, 0.0, 0.0, 0.0],
                [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                [-1.0, 0.0, -half, 1.0, 0.0, -half],
                [0.0, -1.0, 0.0, 0.0, 1.0, 0.0],
            ]
        )
    else:
        raise ValueError(f"unknown jacobian variant {jacobian!r}; use 'eq69' or 'eq68'")
    return m, b


def _system(mass: np.ndarray | None, jacobian: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    default_m, default_b = double_pendulum()
    return (default_m if mass is None else mass), (default_b if jacobian is None else jacobian)


def constraint_projector(
    mass: np.ndarray | None = None, jacobian: np.ndarray | None = None
) -> np.ndarray:
    """Γ = M⁻¹BᵀA⁻¹B with A = BM⁻¹Bᵀ (Welch et al., Eqs. 54 and 64).

    Parameters
    ----------
    mass : ndarray, shape (n, n), optional
        Symmetric positive-definite M; default :func:`double_pendulum`.
    jacobian : ndarray, shape (m, n), optional
        Full-rank B; default :func:`double_pendulum`.

    Returns
    -------
    ndarray, shape (n, n)
        The M-orthogonal projector onto the constraint-violating directions.
    """
    m, b = _system(mass, jacobian)
    minv_bt = np.linalg.solve(m, b.T)
    return minv_bt @ np.linalg.solve(b @ minv_bt, b)


def modal_basis(
    mass: np.ndarray | None = None, jacobian: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and eigenvectors of Γ from the symmetric form L⁻¹BᵀA⁻¹BL⁻ᵀ, M = LLᵀ.

    Returns
    -------
    gammas : ndarray, shape (n,)
        Eigenvalues of Γ as computed (0 and 1 up to rounding).
    vectors : ndarray, shape (n, n)
        V with Γ = V diag(gammas) V⁻¹ (columns M-orthonormal: VᵀMV = I).
    """
    m, b = _system(mass, jacobian)
    chol = np.linalg.cholesky(m)
    s = b.T @ np.linalg.solve(b @ np.linalg.solve(m, b.T), b)
    h = np.linalg.solve(chol, np.linalg.solve(chol, s).T)  # L⁻¹ S L⁻ᵀ (S symmetric)
    gammas, q = np.linalg.eigh(0.5 * (h + h.T))
    return gammas, np.linalg.solve(chol.T, q)


def projector_modes(
    mass: np.ndarray | None = None, jacobian: np.ndarray | None = None
) -> np.ndarray:
    """The eigenvalues of Γ, exactly: n − r zeros and r = rank B ones.

    Γ² = M⁻¹BᵀA⁻¹(BM⁻¹Bᵀ)A⁻¹B = Γ, so its eigenvalues are exactly 0 and 1; the
    computed ones (:func:`modal_basis`) are checked against them (1e-9) and the
    exact values returned, since a rounding error δ in γ = 0 moves the defective
    eigenvalue 1 of X and Λ by √δ.

    Returns
    -------
    ndarray, shape (n,)
    """
    gammas, _ = modal_basis(mass, jacobian)
    exact = np.where(gammas > 0.5, 1.0, 0.0)
    if np.max(np.abs(gammas - exact)) > 1e-9:
        raise ValueError(f"Γ is not a projector (eigenvalues {gammas})")
    return exact


def welch_modal_amplification(dt: float, gamma: float) -> np.ndarray:
    """The 2×2 block of X (Eq. 61) for an eigenvalue γ of Γ (Γ → γ).

    Parameters
    ----------
    dt : float
        Time step Δt.
    gamma : float
        Eigenvalue of Γ = M⁻¹BᵀA⁻¹B.

    Returns
    -------
    ndarray, shape (2, 2)
        [[1 − γ, Δt(1 − γ)], [−2γ/Δt, 1 − 2γ]] acting on (q, q̇) modal amplitudes.
    """
    return np.array([[1.0 - gamma, dt * (1.0 - gamma)], [-2.0 * gamma / dt, 1.0 - 2.0 * gamma]])


def welch_amplification(
    dt: float, mass: np.ndarray | None = None, jacobian: np.ndarray | None = None
) -> np.ndarray:
    """Amplification matrix X of the parameter-free second-order scheme (Welch Eq. 61).

    [q, q̇](t + Δt) = X [q, q̇](t) (Eq. 60) for the linearised homogeneous system
    of Eqs. 52–59 (predictor Eqs. 54–56, corrector Eqs. 57–59), with A = BM⁻¹Bᵀ:

        X = [[I − Γ, Δt (I − Γ)], [−(2/Δt) Γ, I − 2Γ]],  Γ = M⁻¹BᵀA⁻¹B.

    Parameters
    ----------
    dt : float
        Time step Δt.
    mass, jacobian : ndarray, optional
        M (n×n) and B (m×n); default the double pendulum of :func:`double_pendulum`.

    Returns
    -------
    ndarray, shape (2n, 2n)
    """
    g = constraint_projector(mass, jacobian)
    eye = np.eye(g.shape[0])
    return np.block([[eye - g, dt * (eye - g)], [-2.0 / dt * g, eye - 2.0 * g]])


BaumgarteScheme = Literal["eq64", "rk2"]


def baumgarte_modal_amplification(
    dt: float, alpha: float, beta: float, gamma: float, scheme: BaumgarteScheme = "eq64"
) -> np.ndarray:
    """The 2×2 block of Λ (Eq. 64) for an eigenvalue γ of Γ (Γ → γ).

    Parameters
    ----------
    dt : float
        Time step Δt.
    alpha, beta : float
        Baumgarte parameters of Φ̈ + 2αΦ̇ + β²Φ = 0 (Eq. 45).
    gamma : float
        Eigenvalue of Γ.
    scheme : {"eq64", "rk2"}
        See :func:`baumgarte_amplification`.

    Returns
    -------
    ndarray, shape (2, 2)
    """
    if scheme == "eq64":
        b2 = beta * beta * dt * dt
        a = alpha * dt
        vq = gamma * (-beta * beta * dt + alpha * beta * beta * dt * dt * gamma)
        vv = 1.0 - (b2 / 2.0 + 2.0 * a) * gamma + 2.0 * a * a * gamma * gamma
        return np.array([[1.0 + dt / 2.0 * vq, dt + dt / 2.0 * (vv - 1.0)], [vq, vv]])
    if scheme == "rk2":
        jac = np.array([[0.0, 1.0], [-beta * beta * gamma, -2.0 * alpha * gamma]])
        return np.eye(2) + dt * jac + dt * dt / 2.0 * (jac @ jac)
    raise ValueError(f"unknown Baumgarte scheme {scheme!r}; use 'eq64' or 'rk2'")


def baumgarte_amplification(
    dt: float,
    alpha: float,
    beta: float,
    mass: np.ndarray | None = None,
    jacobian: np.ndarray | None = None,
    scheme: BaumgarteScheme = "eq64",
) -> np.ndarray:
    """Amplification matrix Λ of Baumgarte stabilisation (Welch Eqs. 63–64).

    With λ from Eq. 47 (no forces, Φ = Bq) the state-space form (Eqs. 48–49) is
    q̇ = v, v̇ = −Γ(β² q + 2α v), Γ = M⁻¹BᵀA⁻¹B as the paper defines it.

    ``scheme="eq64"`` is Eq. 64 as printed, which is this: the velocity advanced
    by a two-stage second-order Runge–Kutta step,
    v_{n+1} = v_n + Δt v̇ + (Δt²/2) v̈ of the linear system, and the position by
    the trapezoidal rule with the new velocity, q_{n+1} = q_n + (Δt/2)(v_n + v_{n+1})
    (the structure of the paper's own corrector, Eq. 44b)::

        Λ = [[I + (Δt/2) Γ(−β²Δt I + αβ²Δt² Γ),  Δt I − (Δt/2)(β²Δt²/2 + 2αΔt) Γ + α²Δt³ Γ²],
             [Γ(−β²Δt I + αβ²Δt² Γ),              I − (β²Δt²/2 + 2αΔt) Γ + 2α²Δt² Γ²]].

    ``scheme="rk2"`` is the plain two-stage second-order Runge–Kutta step of the
    whole state (§IV: "a second-order Runge-Kutta solution"), Λ = I + ΔtJ + Δt²J²/2.

    Parameters
    ----------
    dt : float
        Time step Δt.
    alpha, beta : float
        Baumgarte parameters (Eq. 45).
    mass, jacobian : ndarray, optional
        M and B; default the double pendulum of :func:`double_pendulum`.
    scheme : {"eq64", "rk2"}

    Returns
    -------
    ndarray, shape (2n, 2n)
    """
    g = constraint_projector(mass, jacobian)
    n = g.shape[0]
    eye = np.eye(n)
    if scheme == "eq64":
        vq = g @ (-beta * beta * dt * eye + alpha * beta * beta * dt * dt * g)
        vv = eye - (beta * beta * dt * dt / 2.0 + 2.0 * alpha * dt) * g
        vv = vv + 2.0 * alpha * alpha * dt * dt * (g @ g)
        return np.block([[eye + dt / 2.0 * vq, dt * eye + dt / 2.0 * (vv - eye)], [vq, vv]])
    if scheme == "rk2":
        jac = np.block([[np.zeros((n, n)), eye], [-beta * beta * g, -2.0 * alpha * g]])
        return np.eye(2 * n) + dt * jac + dt * dt / 2.0 * (jac @ jac)
    raise ValueError(f"unknown Baumgarte scheme {scheme!r}; use 'eq64' or 'rk2'")


def spectral_radius_2x2(block: np.ndarray) -> float:
    """Spectral radius of a real 2×2 matrix from its trace and determinant.

    The roots of ζ² − Tζ + D are formed without cancellation (the larger one first,
    the other as D divided by it); a complex pair has modulus √D.  A double root
    with exactly representable T, D (a Jordan block) comes out exact.
    """
    t = float(block[0, 0] + block[1, 1])
    d = float(block[0, 0] * block[1, 1] - block[0, 1] * block[1, 0])
    disc = t * t - 4.0 * d
    if disc < 0.0:
        return math.sqrt(d)
    big = 0.5 * (t + math.copysign(math.sqrt(disc), t))
    small = d / big if big != 0.0 else 0.0
    return max(abs(big), abs(small))


def welch_spectral_radius(
    dt: float,
    mass: np.ndarray | None = None,
    jacobian: np.ndarray | None = None,
    *,
    modes: np.ndarray | None = None,
) -> float:
    """ρ(X) of Eq. 61 (stability condition Eq. 62: ρ(X) ≤ 1), from the modal blocks.

    ``modes`` (the eigenvalues of Γ) may be passed to skip
    :func:`projector_modes` in scans; ``mass`` and ``jacobian`` are then unused.
    """
    gammas = np.unique(projector_modes(mass, jacobian) if modes is None else modes)
    return max(spectral_radius_2x2(welch_modal_amplification(dt, g)) for g in gammas)


def baumgarte_spectral_radius(
    dt: float,
    alpha: float,
    beta: float,
    mass: np.ndarray | None = None,
    jacobian: np.ndarray | None = None,
    scheme: BaumgarteScheme = "eq64",
    *,
    modes: np.ndarray | None = None,
) -> float:
    """ρ(Λ) of Eq. 64 (stability condition Eq. 65: ρ(Λ) ≤ 1), from the modal blocks.

    ``modes`` as for :func:`welch_spectral_radius`.
    """
    gammas = np.unique(projector_modes(mass, jacobian) if modes is None else modes)
    return max(
        spectral_radius_2x2(baumgarte_modal_amplification(dt, alpha, beta, g, scheme))
        for g in gammas
    )


def largest_stable_step(
    radius: Callable[[float], float],
    dt_min: float = 1e-4,
    dt_max: float = 1e3,
    samples: int = 701,
    tol: float = 1e-12,
    rtol: float = 1e-10,
) -> float:
    """Largest Δt up to which ``radius(Δt) ≤ 1 + tol``: log-spaced scan plus bisection.

    Parameters
    ----------
    radius : callable
        Δt ↦ spectral radius, e.g. ``lambda dt: baumgarte_spectral_radius(dt, 1/dt, 1/dt)``
        (the setting of Welch et al.'s limit Δt ≤ 0.0664 s, §V).
    dt_min, dt_max : float
        Scanned range.
    samples : int
        Number of log-spaced scan points (default: 100 per decade).
    tol : float
        Allowance on ρ ≤ 1 for rounding.
    rtol : float
        Relative bisection tolerance.

    Returns
    -------
    float
        The boundary, or ``inf`` if every scanned Δt is stable.
    """
    grid = np.geomspace(dt_min, dt_max, samples)
    return _first_boundary(
        lambda xs: np.array([radius(float(x)) for x in xs]),
        grid,
        tol,
        rtol,
        chunk=samples,
        relative=True,
    )


def baumgarte_gain_limit(
    ratio: float = 1.0,
    scheme: BaumgarteScheme = "eq64",
    mass: np.ndarray | None = None,
    jacobian: np.ndarray | None = None,
    s_max: float = 10.0,
    step: float = 1e-3,
) -> float:
    """Largest s such that β = s/Δt, α = ratio·s/Δt is stable, for every Δt.

    With α and β proportional to 1/Δt, Λ(Δt) = D Λ(1) D⁻¹, D = diag(I, I/Δt), for
    any Δt-independent Γ (each (1,2) entry of Eq. 64 is Δt times a function of αΔt,
    βΔt and Γ, each (2,1) entry 1/Δt times one): ρ(Λ) does not depend on Δt, and the
    stability limit is one on the dimensionless gain s.

    Returns
    -------
    float
        The largest stable s (``inf`` if none up to ``s_max``).
    """
    grid = np.arange(1, int(round(s_max / step)) + 1) * step
    modes = projector_modes(mass, jacobian)
    return _first_boundary(
        lambda xs: np.array(
            [baumgarte_spectral_radius(1.0, ratio * s, s, scheme=scheme, modes=modes) for s in xs]
        ),
        grid,
        1e-12,
        1e-10,
    )
