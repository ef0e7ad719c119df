"""The thin Python driver of the implicit HHT-α integrator (Negrut et al. 2007), fixed step.

HHT is one of :func:`mbdgen.simulate`'s methods (``method="hht"``, family
:class:`mbdgen.steppers.HHT`); :func:`hht` is the same run with HHT's options spelled
out as keywords.

Names: HHT's α is ``hht_alpha`` (``--hht-alpha``), because :func:`mbdgen.simulate`
and the CLI's ``--alpha`` mean Baumgarte's stabilization parameter, and one name must
not mean both; inside the runtime, where there is no Baumgarte, it is ``alpha`` as in
the paper (DESIGN rule 8).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType

from mbdgen.results import Result
from mbdgen.simulation import simulate


def hht(
    model: ModuleType | str | Path,
    h: float,
    t_end: float,
    *,
    hht_alpha: float = -0.05,
    t0: float = 0.0,
    params: Mapping[str, float] | None = None,
    q0: Sequence[float] | None = None,
    qd0: Sequence[float] | None = None,
    output_every: int = 1,
    newton_tol: float = 1e-10,
    max_iterations: int = 10,
    predictor_degree: int = 2,
    full_newton: bool = False,
    progress: Callable[[float, float], None] | None = None,
) -> Result:
    """Integrate the index-3 equations of a compiled model with HHT-α at a fixed step h.

    Parameters
    ----------
    model : generated module, or the path of a model file (compiled if stale).
    h : the step size; ``t_end - t0`` must be a whole number of steps.
    hht_alpha : HHT's α ∈ [−1/3, 0] (Negrut et al. 2007, Eq. 6); β = (1 − α)²/4,
        γ = (1 − 2α)/2.  0 is the trapezoidal rule (no numerical damping); −1/3 damps
        most (spectral radius (1 + α)/(1 − α) = 0.5 at hω → ∞).
    q0, qd0 : initial state (default: the model's); q0 should satisfy Φ(q0, t0) = 0
        (the first step enforces Φ = 0 at t0 + h, not at t0).  q̈_0, λ_0 are computed
        from the index-1 equations at t0.
    output_every : record every this many steps.
    newton_tol : stop Newton when the estimated distance to the solution, relative to
        max(1, ‖q̈‖∞) and max(1, ‖λ‖∞), is below this (see :mod:`mbdgen.runtime.hht`).
    max_iterations : Newton iterations allowed per step (a step that needs more is
        retried once from the predictor with a fresh iteration matrix, unless it began
        with one, then the run fails).
    predictor_degree : degree (0-3) of the polynomial extrapolating q̈, λ to the next
        step (§3.5); 0 takes the last values.
    full_newton : re-evaluate and refactor the iteration matrix at every iterate
        (default: modified Newton, refreshing it only when convergence slows).
    progress : called as ``progress(t, t_end)`` after each chunk.

    Returns
    -------
    Result
        ``counters`` holds steps, newton_iterations, jacobian_evaluations,
        factorizations, residual_evaluations, max_iterations_per_step, newton_restarts.

    Raises
    ------
    SimulationError
        When Newton fails, the iteration matrix is singular, a value becomes NaN, or
        on Ctrl-C / SIGTERM; ``error.result`` holds the steps computed until then.
    MbdgenError
        On invalid options.
    """
    return simulate(
        model,
        "hht",
        None,
        h,
        t_end,
        t0=t0,
        params=params,
        q0=q0,
        qd0=qd0,
        output_every=output_every,
        progress=progress,
        newton_tol=newton_tol,
        hht_alpha=hht_alpha,
        options={
            "max_iterations": max_iterations,
            "predictor_degree": predictor_degree,
            "full_newton": full_newton,
        },
    )
