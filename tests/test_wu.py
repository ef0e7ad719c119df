"""Wu, Chiou & Lin 2000 on the slider-crank: Table 3 and Fig. 7 (AMPC_3 vs MAMPC_3)."""

from __future__ import annotations

import pytest

import mbdgen
from mbdgen.errors import SimulationError

G_WU = 9.8  # the paper leaves g implicit; see test_table_3_constraint_errors


def _mean_phi(module, method, h, q0, alpha=5.0, g=G_WU):
    r = mbdgen.simulate(module, method, 3, h, 10.0, q0=q0, alpha=alpha, beta=alpha, params={"g": g})
    return r.phi_norm.mean()


TABLE_3 = {"ampc": (4.65e-6, 4.14e-9), "mampc": (9.8e-7, 9.6e-11)}  # h = 0.01, 0.001


@pytest.mark.regression
def test_table_3_constraint_errors(slider_crank, slider_crank_q0):
    """Average ‖Φ‖₂ of AMPC_3 and MAMPC_3, α = β = 5, over 10 s, RKF start (§V).

    The paper states neither g nor the duration.  With g = 10 and 10 s (Welch et
    al. 2007) all four entries come out 4.4-5.2 % high, by a common factor, while
    the ratios between the methods and between the step sizes match to 0.6 %: the
    level is set by g.  With g = 9.8 and φ, x, y assembled from θ0 (Φ(q0) = 0) the
    entries are 4.667e-6, 4.146e-9, 9.846e-7, 9.705e-11: within 0.4 %, 0.1 %,
    0.5 % and 1.1 % of the printed 4.65e-6, 4.14e-9, 9.8e-7, 9.6e-11 (the last two
    printed to two digits).  Tolerance 1.5 %.  With the four-digit q0 of Eq. 37
    the initial violation (4e-5) dominates the averages, so the paper assembled it.
    """
    ours = {
        m: [_mean_phi(slider_crank, m, h, slider_crank_q0) for h in (0.01, 0.001)] for m in TABLE_3
    }
    for method, printed in TABLE_3.items():
        assert ours[method] == pytest.approx(printed, rel=0.015)
    # the ratios the issue asks for: between the methods and between the step sizes
    for i in range(2):
        assert ours["ampc"][i] / ours["mampc"][i] == pytest.approx(
            TABLE_3["ampc"][i] / TABLE_3["mampc"][i], rel=0.015
        )
    for method in TABLE_3:
        assert ours[method][0] / ours[method][1] == pytest.approx(
            TABLE_3[method][0] / TABLE_3[method][1], rel=0.015
        )


def _stable(module, method, alpha, q0):
    try:
        r = mbdgen.simulate(
            module, method, 3, 0.01, 10.0, q0=q0, alpha=alpha, beta=alpha, params={"g": G_WU}
        )
    except SimulationError:
        return False
    return r.phi_norm[-100:].max() < 1e-3


@pytest.mark.regression
def test_figure_7_stability_thresholds(slider_crank, slider_crank_q0):
    """Fig. 7 (h = 0.01): AMPC_3 is unstable for α ≥ 168 while MAMPC_3 stays stable
    for 168 ≤ α ≤ 188.  Measured by bisection (blow-up, or ‖Φ‖ > 1e-3 in the last
    second): AMPC_3 loses stability at α = 166.9, MAMPC_3 at α = 188.3 (with the
    printed q0: 166.4 and 187.8).  The linear limits of Table 2, α h ≤ 1.729 and
    1.935, would allow 172.9 and 193.5: the mechanism's own dynamics take 3 % off."""
    assert _stable(slider_crank, "ampc", 165.0, slider_crank_q0)
    assert not _stable(slider_crank, "ampc", 168.0, slider_crank_q0)
    assert _stable(slider_crank, "mampc", 168.0, slider_crank_q0)
    assert _stable(slider_crank, "mampc", 188.0, slider_crank_q0)
    assert not _stable(slider_crank, "mampc", 190.0, slider_crank_q0)
