"""Generalized-α for the index-3 DAE of multibody dynamics (Chung & Hulbert
1993; Arnold & Brüls 2007 for constrained mechanical systems).

The equations of motion and the position constraints hold at t_{n+1}

    M(q_{n+1}) q̈_{n+1} + Φ_qᵀ(q_{n+1}, t_{n+1}) λ_{n+1} = Q(q_{n+1}, q̇_{n+1}, t_{n+1})
    Φ(q_{n+1}, t_{n+1}) = 0

and the positions and velocities follow Newmark's formulas in the acceleration-like
variable a (Arnold & Brüls 2007, §2):

    (1 − α_m) a_{n+1} + α_m a_n = (1 − α_f) q̈_{n+1} + α_f q̈_n,     a_0 = q̈_0
    q_{n+1} = q_n + h q̇_n + h² (½ − β) a_n + h² β a_{n+1}
    q̇_{n+1} = q̇_n + h (1 − γ) a_n + h γ a_{n+1}

Chung & Hulbert's one-parameter family, by the spectral radius ρ∞ ∈ [0, 1] at
hω → ∞ (:func:`coefficients`):

    α_m = (2ρ∞ − 1)/(ρ∞ + 1),  α_f = ρ∞/(ρ∞ + 1),
    γ = ½ − α_m + α_f,          β = (1 − α_m + α_f)²/4

(second order for γ = ½ − α_m + α_f; ρ∞ = 1 is the trapezoidal rule in a, ρ∞ = 0
annihilates the highest frequencies in one step).  With α_m = 0, α_f = −α this is
HHT-α with the same β, γ (Chung & Hulbert 1993), see ``tests/test_genalpha.py``.

Newton's method on (q̈_{n+1}, λ_{n+1}) is HHT's (:func:`mbdgen.runtime.hht.index3_chunk`,
the one loop both use): the same modified Newton, stopping test, predictor and
counters, the constraints scaled by 1/(β′h²) and the iteration matrix from the
generated blocks (DESIGN rule 2),

    [[M + [(M q̈)_q + (Φ_qᵀλ)_q − Q_q] β′h² − Q_q̇ γ′h, Φ_qᵀ], [Φ_q, 0]],

β′ = β c, γ′ = γ c, c = ∂a_{n+1}/∂q̈_{n+1} = (1 − α_f)/(1 − α_m) — Arnold & Brüls'
iteration matrix (§2) for the unknowns (q̈, λ) instead of (q, λ), rows scaled so
that it is symmetric for symmetric M̂.

Error control is HHT's (:mod:`mbdgen.runtime.hht`) with generalized-α's local error
constant (:func:`control`) and one change to the difference x = q̈_{n+1} − q̈_n of Eq.
25.  The position constraints fix a_{n+1} in the constrained directions, and q̈ then
follows from the a-recursion above,

    (1 − α_f) q̈_{n+1} = (1 − α_m) a_{n+1} + α_m a_n − α_f q̈_n,

so q̈ there carries a mode multiplied by r = −α_f/(1 − α_f) each step (−ρ∞ for the
family above: −0.5 at ``genalpha_adaptive``'s default, barely damped at ``genalpha``'s
0.9).  At a constant step it decays from the start; every change of h starts it again,
since a_n ≈ q̈(t_n + (α_m − α_f) h) with the old h.  Its differences alternate in sign,
so x sees it at full size: on standard Andrews at ε = 1e-8 (ρ∞ = 0.5) the estimates
jumped between 0.26 and 1.5 at nearly constant h and 780 of 2990 attempts were
rejected.  The estimate takes

    x̃ = h_n [x_n/h_n − r x_{n−1}/h_{n−1}] / (1 − r)

instead, which removes a mode of ratio r exactly at a constant step and keeps the
smooth part's h q⃛ (to O(h²), the estimate's own order); the first step and ρ∞ = 0
(r = 0) keep x.  Same problem: 3 of 2159 attempts rejected, 161 matrix evaluations
instead of 1248, error 1.5e-4 instead of 2.4e-4, 14 against 23 ms.

User differential states X: Ẋ_{n+1} = f(q_{n+1}, q̇_{n+1}, X_{n+1}, t_{n+1}) holds at
t_{n+1} exactly, as the equations of motion do, and X follows from an averaged rate b
as q follows from a,

    (1 − α_m) b_{n+1} + α_m b_n = (1 − α_f) Ẋ_{n+1} + α_f Ẋ_n,     b_0 = Ẋ_0
    X_{n+1} = X_n + h b_n + γh (b_{n+1} − b_n)

(Negrut et al. 2007's Eq. 9a with ρ = γ, in b): X is then to q̇ what q̇ is to a, second
order for γ = ½ − α_m + α_f because b_n ≈ Ẋ(t_n + (α_m − α_f) h) as a_n ≈ q̈(t_n +
(α_m − α_f) h) (Arnold & Brüls 2007, §3), and ∂X_{n+1}/∂Ẋ_{n+1} = γh (1 − α_f)/(1 − α_m)
= γ′h, the scale index3_chunk gives q̇ (the loop, the iteration matrix and the error
control are HHT's, :mod:`mbdgen.runtime.hht`).  Not yet here: the perturbed starting
value of a_0 that Arnold & Brüls discuss.
"""

