"""``mbdgen.prepare``: a run decided once and called per case gives what ``simulate``
gives, bit for bit, for every case and in any order of cases.

Both go through the same ``_execute`` of the same checked plan; what a prepared run
keeps between calls (the options, the resolved model, its kernel, the output-size
check) must not carry one case's state into the next, so each comparison here is of
results made with the cases interleaved.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mbdgen
from mbdgen import MbdgenError, SimulationError
from mbdgen.simulation import ConstraintWarning

COLUMNS = ("t", "q", "qd", "qdd", "lam")


def _same(a, b) -> None:
    for key in COLUMNS:
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    timing = ("setup_time_s", "wall_time_s")
    assert {k: v for k, v in a.counters.items() if k not in timing} == {
        k: v for k, v in b.counters.items() if k not in timing
    }
    for key in ("message", "status", "warnings", "parameters", "initial_states"):
        assert a.info[key] == b.info[key], key


# (method, options): one of each family that the pendulum runs
RUNS = [
    ("abm", {"h": 1e-3, "t_end": 0.3}),
    ("rk4", {"h": 1e-3, "t_end": 0.3, "constraints": "baumgarte", "alpha": 5.0, "beta": 5.0}),
    ("dop853", {"h": 1e-2, "t_end": 0.3, "rtol": 1e-8, "atol": 1e-8}),
    ("hht", {"h": 1e-3, "t_end": 0.3, "hht_alpha": -0.2}),
    ("hht_adaptive", {"h": 1e-2, "t_end": 0.3, "rtol": 1e-5, "atol": 1e-5}),
    ("radau5", {"h": 1e-2, "t_end": 0.3, "rtol": 1e-6, "atol": 1e-6}),
    ("newmark_gcp", {"h": 1e-3, "t_end": 0.3}),
]


@pytest.mark.parametrize(("method", "options"), RUNS, ids=[m for m, _ in RUNS])
def test_a_prepared_run_gives_what_simulate_gives(pendulum, method, options):
    cases = [{"g": 9.81}, {"g": 3.0, "m": 2.0}, {}, {"g": 9.81}]
    run = mbdgen.prepare(pendulum, method, **options)
    prepared = [run(params=p) for p in cases]
    direct = [mbdgen.simulate(pendulum, method, params=p, **options) for p in cases]
    for a, b in zip(prepared, direct, strict=True):
        _same(a, b)
    assert not np.array_equal(prepared[0].q, prepared[1].q)  # the cases differ
    assert run.method == method and run.module is pendulum
    assert method in repr(run)


def test_initial_states_and_user_states_per_call(slider_crank, slider_crank_q0, pi_pendulum):
    run = mbdgen.prepare(slider_crank, "abm", h=1e-3, t_end=0.2, constraints="gcp")
    for qd0 in ({"theta": 1.0}, {"theta": 2.0}):
        _same(
            run(q0=slider_crank_q0, qd0=qd0, params={"m": 0.5}),
            mbdgen.simulate(
                slider_crank, "abm", h=1e-3, t_end=0.2, constraints="gcp",
                q0=slider_crank_q0, qd0=qd0, params={"m": 0.5},
            ),
        )  # fmt: skip
    name = pi_pendulum.STATE_NAMES[0]
    held = mbdgen.prepare(pi_pendulum, "hht", h=1e-3, t_end=0.2)
    for x0 in ({name: 0.0}, {name: 0.1}, None):
        a, b = held(x0=x0), mbdgen.simulate(pi_pendulum, "hht", h=1e-3, t_end=0.2, x0=x0)
        _same(a, b)
        np.testing.assert_array_equal(a.states, b.states)


def test_options_fail_at_prepare_names_at_the_call(pendulum):
    with pytest.raises(MbdgenError, match="supports orders"):
        mbdgen.prepare(pendulum, "abm", order=9)
    with pytest.raises(MbdgenError, match="hht_alpha is"):
        mbdgen.prepare(pendulum, "abm", hht_alpha=-0.1)
    run = mbdgen.prepare(pendulum, "abm", h=1e-3, t_end=0.1)
    with pytest.raises(MbdgenError) as prepared:
        run(params={"gravity": 9.81})
    with pytest.raises(MbdgenError) as direct:
        mbdgen.simulate(pendulum, "abm", h=1e-3, t_end=0.1, params={"gravity": 9.81})
    assert str(prepared.value) == str(direct.value)
    _same(run(), mbdgen.simulate(pendulum, "abm", h=1e-3, t_end=0.1))  # still usable


def test_warnings_and_failures_are_those_of_simulate(pendulum):
    """An inconsistent q0 warns in each call (not only the first), and a failed run
    raises the same SimulationError with the same partial result."""
    q0 = np.array(pendulum.Q0, dtype=float) + [0.01, 0.0, 0.0]
    run = mbdgen.prepare(pendulum, "abm", h=1e-3, t_end=0.1)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = run(q0=q0)
        assert [w.category for w in caught] == [ConstraintWarning] * len(caught) != []
        assert caught[0].filename == __file__  # pointed at the caller's line
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _same(a, mbdgen.simulate(pendulum, "abm", h=1e-3, t_end=0.1, q0=q0))
    strict = mbdgen.prepare(pendulum, "abm", h=1e-3, t_end=0.1, strict=True)
    with pytest.raises(MbdgenError, match="q0 violates the constraints"):
        strict(q0=q0)
    run = mbdgen.prepare(pendulum, "rk4", h=0.01, t_end=0.1)
    singular = {"m": 0.0, "J": 0.0}
    with pytest.raises(SimulationError, match="mass matrix is singular") as prepared:
        run(params=singular)
    with pytest.raises(SimulationError) as direct:
        mbdgen.simulate(pendulum, "rk4", h=0.01, t_end=0.1, params=singular)
    assert prepared.value.reason == direct.value.reason == "failed"
    assert str(prepared.value) == str(direct.value)
    _same(prepared.value.result, direct.value.result)
    _same(run(), mbdgen.simulate(pendulum, "rk4", h=0.01, t_end=0.1))  # the next case runs
