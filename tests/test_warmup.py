"""The installation's warm-up (``mbdgen warmup``): what it runs, that its runs give the
integrators the argument types a user's model gives them, its record and its CLI.

The coverage test does not compile an integrator: it stops each run at its first call
of a shared routine and compares what decides the compiled code there — the routine,
its kernels' signatures and the Numba-relevant types of every argument
(:func:`mbdgen.runtime.shared._arg_key`) — with the warm-up model's run of the same
method.  Equal keys mean that the warm-up's cache entry serves the user's run.
"""

from __future__ import annotations

import json

import pytest
from conftest import GENERATED, TEST_GENERATED, TEST_MODELS, cli

import mbdgen
from mbdgen import warmup
from mbdgen.compiler import compile as compile_model
from mbdgen.compiler import import_generated
from mbdgen.methods import METHODS
from mbdgen.runtime import shared


def test_the_plan_runs_every_method_on_every_kind_of_model_it_takes():
    units = warmup.plan()
    kernels = [u for u in units if u.model == warmup.KERNEL_MODEL]
    assert sorted(u.method for u in kernels) == sorted(warmup.KERNEL_METHODS)
    units = [u for u in units if u.model != warmup.KERNEL_MODEL]
    for name, method in METHODS.items():
        mine = [u for u in units if u.method == name]
        kinds = {u.model for u in mine}
        expected = set(warmup.MODELS) - {warmup.KERNEL_MODEL} if method.integrates_states else {
            "warmup_pendulum", "warmup_chain"}  # fmt: skip
        assert kinds == expected, name
        handlings = {u.constraints for u in mine}
        assert handlings == ({None} if method.enforces_constraints else set(warmup.HANDLINGS))
    assert len(units) == len(set(units))
    # a group is one integrator: one constraint handling, and one kind of model except
    # where the sparse model's run takes the dense one's integrator
    batches = warmup.groups(warmup.plan(), 2)
    assert batches[-1] == kernels  # the element kernels last, in one group
    for batch in batches[:-1]:
        assert len({u.constraints for u in batch}) == 1
        assert len({u.model.replace("chain", "pendulum") for u in batch}) == 1


class _Stop(BaseException):
    """Raised at a run's first call of a shared routine, with what decides its code."""


def _first_call(module, method, constraints, monkeypatch):
    def record(self, *args):
        raise _Stop(
            (
                self.routine.py_func.__name__,
                *self._head[1],
                *(shared._arg_key(a) for a in args),
            )
        )

    monkeypatch.setattr(shared._Bound, "__call__", record)
    kwargs = {} if constraints is None else {"constraints": constraints}
    try:
        mbdgen.simulate(module, method=method, h=1e-4, t_end=2e-4, **kwargs)
    except _Stop as stop:
        return stop.args[0]
    except mbdgen.errors.MbdgenError:
        return None  # a run the method refuses (e.g. states that read q̈) compiles nothing
    raise AssertionError(f"{method} ran without a shared routine")


#: User models of each kind: generalized coordinates, spatial bodies with Euler
#: parameters, a sparse mechanism, explicit and implicit user states.
_USERS = {
    "pendulum": GENERATED / "pendulum.py",
    "heavy_top": TEST_MODELS / "heavy_top.py",
    "andrews": GENERATED / "andrews.py",
    "lag_pendulum_explicit": TEST_MODELS / "lag_pendulum_explicit.py",
    "implicit_pendulum": TEST_MODELS / "implicit_pendulum.py",
}

#: (method, constraint handling): one of each integrator family.
_RUNS = [("abm", "direct"), ("rk4", "gcp"), ("vabm", "hybrid"), ("rkf45_adaptive", "gcp"),
         ("dop853", "direct"), ("welch2", None), ("hht", None), ("genalpha", None),
         ("genalpha_adaptive", None), ("radau5", None), ("newmark_gcp", None)]  # fmt: skip


def _load(path):
    if path.parent == TEST_MODELS:
        return compile_model(path, TEST_GENERATED)
    return import_generated(path)


@pytest.mark.parametrize("user", sorted(_USERS))
def test_a_warmed_integrator_serves_every_kind_of_user_model(user, monkeypatch, tmp_path):
    from mbdgen import steppers

    monkeypatch.setenv("MBDGEN_SPECIALIZE", "shared")
    # a small model's own entry point, where another test compiled it, is not the path
    # of a new model's first run: every model takes the shared routines here
    monkeypatch.setattr(steppers, "UNROLL_LIMIT", 0)
    module = _load(_USERS[user])
    checked = 0
    for method, handling in _RUNS:
        if getattr(module, "N_STATES", 0) and not METHODS[method].integrates_states:
            continue
        unit = warmup.unit_for(module, method, handling)
        assert unit in warmup.plan()
        key = _first_call(module, method, handling, monkeypatch)
        if key is None:
            continue
        assert key[0].endswith("_chunk"), key[0]  # the integrator, not post-processing
        model = compile_model(warmup.MODELS_DIR / f"{unit.model}.py", tmp_path)
        assert key == _first_call(model, method, unit.constraints, monkeypatch), (
            user, method, handling, unit)  # fmt: skip
        checked += 1
    assert checked