from __future__ import annotations

import numpy as np

from mbdgen.runtime import hht
from mbdgen.runtime.hht import STATE_SIZE, index3_chunk, state_width, workspace  # noqa: F401


def coefficients(rho_inf: float) -> tuple[float, float, float, float]:
    """(α_m, α_f, β, γ) of Chung & Hulbert's generalized-α for the spectral radius ρ∞
    at hω → ∞: α_m = (2ρ∞ − 1)/(ρ∞ + 1), α_f = ρ∞/(ρ∞ + 1), γ = ½ − α_m + α_f,
    β = (1 − α_m + α_f)²/4 (Chung & Hulbert 1993; Arnold & Brüls 2007, §2)."""
    alpha_m = (2.0 * rho_inf - 1.0) / (rho_inf + 1.0)
    alpha_f = rho_inf / (rho_inf + 1.0)
    return alpha_m, alpha_f, *newmark_coefficients(alpha_m, alpha_f)


def newmark_coefficients(alpha_m: float, alpha_f: float) -> tuple[float, float]:
    """(β, γ) = ((1 − α_m + α_f)²/4, ½ − α_m + α_f): second order and unconditionally
    stable for α_m ≤ α_f ≤ ½ (Chung & Hulbert 1993)."""
    return (1.0 - alpha_m + alpha_f) ** 2 / 4.0, 0.5 - alpha_m + alpha_f


def control(
    rho_inf: float | None,
    tol: float,
    max_iterations: int,
    *,
    alpha_m: float | None = None,
    alpha_f: float | None = None,
    degree: int = 2,
    full_newton: bool = False,
    rate_slow: float = 0.05,
    fixed_degree: bool = False,
    **step: float,
) -> np.ndarray:
    """The ``ctrl`` vector of :func:`mbdgen.runtime.hht.index3_chunk` for generalized-α
    (``C_GENERALIZED`` = 1): α_m, α_f, β, γ from ρ∞, or from ``alpha_m`` and
    ``alpha_f`` given directly (``rho_inf`` None), and the Newton and error-control
    options of :func:`mbdgen.runtime.hht.control` (``step``).

    The local error constant (:data:`mbdgen.runtime.hht.C_ERRCOEF`) is generalized-α's,
    derived as Negrut et al. 2007 derive Eq. 25 for HHT: a_n = q̈(t_n + Δh) + O(h²)
    with Δ = α_m − α_f (Arnold & Brüls 2007, §3), so the Newmark update of q is
    q(t_{n+1}) + h³ q⃛ (β + Δ/2 − 1/6) + O(h⁴) and, with x = q̈_{n+1} − q̈_n ≈ h q⃛,
    δ ≈ (β + (α_m − α_f)/2 − 1/6) h² x (1/12 at ρ∞ = 1, the trapezoidal rule's, as
    HHT's at α = 0)."""
    if rho_inf is not None:
        alpha_m, alpha_f, beta, gamma = coefficients(rho_inf)
    else:
        if alpha_m is None or alpha_f is None:
            raise ValueError("give rho_inf, or alpha_m and alpha_f")
        beta, gamma = newmark_coefficients(alpha_m, alpha_f)
    ctrl = hht.control(
        0.0, tol, max_iterations, degree=degree, full_newton=full_newton,
        rate_slow=rate_slow, beta=beta, gamma=gamma, fixed_degree=fixed_degree, **step,
    )  # fmt: skip
    ctrl[hht.C_ALPHA_M] = alpha_m
    ctrl[hht.C_ALPHA_F] = alpha_f
    ctrl[hht.C_ERRCOEF] = beta + 0.5 * (alpha_m - alpha_f) - 1.0 / 6.0
    # the states' rates averaged as the accelerations are (module docstring), ρ = γ
    ctrl[hht.C_XALPHA_M] = alpha_m
    ctrl[hht.C_XALPHA_F] = alpha_f
    ctrl[hht.C_XERRCOEF] = hht.state_error_coefficient(alpha_m, alpha_f)
    ctrl[hht.C_GENERALIZED] = 1.0
    return ctrl
