"""Every example model compiles (its committed module is current), assembles and
simulates a short run with the mechanism staying on its constraints.

The models cite their sources in their docstrings; the published-table checks are in
the dedicated test files (test_wu, test_welch, test_planar_library, ...).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GENERATED, MODELS

import mbdgen
from mbdgen.analysis.assembly import assemble

EXAMPLES = sorted(p.stem for p in MODELS.glob("*.py"))
#: Andrews' mechanism is stiff (accelerations ~1e4 at t = 0; Hairer & Wanner integrate
#: it to 0.03 s): ABM 4 needs h ≈ 1e-5 there, h = 1e-3 goes unstable by t = 0.024.
#: The flyball governor's dampers (IFToMM A05) put an eigenvalue of order −1e4 1/s: ABM 4
#: is stable at h = 1e-4, not at 2e-4.
STEP = {"andrews": (1e-5, 0.005), "iftomm_a05_flyball_governor": (1e-4, 0.05)}
#: Models whose redundant constraint rows are part of what they demonstrate.
REDUNDANT = {"iftomm_a04_bricard": ["J6[4]"]}


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_assembles_and_simulates(name):
    module = mbdgen.compile(MODELS / f"{name}.py", GENERATED, recompile=False)
    a = assemble(module)
    assert a.residual < 1e-10 and a.dof >= 0, a.redundancy_message()
    assert a.redundant_names == REDUNDANT.get(name, []), a.redundancy_message()
    h, t_end = STEP.get(name, (1e-3, 0.05))
    if module.N_STATES:  # only the index-3 methods integrate user states: test_states.py
        with pytest.raises(mbdgen.MbdgenError, match="cannot integrate user states"):
            mbdgen.simulate(module, "abm", 4, h, t_end, assemble=True)
        r = mbdgen.simulate(module, "hht", None, h, t_end, assemble=True)
        assert np.isfinite(r.states).all() and r.states.shape == (len(r), module.N_STATES)
    else:
        r = mbdgen.simulate(module, "abm", 4, h, t_end, alpha=10, beta=10, assemble=True)
    assert r.ok and np.isfinite(r.q).all()
    assert r.phi_norm.max() < 1e-6, r.phi_norm.max()
    assert r.energy is not None and np.isfinite(r.energy).all()