def test_warm_runs_its_units_records_them_and_then_skips(tmp_path, monkeypatch):
    """The whole machinery on one cheap unit: a worker process, progress lines, the
    record in the cache folder, and a second call that does nothing."""
    monkeypatch.setattr(warmup, "record_path", lambda: tmp_path / "warmup.json")
    monkeypatch.setattr(warmup, "modules_dir", lambda: tmp_path / "modules")
    one = [warmup.Unit("warmup_pendulum", "euler", "direct")]
    monkeypatch.setattr(warmup, "plan", lambda methods=None: one)
    lines: list[str] = []
    record = warmup.warm(jobs=2, echo=lines.append, progress_s=0.2)
    assert not record["skipped"] and record["jobs"] == 2
    assert [r["outcome"] for r in record["rows"]] == ["ok"]
    assert record["cpu_s"] > 0 and record["wall_s"] > 0
    assert lines[0].startswith(f"warm-up: generating {len(warmup.MODELS)} small models")
    assert lines[1].startswith("warm-up: 1 runs in 1 groups on 2 processes")
    saved = json.loads((tmp_path / "warmup.json").read_text())
    assert saved["units"] == [["warmup_pendulum", "euler", "direct"]]
    again: list[str] = []
    assert warmup.warm(jobs=2, echo=again.append)["skipped"] and again == []
    # what the CLI's first run estimates: nothing left to compile for this unit
    module = import_generated(GENERATED / "pendulum.py")
    assert warmup.first_run_estimate(module, "euler", None) is None
    assert warmup.first_run_estimate(module, "hht", None) is not None


def test_a_failed_unit_is_one_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(warmup, "record_path", lambda: tmp_path / "warmup.json")
    monkeypatch.setattr(warmup, "modules_dir", lambda: tmp_path / "modules")
    bad = [warmup.Unit("warmup_pendulum", "abm", "nonsense")]
    monkeypatch.setattr(warmup, "plan", lambda methods=None: bad)
    with pytest.raises(mbdgen.errors.MbdgenError, match=r"1 of 1 runs failed, the first abm"):
        warmup.warm(jobs=1, echo=lambda s: None)
    assert not (tmp_path / "warmup.json").exists()


def test_cli_list_prints_the_plan_and_compiles_nothing():
    code, out = cli("warmup", "--list", "--methods", "hht,abm")
    assert code == 0, out
    lines = out.splitlines()
    assert any(line.startswith("dense ") and "hht" in line for line in lines)
    assert any(line.startswith("sparse, implicit states") for line in lines)
    assert sum("abm/gcp" in line for line in lines) == 2  # dense and sparse
    code, out = cli("warmup", "--methods", "nope", "--list")
    assert code != 0 and "unknown method nope" in out


def test_models_are_the_kinds_they_stand_for(tmp_path):
    for name, kind in warmup.MODELS.items():
        module = compile_model(warmup.MODELS_DIR / f"{name}.py", tmp_path)
        if name == warmup.KERNEL_MODEL:  # spatial bodies, on the sparse integrators
            assert module.LINEAR_ALGEBRA == "sparse" and module.N_EULER_BODIES == 3
            continue
        sparse = getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse"
        assert sparse == kind.startswith("sparse"), name
        assert bool(getattr(module, "N_STATES", 0)) == ("states" in kind), name
        assert bool(getattr(module, "IMPLICIT_STATES", False)) == ("implicit" in kind), name
        assert warmup.unit_for(module, "hht", None).model == name
    assert sorted(p.stem for p in warmup.MODELS_DIR.glob("warmup_*.py")) == sorted(warmup.MODELS)


def test_the_first_run_bench_reports_its_goals():
    from mbdgen import bench_first_run

    row = {"kind": "spatial", "method": "hht", "total_s": 4.2, "startup_s": 0.3,
           "generate_s": 1.1, "first_step_s": 2.8, "cpu_s": 4.0,
           "integrators_compiled": []}  # fmt: skip
    first = {"warmup": {"skipped": True}, "rows": [row], "worst_total_s": 4.2,
             "pass_first_run": True}  # fmt: skip
    background = {"wall_ratio": 1.04, "cpu_ratio": 1.01, "rounds": 4, "rounds_overlapped": 4,
                  "cores": 2, "pass_background": True}  # fmt: skip
    text = bench_first_run.report(first, background)
    assert "spatial  hht" in text and "4.20 = 0.30 + 1.10 + 2.80" in text
    assert "worst 4.20 s (goal ≤ 5 s) PASS" in text
    assert "wall 1.040x, CPU 1.010x" in text and "goal ≤ 1.1x) PASS" in text
