"""Second order of the index-3 and Newmark methods on every class of model whose mass
matrix depends on q: spatial bodies in Euler parameters (M = diag(mI, 4GᵀJ′G), Haug
1989) through the dense and the sparse linear algebra, and generalized coordinates.

tests/test_hht.py fits the orders on the planar pendulum, whose M is constant; there
fixed-step HHT-α was second order while on these models it was not (orders of q at
α = −0.05 and −0.3: heavy top 0.99 and 0.85 over h = 0.01 … 0.01/32; over the range
below, rheonomic 0.97 and 0.79, spatial double pendulum 1.41 and 1.07, spherical chain
1.74 and 1.23): Eq. 10 of Negrut et al. 2007 weights α M_n ã_n
where Arnold & Brüls' form of the method needs α M_{n+1} ã_n
(:func:`mbdgen.runtime.hht.mass_lag`).  Generalized-α and Newmark-GCP were second
order all along; they are fitted here as the same guard.

Errors: max-norm of q and q̇ at the end time against RADAU5 at rtol = atol = 1e-11
(fifth order, error-controlled: it agrees with RADAU5 at 1e-10 and at 1e-12 to 7e-10
on these models, under 1 % of the finest level's error; at 1e-12 its step size
collapses at t = 0.032 on the spatial double pendulum, the floor of double
precision).  Slopes fitted over h = T/200 … T/6400, T the end time (6 step sizes, 5
halvings); measured (q, q̇), the smallest of each model's five methods:

    heavy top (dense)              hht α = 0: 2.00/1.95, newmark_gcp 1.97/1.96
    spatial double pendulum        hht α = −0.3: 2.00/1.99, the others 2.00-2.02
    spherical chain (4 links)      every method 1.99-2.00
    spatial slider-crank, t = 0.8  hht α = −0.3: 1.99/1.94, newmark_gcp 2.06/2.03
    rheonomic (generalized, M(q))  newmark_gcp 1.93/2.13, the others 1.97-2.00

The spatial slider-crank ends at t = 0.8: at t = 1 its HHT-α error in q nearly vanishes
at h = 1/200 (local slopes 0.3, 1.3, 1.7, 1.9, 2.0 from there at α = −0.3, fitted 1.49;
at t = 0.5 and 1.5 the same), and the window cannot move to smaller steps: there the
index-3 round-off in q̇ (≈ eps/(βh²)) rises above the discretization error from h ≈
1/12800 on (α = 0 at t = 1: q̇'s error 5.5e-6 at 1/12800, 1.4e-4 at 1/25600).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GENERATED, TEST_GENERATED, TEST_MODELS

import mbdgen
from mbdgen.compiler import compile as compile_model
from mbdgen.compiler import import_generated

LEVELS = 6
MIN_ORDER = 1.9

STEPS = 200  # steps of the largest step size of the fit
# model -> (where it comes from, end time)
MODELS = {
    "heavy_top": ("test", 1.0),
    "spatial_double_pendulum": ("test", 1.0),
    "spherical_chain": ("test", 1.0),
    "spatial_slider_crank": ("example", 0.8),
    "rheonomic": ("test", 1.0),
}

METHODS = {
    "hht_alpha0": ("hht", {"hht_alpha": 0.0}),
    "hht_alpha-0.05": ("hht", {"hht_alpha": -0.05}),
    "hht_alpha-0.3": ("hht", {"hht_alpha": -0.3}),
    "genalpha": ("genalpha", {}),
    "newmark_gcp": ("newmark_gcp", {}),
}


@pytest.fixture(scope="module", params=list(MODELS))
def reference(request):
    """(module, end time, q, q̇ at the end time by RADAU5 at 1e-11)."""
    where, t_end = MODELS[request.param]
    if where == "example":
        module = import_generated(GENERATED / f"{request.param}.py")
    else:
        module = compile_model(TEST_MODELS / f"{request.param}.py", TEST_GENERATED)
    ref = mbdgen.simulate(module, "radau5", h=1e-3, t_end=t_end, rtol=1e-11, atol=1e-11)
    assert ref.t[-1] == pytest.approx(t_end, abs=1e-12)
    return module, t_end, ref.q[-1], ref.qd[-1]


@pytest.mark.parametrize("name", list(METHODS))
def test_second_order_in_q_and_qd(reference, name):
    module, t_end, q_ref, qd_ref = reference
    method, options = METHODS[name]
    hs = t_end / STEPS / 2.0 ** np.arange(LEVELS)
    errors_q, errors_qd = [], []
    for h in hs:
        result = mbdgen.simulate(module, method, h=h, t_end=t_end, **options)
        assert result.t[-1] == pytest.approx(t_end, abs=1e-12)
        errors_q.append(np.abs(result.q[-1] - q_ref).max())
        errors_qd.append(np.abs(result.qd[-1] - qd_ref).max())
    slope_q = np.polyfit(np.log(hs), np.log(errors_q), 1)[0]
    slope_qd = np.polyfit(np.log(hs), np.log(errors_qd), 1)[0]
    detail = f"q {slope_q:.3f} {errors_q}, qd {slope_qd:.3f} {errors_qd}"
    assert slope_q >= MIN_ORDER, detail
    assert slope_qd >= MIN_ORDER, detail
    # the finest level is resolved above the reference's own error
    assert errors_q[-1] > 1e-9 and errors_qd[-1] > 1e-9, detail
