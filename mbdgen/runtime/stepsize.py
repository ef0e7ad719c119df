"""The step-size controller shared by the error-controlled integrators.

Every variable-step method here has a local error estimate ``err`` in units of the
tolerance (accept when err ≤ 1) that behaves as C h^p over a step; the step that
would put the next estimate at ``target`` is h (target/err)^(1/p).  What differs
between methods is only the policy around that ratio, so a :class:`Controller` is
a record of numbers and :func:`ratio` is the one place that turns an estimate into
h_next/h (the elementary controller of Hairer, Nørsett & Wanner, *Solving ODEs I*,
§II.4, Eq. 4.13, with a hysteresis band):

    r = safety (target/err)^exponent
    r ≥ grow_min       → min(grow_max, r/grow_bias)      (grow)
    1 ≤ r < grow_min   → 1                               (keep h)
    r < 1              → clamp(r, shrink_min, shrink_max) (shrink)

The band keeps h constant over stretches of steps, which is what the Adams order
test needs (equal steps, Haug 1989 §7.4.4: change h "if significant gains are
possible") and what lets a Newton method keep its factorized iteration matrix
(Negrut et al. 2007, §3).  The users are:

* :data:`VABM` — variable-order Adams (:mod:`mbdgen.runtime.adaptive`), exponent
  1/(k + 1) set per step;
* :data:`RKF45` — Fehlberg 4(5) (:mod:`mbdgen.runtime.adaptive_rk`): safety 0.9,
  factor in [0.2, 4], no band;
* :data:`DOP853` — Dormand–Prince 8(5,3) (:mod:`mbdgen.runtime.dop853`): Hairer's
  DOP853 numbers, safety 0.9, factor in [1/3, 6], no band;
* :data:`INDEX3` — HHT-α and generalized-α with error control
  (:mod:`mbdgen.runtime.hht`): Negrut et al. 2007's h_new = s h / Θ^{1/6} with
  s = 0.9 (Eqs. 37b, 47d; Θ = err², so the exponent is 1/3), bounded to [0.2, 2]
  per step and kept while it would grow by less than 20 %.

Rejections follow each method's own rule (halving for Adams, Haug §7.4.4; the same
formula capped below 1 for the one-step methods, :func:`retry_ratio`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from numba import njit

_EPS = 2.220446049250313e-16
_TINY = 2.2250738585072014e-308


class Controller(NamedTuple):
    """The numbers of one step-size policy (see the module docstring)."""

    safety: float
    target: float
    grow_min: float
    grow_bias: float
    grow_max: float
    shrink_min: float
    shrink_max: float


#: Variable-order Adams (DE's rules; :func:`mbdgen.runtime.adaptive.step_ratio`
#: explains TARGET = 0.1).
VABM = Controller(
    safety=1.0, target=0.1, grow_min=1.25, grow_bias=1.2, grow_max=2.0, shrink_min=0.5,
    shrink_max=0.9,
)  # fmt: skip
#: Fehlberg 4(5): h · min(4, max(0.2, 0.9 err^(−1/5))).
RKF45 = Controller(
    safety=0.9, target=1.0, grow_min=1.0, grow_bias=1.0, grow_max=4.0, shrink_min=0.2,
    shrink_max=1.0,
)  # fmt: skip
#: Dormand–Prince 8(5,3): h · min(6, max(1/3, 0.9 err^(−1/8))) (Hairer's DOP853:
#: SAFE = 0.9, FAC1 = 0.333, FAC2 = 6).
DOP853 = Controller(
    safety=0.9, target=1.0, grow_min=1.0, grow_bias=1.0, grow_max=6.0, shrink_min=1.0 / 3.0,
    shrink_max=1.0,
)  # fmt: skip
#: HHT-α and generalized-α (Negrut et al. 2007, Eqs. 37-38: safety 0.9).
INDEX3 = Controller(
    safety=0.9, target=1.0, grow_min=1.2, grow_bias=1.0, grow_max=2.0, shrink_min=0.2,
    shrink_max=0.9,
)  # fmt: skip


@njit(cache=True)
def ratio(err: float, exponent: float, c: Controller) -> float:
    """h_next/h after an accepted step with error estimate ``err`` ∝ h^(1/exponent)."""
    if err <= 0.0:
        return c.grow_max
    r = c.safety * (c.target / err) ** exponent
    if r >= c.grow_min:
        return min(c.grow_max, r / c.grow_bias)
    if r >= 1.0:
        return 1.0
    return max(c.shrink_min, min(c.shrink_max, r))


@njit(cache=True)
def retry_ratio(err: float, exponent: float, c: Controller) -> float:
    """h_retry/h after a rejected step (err > 1 or not finite): the controller's
    ratio, below 0.9; 0.25 when the attempt met a NaN or inf."""
    if not math.isfinite(err):
        return 0.25
    return min(0.9, max(c.shrink_min, c.safety * (c.target / err) ** exponent))


@njit(cache=True)
def h_floor(h_min: float, t: float) -> float:
    """Smallest step: the user's, 16 ulp of t, or the smallest normal number."""
    return max(h_min, 16.0 * _EPS * abs(t), _TINY)


@njit(cache=True)
def wrms(v, scale) -> float:
    """Weighted root-mean-square norm sqrt(Σ (vᵢ/scaleᵢ)² / n) (Negrut et al. 2007,
    Eq. 34; Haug 1989 §7.4.4)."""
    acc = 0.0
    for i in range(v.shape[0]):
        r = v[i] / scale[i]
        acc += r * r
    return math.sqrt(acc / max(v.shape[0], 1))
