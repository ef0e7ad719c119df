"""The baselines of ``mbdgen bench`` compute what mbdgen computes.

Both baselines implement the same algorithm as ``mbdgen.simulate(method="abm",
order=4, start="ramp")``: AB 4 predictor / AM 5 corrector in PECE mode (Haug 1989
§7.4, Eqs. 7.4.11 and 7.4.15), self-started by the order ramp, with Baumgarte's
stabilisation (Eq. 7.3.8).  Timing ratios are the benchmark's business, not
asserted here.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mbdgen import bench


@pytest.fixture(scope="module")
def module():
    return bench.mbdgen_module()


@pytest.fixture(scope="module")
def weights():
    return bench.adams_weights()


def _compare(result, base: dict[str, np.ndarray], rows: int, tol: float) -> None:
    n = result.q.shape[1]
    m = result.lam.shape[1]
    assert result.q.shape[0] == base["x"].shape[0] == rows
    np.testing.assert_allclose(result.t, base["t"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.q, base["x"][:, :n], rtol=0, atol=tol)
    np.testing.assert_allclose(result.qd, base["x"][:, n:], rtol=0, atol=tol)
    np.testing.assert_allclose(result.qdd, base["f"][:, n:], rtol=0, atol=100 * tol)
    np.testing.assert_allclose(result.lam, base["aux"][:, :m], rtol=0, atol=100 * tol)
    np.testing.assert_allclose(result.phi_norm, base["aux"][:, m], rtol=0, atol=tol)


def test_handwritten_matches_mbdgen(module, weights):
    steps = 2000
    result = bench.mbdgen_simulate(module, steps)
    hand = bench.handwritten_simulate(steps, weights=weights)
    assert np.max(np.abs(result.q[-1] - hand["x"][-1, :4])) < 1e-9
    _compare(result, hand, steps + 1, 1e-9)
    # The mechanism moved, and Baumgarte kept it on the constraint manifold.
    assert abs(result.q[-1, 0] - bench.Q0[0]) > 0.1
    assert result.phi_norm[-1] < 1e-4


def test_lambdify_matches_mbdgen(module, weights):
    steps = 100
    result = bench.mbdgen_simulate(module, steps)
    lam = bench.lambdify_simulate(steps, weights=weights)
    assert np.max(np.abs(result.q[-1] - lam["x"][-1, :4])) < 1e-9
    _compare(result, lam, steps + 1, 1e-9)


def test_handwritten_stops_on_nan(weights):
    # A NaN step gives a NaN predictor: the baseline stops with a status code, as
    # mbdgen does, instead of filling its outputs with NaN.
    with pytest.raises(RuntimeError, match="status"):
        bench.handwritten_simulate(5, h=math.nan, weights=weights)


@pytest.mark.slow
def test_run_quick():
    results = bench.run(quick=True)
    json.dumps(results)  # serialisable
    for key in (
        "mbdgen_us_per_step",
        "mbdgen_loop_us_per_step",
        "handwritten_us_per_step",
        "lambdify_us_per_step",
        "ratio_mbdgen_over_handwritten",
        "ratio_lambdify_over_mbdgen",
        "cold_total_s",
        "cold_generate_s",
        "cold_jit_s",
        "warm_total_s",
        "warm_first_step_s",
    ):
        assert isinstance(results[key], float), key
        assert results[key] > 0.0, key
    for key in ("steps", "lambdify_steps", "repeats", "warm_cache_hits"):
        assert isinstance(results[key], int) and results[key] > 0, key
    assert results["warm_cache_misses"] == 0
    assert results["cold_cache_misses"] > 0
    assert results["max_abs_q_difference_mbdgen_handwritten"] < 1e-9
    from mbdgen.methods import METHODS

    assert [row["method"] for row in results["methods"]] == list(METHODS)
    assert all(row["us_per_step"] > 0 for row in results["methods"])
    for key in (
        "pass_handwritten_ratio",
        "pass_lambdify_speedup",
        "pass_warm_start",
        "pass_warm_cache",
    ):
        assert isinstance(results[key], bool), key
    text = bench.report(results)
    assert "hand-written" in text and "lambdify" in text and "warm start" in text


def test_scale_table_reports_compile_time_and_module_size():
    """`mbdgen bench` runs this for N = 8, 64, 512 (measured: cold 14-16 s each, code
    34 kB for every N); here N = 8 only, in a fresh process with an empty cache."""
    (row,) = bench.scale([8])
    assert (row["links"], row["n"], row["m"]) == (8, 24, 16)
    assert row["code_bytes"] + row["data_bytes"] == row["bytes"]
    assert 0 < row["generate_s"] and 0 < row["jit_s"] and row["pass_cold"] in (True, False)
    assert "planar N-link chains" in bench.scale_report([row])
