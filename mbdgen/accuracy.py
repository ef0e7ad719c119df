"""What a tolerance buys: the measured final global error of each error-controlled
method, as a multiple of rtol = atol, on seven test problems.

The problems (``docs/measure_tolerances.py``, which regenerates these numbers; the
full table per problem is in docs/methods.md, "What a tolerance buys"): the pendulum,
a four-bar with a spring, the slider-crank (assembled), the spatial double pendulum,
the heavy top, and standard and stiff Andrews.  The error is the max-norm of q at
t_end against RADAU5 at 1e-11.  A method keeps its tolerance's promise where the
ratio stays within :data:`PROMISE` and the log-log slope of error against tolerance
is at least :data:`MIN_SLOPE`.  The second-order index-3 methods hold their error
per unit step (:class:`mbdgen.steppers.HHTAdaptive`): 0.06-44 × rtol for HHT, up to
120 × for generalized-α on standard Andrews, slopes 0.71-1.07 (with the paper's error
per step, ``error_per_unit_step=False``, the global error fell as rtol^(2/3): slopes
0.53-0.75, up to 3.4e4 × rtol); radau5's error falls faster than its tolerance.
:func:`note` is what ``mbdgen simulate`` says about it after a run's summary.
"""

from __future__ import annotations

import math

#: The ratios error / tol a tolerance is promised to keep, and the least slope.
PROMISE = (0.01, 30.0)
MIN_SLOPE = 0.85

#: method → ({decade k of rtol = 10^-k: (least, largest ratio over the problems)},
#: least slope, largest slope), measured with Numba 0.68 on x86-64.
MEASURED: dict[str, tuple[dict[int, tuple[float, float]], float, float]] = {
    "vabm": ({3: (0.2, 41), 4: (0.075, 18), 5: (0.067, 15), 6: (0.067, 44), 7: (0.0023, 39),
              8: (0.077, 20), 9: (0.062, 39)}, 0.99, 1.22),
    "rkf45_adaptive": ({3: (1.9, 66), 4: (2.2, 31), 5: (0.52, 27), 6: (0.38, 21),
                        7: (0.45, 28), 8: (0.52, 9.5), 9: (0.52, 1e2)}, 0.89, 1.12),
    "dop853": ({3: (0.0017, 26), 4: (0.009, 44), 5: (0.091, 81), 6: (0.15, 1.3e2),
                7: (0.071, 1.7e2), 8: (0.038, 1.5e2), 9: (0.023, 1.4e2)}, 0.84, 1.09),
    "hht_adaptive": ({3: (0.056, 11), 4: (0.095, 18), 5: (0.12, 21), 6: (0.14, 27),
                      7: (0.15, 44), 8: (0.17, 23), 9: (0.18, 42)}, 0.71, 1.07),
    "genalpha_adaptive": ({3: (0.066, 16), 4: (0.14, 27), 5: (0.11, 38), 6: (0.23, 46),
                           7: (0.27, 58), 8: (0.29, 78), 9: (0.34, 1.2e2)}, 0.74, 1.01),
    "radau5": ({3: (0.066, 2.6e3), 4: (0.052, 1.2e2), 5: (0.032, 74), 6: (0.012, 53),
                7: (0.0044, 28), 8: (0.0027, 18), 9: (0.00089, 5.8)}, 1.16, 1.87),
}  # fmt: skip

#: The same for the index-3 methods with the paper's error per step
#: (``error_per_unit_step=False``, ``mbdgen simulate --error-per-step``).
MEASURED_PER_STEP: dict[str, tuple[dict[int, tuple[float, float]], float, float]] = {
    "hht_adaptive": ({3: (0.44, 5.3e2), 4: (0.53, 5.8e2), 5: (3.5, 3.4e2), 6: (9.4, 1.1e3),
                      7: (26, 2.7e3), 8: (66, 7.6e3), 9: (1.6e2, 1.3e4)}, 0.54, 0.72),
    "genalpha_adaptive": ({3: (0.59, 7.5e2), 4: (0.6, 8.5e2), 5: (4, 3.9e2), 6: (13, 2.3e3),
                           7: (37, 5.6e3), 8: (1e2, 1.2e4), 9: (2.3e2, 3.4e4)}, 0.53, 0.75),
}  # fmt: skip


def _table(
    method: str, per_step: bool
) -> dict[str, tuple[dict[int, tuple[float, float]], float, float]]:
    return MEASURED_PER_STEP if per_step and method in MEASURED_PER_STEP else MEASURED


def measured(method: str, rtol: float, per_step: bool = False) -> tuple[float, float] | None:
    """(least, largest) measured error / rtol at the decade nearest ``rtol``, or None
    where ``method`` was not measured or ``rtol`` is outside 1e-3 … 1e-9 by more
    than half a decade; ``per_step``: with the error held per step (index-3 methods)."""
    table = _table(method, per_step)
    if method not in table or not rtol > 0:
        return None
    decades = table[method][0]
    k = round(-math.log10(rtol))
    if k not in decades or abs(-math.log10(rtol) - k) > 0.5:
        return None
    return decades[k]


def note(method: str, rtol: float, per_step: bool = False) -> str | None:
    """One line for a run of ``method`` at ``rtol`` where the measured error broke the
    promise (:data:`PROMISE`, :data:`MIN_SLOPE`) at that tolerance, else None;
    ``per_step``: the run held the error per step (:data:`MEASURED_PER_STEP`)."""
    ratios = measured(method, rtol, per_step)
    if ratios is None:
        return None
    low, high = ratios
    per_step = per_step and method in MEASURED_PER_STEP
    _, least, largest = _table(method, per_step)[method]
    if PROMISE[0] <= low and high <= PROMISE[1] and least >= MIN_SLOPE:
        return None
    k = round(-math.log10(rtol))
    how = " with the error per step" if per_step else ""
    text = (
        f"{method}{how} at rtol = 1e-{k}: final error measured {low:.2g}-{high:.2g} × rtol "
        "on seven test problems"
    )
    if least < MIN_SLOPE:
        text += f"; its slope against rtol was {least:.2f}-{largest:.2f} (1: proportional)"
    if per_step:
        text += (
            "; without --error-per-step the error is held per unit step (near rtol) and a "
            "singular force stops the run (per step, 1/(t - 0.5) was stepped over at 1e-3 "
            "and 1e-6)"
        )
    elif high > PROMISE[1] and method in ("hht_adaptive", "genalpha_adaptive"):
        text += "; for an error near rtol use radau5 or dop853"
    return text + (
        " (docs/methods.md, 'What a tolerance buys'); --estimate-error estimates this run's error"
    )
