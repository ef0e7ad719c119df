"""A small model's own entry point compiled in the background (mbdgen.specialize).

Each test runs a fresh copy of the slider-crank (a new file, so nothing of its own is in
Numba's cache) under the policy "background" that users get by default; the rest of the
suite runs under "shared" (tests/conftest.py).  The shared routine and the module's own
entry point perform the same floating-point operations in the same order (no fast-math
anywhere), so every comparison here is exact.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest
from conftest import MODELS, run_python

import mbdgen
from mbdgen import MbdgenError, simulation, specialize
from mbdgen.runtime import module_name, shared

RUN = {"h": 1e-3, "t_end": 0.2}


@pytest.fixture
def new_model(tmp_path, monkeypatch):
    """A copy of the slider-crank in a new file, compiled; policy "background".  The
    copy takes the canonical module name in ``sys.modules``: given back afterwards."""
    name = module_name("slider_crank.py")
    if name in sys.modules:
        monkeypatch.setitem(sys.modules, name, sys.modules[name])
    else:
        monkeypatch.delitem(sys.modules, name, raising=False)
    model = tmp_path / "slider_crank.py"
    model.write_text((MODELS / "slider_crank.py").read_text() + f"\n# copy {time.time_ns()}\n")
    monkeypatch.setenv(specialize.POLICY_ENV, "background")
    monkeypatch.delenv("MBDGEN_SHARED_ENTRY", raising=False)
    return mbdgen.compile(model, tmp_path / "gen")


def _same(a, b) -> None:
    for key in ("t", "q", "qd", "qdd", "lam"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))


def test_the_policy_is_checked(monkeypatch):
    monkeypatch.setenv(specialize.POLICY_ENV, "later")
    with pytest.raises(MbdgenError, match="must be one of background, now, shared"):
        specialize.policy()
    monkeypatch.setenv(specialize.POLICY_ENV, "NOW")
    assert specialize.policy() == "now"


def test_the_first_run_does_not_wait_for_its_own_entry_point(new_model):
    """The first run steps through the shared routine while a background process
    compiles the module's own ``abm_chunk`` into Numba's cache (the run itself may pick
    it up there before it ends), and another its ``energy_rows`` (the energy check at
    the end); the next run loads both from there, and this process never compiles
    them: cache hits, no miss.  Both runs give the same bits."""
    entry, energy_rows = new_model.abm_chunk, new_model.energy_rows
    first = mbdgen.simulate(new_model, method="abm", **RUN)
    started = {k[1]: p for k, p in specialize._STARTED.items() if k[0] == new_model.__file__}
    assert set(started) == {"abm_chunk", "energy_rows"}
    assert all(p.wait(300) == 0 for p in started.values())
    second = mbdgen.simulate(new_model, method="abm", **RUN)
    for dispatcher in (entry, energy_rows):
        assert sum(dispatcher.stats.cache_hits.values()) == 1
        assert sum(dispatcher.stats.cache_misses.values()) == 0
    _same(first, second)
    np.testing.assert_array_equal(first.energy, second.energy)


def test_the_next_runs_resolve_no_argument_types(new_model, monkeypatch):
    """One Specializing per module and entry point keeps its choice for the argument
    types it has seen (their Numba fingerprint): the runs after the first call no
    ``typeof`` (which cost about 200 µs a run of the slider-crank, most of a short
    run's overhead), and give the same bits."""
    first = mbdgen.simulate(new_model, method="abm", **RUN)
    calls = []
    dispatcher = type(new_model.abm_chunk)
    real = dispatcher.typeof_pyval

    def counted(self, value):
        calls.append(value)
        return real(self, value)

    monkeypatch.setattr(dispatcher, "typeof_pyval", counted)
    again = [mbdgen.simulate(new_model, method="abm", **RUN) for _ in range(3)]
    assert not calls
    for run in again:
        _same(first, run)
    specialize.wait_started(300)


def test_the_shared_policy_never_compiles_the_own_entry_point(new_model, monkeypatch):
    """Under "shared" a new model steps through the shared routines (entry point and
    energy rows) and starts no background compile; once its own code is compiled (here
    by a run under "now") the next run takes that, with the same bits."""
    monkeypatch.setenv(specialize.POLICY_ENV, "shared")
    first = mbdgen.simulate(new_model, method="abm", **RUN)
    assert not new_model.abm_chunk.signatures and not new_model.energy_rows.signatures
    assert not [k for k in specialize._STARTED if k[0] == new_model.__file__]
    monkeypatch.setenv(specialize.POLICY_ENV, "now")
    own = mbdgen.simulate(new_model, method="abm", **RUN)
    monkeypatch.setenv(specialize.POLICY_ENV, "shared")
    again = mbdgen.simulate(new_model, method="abm", **RUN)
    assert len(new_model.abm_chunk.signatures) == 1
    assert not [k for k in specialize._STARTED if k[0] == new_model.__file__]
    for run in (own, again):
        _same(first, run)
        np.testing.assert_array_equal(first.energy, run.energy)


def test_a_run_goes_on_with_its_own_entry_point_once_compiled(new_model, monkeypatch):
    """Between chunks the run looks whether the background compile has ended and then
    continues with the module's own entry point.  Here a stand-in for the background
    process compiles the own code when it is polled the second time: the zero-step call
    and the first chunk run on the shared routine, chunks 2-20 on the own code, and the
    run has the bits of a run on the own code alone."""
    calls = {"shared": 0, "polls": 0}

    class Background:
        def __init__(self, module, name, signature):
            self.compile = lambda: getattr(module, name).compile(signature)

        def poll(self):
            calls["polls"] += 1
            if calls["polls"] < 2:
                return None
            self.compile()
            return 0

    real_entry = shared.entry

    def counted_entry(module, name):
        routine = real_entry(module, name)

        def call(*args):
            calls["shared"] += 1
            return routine(*args)

        return call

    monkeypatch.setattr(specialize, "start", Background)
    monkeypatch.setattr(shared, "entry", counted_entry)
    monkeypatch.setattr(simulation, "CHUNK_STEPS", 10)
    switched = mbdgen.simulate(new_model, method="abm", **RUN)
    assert calls == {"shared": 2, "polls": 2}
    assert new_model.abm_chunk.signatures  # the own code ran the other 19 chunks
    monkeypatch.setenv(specialize.POLICY_ENV, "now")
    _same(switched, mbdgen.simulate(new_model, method="abm", **RUN))


def test_a_failed_background_compile_leaves_the_shared_routine(new_model, monkeypatch):
    """Where the background process cannot start or compiles nothing, the run stays on
    the shared routine to its end and never compiles in its own process."""
    monkeypatch.setattr(specialize, "start", lambda module, name, signature: None)
    result = mbdgen.simulate(new_model, method="abm", **RUN)
    assert not new_model.abm_chunk.signatures
    assert result.t[-1] == pytest.approx(RUN["t_end"])


def test_a_shared_routine_that_does_not_type_falls_back_to_the_own_entry_point(
    new_model, monkeypatch
):
    """Should the shared routine fail to compile for a model (a Numba typing error), the
    run compiles its own entry point in the process, as without the background policy,
    and starts no background compile of it."""
    from numba.core.errors import TypingError

    def refuses(*args):
        raise TypingError("no shared routine for this model")

    started = []
    monkeypatch.setattr(shared, "entry", lambda module, name: refuses)
    monkeypatch.setattr(specialize, "start", lambda *args: started.append(args))
    result = mbdgen.simulate(new_model, method="abm", **RUN)
    assert result.t[-1] == pytest.approx(RUN["t_end"])
    assert new_model.abm_chunk.signatures
    assert [args[1] for args in started] == ["energy_rows"]  # its shared routine types


def test_copies_of_a_model_in_two_folders_do_not_share_a_lock():
    """The lock and the log are per file: a copy of a model in another folder is
    another file to Numba's cache, whose own code another process may be compiling."""
    from types import SimpleNamespace

    signature = ("float64",)
    a = specialize._key(SimpleNamespace(__file__="/a/pendulum.py"), "abm_chunk", signature)
    b = specialize._key(SimpleNamespace(__file__="/b/pendulum.py"), "abm_chunk", signature)
    again = specialize._key(SimpleNamespace(__file__="/a/pendulum.py"), "abm_chunk", signature)
    assert a[2] != b[2] and a == again


def test_a_new_models_kernels_compile_on_two_cores(new_model, slider_crank):
    """Under the policy "background" a new model's first HHT run starts one helper
    process (``python -m mbdgen.specialize --kernels``) for the kernels it needs after
    the evaluation kernel (the Newton matrix's blocks, the energy check's), while this
    process compiles the evaluation kernel for the checks at t0 and then takes the
    kernels from the other end; a lock per kernel makes each compile happen once, and
    a kernel the helper compiled is loaded from Numba's cache.  The run has the bits of
    the committed module's (the same source compiled in two processes), and a later run
    starts no second helper.  (Measured on the flyball governor, fresh copy: first HHT
    step 38.6 s in one process, 20.2 s with the helper; the spatial slider-crank 14.4 →
    8.8 s.)"""
    if (specialize.os.cpu_count() or 1) < 2:
        pytest.skip("one core: no helper")
    path = str(new_model.__file__)
    names = shared.kernels_after_start(new_model, "hht_adaptive", "direct")
    assert names == ["mass_a_q", "phi_q_lam_q", "force_q", "force_qd", "energy", "phi_t"]
    first = mbdgen.simulate(new_model, method="hht_adaptive", rtol=1e-6, atol=1e-6, **RUN)
    helper = specialize._HELPERS[path]
    assert helper.wait(300) == 0
    here = {k for k in names if sum(getattr(new_model, k).stats.cache_misses.values())}
    line = specialize.kernel_log_path(path).read_text().splitlines()[-1]
    there = set(line.split("compiled:")[1].split())
    assert here.isdisjoint(there) and here | there == set(names), (here, there)
    for k in there:  # loaded from the cache the helper filled
        assert sum(getattr(new_model, k).stats.cache_hits.values()) == 1
    again = mbdgen.simulate(new_model, method="hht_adaptive", rtol=1e-6, atol=1e-6, **RUN)
    assert specialize._HELPERS[path] is helper
    reference = mbdgen.simulate(slider_crank, method="hht_adaptive", rtol=1e-6, atol=1e-6, **RUN)
    _same(first, reference)
    _same(again, reference)


def test_a_kernel_compiled_by_either_process_is_loaded_by_the_other(new_model):
    """Numba keys its disk cache by what ``compile`` was given: the helper compiles a
    kernel for its argument types, this process (a kernel as a first-class function,
    ``KernelPointer``) for the full signature.  Each finds what the other saved, in
    both orders: a kernel this process compiled before the helper reached it is not
    compiled again by the helper (the race that once made both compile ``force_qd``),
    and one the helper compiled is loaded here, a cache hit and no miss."""
    path = str(new_model.__file__)
    ours = shared.KernelPointer(new_model.force_qd, shared.KERNEL_SIGNATURES["force_qd"])
    assert sum(new_model.force_qd.stats.cache_misses.values()) == 1
    assert ours.__wrapper_address__()
    helper = f"from mbdgen import specialize as s; print(s._compile_kernels({path!r}, %s))"
    done = run_python(helper % "['force_qd', 'force_q']").splitlines()[-1]  # as the helper
    assert done == "compiled: force_q", done
    shared.KernelPointer(new_model.force_q, shared.KERNEL_SIGNATURES["force_q"])
    assert sum(new_model.force_q.stats.cache_misses.values()) == 0
    assert sum(new_model.force_q.stats.cache_hits.values()) == 1
