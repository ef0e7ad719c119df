"""HHT-α for the index-3 DAE of multibody dynamics (Negrut et al. 2007), with user
differential states.

The equations of motion and the position constraints

    M(q) q̈ + Φ_qᵀ(q, t) λ = Q(q, q̇, t),    Φ(q, t) = 0

are discretized at t_{n+1} with the Newmark formulas (Eq. 2)

    q_{n+1} = q_n + h q̇_n + ½h² [(1 − 2β) q̈_n + 2β q̈_{n+1}]
    q̇_{n+1} = q̇_n + h [(1 − γ) q̈_n + γ q̈_{n+1}]

and HHT's weighting of the forces at two consecutive steps, scaled by 1/(1 + α)
(Eqs. 11a-b, residuals of Eq. 13, with the position constraints scaled by 1/(βh²)):

    e1 = (M q̈)_{n+1} / (1 + α) + (Φ_qᵀλ − Q)_{n+1} − α/(1 + α) (Φ_qᵀλ − Q)_n
         + α/(1 + α) (M_{n+1} − M_n) ã_n = 0
    e2 = Φ(q_{n+1}, t_{n+1}) / (βh²) = 0

α ∈ [−1/3, 0], β = (1 − α)²/4, γ = (1 − 2α)/2 (Eq. 6; :func:`coefficients`);
α = 0 is the trapezoidal rule.  The last term of e1 is not in the paper: ã_n is the
acceleration at t_n (M_n ã_n = −(Φ_qᵀλ − Q)_n), and the term makes e1 Arnold & Brüls'
form of HHT-α (generalized-α with α_m = 0, α_f = −α), which is second order when M
depends on q; the paper's Eq. 10 is first order then (spatial bodies in Euler
parameters, generalized coordinates).  For a constant M (planar bodies, point masses)
the term is exactly zero (:func:`mass_lag`).  Newton's method on the unknowns
(q̈_{n+1}, λ_{n+1}) uses the iteration matrix of Eqs. 12 and 14, assembled from the
generated blocks only (DESIGN rule 2):

    [[M̂, Φ_qᵀ], [Φ_q, 0]],
    M̂ = M/(1 + α) + [(M v)_q/(1 + α) + (Φ_qᵀλ)_q − Q_q] βh² − Q_q̇ γh,  v = q̈ + α ã_n

(Eq. 14 with Q_q for the paper's Π_q F, (M v)_q for its (M q̈)_q as e1's last term
asks, and the Q_q̇ γh term that velocity-dependent forces add when Q is not a separate
unknown F).  The method is modified Newton, as
§3 of the paper describes: the factorized matrix is kept over iterations and steps
(h is fixed here), re-evaluated and refactored when the convergence rate ξ (Eq. 43)
is slow or divergent, or too slow to converge in the iterations left; a step that
exhausts its iterations is restarted once from the predictor with a matrix evaluated
there, unless its first iteration already had such a matrix, whose restart would
repeat the same iterates (then ``NEWTON_FAILED``: a fixed step cannot be cut).  The
iteration stops when the estimated distance to the solution, ξ/(1 − ξ) ‖Δ‖ (Eq. 42)
or ‖Δ‖ on the first iteration, is at most 1, ‖·‖ the larger of the max-norms of Δq̈
and Δλ over their tolerances: ``ctrl[C_TOL]`` times max(1, ‖q̈‖∞) and max(1, ‖λ‖∞),
but not below the round-off floor 10 eps max(1, ‖q‖∞)/(βh²) of q̈ (a smaller change
of q̈ does not change q; times max Mᵢᵢ for λ), which a small h reaches first.

Start: q̈_0, λ_0 solve the index-1 equations at t0 (Haug 1989, Eq. 7.2.1).
Prediction (§3.5): q̈_{n+1}, λ_{n+1} extrapolated by the polynomial of degree
``ctrl[C_DEGREE]`` (≤ 3) through the last accepted values; with a fixed step the
Newton divided-difference form reduces to binomial weights, degree 0 is
q̈_{n+1} = q̈_n, λ_{n+1} = λ_n.  With error control ``ctrl[C_DEGREE]`` is the highest
degree: after each accepted step the degree whose extrapolation came closest to the
converged values (in the Newton test's units; :func:`_best_degree`) predicts the next
one, unless ``ctrl[C_FIXED_DEGREE]``.  The paper fixes no degree; a polynomial through
past steps overshoots where h grows fast (stiff Andrews at ε = 1.8e-2: a quadratic's
first iterate 10²-10³ times the tolerance away, 84 iterations for 15 steps against 50
for 13 with the choice; generalized-α there lost the motion with degree 2) and a
constant lags where the motion is smooth (standard Andrews at ε = 1e-10: 2.18
iterations per step with degree 0, 2.01 with degree 2).

**Error control** (``ctrl[C_ADAPTIVE]``; Negrut et al. 2007, §3).  With
x = q̈_{n+1} − q̈_n the local error of q is δ ≈ C h² x, C = β − 1/(6(1 + α)) (Eq. 25;
generalized-α's constant in :func:`mbdgen.runtime.genalpha.control`); its composite
e = ‖δ/w‖_rms with weights w_i = max(atol, rtol Y_i), Y_i = max_j |q_i,j| over the
accepted steps (Eq. 34: rtol = atol = ε are the paper's ε max(1, Y_i)).  A converged
step is accepted if e ≤ 1 (Eqs. 35b, 47c); the next step, or the retry of a rejected
one, is h (0.9 e^{−1/3}) (Eqs. 37b, 47d: Θ_q = e²) through the shared controller
(:data:`mbdgen.runtime.stepsize.INDEX3`: within [0.2, 2], kept while the gain is
below 20 %, so that the factorized matrix is kept, and not grown right after a
failure).  The corrector stops (Eq. 45, from the second iteration on) when
ξ/(1 − ξ) ‖Δq̈/w‖_rms ≤ c/(|C| h²), c = ``ctrl[C_STOP]`` = 0.001, and λ's
correction meets the fixed step's test with the relative tolerance c ε instead of
``ctrl[C_TOL]`` (the larger of the two).  The paper's test has no λ term: λ has no
error estimate, and its accuracy follows q̈'s through Eq. 11; c ε asks of λ the
fraction c of the accuracy asked of q that Eq. 45 asks of q̈.  Holding λ to
``newton_tol`` = 1e-10 instead made λ's test decide almost every iteration count at
engineering tolerances (stiff Andrews at ε = 1.8e-2: Eq. 45 met after 1-3
iterations, λ's test after 3-7; design notes, stop 41).

**Error per unit step** (``ctrl[C_SPAN]`` = T > 0, the default of
:class:`mbdgen.steppers.HHTAdaptive`): held per step, δ ∝ h³ ≤ ε gives h ∝ ε^{1/3}
and a global error ∝ h² ∝ ε^{2/3}, 10²–10⁴ ε at ε = 1e-6 … 1e-9.  Per unit step q's
weights are max(w_i h/T, ν), ν = 2|C| h² times q̈'s round-off floor (below, the
Newton test's), the controller's exponent 1/2 and c of Eq. 45 is c h/T: the local
errors add up to about ε over the run, h ∝ ε^{1/2} and the global error ∝ ε.  The
states' error stays per step (their X⃛ estimate's round-off floor grows as 1/h).
The best-degree predictor never takes the constant then: its lag h q⃛, left below
the Newton floor in the same direction every step, drifts q̇.  And a step below
:func:`_velocity_floor`, once a step ten times it was accepted, ends the run as a
step-size collapse: q̇ is not resolved there, and a step-size controller that gets
there is crossing a singularity whose q̇ changes by O(1) within a step while q's
estimate falls below q's round-off.  A step whose Newton
iteration fails after the restart is rejected and h cut by 4 (§3); below h_min the
run ends with ``NEWTON_FAILED`` (or ``STEP_SIZE_COLLAPSE`` after error-test failures,
``NONFINITE`` after a NaN).  The iteration matrix is kept while h stays within
``H_CHANGE`` of the h it was built for.
Generalized-α's a_n ≈ q̈(t_n + (α_m − α_f) h) (Arnold & Brüls 2007, §3) belongs to
the step h that made it: a step of another size h′ first takes a_n ← q̈_n + (h′/h)
(a_n − q̈_n), else each change of h leaves an O(Δh) error that the estimate does not
see (on Andrews' mechanism a floor of 3e-5 from ε = 1e-8 on); the states' averaged
rate b_n (below) is carried the same way, by HHT too.
No step passes the end time; outputs at the requested times come from
:func:`interpolate` over the step that contains them, and Φ, Φ̇ there are evaluated
at the interpolated state.

**User differential states** X ∈ R^nd (controllers, actuators; Eq. 8a in the
explicit form Ẋ = f(q, q̇, X, t), d = Ẋ − f; :mod:`mbdgen.model.states`).  Ẋ_{n+1}
is the third unknown of Newton's method, after q̈ and λ as in Eq. 12, with the
residual e3 = Ẋ_{n+1} − f(q_{n+1}, q̇_{n+1}, X_{n+1}, t_{n+1}) of Eq. 13; before each
evaluation X_{n+1} is written into the tail of a working copy of p (p = [parameters;
X], :mod:`mbdgen.codegen.abi`), so that the forces see it, and the caller's p is never
written.  X follows Eq. 9a with ρ = γ — the paper's own hint (§3.1.2: compare Eq. 9
with Newmark's Eq. 2b), X treated as q̇ is — written in an averaged rate b, as
generalized-α writes q in its a (Arnold & Brüls 2007):

    (1 − α_m) b_{n+1} + α_m b_n = (1 − α_f) Ẋ_{n+1} + α_f Ẋ_n,     b_0 = Ẋ_0
    X_{n+1} = X_n + h b_n + ρh (b_{n+1} − b_n),     ρ = γ = ½ − α_m + α_f

(:func:`state_update`), with (α_m, α_f) = (0, −α) for HHT — b_{n+1} = (1 + α) Ẋ_{n+1}
− α Ẋ_n, the weighting Eq. 11a gives the forces — and generalized-α's own α_m, α_f
(``ctrl[C_XALPHA_M]``, ``ctrl[C_XALPHA_F]``).  Why not Eq. 9a as printed (b = Ẋ, e3
at t_{n+1}): that is the θ-method, first order for every ρ ≠ ½ (the paper's Eq. 32,
δ = (ρ − ½) h² Ẍ), and a first-order X makes the whole closed loop first order — on
the PI pendulum (models/pi_pendulum.py) φ's error fell as h^1.0 with it and falls as
h^2.0 with this form.  ρ = ½, Eq. 9a's one second-order choice, is the trapezoidal
rule, which does not damp a stiff state; this form damps it as the method damps q:
at hλ → −∞ the amplification of Ẋ = λX has the eigenvalues −α_f/(1 − α_f) (−ρ∞ for
generalized-α) and 1 − 1/γ (HHT's α = −0.3: 0.43 and 0.25; α = 0 damps nothing).
∂X_{n+1}/∂Ẋ_{n+1} = ρ′h, ρ′ = ρ (1 − α_f)/(1 − α_m), takes Eq. 9b's ρh in the
iteration matrix (:func:`state_matrix`, with d_q̈ = d_λ = 0):

    [[M̂, Φ_qᵀ, −Q_X ρ′h], [Φ_q, 0, 0], [−(f_q βh² + f_q̇ γh), 0, I − f_X ρ′h]]

With error control, X's error enters as the paper's Eqs. 33-38 and 46 prescribe, for
this formula: it is second order, so its local error is δ_X ≈ C_X h³ X⃛ (not Eq. 32's
O(h²)), C_X = 1/12 − Δ/2 − Δ² + α_m Δ, Δ = α_m − α_f (:func:`state_error_coefficient`,
derived as Eq. 32 is, on the solution the method follows), with X⃛ from the divided
differences of the accepted Ẋ over the last two steps (the first step has none and
takes Ẍ_n = 0, a conservative O(h²) bound).  Its composite error over the weights
max(atol, rtol Y^X_i), Y^X_i = max_j |X_i,j| (Eq. 34), must be ≤ 1 as q's (Eqs. 47c,
48c), and the next step is the smaller of Eqs. 37b and 38b — both with the exponent
1/3 here, so h 0.9 max(e_q, e_X)^(−1/3).  The corrector also needs Eq. 46 for this
δ_X: ξ/(1 − ξ) ‖ΔẊ ∂δ_X/∂Ẋ / w‖_rms ≤ c, one rate ξ from the largest of the norms of
Δq̈, Δλ and ΔẊ.  At a fixed step ΔẊ is held to ``ctrl[C_TOL]`` max(1, ‖Ẋ‖∞), not below
its round-off floor eps max(1, ‖X‖∞)/(ρ′h).  The predictor extrapolates Ẋ with q̈ and
λ; dense output interpolates X by the cubic Hermite through X, Ẋ, and Ẋ linearly; a
rejected step leaves X, Ẋ and b as they were.  With nd = 0 every state loop is empty
and the kernels see the caller's p: the results are those of the loop without states,
bit for bit.

**Implicit states**, d(Ẋ, X, q, q̇, q̈, λ, t) = 0 (Eq. 8a in full;
:func:`mbdgen.model.states.implicit`), when the module's ``IMPLICIT_STATES`` is set
(the ``implicit`` argument): e3 = d(Ẋ_{n+1}, X_{n+1}, q_{n+1}, q̇_{n+1}, ã_{n+1},
λ_{n+1}, t_{n+1}) from the ``state_residual`` kernel, and the third block row of Eq. 12
from its partials (``state_residual_blocks``; :func:`implicit_state_blocks`):

    [d_q̈/(1 + α) + d_q βh² + d_q̇ γh,   d_λ,   d_Ẋ + d_X ρ′h]

(β′h², γ′h and α = 0 for generalized-α, as in the other rows; an explicit state of such
a model is the row d = Ẋ − f).  ã_{n+1} is the acceleration at t_{n+1}: HHT-α's unknown
q̈_{n+1} approximates q̈(t_{n+1} + αh) (Eq. 10 weights the forces of t_n and t_{n+1}), a
lag that made a state reading q̈ first order; d reads ã_{n+1} = (q̈_{n+1} + α ã_n)/(1 +
α), ã_0 = q̈_0, carried in ``ws.a`` (:func:`recovered_acceleration`, derived there from
Eqs. 10 and 7d with e1's term of a configuration-dependent M, :func:`mass_lag`).
Generalized-α's q̈_{n+1} satisfies the equations at t_{n+1} and is read as it is, as is
HHT's at α = 0 (every bit as before).

At the start, after q̈_0, λ_0, Ẋ_0 solves d(Ẋ_0, X_0, q_0, q̇_0, q̈_0, λ_0, t_0) = 0
by Newton's method on d_Ẋ (:func:`implicit_state_start`); a singular d_Ẋ returns
``SINGULAR_STATES`` with the state in ``state[S_BADSTATE]``.  The states' formula,
error estimate, stopping test, predictor and dense output are those above.  Without
implicit states none of this is compiled into the path taken, and the explicit path's
results are unchanged bit for bit.

The loop itself is :func:`index3_chunk`, shared with generalized-α
(:mod:`mbdgen.runtime.genalpha`), which differs only in the positions' update and in
the scalars passed to :func:`residual` and :func:`iteration_matrix`.  Its linear
algebra (the ``la_*`` operations) is chosen by the workspace's type: dense
(n + m + nd)² arrays and LU with partial pivoting here, or the Newton matrix on the
compile-time sparse patterns of :mod:`mbdgen.runtime.sparse_newton` for the modules
whose entry point binds the ``*_values`` kernels (``LINEAR_ALGEBRA = "sparse"``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np
from numba import njit, types
from numba.core.errors import NumbaIRAssumptionWarning
from numba.extending import overload

from mbdgen.runtime import stepsize
from mbdgen.runtime.linalg import PIVOT_TOL, lu_factor_inplace, lu_solve_factored, row_weights
from mbdgen.runtime.refs import borrow
from mbdgen.runtime.status import (
    NEWTON_FAILED,
    NONFINITE,
    OK,
    SINGULAR,
    SINGULAR_STATES,
    STEP_SIZE_COLLAPSE,
)
from mbdgen.runtime.stepsize import h_floor

# Layout of the float ``ctrl`` vector.
C_ALPHA = 0  # HHT α ∈ [−1/3, 0]
C_BETA = 1  # Newmark β
C_GAMMA = 2  # Newmark γ
C_TOL = 3  # Newton tolerance of λ (and of q̈ at a fixed step), relative (λ: ≥ c ε adaptive)
C_MAXIT = 4  # Newton iterations allowed per step
C_RATE_SLOW = 5  # ξ above this re-evaluates an old iteration matrix
C_FULL_NEWTON = 6  # 1: re-evaluate the iteration matrix at every iterate
C_DEGREE = 7  # degree of the predictor polynomial (0-3)
C_ALPHA_M = 8  # generalized-α's α_m (0 for HHT; :mod:`mbdgen.runtime.genalpha`)
C_ALPHA_F = 9  # generalized-α's α_f (0 for HHT)
C_ADAPTIVE = 10  # 1: error control and dense output (Eqs. 25, 34-39, 45)
C_RTOL = 11  # ε of Eq. 34 relative to Y_i = max_j |q_i,j| ...
C_ATOL = 12  # ... and its floor: weights max(atol, rtol Y_i)
C_ERRCOEF = 13  # C of the local error δ = C h² x (Eq. 25: β − 1/(6(1 + α)))
C_STOP = 14  # c of the corrector stopping criterion (Eq. 45; 0.001)
C_ATTEMPTS = 15  # step attempts per call with error control
C_XRHO = 16  # ρ of the states' formula (Eq. 9a): γ
C_XALPHA_M = 17  # α_m of the states' rate average b (HHT: 0; generalized-α: α_m)
C_XALPHA_F = 18  # α_f of the states' rate average b (HHT: −α; generalized-α: α_f)
C_XERRCOEF = 19  # C_X of the states' local error δ_X = C_X h³ X⃛ (:func:`state_error_coefficient`)
C_GENERALIZED = 20  # 1: generalized-α (:mod:`mbdgen.runtime.genalpha`), 0: HHT-α
C_FIXED_DEGREE = 21  # 1: error control keeps C_DEGREE (0: the best degree up to it)
C_SPAN = 22  # T > 0: the error test per unit step, e T/h (0: per step, Eqs. 35b, 47c)
CTRL_SIZE = 23

# Layout of the int64 ``state`` array shared between chunks.
S_STEP = 0  # steps accepted since t0
S_ROW = 1  # next output row
S_STARTED = 2  # 1 once q̈_0, λ_0 are known
S_NEWTON = 3  # Newton iterations (linear solves)
S_JAC = 4  # iteration-matrix evaluations
S_FACT = 5  # LU factorizations
S_JAC_VALID = 6  # 1: ``A``, ``piv`` hold the factorized iteration matrix
S_NHIST = 7  # valid rows in the prediction history
S_HEAD = 8  # history row of the last accepted step
S_MAX_ITERS = 9  # most Newton iterations any step took
S_RESTARTS = 10  # steps restarted from the predictor with a fresh matrix
S_NEVAL = 11  # evaluations of the ``dynamics`` kernel
S_REJECTS = 12  # steps rejected by the error test (Eqs. 35b, 47c)
S_CUTS = 13  # steps whose Newton iteration failed, retried with h/4
S_LASTFAIL = 14  # why the last attempt failed: a ``_FAIL_*`` code (0: it did not)
S_BADSTATE = 15  # SINGULAR_STATES: the state at whose column d_Ẋ(t0) is singular
S_DEGREE = 16  # error control: 1 + the predictor degree of the next step (0: C_DEGREE)
S_VFLOOR = 17  # per unit step: 1 once a step of 10 × :func:`_velocity_floor` was accepted
STATE_SIZE = 18

_FAIL_ERROR = 1  # the error test
_FAIL_NEWTON = 2  # Newton's iteration did not converge
_FAIL_NONFINITE = 3  # a NaN or inf in the iterate
_FAIL_SINGULAR = 4  # the iteration matrix was singular at the iterate
#: Status of a run whose step fell below h_min, by the reason of the last failure.
_FAILURES = np.array([STEP_SIZE_COLLAPSE, STEP_SIZE_COLLAPSE, NEWTON_FAILED, NONFINITE, SINGULAR])

# Layout of the float ``fstate`` array of the workspace (error control).
F_T = 0  # t_n of the last accepted step
F_TPREV = 1  # t_{n−1}: start of the last accepted step (dense output)
F_H = 2  # step size of the next attempt
F_HMIN = 3  # smallest step allowed by the user (the guard also uses 16 ulp of t)
F_HMAX = 4  # largest step allowed
F_HJAC = 5  # step size of the factorized iteration matrix
F_ERR = 6  # composite error e/ε of the last attempt (Eq. 34; > 1: rejected)
F_TEND = 7  # end of the integration: no step goes past it
F_HA = 8  # the step ``ws.a`` and ``ws.xb`` belong to (0: a_n = q̈_n, b_n = Ẋ_n)
F_SIZE = 9

#: Round-off floor of the Newton corrections, in units of eps max(1, ‖q‖∞)/(βh²).
_NOISE = 10.0 * np.finfo(np.float64).eps
_EPS = np.finfo(np.float64).eps

#: Rows of the prediction history: a cubic needs four points (§3.5: degree ≤ 3).
HISTORY = 4
MAX_DEGREE = HISTORY - 1

#: An iteration matrix is kept while the step differs from the one it was evaluated
#: for by at most this fraction ("while h barely changes", Negrut et al. 2007, §3).
H_CHANGE = 0.2

# Phases of the loop.
_PH_START = 0  # q̈_0, λ_0 from the index-1 equations
_PH_NEXT = 1  # a new step begins (or, with error control, an output is due)
_PH_ITER = 2  # Newton iterations of a step
_PH_OUTPUT = 3  # evaluate the constraints at an interpolated output point


def coefficients(alpha: float) -> tuple[float, float]:
    """Newmark's β, γ of the HHT method: ((1 − α)²/4, (1 − 2α)/2) (Negrut et al. 2007,
    Eq. 6).  α = 0 gives the trapezoidal rule (1/4, 1/2)."""
    return (1.0 - alpha) ** 2 / 4.0, (1.0 - 2.0 * alpha) / 2.0


def control(
    alpha: float,
    tol: float,
    max_iterations: int,
    *,
    degree: int = 2,
    full_newton: bool = False,
    rate_slow: float = 0.05,
    beta: float | None = None,
    gamma: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    stop: float = 1e-3,
    attempts: int = 4096,
    fixed_degree: bool = False,
    span: float = 0.0,
) -> np.ndarray:
    """The ``ctrl`` vector; β, γ default to :func:`coefficients` of α.  With ``rtol``
    (and ``atol``, default ``rtol``) the step size is error-controlled: Negrut et al.
    2007's ε with the weights max(atol, rtol Y_i) — ``rtol = atol = ε`` are the paper's
    ε Y_i, Y_i = max(1, max_j |q_i,j|) (Eq. 34); ``stop`` is c of Eq. 45.  With error
    control the predictor's degree is the one up to ``degree`` that best predicted the
    last step, unless ``fixed_degree``.  ``span`` > 0 (t_end − t0): the error per unit
    step over it (module docstring)."""
    b, g = coefficients(alpha)
    ctrl = np.zeros(CTRL_SIZE)
    ctrl[C_ALPHA] = alpha
    ctrl[C_BETA] = b if beta is None else beta
    ctrl[C_GAMMA] = g if gamma is None else gamma
    ctrl[C_TOL] = tol
    ctrl[C_MAXIT] = max_iterations
    ctrl[C_RATE_SLOW] = rate_slow
    ctrl[C_FULL_NEWTON] = 1.0 if full_newton else 0.0
    ctrl[C_DEGREE] = degree
    ctrl[C_FIXED_DEGREE] = 1.0 if fixed_degree else 0.0
    ctrl[C_ERRCOEF] = ctrl[C_BETA] - 1.0 / (6.0 * (1.0 + alpha))  # Eq. 25
    # the states: ρ = γ, their rates averaged as HHT averages the forces (α_m = 0, α_f = −α)
    ctrl[C_XRHO] = ctrl[C_GAMMA]
    ctrl[C_XALPHA_F] = -alpha
    ctrl[C_XERRCOEF] = state_error_coefficient(0.0, -alpha)
    if rtol is not None:
        ctrl[C_ADAPTIVE] = 1.0
        ctrl[C_RTOL] = rtol
        ctrl[C_ATOL] = rtol if atol is None else atol
        ctrl[C_STOP] = stop
        ctrl[C_ATTEMPTS] = attempts
        ctrl[C_SPAN] = span
    return ctrl


def state_error_coefficient(alpha_m: float, alpha_f: float) -> float:
    """C_X of the local error δ_X ≈ C_X h³ X⃛ of the user states' formula (module
    docstring, "User differential states") with ρ = ½ − Δ, Δ = α_m − α_f:

        C_X = 1/12 − Δ/2 − Δ² + α_m Δ

    derived as Negrut et al. 2007 derive Eq. 32, on the solution the method follows
    (b_n = Ẋ(t_n + Δh) − ½Δ(1 − 2α_m + Δ) h² X⃛ + O(h³)).  1/12 for Δ = 0, the
    trapezoidal rule's; 1/12 + 0.15 − 0.09 = 0.143 for HHT's α = −0.3."""
    delta = alpha_m - alpha_f
    return 1.0 / 12.0 - 0.5 * delta - delta * delta + alpha_m * delta


def state_width(n: int, m: int, nd: int = 0) -> int:
    """Length of the state x = [q; q̇; q̈; λ; X; Ẋ] (nd user states X)."""
    return 3 * n + m + 2 * nd


class Workspace(NamedTuple):
    """Preallocated arrays of :func:`index3_chunk`.

    M, Q, Φ, Φ_q, Φ_t, γ of the latest evaluation come first, as in every workspace
    (:mod:`mbdgen.diagnose` reads them; sizes of large models are read from Q and Φ,
    :data:`mbdgen.codegen.abi.RUNTIME_SIZES`).
    """

    mass: np.ndarray  # M
    force: np.ndarray  # Q
    phi: np.ndarray  # Φ
    phi_q: np.ndarray  # Φ_q
    phi_t: np.ndarray  # Φ_t
    gam: np.ndarray  # γ (acceleration right side, used at the start)
    A: np.ndarray  # iteration matrix, then its LU factors
    piv: np.ndarray  # pivots
    b: np.ndarray  # right side, then the Newton correction
    maq: np.ndarray  # (M q̈)_q
    plq: np.ndarray  # (Φ_qᵀλ)_q
    fq: np.ndarray  # Q_q
    fqd: np.ndarray  # Q_q̇
    r_prev: np.ndarray  # (Φ_qᵀλ − Q)_n of the last accepted step
    ma_prev: np.ndarray  # HHT-α: M_n ã_n of the last accepted step (:func:`mass_lag`)
    va: np.ndarray  # HHT-α: M_{n+1} ã_n, then q̈_{n+1} + α ã_n for (M v)_q (:func:`mass_lag`)
    q1: np.ndarray  # q_{n+1} (or an output point's q)
    qd1: np.ndarray  # q̇_{n+1} (or an output point's q̇)
    qdd1: np.ndarray  # q̈_{n+1} (Newton iterate)
    lam1: np.ndarray  # λ_{n+1} (Newton iterate)
    hist: np.ndarray  # accepted [q̈; λ] for the predictor, HISTORY rows
    hist_t: np.ndarray  # their times
    a: np.ndarray  # generalized-α: a_n of the last accepted step; HHT-α: ã_n, the
    #   acceleration at t_n (:func:`recovered_acceleration`; :func:`mass_lag`, states' d)
    a1: np.ndarray  # generalized-α: a_{n+1} of the iterate; HHT-α: ã_{n+1}
    x_prev: np.ndarray  # [q; q̇; q̈; λ; X; Ẋ] at the start of the last accepted step
    y_max: np.ndarray  # max |q_i|, then max |X_i|, over the accepted steps (Eq. 34's Y_i)
    weight: np.ndarray  # error weights of the current attempt (q, then X)
    pw: np.ndarray  # the predictor's Lagrange weights
    fstate: np.ndarray  # (F_SIZE,) times and step sizes, see the ``F_*`` constants
    t_out: np.ndarray  # output times (error control); unused at a fixed step
    # user differential states X (nd of them; empty arrays when nd = 0)
    p_work: np.ndarray  # the kernels' p = [parameters; X_{n+1}]: the caller's p is not written
    x1: np.ndarray  # X_{n+1} (Eq. 9a)
    xd1: np.ndarray  # Ẋ_{n+1} (Newton iterate)
    xb: np.ndarray  # b_n, the states' averaged rate of the last accepted step
    xb1: np.ndarray  # b_{n+1} of the iterate
    rate: np.ndarray  # f(q, q̇, X, t) at the iterate
    fxq: np.ndarray  # f_q (nd × n)
    fxqd: np.ndarray  # f_q̇ (nd × n)
    fxx: np.ndarray  # f_X (nd × nd)
    qx: np.ndarray  # Q_X (n × nd)
    # the residual's partials of implicit states (module docstring; (0, ·) when explicit)
    dqdd: np.ndarray  # d_q̈ (nd × n)
    dq: np.ndarray  # d_q (nd × n)
    dqd: np.ndarray  # d_q̇ (nd × n)
    dlam: np.ndarray  # d_λ (nd × m)
    dxd: np.ndarray  # d_Ẋ (nd × nd)
    dx: np.ndarray  # d_X (nd × nd)
    xjac: np.ndarray  # d_Ẋ at the start, then its LU factors (nd × nd)
    xpiv: np.ndarray  # its pivots
    active: np.ndarray  # (m,) 1.0 for an enforced row, 0.0 for a removed redundant row


def workspace(
    n: int,
    m: int,
    t_out: np.ndarray | None = None,
    nd: int = 0,
    n_params: int = 0,
    active: np.ndarray | None = None,
    implicit: bool = False,
) -> Workspace:
    """Preallocated arrays for :func:`index3_chunk`; ``t_out`` the output times of an
    error-controlled run; ``nd`` user states after ``n_params`` parameters in p
    (``implicit``: some state is implicit, the module's ``IMPLICIT_STATES``);
    ``active`` (m,) weights 1.0 for the constraint rows to enforce and 0.0 for the
    redundant rows left out (their equation becomes λ_i = 0), default all 1.0."""
    N = n + m + nd
    weights = row_weights(m, active)
    ni = nd if implicit else 0
    return Workspace(
        mass=np.zeros((n, n)),
        force=np.zeros(n),
        phi=np.zeros(m),
        phi_q=np.zeros((m, n)),
        phi_t=np.zeros(m),
        gam=np.zeros(m),
        A=np.zeros((N, N)),
        piv=np.zeros(N, dtype=np.int64),
        b=np.zeros(N),
        maq=np.zeros((n, n)),
        plq=np.zeros((n, n)),
        fq=np.zeros((n, n)),
        fqd=np.zeros((n, n)),
        r_prev=np.zeros(n),
        ma_prev=np.zeros(n),
        va=np.zeros(n),
        q1=np.zeros(n),
        qd1=np.zeros(n),
        qdd1=np.zeros(n),
        lam1=np.zeros(m),
        hist=np.zeros((HISTORY, N)),
        hist_t=np.zeros(HISTORY),
        a=np.zeros(n),
        a1=np.zeros(n),
        x_prev=np.zeros(state_width(n, m, nd)),
        y_max=np.zeros(n + nd),
        weight=np.ones(n + nd),
        pw=np.zeros(HISTORY),
        fstate=np.zeros(F_SIZE),
        t_out=np.zeros(0) if t_out is None else np.asarray(t_out, dtype=np.float64),
        p_work=np.zeros(n_params + nd if nd else 0),
        x1=np.zeros(nd),
        xd1=np.zeros(nd),
        xb=np.zeros(nd),
        xb1=np.zeros(nd),
        rate=np.zeros(nd),
        fxq=np.zeros((nd, n)),
        fxqd=np.zeros((nd, n)),
        fxx=np.zeros((nd, nd)),
        qx=np.zeros((n, nd)),
        dqdd=np.zeros((ni, n)),
        dq=np.zeros((ni, n)),
        dqd=np.zeros((ni, n)),
        dlam=np.zeros((ni, m)),
        dxd=np.zeros((ni, ni)),
        dx=np.zeros((ni, ni)),
        xjac=np.zeros((ni, ni)),
        xpiv=np.zeros(ni, dtype=np.int64),
        active=weights,
    )


@njit(cache=True, inline="always")
def newmark(n, h, beta, gamma_nm, q, qd, qdd, qdd1, q1, qd1):
    """q_{n+1}, q̇_{n+1} from q̈_{n+1} by the Newmark formulas (Negrut et al. 2007, Eq. 2)."""
    hh = 0.5 * h * h
    for i in range(n):
        q1[i] = q[i] + h * qd[i] + hh * ((1.0 - 2.0 * beta) * qdd[i] + 2.0 * beta * qdd1[i])
        qd1[i] = qd[i] + h * ((1.0 - gamma_nm) * qdd[i] + gamma_nm * qdd1[i])


@njit(cache=True, inline="always")
def residual(n, m, alpha, bh2, mass, force, phi, phi_q, qdd1, lam1, r_prev, active, e):
    """e = [e1; e2] of Negrut et al. 2007, Eq. 13, from M, Q, Φ, Φ_q at (q_{n+1}, t_{n+1}).

    ``r_prev`` = (Φ_qᵀλ − Q)_n; ``bh2`` = βh².  A removed redundant row (``active[i]``
    = 0) has the equation λ_i = 0 instead of Φ_i/(βh²) = 0.
    """
    c = 1.0 / (1.0 + alpha)
    for i in range(n):
        s = -force[i] - alpha * c * r_prev[i]
        for j in range(n):
            s += c * mass[i, j] * qdd1[j]
        for j in range(m):
            s += phi_q[j, i] * lam1[j]
        e[i] = s
    for i in range(m):
        w = active[i]
        e[n + i] = w * phi[i] / bh2 + (1.0 - w) * lam1[i]


@njit(cache=True, inline="always")
def genalpha_update(
    n, h, beta, gamma_nm, alpha_m, alpha_f, q, qd, qdd, a, qdd1, a1, q1, qd1
):  # fmt: skip
    """a_{n+1}, q_{n+1}, q̇_{n+1} from q̈_{n+1} by generalized-α's recurrences (Arnold &
    Brüls 2007, §2; Chung & Hulbert 1993):

        (1 − α_m) a_{n+1} + α_m a_n = (1 − α_f) q̈_{n+1} + α_f q̈_n
        q_{n+1} = q_n + h q̇_n + h² (½ − β) a_n + h² β a_{n+1}
        q̇_{n+1} = q̇_n + h (1 − γ) a_n + h γ a_{n+1}
    """
    cm = 1.0 / (1.0 - alpha_m)
    hh = h * h
    for i in range(n):
        a1[i] = ((1.0 - alpha_f) * qdd1[i] + alpha_f * qdd[i] - alpha_m * a[i]) * cm
        q1[i] = q[i] + h * qd[i] + hh * ((0.5 - beta) * a[i] + beta * a1[i])
        qd1[i] = qd[i] + h * ((1.0 - gamma_nm) * a[i] + gamma_nm * a1[i])


@njit(cache=True, inline="always")
def iteration_matrix(
    mass_a_q,
    phi_q_lam_q,
    force_q,
    force_qd,
    n,
    m,
    t,
    q1,
    qd1,
    qdd1,
    lam1,
    p,
    alpha,
    bh2,
    gh,
    mass,
    phi_q,
    maq,
    plq,
    fq,
    fqd,
    active,
    A,
):
    """The Newton matrix of Negrut et al. 2007, Eq. 12 (M̂ of Eq. 14), into ``A``.

    ``mass``, ``phi_q`` are M and Φ_q at (q_{n+1}, t); the four Jacobian blocks are
    evaluated here from the generated kernels (``maq``, ``plq``, ``fq``, ``fqd`` are
    their work arrays).  ``bh2`` = βh², ``gh`` = γh.  The row of a removed redundant
    constraint (``active[i]`` = 0) is that of λ_i = 0.
    """
    mass_a_q(t, q1, qdd1, p, maq)
    phi_q_lam_q(t, q1, lam1, p, plq)
    force_q(t, q1, qd1, p, fq)
    force_qd(t, q1, qd1, p, fqd)
    _newton_block(n, m, alpha, bh2, gh, mass, phi_q, maq, plq, fq, fqd, active, A)


@njit(cache=True, inline="always")
def _newton_block(n, m, alpha, bh2, gh, mass, phi_q, maq, plq, fq, fqd, active, A):
    """The (n + m)² block of Eq. 12 (M̂ of Eq. 14) from the evaluated Jacobian blocks."""
    c = 1.0 / (1.0 + alpha)
    for i in range(n):
        for j in range(n):
            A[i, j] = c * mass[i, j] + (c * maq[i, j] + plq[i, j] - fq[i, j]) * bh2 - fqd[i, j] * gh
    constraint_block(n, m, phi_q, active, A)


@njit(cache=True, inline="always")
def constraint_block(n, m, phi_q, active, A):
    """The constraint rows and columns of the (n + m)² saddle-point matrices of the
    index-3 loop (the start-up's Haug 1989 Eq. 7.2.1, Negrut et al. 2007 Eq. 12):
    rows n + i = w_i Φ_q,i, columns n + i = Φ_q,iᵀ, diagonal 1 − w_i (``active[i]`` =
    w_i = 0: a removed redundant row, whose equation is λ_i = 0), zero elsewhere."""
    for i in range(m):
        w = active[i]
        for j in range(n):
            A[n + i, j] = w * phi_q[i, j]
            A[j, n + i] = phi_q[i, j]
        for j in range(m):
            A[n + i, n + j] = 0.0
        A[n + i, n + i] = 1.0 - w


# The linear algebra of the index-3 loop, dense: (n + m + nd)² arrays and LU with partial
# pivoting.  :mod:`mbdgen.runtime.sparse_newton` has the same operations on the static
# sparse patterns; :func:`index3_loop` takes one set or the other as arguments.


@njit(cache=True, inline="always")
def dense_start(n, m, nd, ws):
    """[[M, Φ_qᵀ], [Φ_q, 0]] and [Q; γ] of the start-up (Haug 1989, Eq. 7.2.1) into
    ``ws.A``, ``ws.b`` (a removed redundant row: λ_i = 0)."""
    A, b, mass, phi_q = ws.A, ws.b, ws.mass, ws.phi_q
    for i in range(n):
        for j in range(n):
            A[i, j] = mass[i, j]
        b[i] = ws.force[i]
    constraint_block(n, m, phi_q, ws.active, A)
    for i in range(m):
        b[n + i] = ws.active[i] * ws.gam[i]


@njit(cache=True, inline="always")
def dense_newton(n, m, nd, implicit, alpha, bh2, gh, gx, ws):
    """The Newton matrix (Eq. 12; :func:`iteration_matrix`, :func:`state_matrix` or,
    with implicit states, :func:`implicit_state_blocks`) into ``ws.A`` from the
    Jacobian blocks the loop evaluated into ``ws``."""
    _newton_block(
        n, m, alpha, bh2, gh, ws.mass, ws.phi_q, ws.maq, ws.plq, ws.fq, ws.fqd, ws.active, ws.A
    )  # fmt: skip
    if nd > 0:
        if implicit:
            implicit_state_blocks(
                n, m, nd, alpha, bh2, gh, gx, ws.dqdd, ws.dq, ws.dqd, ws.dlam, ws.dxd, ws.dx,
                ws.qx, ws.active, ws.A,
            )  # fmt: skip
        else:
            _state_blocks(n, m, nd, bh2, gh, gx, ws.fxq, ws.fxqd, ws.fxx, ws.qx, ws.A)


@njit(cache=True)
def dense_implicit_noise(ws):
    """(Σ|d_q̈|, Σ|d_λ|) / min_i |(d_Ẋ)_ii| of the implicit states' latest blocks: a
    change δ of q̈ (of λ) below its round-off floor moves the Ẋ that solves d = 0 by at
    most about the first (second) times δ; the Ẋ correction is not asked to be
    smaller (:func:`_state_correction`)."""
    return _noise_ratio(ws.dqdd.ravel(), ws.dlam.ravel(), np.diag(ws.dxd))


@njit(cache=True)
def _noise_ratio(dqdd, dlam, diag):
    sq = 0.0
    for v in dqdd:
        sq += abs(v)
    sl = 0.0
    for v in dlam:
        sl += abs(v)
    dmin = np.inf
    for v in diag:
        dmin = min(dmin, abs(v))
    if not dmin > 0.0:
        return 0.0, 0.0
    return sq / dmin, sl / dmin


@njit(cache=True)
def dense_state_jacobian(ws):
    """``ws.xjac`` ← d_Ẋ (``ws.dxd``) of the implicit states, for Ẋ_0."""
    for i in range(ws.dxd.shape[0]):
        for j in range(ws.dxd.shape[1]):
            ws.xjac[i, j] = ws.dxd[i, j]


@njit(cache=True, inline="always")
def dense_factor(ws, size):
    """LU of the leading ``size``² block of ``ws.A`` in place; a status code."""
    return lu_factor_inplace(ws.A, ws.piv, size)


@njit(cache=True, inline="always")
def dense_solve(ws, size):
    """``ws.b[:size]`` ← the solution with the factors of :func:`dense_factor`."""
    lu_solve_factored(ws.A, ws.piv, ws.b, size)


@njit(cache=True, inline="always")
def dense_residual(n, m, alpha, bh2, ws, qdd1, lam1, e):
    """:func:`residual` from the dense M and Φ_q of ``ws``."""
    residual(
        n, m, alpha, bh2, ws.mass, ws.force, ws.phi, ws.phi_q, qdd1, lam1, ws.r_prev, ws.active, e
    )  # fmt: skip


@njit(cache=True, inline="always")
def dense_r_prev(n, m, ws, lam):
    """``ws.r_prev`` ← (Φ_qᵀλ − Q) of the latest evaluation (the next step's e1)."""
    for i in range(n):
        s = -ws.force[i]
        for j in range(m):
            s += ws.phi_q[j, i] * lam[j]
        ws.r_prev[i] = s


@njit(cache=True, inline="always")
def dense_mass_vector(ws, v, out):
    """``out`` ← M v with the M of the latest evaluation."""
    for i in range(out.shape[0]):
        s = 0.0
        for j in range(out.shape[0]):
            s += ws.mass[i, j] * v[j]
        out[i] = s


@njit(cache=True, inline="always")
def dense_mass_scale(n, ws):
    """max |M_ii| (the round-off floor of λ's correction)."""
    sm = 0.0
    for i in range(n):
        sm = max(sm, abs(ws.mass[i, i]))
    return sm


@njit(cache=True, inline="always")
def dense_record(row, t, x, ws, qd, out_t, out_x, out_aux):
    """An output row: t, x and [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂]."""
    _record(row, t, x, ws.phi, ws.phi_q, ws.phi_t, qd, out_t, out_x, out_aux)


#: Linear algebra of the index-3 loop by workspace class: {class: {operation: function}}
#: (:func:`register_linear_algebra`); a workspace not registered is the dense one.
_LINEAR_ALGEBRA: dict[type, dict[str, Any]] = {}
_DENSE_OPS = {
    "start": dense_start,
    "newton": dense_newton,
    "factor": dense_factor,
    "solve": dense_solve,
    "residual": dense_residual,
    "r_prev": dense_r_prev,
    "mass_vector": dense_mass_vector,
    "mass_scale": dense_mass_scale,
    "record": dense_record,
    "state_jacobian": dense_state_jacobian,
    "implicit_noise": dense_implicit_noise,
}


def register_linear_algebra(workspace_class: type, operations: dict[str, Any]) -> None:
    """Let :func:`index3_chunk` run on workspaces of ``workspace_class`` with these
    ``la_*`` operations (keys of ``_DENSE_OPS``; :mod:`mbdgen.runtime.sparse_newton`)."""
    if set(operations) != set(_DENSE_OPS):
        raise ValueError(f"operations must be {sorted(_DENSE_OPS)}, got {sorted(operations)}")
    _LINEAR_ALGEBRA[workspace_class] = operations


def _ops_of(ws_class: Any) -> dict[str, Any]:
    return _LINEAR_ALGEBRA.get(ws_class, _DENSE_OPS)


def _typed_ops(ws_type: Any) -> dict[str, Any]:
    return _ops_of(getattr(ws_type, "instance_class", None))


# The ``la_*`` functions: in Python (NUMBA_DISABLE_JIT) they look the operation up by
# the workspace's class, in compiled code the overloads below resolve it when the loop
# is typed, so each entry point contains only its own linear algebra.  They are inlined
# (typed IR), as the code they replaced was: as calls, the dense operations lose the
# constant sizes of the small models (the slider-crank's HHT step took 1.24x as long).
# Numba's SSA pass then reports variables of the inlined overloads "not in scope", a
# pedantic check of its own (NumbaIRAssumptionWarning) on correct code: silenced for
# these functions only.
warnings.filterwarnings(
    "ignore", message=r"variable '_ol_\w+__locals__", category=NumbaIRAssumptionWarning
)


def la_start(n, m, nd, ws):
    return _ops_of(type(ws))["start"](n, m, nd, ws)


def la_newton(n, m, nd, implicit, alpha, bh2, gh, gx, ws):
    return _ops_of(type(ws))["newton"](n, m, nd, implicit, alpha, bh2, gh, gx, ws)


def la_factor(ws, size):
    return _ops_of(type(ws))["factor"](ws, size)


def la_solve(ws, size):
    return _ops_of(type(ws))["solve"](ws, size)


def la_residual(n, m, alpha, bh2, ws, qdd1, lam1, e):
    return _ops_of(type(ws))["residual"](n, m, alpha, bh2, ws, qdd1, lam1, e)


def la_r_prev(n, m, ws, lam):
    return _ops_of(type(ws))["r_prev"](n, m, ws, lam)


def la_mass_vector(ws, v, out):
    return _ops_of(type(ws))["mass_vector"](ws, v, out)


def la_mass_scale(n, ws):
    return _ops_of(type(ws))["mass_scale"](n, ws)


def la_record(row, t, x, ws, qd, out_t, out_x, out_aux):
    return _ops_of(type(ws))["record"](row, t, x, ws, qd, out_t, out_x, out_aux)


def la_state_jacobian(ws):
    return _ops_of(type(ws))["state_jacobian"](ws)


def la_implicit_noise(ws):
    return _ops_of(type(ws))["implicit_noise"](ws)


@overload(la_start, inline="always")
def _ol_start(n, m, nd, ws):
    f = _typed_ops(ws)["start"]
    return lambda n, m, nd, ws: f(n, m, nd, ws)


def _constant(ty: Any) -> Any:
    """The value of an argument whose Numba type is a literal (a module constant such as
    ``N_STATES`` or ``IMPLICIT_STATES`` bound by the entry point), else None."""
    return ty.literal_value if isinstance(ty, types.Literal) else None


# The states' rows of the Newton matrix are chosen when the loop is typed.  Numba's
# dead-branch pruning resolves a branch on a constant in the IR it inlines, but an
# overload's arguments are typed values, so a module constant that reaches ``dense_newton``
# through ``la_newton`` prunes nothing, and every model typed and lowered the implicit
# states' rows and compiled ``implicit_state_blocks``.  ``prefer_literal`` lets the
# overload see the constants; it passes them on as constants of its own closure, which
# the pruning after inlining ``dense_newton`` resolves: no states (nd = 0 at compile
# time) compiles neither state path, explicit states only the explicit one.  A size
# read at run time (the large models, ``abi.RUNTIME_SIZES``) keeps its branch.
@overload(la_newton, inline="always", prefer_literal=True)
def _ol_newton(n, m, nd, implicit, alpha, bh2, gh, gx, ws):
    f = _typed_ops(ws)["newton"]
    if _constant(nd) == 0:
        return lambda n, m, nd, implicit, alpha, bh2, gh, gx, ws: f(
            n, m, 0, False, alpha, bh2, gh, gx, ws
        )
    flag = _constant(implicit)
    if flag is not None:
        flag = bool(flag)
        return lambda n, m, nd, implicit, alpha, bh2, gh, gx, ws: f(
            n, m, nd, flag, alpha, bh2, gh, gx, ws
        )
    return lambda n, m, nd, implicit, alpha, bh2, gh, gx, ws: f(
        n, m, nd, implicit, alpha, bh2, gh, gx, ws
    )


@overload(la_factor, inline="always")
def _ol_factor(ws, size):
    f = _typed_ops(ws)["factor"]
    return lambda ws, size: f(ws, size)


@overload(la_solve, inline="always")
def _ol_solve(ws, size):
    f = _typed_ops(ws)["solve"]
    return lambda ws, size: f(ws, size)


@overload(la_residual, inline="always")
def _ol_residual(n, m, alpha, bh2, ws, qdd1, lam1, e):
    f = _typed_ops(ws)["residual"]
    return lambda n, m, alpha, bh2, ws, qdd1, lam1, e: f(n, m, alpha, bh2, ws, qdd1, lam1, e)


@overload(la_r_prev, inline="always")
def _ol_r_prev(n, m, ws, lam):
    f = _typed_ops(ws)["r_prev"]
    return lambda n, m, ws, lam: f(n, m, ws, lam)


@overload(la_mass_vector, inline="always")
def _ol_mass_vector(ws, v, out):
    f = _typed_ops(ws)["mass_vector"]
    return lambda ws, v, out: f(ws, v, out)


@overload(la_mass_scale, inline="always")
def _ol_mass_scale(n, ws):
    f = _typed_ops(ws)["mass_scale"]
    return lambda n, ws: f(n, ws)


@overload(la_implicit_noise, inline="always")
def _ol_implicit_noise(ws):
    f = _typed_ops(ws)["implicit_noise"]
    return lambda ws: f(ws)


@overload(la_state_jacobian, inline="always")
def _ol_state_jacobian(ws):
    f = _typed_ops(ws)["state_jacobian"]
    return lambda ws: f(ws)


@overload(la_record, inline="always")
def _ol_record(row, t, x, ws, qd, out_t, out_x, out_aux):
    f = _typed_ops(ws)["record"]
    return lambda row, t, x, ws, qd, out_t, out_x, out_aux: f(
        row, t, x, ws, qd, out_t, out_x, out_aux
    )


@njit(cache=True, inline="always")
def mass_lag(n, alpha, ws, e):
    """e1 += α/(1 + α) (M_{n+1} − M_n) ã_n: HHT-α's equations of motion for a
    configuration-dependent M, second order (``ws.a`` = ã_n, ``ws.ma_prev`` = M_n ã_n).

    Why.  Eq. 10 of Negrut et al. 2007, (M q̈)_{n+1} + (1 + α) r_{n+1} − α r_n = 0 with
    r = Φ_qᵀλ − Q, is HHT-α as Hilber, Hughes & Taylor wrote it for a constant M.  It is
    generalized-α with α_m = 0, α_f = −α (Arnold & Brüls 2007, §2: a_{n+1} = (1 + α)
    ã_{n+1} − α ã_n, with ã the acceleration at which the equations of motion hold,
    M ã + r = 0 at t_n and t_{n+1}) only while M is constant: multiplied by M_{n+1},
    Arnold & Brüls' recurrence reads

        M_{n+1} q̈_{n+1} + (1 + α) r_{n+1} + α M_{n+1} ã_n = 0,

    and Eq. 10 has α M_n ã_n (= −α r_n) in the place of α M_{n+1} ã_n.  The difference,
    α (M_{n+1} − M_n) ã_n = O(αh), is an error of q̈_{n+1} of the order of the step that
    the Newmark formulas (γ = ½ − α) do not compensate: fixed-step HHT-α fell to first
    order on the models whose M depends on q — spatial bodies in Euler parameters, M =
    diag(mI, 4GᵀJ′G) (a heavy top: 0.99 at α = −0.05, 0.85 at α = −0.3), generalized
    coordinates (0.97, 0.79) — and was second order on planar bodies and point masses,
    whose M is constant.  With this term e1 is Arnold & Brüls' equation (times
    1/(1 + α)), whose second order they prove for every M (measured:
    tests/test_order_spatial.py); for a constant M, M_{n+1} ã_n and M_n ã_n are the same
    floating-point numbers, the term is exactly zero and every result is Eq. 10's, bit
    for bit.  Its Jacobian is (M v)_q/(1 + α) with v = q̈_{n+1} + α ã_n,
    where the loop evaluates ``mass_a_q``.  ``ws.va`` is scratch for M_{n+1} ã_n.
    """
    la_mass_vector(ws, ws.a, ws.va)
    c = alpha / (1.0 + alpha)
    for i in range(n):
        e[i] += c * (ws.va[i] - ws.ma_prev[i])


# The states' steps below are plain (not Numba-inlined) functions: they take no kernels,
# so each compiles once, and the index-3 loop, inlined into every entry point, stays small
# (Numba's inlining of the loop costs time in proportion to its size; LLVM still inlines
# these calls).


@njit(cache=True)
def recovered_acceleration(n, alpha, a, qdd1, a1):
    """ã_{n+1} = (q̈_{n+1} + α ã_n)/(1 + α), the acceleration at t_{n+1} that HHT-α's
    unknown q̈_{n+1} stands for, into ``a1`` (``a`` = ã_n; ã_0 = q̈_0).

    Derivation (Negrut et al. 2007).  With r = Φ_qᵀλ − Q, Eq. 10 (Eq. 11a times 1 + α)
    at t_{n+1} reads

        (M q̈)_{n+1} + (1 + α) r_{n+1} − α r_n = 0,

    so q̈_{n+1} is not the acceleration at t_{n+1} but approximates the one at Eq. 5's
    t̃_{n+1} = t_n + (1 + α) h (where Eq. 15 evaluates the force): q̈_{n+1} ≈
    q̈(t_{n+1} + αh), an O(αh) lag that a state reading q̈ inherits (first order).  The
    acceleration at t_{n+1} is the one the equations of motion (Eq. 7d) give there with
    the step's own forces: M_{n+1} ã_{n+1} = −r_{n+1}, likewise M_n ã_n = −r_n at the
    accepted t_n (at t0 the start solves Eq. 7d: ã_0 = q̈_0).  Substituted into Eq. 10,

        M_{n+1} q̈_{n+1} = (1 + α) M_{n+1} ã_{n+1} − α M_n ã_n,

    which for a constant M (absolute coordinates of planar bodies, point masses) is the
    formula above exactly, with ∂ã_{n+1}/∂q̈_{n+1} = I/(1 + α) in the states' rows of
    Eq. 12 (:func:`implicit_state_blocks`).  For a configuration-dependent M the loop's
    e1 has α M_{n+1} ã_n in the place of α M_n ã_n (:func:`mass_lag`), and the formula
    is exact for every M: M_{n+1} q̈_{n+1} = (1 + α) M_{n+1} ã_{n+1} − α M_{n+1} ã_n.
    The recurrence does not involve h: a change of step size needs no correction
    (unlike generalized-α's a_n).
    """
    c = 1.0 / (1.0 + alpha)
    for i in range(n):
        a1[i] = (qdd1[i] + alpha * a[i]) * c


@njit(cache=True)
def state_update(nd, h, rho, alpha_m, alpha_f, X, Xd, xb, xd1, xb1, x1, p, n_params):
    """b_{n+1}, X_{n+1} from Ẋ_{n+1} (module docstring, "User differential states"):

        (1 − α_m) b_{n+1} + α_m b_n = (1 − α_f) Ẋ_{n+1} + α_f Ẋ_n
        X_{n+1} = X_n + h b_n + ρh (b_{n+1} − b_n)

    (Negrut et al. 2007, Eq. 9a in the averaged rate b; α_m = α_f = 0 is Eq. 9a), and
    X_{n+1} into the kernels' ``p[n_params:]``."""
    cm = 1.0 / (1.0 - alpha_m)
    for i in range(nd):
        xb1[i] = ((1.0 - alpha_f) * xd1[i] + alpha_f * Xd[i] - alpha_m * xb[i]) * cm
        x1[i] = X[i] + h * ((1.0 - rho) * xb[i] + rho * xb1[i])
        p[n_params + i] = x1[i]


@njit(cache=True)
def _put_states(nd, values, p, n_params):
    """X into the kernels' ``p[n_params:]``."""
    for i in range(nd):
        p[n_params + i] = values[i]


@njit(cache=True, inline="always")
def state_matrix(
    state_rate_q, state_rate_qd, state_rate_x, force_x, n, m, nd, t, q1, qd1, p, bh2, gh, gx,
    fxq, fxqd, fxx, qx, A,
):  # fmt: skip
    """The states' rows and columns of the Newton matrix (Negrut et al. 2007, Eq. 12
    with d = Ẋ − f, d_q̈ = d_λ = 0), into ``A`` beside :func:`iteration_matrix`'s
    (n + m)² block:

        ∂e1/∂Ẋ = −Q_X gx,   ∂e2/∂Ẋ = 0,
        ∂e3/∂q̈ = −(f_q bh2 + f_q̇ gh),   ∂e3/∂λ = 0,   ∂e3/∂Ẋ = I − f_X gx

    with ``bh2`` = ∂q_{n+1}/∂q̈_{n+1}, ``gh`` = ∂q̇_{n+1}/∂q̈_{n+1} and ``gx`` =
    ∂X_{n+1}/∂Ẋ_{n+1} = ρh (1 − α_f)/(1 − α_m) (Eq. 9b for the averaged rate), the
    blocks from the generated kernels at (t, q1, qd1, p) with X_{n+1} in p."""
    force_x(t, q1, qd1, p, qx)
    state_rate_q(t, q1, qd1, p, fxq)
    state_rate_qd(t, q1, qd1, p, fxqd)
    state_rate_x(t, q1, qd1, p, fxx)
    _state_blocks(n, m, nd, bh2, gh, gx, fxq, fxqd, fxx, qx, A)


@njit(cache=True)
def _state_columns(n, m, nd, gx, qx, A):
    """The states' columns of the Newton matrix above their rows, explicit or implicit
    form alike (Eq. 12): ∂e1/∂Ẋ = −Q_X gx, ∂e2/∂Ẋ = 0."""
    o = n + m
    for i in range(n):
        for j in range(nd):
            A[i, o + j] = -gx * qx[i, j]
    for i in range(m):
        for j in range(nd):
            A[n + i, o + j] = 0.0


@njit(cache=True)
def _state_blocks(n, m, nd, bh2, gh, gx, fxq, fxqd, fxx, qx, A):
    o = n + m
    _state_columns(n, m, nd, gx, qx, A)
    for i in range(nd):
        for j in range(n):
            A[o + i, j] = -(bh2 * fxq[i, j] + gh * fxqd[i, j])
        for j in range(m):
            A[o + i, n + j] = 0.0
        for j in range(nd):
            A[o + i, o + j] = (1.0 if i == j else 0.0) - gx * fxx[i, j]


@njit(cache=True)
def implicit_state_blocks(
    n, m, nd, alpha, bh2, gh, gx, dqdd, dq, dqd, dlam, dxd, dx, qx, active, A
):  # fmt: skip
    """The states' rows and columns of the Newton matrix for the implicit form d(Ẋ, X,
    q, q̇, q̈, λ, t) = 0 (Negrut et al. 2007, Eqs. 8a, 12), into ``A`` beside
    :func:`iteration_matrix`'s (n + m)² block:

        ∂e1/∂Ẋ = −Q_X gx,   ∂e2/∂Ẋ = 0,
        ∂e3/∂q̈ = d_q̈/(1 + α) + d_q bh2 + d_q̇ gh,   ∂e3/∂λ = d_λ,   ∂e3/∂Ẋ = d_Ẋ + d_X gx

    (``bh2``, ``gh``, ``gx`` as in :func:`state_matrix`; with d = Ẋ − f this is that
    function's matrix).  d reads HHT's recovered acceleration ã_{n+1} = (q̈_{n+1} +
    α ã_n)/(1 + α) (:func:`recovered_acceleration`), hence d_q̈/(1 + α); ``alpha`` is
    0 for generalized-α, whose q̈_{n+1} d reads itself.  A removed redundant row's λ_j
    (``active[j]`` = 0, its equation λ_j = 0) does not enter e3: its column of d_λ is
    left out."""
    o = n + m
    c = 1.0 / (1.0 + alpha)  # ∂ã_{n+1}/∂q̈_{n+1}; 1.0 (every bit unchanged) at α = 0
    _state_columns(n, m, nd, gx, qx, A)
    for i in range(nd):
        for j in range(n):
            A[o + i, j] = c * dqdd[i, j] + bh2 * dq[i, j] + gh * dqd[i, j]
        for j in range(m):
            A[o + i, n + j] = active[j] * dlam[i, j]
        for j in range(nd):
            A[o + i, o + j] = dxd[i, j] + gx * dx[i, j]


@njit(cache=True)
def _factor_states(A, piv, N):
    """LU with partial pivoting of d_Ẋ (``A``, N × N) in place, as
    :func:`mbdgen.runtime.linalg.lu_factor_inplace` (same pivot tolerance); returns −1,
    or the column k at which it is singular: state k's Ẋ is not determined by the
    residuals given the states before it."""
    scale = 0.0
    for i in range(N):
        for j in range(N):
            scale = max(scale, abs(A[i, j]))
    tol = PIVOT_TOL * scale
    for k in range(N):
        p = k
        best = abs(A[k, k])
        for i in range(k + 1, N):
            if abs(A[i, k]) > best:
                best = abs(A[i, k])
                p = i
        piv[k] = p
        if not (best > tol and scale > 0.0):
            return k
        if p != k:
            for j in range(N):
                A[k, j], A[p, j] = A[p, j], A[k, j]
        inv = 1.0 / A[k, k]
        for i in range(k + 1, N):
            f = A[i, k] * inv
            A[i, k] = f
            for j in range(k + 1, N):
                A[i, j] -= f * A[k, j]
    return -1


@njit(cache=True, inline="always")
def implicit_state_start(
    state_residual, state_residual_blocks, nd, t, q, qd, qdd, lam, xd, p, d, ws, tol,
    max_iterations,
):  # fmt: skip
    """Ẋ_0 from d(Ẋ_0, X_0, q_0, q̇_0, q̈_0, λ_0, t_0) = 0 (Negrut et al. 2007, Eq. 8a at
    t0, with q̈_0, λ_0 of the index-1 start) by Newton's method on d_Ẋ, from Ẋ = 0 and
    with d_Ẋ evaluated at every iterate, until ‖ΔẊ‖∞ ≤ ``tol`` max(1, ‖Ẋ‖∞) (one
    iteration and a check when d is linear in Ẋ).  X_0 is in ``p``.  Returns −1, the
    index of the state whose column of d_Ẋ is singular (:func:`_factor_states`), or −2
    when the iteration does not converge in ``max_iterations`` + 1 iterations.  Inlined:
    a kernel passed to a function that is not would make the entry point uncacheable
    (Numba lowers it as a dynamic address)."""
    jac, piv = ws.xjac, ws.xpiv
    for i in range(nd):
        xd[i] = 0.0
    for _ in range(max_iterations + 1):
        state_residual(t, q, qd, qdd, lam, xd, p, d)
        state_residual_blocks(
            t, q, qd, qdd, lam, xd, p, ws.dqdd, ws.dq, ws.dqd, ws.dlam, ws.dxd, ws.dx
        )
        la_state_jacobian(ws)  # d_Ẋ, dense, into ws.xjac
        bad = _factor_states(jac, piv, nd)
        if bad >= 0:
            return bad
        lu_solve_factored(jac, piv, d, nd)
        dx = 0.0
        sx = 1.0
        for i in range(nd):
            xd[i] -= d[i]
            dx = max(dx, abs(d[i]))
            sx = max(sx, abs(xd[i]))
        if not math.isfinite(dx):
            return -2
        if dx <= tol * sx:
            return -1
    return -2


@njit(cache=True)
def _state_start(n, NM, nd, rate, X, Xd, xb, hist, y_max):
    """Ẋ_0 = f(q_0, q̇_0, X_0, t_0), b_0 = Ẋ_0 (as a_0 = q̈_0), the first history row
    and Y^X (Eq. 34)."""
    for i in range(nd):
        Xd[i] = rate[i]
        xb[i] = rate[i]
        hist[0, NM + i] = rate[i]
        y_max[n + i] = abs(X[i])


@njit(cache=True)
def _state_weights(n, nd, hs, hp, rtol, atol, errcoef_x, y_max, weight):
    """The states' error weights ε Y^X_i (Eq. 34) and ∂δ_X/∂Ẋ_{n+1} of this step (see
    :func:`_state_error`)."""
    for i in range(n, n + nd):
        weight[i] = max(atol, rtol * y_max[i])
    return 2.0 * errcoef_x * hs * hs / (hs + (hp if hp > 0.0 else hs))


@njit(cache=True)
def _state_error(n, nd, ox, hs, hp, errcoef_x, xd1, Xd, x_prev, weight):
    """The states' composite error (Eq. 34) of δ_X = C_X h³ X⃛ (the analogue of Eqs.
    32-33 for this formula), X⃛ from the divided differences of Ẋ over the last two
    steps (h_n = ``hs``, h_{n−1} = ``hp``; before the first step, none: Ẍ_n taken as
    0, an O(h²) bound)."""
    hq = hp if hp > 0.0 else hs
    acc = 0.0
    for i in range(nd):
        slope = (Xd[i] - x_prev[ox + i]) / hp if hp > 0.0 else 0.0
        x3 = 2.0 * ((xd1[i] - Xd[i]) / hs - slope) / (hs + hq)
        r = errcoef_x * hs * hs * hs * x3 / weight[n + i]
        acc += r * r
    return math.sqrt(acc / nd)


@njit(cache=True)
def _state_accept(n, NM, nd, head, X, Xd, xb, x1, xd1, xb1, hist, y_max):
    """X, Ẋ, b of the accepted step, its history row and Y^X (Eq. 34)."""
    for i in range(nd):
        X[i] = x1[i]
        Xd[i] = xd1[i]
        xb[i] = xb1[i]
        hist[head, NM + i] = xd1[i]
        y_max[n + i] = max(y_max[n + i], abs(x1[i]))


@njit(cache=True)
def _velocity_floor(n, beta, gamma_nm, q, qd, rtol, atol):
    """The step below which q̇ is not resolved to the tolerance: a change of q̈ by one
    ulp of q over βh² (Eq. 2a) moves q̇ = … + γh q̈ by γ/β eps max(1, ‖q‖∞)/h; this
    is the h at which that reaches q̇'s weight max(atol, rtol max(1, ‖q̇‖∞)) (Eq. 34's
    form).  A step-size controller that goes below it is crossing a singularity — a q̇
    that changes by O(1) within a step whatever its size, while q's local error (Eq.
    25) falls below q's own round-off — or asks for more than double precision gives."""
    sx = 1.0
    sv = 1.0
    for i in range(n):
        sx = max(sx, abs(q[i]))
        sv = max(sv, abs(qd[i]))
    return gamma_nm * _EPS * sx / (beta * max(atol, rtol * sv))


@njit(cache=True)
def _state_correction(NM, n, nd, adaptive, b, xd1, x1, weight, gx, kx, stop, tol, floor_add):
    """Ẋ_{n+1} += ΔẊ and the norm of ΔẊ: at a fixed step against ``tol`` max(1, ‖Ẋ‖∞);
    with error control Eq. 46, ‖ΔẊ‖_X/√n_d against c ε/|∂δ_X/∂Ẋ|.  Not below the
    round-off floor: a change under eps max(1, ‖X‖∞)/gx no longer changes X (Eq. 9a),
    plus ``floor_add``, the round-off of q̈ and λ that implicit residuals pass on to Ẋ
    (:func:`dense_implicit_noise`; 0.0 for explicit states)."""
    sxx = 1.0
    for i in range(nd):
        sxx = max(sxx, abs(x1[i]))
    floor_x = _NOISE * sxx / gx + floor_add
    dx = 0.0
    sd = 1.0
    for i in range(nd):
        xd1[i] += b[NM + i]
        if adaptive:
            r = b[NM + i] / max(stop * weight[n + i] / kx, floor_x)
            dx += r * r
        else:
            dx = max(dx, abs(b[NM + i]))
            sd = max(sd, abs(xd1[i]))
    if adaptive:
        return math.sqrt(dx / nd)
    return dx / max(tol * sd, floor_x)


@njit(cache=True, inline="always")
def _lagrange_weight(d, j, t1, hist_t, head):
    """Weight of history row ``head`` − j (a ring of ``hist_t.shape[0]`` rows) in the
    polynomial of degree d through rows head … head − d, evaluated at ``t1``."""
    K = hist_t.shape[0]
    rj = head - j if head >= j else head - j + K
    v = 1.0
    for k in range(d + 1):
        if k != j:
            rk = head - k if head >= k else head - k + K
            v *= (t1 - hist_t[rk]) / (hist_t[rj] - hist_t[rk])
    return v


@njit(cache=True, inline="always")
def _predict(n, m, nd, degree, hist, hist_t, head, count, t1, w, qdd1, lam1, xd1):
    """q̈_{n+1}, λ_{n+1}, Ẋ_{n+1} extrapolated to ``t1`` by the polynomial through the
    last ``degree`` + 1 accepted values (§3.5), at their own times: Newton's
    divided-difference interpolant, evaluated through its Lagrange weights ``w``,
    computed once for all components (equal steps: the binomial weights
    (−1)^j C(d + 1, j + 1))."""
    # The ring's rows head, head − 1, … wrap by one compare, not ``%``: with an integer
    # division per term these loops had a fifth of the slider-crank's jitted HHT
    # samples, and the step is 6 % faster without them (stop 40).
    K = hist.shape[0]
    d = min(degree, count - 1)
    for j in range(d + 1):
        w[j] = _lagrange_weight(d, j, t1, hist_t, head)
    for i in range(n + m + nd):
        v = 0.0
        for j in range(d + 1):
            v += w[j] * hist[head - j if head >= j else head - j + K, i]
        if i < n:
            qdd1[i] = v
        elif i < n + m:
            lam1[i - n] = v
        else:
            xd1[i - n - m] = v


# Compiled once and called, not inlined into each model's loop, and written as loops:
# inlined with its degrees unrolled it put some 7 s on a new model's first hht compile
# (cold cache, 2 cores); a call per accepted step costs nanoseconds.
@njit(cache=True, error_model="numpy")
def _best_degree(
    n, m, nd, lowest, degree, hist, hist_t, head, count, t1, qdd1, lam1, xd1, weight, cq, cl, cx
):  # fmt: skip
    """The degree in [``lowest``, ``degree``] (≤ 3) whose extrapolation (:func:`_predict`)
    would have come closest to the converged q̈_{n+1}, λ_{n+1}, Ẋ_{n+1} at ``t1``, its error
    measured in the units of the Newton test: q̈_i over ``cq`` w_i (Eq. 45), λ over
    ``cl``, Ẋ_i over ``cx`` w_{n+i} (Eq. 46); the largest of them, the smallest degree
    on a tie."""
    K = hist.shape[0]
    r1 = head - 1 if head >= 1 else head - 1 + K
    r2 = head - 2 if head >= 2 else head - 2 + K
    r3 = head - 3 if head >= 3 else head - 3 + K
    best = 0
    best_err = math.inf
    for d in range(min(lowest, count - 1), min(degree, count - 1) + 1):
        w0 = w1 = w2 = w3 = 0.0  # the Lagrange weights of rows head, head − 1, …
        for j in range(d + 1):
            v = _lagrange_weight(d, j, t1, hist_t, head)
            if j == 0:
                w0 = v
            elif j == 1:
                w1 = v
            elif j == 2:
                w2 = v
            else:
                w3 = v
        err = 0.0
        for i in range(n + m + nd):
            if i < n:
                y = qdd1[i]
                scale = cq * weight[i]
            elif i < n + m:
                y = lam1[i - n]
                scale = cl
            else:
                y = xd1[i - n - m]
                scale = cx * weight[i - m]
            p = w0 * hist[head, i]
            if d >= 1:
                p += w1 * hist[r1, i]
            if d >= 2:
                p += w2 * hist[r2, i]
            if d >= 3:
                p += w3 * hist[r3, i]
            e = abs(p - y)
            if e > err * scale:  # divide only where the maximum grows
                err = e / scale
        if err < best_err:
            best = d
            best_err = err
    return best


@njit(cache=True, inline="always")
def _record(row, t, x, phi, phi_q, phi_t, qd, out_t, out_x, out_aux):
    out_t[row] = t
    for i in range(x.shape[0]):
        out_x[row, i] = x[i]
    phi2 = 0.0
    phid2 = 0.0
    for i in range(phi.shape[0]):
        v = phi_t[i]
        for j in range(qd.shape[0]):
            v += phi_q[i, j] * qd[j]
        phi2 += phi[i] * phi[i]
        phid2 += v * v
    out_aux[row, 0] = math.sqrt(phi2)
    out_aux[row, 1] = math.sqrt(phid2)


@njit(cache=True, inline="always")
def interpolate(n, nd, t, ta, tb, xa, xb, out):
    """Dense output over the last step [ta, tb]: the cubic Hermite interpolants of q
    (through q, q̇ at both ends), of q̇ (through q̇, q̈) and of the user states X
    (through X, Ẋ), linear in q̈, λ and Ẋ.  Their local errors, O(h⁴) and O(h³) (q̈ of
    HHT is first order when α ≠ 0), are below the step's own; the end points are
    reproduced exactly."""
    h = tb - ta
    s = (t - ta) / h if h > 0.0 else 1.0
    h00 = (1.0 + 2.0 * s) * (1.0 - s) ** 2
    h10 = s * (1.0 - s) ** 2
    h01 = s * s * (3.0 - 2.0 * s)
    h11 = s * s * (s - 1.0)
    for i in range(n):
        out[i] = h00 * xa[i] + h * h10 * xa[n + i] + h01 * xb[i] + h * h11 * xb[n + i]
        j = n + i
        out[j] = h00 * xa[j] + h * h10 * xa[n + j] + h01 * xb[j] + h * h11 * xb[n + j]
    o = xa.shape[0] - 2 * nd  # X at o, Ẋ at o + nd
    for i in range(2 * n, o):
        out[i] = (1.0 - s) * xa[i] + s * xb[i]
    for i in range(o, o + nd):
        j = i + nd
        out[i] = h00 * xa[i] + h * h10 * xa[j] + h01 * xb[i] + h * h11 * xb[j]
        out[j] = (1.0 - s) * xa[j] + s * xb[j]


@njit(cache=True, inline="always")
def _cut(state, fstate, h, why):
    """Reject a step whose Newton iteration failed and retry with h/4 (Negrut et al.
    2007, §3), with an iteration matrix evaluated anew."""
    state[S_CUTS] += 1
    state[S_LASTFAIL] = why
    state[S_JAC_VALID] = 0
    fstate[F_H] = 0.25 * h


@njit(cache=True, inline="always")
def index3_chunk(
    dynamics,
    mass_a_q,
    phi_q_lam_q,
    force_q,
    force_qd,
    state_rate,
    state_rate_q,
    state_rate_qd,
    state_rate_x,
    force_x,
    state_residual,
    state_residual_blocks,
    n,
    m,
    nd,
    n_params,
    implicit,
    p,
    ctrl,
    ws,
    t0,
    h,
    x,
    state,
    n_steps,
    stride,
    out_t,
    out_x,
    out_aux,
):
    """The index-3 Newton loop shared by HHT-α and generalized-α, at a fixed step or
    with error control: one compiled entry point per model for the four methods.

    ``ctrl[C_GENERALIZED]`` 0: HHT-α (Parameters below).  1: generalized-α
    in Arnold & Brüls' form (:mod:`mbdgen.runtime.genalpha`): the unknowns q̈_{n+1},
    λ_{n+1} satisfy the equations of motion at t_{n+1} exactly (no weighting, α = 0 in
    :func:`residual`), q_{n+1}, q̇_{n+1} follow from :func:`genalpha_update`, so that
    ∂q_{n+1}/∂q̈_{n+1} = β′h², ∂q̇_{n+1}/∂q̈_{n+1} = γ′h with β′ = β c, γ′ = γ c,
    c = (1 − α_f)/(1 − α_m): the residual, the constraint scaling 1/(β′h²), the
    iteration matrix and the round-off floor take βh², γh → β′h², γ′h (Arnold &
    Brüls 2007, §2, with the constraint rows scaled by 1/(β′h²)).  ``ws.a`` keeps a_n.

    User states (nd > 0; module docstring): Ẋ_{n+1} is the third unknown, e3 = Ẋ − f
    its residual (``implicit``: e3 = d(Ẋ, X, q, q̇, q̈, λ, t)), X_{n+1} from
    :func:`state_update` is written into ``ws.p_work`` before each evaluation, and
    ``ws.xb`` keeps b_n.  With nd = 0 the kernels see the caller's ``p`` and every
    state loop is empty.

    Fixed step (``ctrl[C_ADAPTIVE]`` = 0): ``n_steps`` steps of size ``h`` from
    t0 + ``state[S_STEP]`` h, every ``stride``-th recorded.  Error control
    (``ctrl[C_ADAPTIVE]`` = 1, the module docstring): steps of size ``ws.fstate[F_H]``
    from ``ws.fstate[F_T]``; ``n_steps`` more outputs at the times ``ws.t_out``, at
    most ``ctrl[C_ATTEMPTS]`` attempts; ``t0``, ``h`` and ``stride`` are not used.
    ``ctrl`` also carries ``C_ALPHA_M``, ``C_ALPHA_F``.

    A fixed HHT-α step follows Negrut et al. 2007, Eqs. 2, 9, 11-14.

    Parameters
    ----------
    dynamics, mass_a_q, phi_q_lam_q, force_q, force_qd : the model's kernels (their
        ``*_values`` forms with a :class:`mbdgen.runtime.sparse_newton.Workspace`).
    state_rate, state_rate_q, state_rate_qd, state_rate_x, force_x : the user states'
        kernels f, f_q, f_q̇, f_X and Q_X (nothing is called when nd = 0).
    state_residual, state_residual_blocks : the residual d and its partials d_q̈, d_q,
        d_q̇, d_λ, d_Ẋ, d_X (one kernel; called when ``implicit``).
    n, m, nd : numbers of coordinates, constraints and user states.
    n_params : number of parameters: the kernels read X at p[n_params:].
    implicit : the module's ``IMPLICIT_STATES``: the states' row of Eqs. 12-13 from the
        residual kernels (True) or from Ẋ = f (False).
    p : the parameter vector [parameters; X0] (not written: X_{n+1} goes into a copy).
    ctrl : (CTRL_SIZE,) α, β, γ and the Newton options, see the ``C_*`` constants.
    ws : :func:`workspace` (n, m, nd=nd, n_params=n_params), or the sparse one of
        :func:`mbdgen.runtime.sparse_newton.workspace`: the ``la_*`` operations, chosen
        by the workspace's type when the loop is compiled, are everything that knows how
        M, Φ_q and the Newton matrix are stored.
    x : (3n + m + 2nd,) [q; q̇; q̈; λ; X; Ẋ] at t0 + state[S_STEP] h, updated in place.
        Before the first call (``state[S_STARTED] == 0``) only q, q̇ and X are read;
        q̈, λ and Ẋ are computed.
    state : int64 (STATE_SIZE,) counters, see the ``S_*`` constants.
    stride : record every ``stride``-th step in ``out_*`` (row ``state[S_ROW]`` on).
    out_t, out_x, out_aux : output rows: t, x, and [‖Φ‖₂, ‖Φ_q q̇ + Φ_t‖₂].

    Returns
    -------
    status : ``OK``, or ``SINGULAR``, ``NONFINITE``, ``NEWTON_FAILED``,
    ``SINGULAR_STATES`` (d_Ẋ singular at the start, the state in ``state[S_BADSTATE]``);
    on failure ``x`` holds the last accepted step.
    """
    # unowned views: no reference counting inside the loop (mbdgen.runtime.refs)
    p = borrow(p)
    ctrl = borrow(ctrl)
    ws = borrow(ws)
    mass, force, phi, phi_q, phi_t, gam = ws.mass, ws.force, ws.phi, ws.phi_q, ws.phi_t, ws.gam
    b = ws.b
    q1, qd1, qdd1, lam1 = ws.q1, ws.qd1, ws.qdd1, ws.lam1
    hist, hist_t, a, a1, pw = ws.hist, ws.hist_t, ws.a, ws.a1, ws.pw
    fstate, t_out, weight, y_max, x_prev = ws.fstate, ws.t_out, ws.weight, ws.y_max, ws.x_prev
    x1, xd1, xb, xb1, rate = ws.x1, ws.xd1, ws.xb, ws.xb1, ws.rate
    NM = n + m
    N = n + m + nd
    pk = p  # the kernels' parameter vector
    if nd > 0:
        pk = ws.p_work
        for i in range(n_params):
            pk[i] = p[i]
    alpha = ctrl[C_ALPHA]
    beta = ctrl[C_BETA]
    gamma_nm = ctrl[C_GAMMA]
    tol = ctrl[C_TOL]
    max_iterations = int(ctrl[C_MAXIT])
    rate_slow = ctrl[C_RATE_SLOW]
    full_newton = ctrl[C_FULL_NEWTON] != 0.0
    degree = int(ctrl[C_DEGREE])
    choose_degree = ctrl[C_ADAPTIVE] != 0.0 and degree > 0 and ctrl[C_FIXED_DEGREE] == 0.0
    alpha_m = ctrl[C_ALPHA_M]
    alpha_f = ctrl[C_ALPHA_F]
    generalized = ctrl[C_GENERALIZED] != 0.0
    ga_root = -alpha_f / (1.0 - alpha_f)  # q̈'s parasitic root under generalized-α
    adaptive = ctrl[C_ADAPTIVE] != 0.0
    rtol = ctrl[C_RTOL]
    atol = ctrl[C_ATOL]
    errcoef = max(abs(ctrl[C_ERRCOEF]), 1e-300)
    stop = ctrl[C_STOP]
    span = ctrl[C_SPAN]  # error per unit step over this span (0: per step)
    expo = 0.5 if span > 0.0 else 1.0 / 3.0  # of the controller: e ∝ h² or h³
    stop_h = stop  # c of Eq. 45 for this attempt: c h/T per unit step
    # per unit step the Newton iteration stops at q̈'s round-off floor with h/T as
    # small a tolerance: a constant predictor's lag h q⃛ would be left there, every step
    # in the same direction, as a drift of q̇ (γh times it a step)
    lowest = 1 if span > 0.0 else 0
    # λ's relative tolerance: with error control c ε (Eq. 45's fraction of the error
    # asked for), never tighter than ``newton_tol``
    tol_l = max(tol, stop * rtol) if adaptive else tol
    max_attempts = int(ctrl[C_ATTEMPTS])
    rho_x = ctrl[C_XRHO]
    alpha_mx = ctrl[C_XALPHA_M]
    alpha_fx = ctrl[C_XALPHA_F]
    errcoef_x = max(abs(ctrl[C_XERRCOEF]), 1e-300)
    scale_x = (1.0 - alpha_fx) / (1.0 - alpha_mx)  # ∂b_{n+1}/∂Ẋ_{n+1}
    scale = 1.0  # ∂a_{n+1}/∂q̈_{n+1}
    if generalized:
        alpha = 0.0  # the equations of motion hold at t_{n+1} (Arnold & Brüls)
        scale = (1.0 - alpha_f) / (1.0 - alpha_m)
    K = hist.shape[0]
    q = x[:n]
    qd = x[n : 2 * n]
    qdd = x[2 * n : 3 * n]
    lam = x[3 * n : 3 * n + m]
    X = x[3 * n + m : 3 * n + m + nd]
    Xd = x[3 * n + m + nd :]
    ox = 3 * n + m + nd  # Ẋ in x (x_prev)
    n_total = t_out.shape[0]
    done = 0  # steps (fixed step) or outputs (error control) of this call
    attempts = 0
    k = 0  # Newton iterations of this step
    uses = 1 << 30  # solves with the current factorization (unknown: count it as old)
    noise_q = 0.0  # implicit states: how q̈'s and λ's round-off reach Ẋ (implicit_noise)
    noise_l = 0.0
    restarted = False
    fresh0 = False  # the attempt's first iteration used a matrix evaluated at its predictor
    converged = False
    nrm_prev = 0.0
    hs = h  # the step being attempted
    bh2 = beta * hs * hs * scale
    gh = gamma_nm * hs * scale
    gx = rho_x * hs * scale_x  # ∂X_{n+1}/∂Ẋ_{n+1}
    kx = errcoef_x * hs  # ∂δ_X/∂Ẋ_{n+1} (error control)
    t1 = t0
    acc1 = qdd1  # the acceleration d reads: q̈_{n+1}, or HHT-α's ã_{n+1} (below)
    lag = alpha != 0.0  # HHT-α's q̈ lags; α = 0 for generalized-α: its q̈ is at t_{n+1}
    if implicit and lag:
        acc1 = a1
    phase = _PH_NEXT if state[S_STARTED] != 0 else _PH_START
    while True:
        if phase == _PH_NEXT:
            if adaptive:
                tn = fstate[F_T]
                j = state[S_ROW]
                if j < n_total and t_out[j] <= tn:
                    if done == n_steps:
                        return OK
                    t1 = t_out[j]
                    interpolate(n, nd, t1, fstate[F_TPREV], tn, x_prev, x, out_x[j])
                    for i in range(n):
                        q1[i] = out_x[j, i]
                        qd1[i] = out_x[j, n + i]
                    if nd > 0:
                        _put_states(nd, out_x[j, 3 * n + m :], pk, n_params)
                    phase = _PH_OUTPUT
                else:
                    if j >= n_total or done == n_steps or attempts == max_attempts:
                        return OK
                    hs = min(fstate[F_H], fstate[F_HMAX])
                    if hs < h_floor(fstate[F_HMIN], tn):
                        return _FAILURES[state[S_LASTFAIL]]
                    if state[S_VFLOOR] != 0 and hs < _velocity_floor(
                        n, beta, gamma_nm, q, qd, rtol, atol
                    ):
                        return _FAILURES[state[S_LASTFAIL]]
                    t1 = tn + hs
                    if t1 >= fstate[F_TEND]:  # land on the end
                        t1 = fstate[F_TEND]
                        hs = t1 - tn
                    attempts += 1
                    if state[S_JAC_VALID] != 0 and abs(hs / fstate[F_HJAC] - 1.0) > H_CHANGE:
                        state[S_JAC_VALID] = 0
                    bh2 = beta * hs * hs * scale
                    gh = gamma_nm * hs * scale
                    gx = rho_x * hs * scale_x
                    if span > 0.0:
                        stop_h = stop * (hs / span)
                    for i in range(n):
                        weight[i] = max(atol, rtol * y_max[i])  # ε Y_i (Eq. 34)
                    if fstate[F_HA] > 0.0 and hs != fstate[F_HA]:
                        # a_n ≈ q̈(t_n + (α_m − α_f) h), b_n ≈ Ẋ(t_n + (α_m − α_f) h) for
                        # the step they were made with: move them to the new step
                        r = hs / fstate[F_HA]
                        if generalized:
                            for i in range(n):
                                a[i] = qdd[i] + r * (a[i] - qdd[i])
                        for i in range(nd):
                            xb[i] = Xd[i] + r * (xb[i] - Xd[i])
                        fstate[F_HA] = hs
                    if nd > 0:
                        kx = _state_weights(
                            n, nd, hs, tn - fstate[F_TPREV], rtol, atol, errcoef_x, y_max,
                            weight,
                        )  # fmt: skip
            else:
                if done == n_steps:
                    return OK
                t1 = t0 + (state[S_STEP] + 1) * h
            if phase == _PH_NEXT:
                _predict(
                    n, m, nd, degree if state[S_DEGREE] == 0 else state[S_DEGREE] - 1, hist,
                    hist_t, state[S_HEAD], state[S_NHIST], t1, pw, qdd1, lam1, xd1,
                )  # fmt: skip
                k = 0
                nrm_prev = 0.0
                converged = False
                restarted = False
                fresh0 = False
                phase = _PH_ITER
        if phase == _PH_START:
            t1 = fstate[F_T] if adaptive else t0 + state[S_STEP] * h
            for i in range(n):
                q1[i] = q[i]
                qd1[i] = qd[i]
            if nd > 0:
                _put_states(nd, X, pk, n_params)
        elif phase == _PH_ITER:
            if generalized:
                genalpha_update(
                    n, hs, beta, gamma_nm, alpha_m, alpha_f, q, qd, qdd, a, qdd1, a1, q1, qd1
                )  # fmt: skip
            else:
                newmark(n, hs, beta, gamma_nm, q, qd, qdd, qdd1, q1, qd1)
                if implicit and nd > 0 and alpha != 0.0:
                    recovered_acceleration(n, alpha, a, qdd1, a1)  # ã_{n+1} for d
            if nd > 0:
                state_update(
                    nd, hs, rho_x, alpha_mx, alpha_fx, X, Xd, xb, xd1, xb1, x1, pk, n_params
                )  # fmt: skip
        # the one evaluation site of the equations
        dynamics(t1, q1, qd1, pk, mass, force, phi, phi_q, phi_t, gam)
        state[S_NEVAL] += 1
        if phase == _PH_OUTPUT:
            j = state[S_ROW]
            la_record(j, t1, out_x[j], ws, qd1, out_t, out_x, out_aux)
            state[S_ROW] += 1
            done += 1
            phase = _PH_NEXT
            continue
        if nd > 0:
            if not implicit:
                state_rate(t1, q1, qd1, pk, rate)  # f of e3 (and Ẋ_0 at the start)
            elif phase == _PH_ITER:
                state_residual(t1, q1, qd1, acc1, lam1, xd1, pk, rate)  # d of e3
        factor = False
        if phase == _PH_START:
            # [[M, Φ_qᵀ], [Φ_q, 0]] [q̈_0; λ_0] = [Q; γ] (Haug 1989, Eq. 7.2.1)
            la_start(n, m, nd, ws)
            state[S_JAC_VALID] = 0
            factor = True
        else:
            if converged and adaptive:
                # δ = C h² (q̈_{n+1} − q̈_n) (Eq. 25), composite error (Eq. 34)
                # generalized-α: x without q̈'s parasitic mode (ratio ga_root a step,
                # mbdgen.runtime.genalpha), from this step's and the last step's
                # differences, each per unit step
                root = 0.0
                w = 0.0
                prev = 0
                if generalized and state[S_NHIST] >= 2:
                    root = ga_root
                    prev = state[S_HEAD] - 1 if state[S_HEAD] > 0 else K - 1
                    w = root * hs / (hist_t[state[S_HEAD]] - hist_t[prev])
                acc = 0.0
                unit = 1.0
                nu = 0.0
                if span > 0.0:
                    # per unit step: δ_i ≤ w_i h/T, but not below the δ that q̈'s
                    # round-off floor makes (2 C h² times the Newton test's floor)
                    unit = hs / span
                    sx = 1.0
                    for i in range(n):
                        sx = max(sx, abs(q1[i]))
                    nu = 2.0 * errcoef * hs * hs * _NOISE * sx / bh2
                for i in range(n):
                    xi = qdd1[i] - qdd[i]
                    if root != 0.0:
                        xi = (xi - w * (qdd[i] - hist[prev, i])) / (1.0 - root)
                    if span > 0.0:
                        r = errcoef * hs * hs * xi / max(weight[i] * unit, nu)
                    else:
                        r = errcoef * hs * hs * xi / weight[i]
                    acc += r * r
                err = math.sqrt(acc / max(n, 1))
                if nd > 0:
                    # the states' error (Eqs. 33-34); the step is the smaller of Eqs.
                    # 37b and 38b, both of exponent 1/3 here
                    hp = fstate[F_T] - fstate[F_TPREV]
                    # per step also when q's error is per unit step: the estimate of X⃛,
                    # Ẋ's second divided difference, has a round-off floor that grows as
                    # h shrinks, and per unit step it collapsed the step (lag pendulum at
                    # ε = 1e-9, design notes)
                    ex = _state_error(n, nd, ox, hs, hp, errcoef_x, xd1, Xd, x_prev, weight)
                    err = max(err, ex)
                fstate[F_ERR] = err
                if not err <= 1.0:  # Eqs. 35b, 36b, 47c, 48c
                    state[S_REJECTS] += 1
                    state[S_LASTFAIL] = _FAIL_ERROR
                    fstate[F_H] = hs * stepsize.retry_ratio(err, expo, stepsize.INDEX3)
                    phase = _PH_NEXT
                    continue
            if converged:
                # accept: x ← the new step; keep (Φ_qᵀλ − Q)_{n+1} for the next e1
                if adaptive:
                    for i in range(x.shape[0]):
                        x_prev[i] = x[i]
                la_r_prev(n, m, ws, lam1)
                for i in range(n):
                    q[i] = q1[i]
                    qd[i] = qd1[i]
                    qdd[i] = qdd1[i]
                for i in range(m):
                    lam[i] = lam1[i]
                if generalized or (implicit and nd > 0 and lag):
                    for i in range(n):
                        a[i] = a1[i]  # a_{n+1}, or HHT-α's ã_{n+1}
                elif lag:
                    recovered_acceleration(n, alpha, a, qdd1, a)  # ã_{n+1}
                if lag:
                    la_mass_vector(ws, a, ws.ma_prev)  # M_{n+1} ã_{n+1}, next e1's M_n ã_n
                if generalized or nd > 0:
                    fstate[F_HA] = hs
                if choose_degree:
                    # the next step's predictor: the degree that would have served this
                    # one best (§3.5's polynomial; a cubic through past steps overshoots
                    # where h grows fast, a constant lags where the motion is smooth)
                    sl = 1.0
                    for i in range(m):
                        sl = max(sl, abs(lam1[i]))
                    state[S_DEGREE] = 1 + _best_degree(
                        n, m, nd, lowest, degree, hist, hist_t, state[S_HEAD], state[S_NHIST], t1,
                        qdd1, lam1, xd1, weight, stop_h / (errcoef * hs * hs), tol_l * sl,
                        stop / kx,
                    )  # fmt: skip
                head = state[S_HEAD] + 1 if state[S_HEAD] + 1 < K else 0
                if nd > 0:
                    _state_accept(n, NM, nd, head, X, Xd, xb, x1, xd1, xb1, hist, y_max)
                for i in range(x.shape[0]):
                    if not math.isfinite(x[i]):
                        return NONFINITE
                for i in range(n):
                    hist[head, i] = qdd1[i]
                for i in range(m):
                    hist[head, n + i] = lam1[i]
                hist_t[head] = t1
                state[S_HEAD] = head
                if state[S_NHIST] < K:
                    state[S_NHIST] += 1
                if k > state[S_MAX_ITERS]:
                    state[S_MAX_ITERS] = k
                state[S_STEP] += 1
                if adaptive:
                    # the next step (Eqs. 37b, 47d); no growth right after a failure
                    grow = stepsize.ratio(fstate[F_ERR], expo, stepsize.INDEX3)
                    if state[S_LASTFAIL] != 0:
                        grow = min(grow, 1.0)
                    state[S_LASTFAIL] = 0
                    fstate[F_TPREV] = fstate[F_T]
                    fstate[F_T] = t1
                    fstate[F_H] = min(hs * grow, fstate[F_HMAX])
                    for i in range(n):
                        y_max[i] = max(y_max[i], abs(q[i]))
                    if span > 0.0 and state[S_VFLOOR] == 0:
                        # armed once a step was ten times longer: a start that needs
                        # shorter ones has not fallen there
                        if hs >= 10.0 * _velocity_floor(n, beta, gamma_nm, q, qd, rtol, atol):
                            state[S_VFLOOR] = 1
                else:
                    done += 1
                    if state[S_STEP] % stride == 0:
                        la_record(state[S_ROW], t1, x, ws, qd, out_t, out_x, out_aux)
                        state[S_ROW] += 1
                phase = _PH_NEXT
                continue
            if k >= max_iterations:
                if not (restarted or full_newton or fresh0):
                    # once more from the predictor, with a matrix evaluated there (not
                    # when the first iteration had one: the restart would repeat it)
                    restarted = True
                    state[S_RESTARTS] += 1
                    state[S_JAC_VALID] = 0
                    _predict(
                        n, m, nd, degree if state[S_DEGREE] == 0 else state[S_DEGREE] - 1,
                        hist, hist_t, state[S_HEAD], state[S_NHIST], t1, pw, qdd1, lam1, xd1,
                    )  # fmt: skip
                    k = 0
                    nrm_prev = 0.0
                    continue
                if not adaptive:
                    return NEWTON_FAILED
                _cut(state, fstate, hs, _FAIL_NEWTON)
                phase = _PH_NEXT
                continue
            la_residual(n, m, alpha, bh2, ws, qdd1, lam1, b)
            if lag:
                mass_lag(n, alpha, ws, b)
            if implicit:
                for i in range(nd):
                    b[NM + i] = rate[i]  # e3 = d(Ẋ, X, q, q̇, q̈, λ, t) (Eq. 13)
            else:
                for i in range(nd):
                    b[NM + i] = xd1[i] - rate[i]  # e3 = d = Ẋ − f (Eq. 13)
            for i in range(N):
                b[i] = -b[i]
            if full_newton or state[S_JAC_VALID] == 0:
                # the Jacobian blocks of Eq. 12 at the iterate, then the matrix
                if k == 0:
                    fresh0 = True
                if lag:
                    # e1's M term is M_{n+1} (q̈_{n+1} + α ã_n)/(1 + α) (mass_lag)
                    va = ws.va
                    for i in range(n):
                        va[i] = qdd1[i] + alpha * a[i]
                    mass_a_q(t1, q1, va, pk, ws.maq)
                else:
                    mass_a_q(t1, q1, qdd1, pk, ws.maq)
                phi_q_lam_q(t1, q1, lam1, pk, ws.plq)
                force_q(t1, q1, qd1, pk, ws.fq)
                force_qd(t1, q1, qd1, pk, ws.fqd)
                if nd > 0:
                    force_x(t1, q1, qd1, pk, ws.qx)
                    if implicit:
                        state_residual_blocks(
                            t1, q1, qd1, acc1, lam1, xd1, pk, ws.dqdd, ws.dq, ws.dqd, ws.dlam,
                            ws.dxd, ws.dx,
                        )  # fmt: skip
                    else:
                        state_rate_q(t1, q1, qd1, pk, ws.fxq)
                        state_rate_qd(t1, q1, qd1, pk, ws.fxqd)
                        state_rate_x(t1, q1, qd1, pk, ws.fxx)
                la_newton(n, m, nd, implicit, alpha, bh2, gh, gx, ws)
                if implicit and nd > 0:
                    noise_q, noise_l = la_implicit_noise(ws)
                state[S_JAC] += 1
                factor = True
        size = NM if phase == _PH_START else N
        if factor:
            status = la_factor(ws, size)
            state[S_FACT] += 1
            if status != OK:
                state[S_JAC_VALID] = 0
                if adaptive and phase == _PH_ITER:
                    # singular at an iterate that a too-long step's prediction threw
                    # far off (a cubic predictor on stiff Andrews): cut the step as
                    # for a NaN; only at h_min does the run end with SINGULAR
                    _cut(state, fstate, hs, _FAIL_SINGULAR)
                    phase = _PH_NEXT
                    continue
                return status
            uses = 0
            if phase == _PH_ITER:
                state[S_JAC_VALID] = 1
                fstate[F_HJAC] = hs
        la_solve(ws, size)
        uses += 1
        if phase == _PH_START:
            for i in range(n):
                qdd[i] = b[i]
                hist[0, i] = b[i]
                a[i] = b[i]  # a_0 = q̈_0 (Arnold & Brüls 2007, §2)
                y_max[i] = abs(q[i])
            for i in range(m):
                lam[i] = b[n + i]
                hist[0, n + i] = b[n + i]
            la_r_prev(n, m, ws, lam)
            if lag:
                la_mass_vector(ws, a, ws.ma_prev)  # M_0 ã_0, ã_0 = q̈_0
            if nd > 0:
                if implicit:
                    # Ẋ_0 from d = 0 at t0, with q̈_0, λ_0 just found (Eq. 8a)
                    bad = implicit_state_start(
                        state_residual, state_residual_blocks, nd, t1, q, qd, qdd, lam, Xd, pk,
                        rate, ws, tol, max_iterations,
                    )  # fmt: skip
                    if bad >= 0:
                        state[S_BADSTATE] = bad
                        return SINGULAR_STATES
                    if bad == -2:
                        return NEWTON_FAILED
                    _state_start(n, NM, nd, Xd, X, Xd, xb, hist, y_max)
                else:
                    _state_start(n, NM, nd, rate, X, Xd, xb, hist, y_max)
            for i in range(x.shape[0]):
                if not math.isfinite(x[i]):
                    return NONFINITE
                x_prev[i] = x[i]
            hist_t[0] = t1
            fstate[F_TPREV] = t1
            state[S_HEAD] = 0
            state[S_NHIST] = 1
            state[S_STARTED] = 1
            if not adaptive and state[S_ROW] * stride == state[S_STEP]:
                la_record(state[S_ROW], t1, x, ws, qd, out_t, out_x, out_aux)
                state[S_ROW] += 1
            phase = _PH_NEXT
            continue
        # Newton update, weighted by the tolerance or the round-off floor: below
        # eps max(1, ‖q‖)/(βh²) a change of q̈ no longer changes q (Eq. 2a)
        sx = 1.0
        for i in range(n):
            sx = max(sx, abs(q1[i]))
        floor = _NOISE * sx / bh2
        dq = 0.0
        sq = 1.0
        for i in range(n):
            qdd1[i] += b[i]
            if adaptive:
                # Eq. 45: ‖Δq̈‖_q/√p against c ε/(|C| h²) (weights ε Y_i)
                r = b[i] / max(stop_h * weight[i] / (errcoef * hs * hs), floor)
                dq += r * r
            else:
                dq = max(dq, abs(b[i]))
                sq = max(sq, abs(qdd1[i]))
        dl = 0.0
        sl = 1.0
        for i in range(m):
            lam1[i] += b[n + i]
            dl = max(dl, abs(b[n + i]))
            sl = max(sl, abs(lam1[i]))
        sm = la_mass_scale(n, ws)
        nrm_l = dl / max(tol_l * sl, floor * sm)
        if adaptive:
            nrm = max(math.sqrt(dq / max(n, 1)), nrm_l)
        else:
            nrm = max(dq / max(tol * sq, floor), nrm_l)
        if nd > 0:  # Eq. 46 with error control
            nrm = max(
                nrm,
                _state_correction(
                    NM,
                    n,
                    nd,
                    adaptive,
                    b,
                    xd1,
                    x1,
                    weight,
                    gx,
                    kx,
                    stop,
                    tol,
                    (noise_q * floor + noise_l * floor * sm) if implicit else 0.0,
                ),  # fmt: skip
            )
        k += 1
        state[S_NEWTON] += 1
        if not math.isfinite(nrm):
            if not adaptive:
                return NONFINITE
            _cut(state, fstate, hs, _FAIL_NONFINITE)
            phase = _PH_NEXT
            continue
        if nrm_prev == 0.0:
            # the first iteration: no rate yet; with error control Eq. 45 needs one
            converged = nrm <= 1.0 and not adaptive
        else:
            xi = nrm / nrm_prev  # convergence rate (Eq. 43)
            if xi < 1.0:
                converged = nrm * xi / (1.0 - xi) <= 1.0  # Eqs. 42, 45, 46
            else:
                converged = nrm <= 1.0  # stagnating below the tolerance: round-off
            # an old matrix is re-evaluated when the rate is slow, or too slow to meet
            # the tolerance within the iterations left (Eq. 42 extrapolated)
            slow = xi > rate_slow or nrm * xi ** (max_iterations - k) / (1.0 - xi) > 1.0
            if not converged and slow and uses > 1:
                state[S_JAC_VALID] = 0
        nrm_prev = nrm
