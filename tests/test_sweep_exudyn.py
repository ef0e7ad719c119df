"""The sweep bench's Exudyn column (mbdgen.bench_exudyn): Exudyn's ParameterVariation
runs the same plan as mbdgen's sweep, and the bench works without Exudyn.

Agreement is checked by convergence, not by a hand-picked tolerance: mbdgen's run
(ABM 4, h = 1e-3) is far more accurate than Exudyn's generalized-α (2nd order), so
the difference of the final states is Exudyn's discretization error, and halving
Exudyn's step must divide it by about 2² = 4 (accepted: 3 to 5.5).  A set mapped to
the wrong row of the plan would differ by the ±10 % parameter spread (≈ 1e-2 rad)
and would not shrink with h.
"""

from __future__ import annotations

import numpy as np
import pytest

import mbdgen
from mbdgen import bench_exudyn
from mbdgen.bench import (
    H,
    _exudyn_column,
    mbdgen_module,
    module_defaults,
    sweep_options,
    sweep_plan,
)


def test_exudyn_parameter_variation_converges_to_the_sweep(slider_crank):
    pytest.importorskip("exudyn")
    module = mbdgen_module()
    runs, t_end = 4, 0.2
    mine = mbdgen.sweep(module, sweep_plan(runs), workers=1, **sweep_options(t_end)).table
    final = mine[[f"final.q.{n}" for n in module.COORDINATE_NAMES]].to_numpy()
    # Exudyn starts from the closed-form assembled state; mbdgen's assembly agrees
    defaults = module_defaults(module)
    theta0 = float(module.Q0[0])
    lone = mbdgen.simulate(module, **{**sweep_options(t_end), "t_end": 2 * H})
    assert np.allclose(bench_exudyn.initial_state(defaults, theta0), lone.q[0, 1:], atol=1e-12)
    errors = []
    for h in (H, H / 2):
        out = bench_exudyn.exudyn_sweep(runs, 0, t_end, h, 2, defaults, theta0)
        assert out is not None and out["final_q"].shape == (runs, 4)
        errors.append(np.abs(out["final_q"] - final).max(axis=0))
    ratio = errors[0] / errors[1]
    assert np.all((ratio > 3.0) & (ratio < 5.5)), (errors, ratio)
    assert errors[0].max() < 1e-3 * 1e-3  # ≈ h²: far below the sets' 1e-2 spread


def test_bench_without_exudyn_says_not_installed(monkeypatch):
    monkeypatch.setattr(bench_exudyn, "available", lambda: False)
    column = _exudyn_column(mbdgen_module(), 2, 0.01, 1, None)
    assert column == {"installed": False}
    assert bench_exudyn.exudyn_sweep(2, 0, 0.01, H, 1, {}, 0.0) is None
