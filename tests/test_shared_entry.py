"""Entry points compiled once for all models (mbdgen.runtime.shared, issue 11 item 3).

The shared routines run the same runtime code as a module's own entry point, with
the kernel called through a function pointer instead of inlined.  No fast-math flag
is set anywhere, so LLVM may not reorder or contract floating-point operations and
both paths must give the same bits: the tests compare exactly.  Small models are
forced through the shared path (``UNROLL_LIMIT`` patched to 0) so that the cheap,
already-compiled example modules serve.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import mbdgen
from mbdgen import steppers
from mbdgen.compiler import import_generated
from mbdgen.runtime import shared
from tests.conftest import GENERATED, TEST_GENERATED, TEST_MODELS, run_python

RUN = {"h": 1e-3, "t_end": 0.05}


@pytest.fixture
def forced_shared(monkeypatch):
    monkeypatch.setattr(steppers, "UNROLL_LIMIT", 0)
    monkeypatch.delenv("MBDGEN_SHARED_ENTRY", raising=False)


def _same_bits(shared_run, inlined) -> None:
    """Both runs' times, states, accelerations, multipliers, user states and counters
    (not the timings) are equal, bit for bit."""
    assert shared_run.q.shape == inlined.q.shape
    for key in ("t", "q", "qd", "qdd", "lam", "states"):
        np.testing.assert_array_equal(getattr(shared_run, key), getattr(inlined, key))
    counts = {k: v for k, v in shared_run.counters.items() if not k.endswith("_s")}
    assert counts == {k: inlined.counters[k] for k in counts}


@pytest.mark.parametrize(
    ("method", "keywords"),
    [
        ("abm", {}),
        ("vabm", {}),
        ("rkf45_adaptive", {}),
        ("dop853", {}),
        ("abm", {"constraints": "gcp"}),
        ("vabm", {"constraints": "hybrid", "alpha": 5.0, "beta": 5.0}),
        ("radau5", {}),
    ],
    ids=["abm", "vabm", "rkf45_adaptive", "dop853", "abm-gcp", "vabm-hybrid", "radau5"],
)
def test_shared_entry_gives_the_inlined_bits(slider_crank, forced_shared, method, keywords):
    """Every family's shared routine against the module's own entry point, exactly (the
    suite runs small models through the shared ones, tests/conftest.py; users step
    through the own ones once compiled): fixed-step and variable-step explicit
    methods, GCP and the hybrid algorithm, Radau IIA.  The index-3, Welch and
    Newmark-GCP routines follow."""
    shared_run = mbdgen.simulate(slider_crank, method=method, **RUN, **keywords)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MBDGEN_SHARED_ENTRY", "0")
        inlined = mbdgen.simulate(slider_crank, method=method, **RUN, **keywords)
    _same_bits(shared_run, inlined)


def test_one_compiled_routine_serves_every_model(slider_crank, pendulum, forced_shared):
    for module in (slider_crank, pendulum):
        mbdgen.simulate(module, method="abm", **RUN)
    assert len(shared.abm_chunk.signatures) == 1


def test_shared_entry_is_cached_across_processes(slider_crank, forced_shared):
    mbdgen.simulate(slider_crank, method="abm", **RUN)
    code = f"""
import mbdgen
from mbdgen import steppers
from mbdgen.runtime import shared
steppers.UNROLL_LIMIT = 0
mod = mbdgen.compile({str(GENERATED.parent / "models" / "slider_crank.py")!r},
                     {str(GENERATED)!r}, recompile=False)
mbdgen.simulate(mod, method="abm", h=1e-3, t_end=0.05)
print(sum(shared.abm_chunk.stats.cache_hits.values()),
      sum(shared.abm_chunk.stats.cache_misses.values()))
"""
    hits, misses = run_python(code).split()[-2:]
    assert (int(hits), int(misses)) == (1, 0)


def test_opt_out_and_unshared_methods(slider_crank, monkeypatch):
    monkeypatch.setenv("MBDGEN_SHARED_ENTRY", "0")
    assert shared.entry(slider_crank, "abm_chunk") is None
    monkeypatch.delenv("MBDGEN_SHARED_ENTRY")
    assert shared.entry(slider_crank, "derived") is None
    assert callable(shared.entry(slider_crank, "abm_chunk"))


@pytest.mark.parametrize(
    ("name", "method", "entry"),
    [
        ("slider_crank", "welch1", "welch_chunk"),
        ("slider_crank", "welch2", "welch_chunk"),
        ("welch_pendulum3d", "welch2", "welch_chunk"),
        ("pendulum", "newmark_gcp", "newmark_gcp_chunk"),
        ("pendulum", "newmark_gcp_fv", "newmark_gcp_chunk"),
    ],
)
def test_shared_implicit_entries_give_the_inlined_bits(
    slider_crank, pendulum, forced_shared, name, method, entry
):
    """The shared Welch and Newmark-GCP routines (every kernel by pointer, sizes read
    from the workspace) against the module's own entry point, exactly: Welch's plain
    form (Eq. 44) and its Euler-parameter form (Eq. 43), Newmark-GCP's IMPL and FV."""
    module = {"slider_crank": slider_crank, "pendulum": pendulum}.get(name)
    module = module or import_generated(GENERATED / f"{name}.py")
    assert callable(shared.entry(module, entry))
    shared_run = mbdgen.simulate(module, method=method, **RUN)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MBDGEN_SHARED_ENTRY", "0")
        inlined = mbdgen.simulate(module, method=method, **RUN)
    _same_bits(shared_run, inlined)
    assert len(shared.SHARED[entry].signatures) == 1


@pytest.mark.parametrize(
    ("name", "method", "routine"),
    [
        ("andrews", "hht", "index3_chunk"),  # sparse Newton matrix, no states
        ("andrews", "genalpha_adaptive", "index3_chunk"),
        ("pi_pendulum", "hht_adaptive", "index3_states_chunk"),  # dense, explicit state
        ("pi_pendulum", "genalpha", "index3_states_chunk"),
        ("lag_pendulum_implicit", "hht", "index3_implicit_chunk"),  # d(Ẋ, X, ...) = 0
        ("lag_pendulum_implicit", "genalpha_adaptive", "index3_implicit_chunk"),
    ],
)
def test_shared_index3_entries_give_the_inlined_bits(forced_shared, name, method, routine):
    """HHT-α and generalized-α, fixed step and error-controlled, through the shared
    index-3 routine (the dynamics kernel and the Newton-matrix blocks by pointer; the
    states' kernels too where the model has states; n, m, nd read from the workspace)
    against the module's own entry point, exactly.  Each of the three routines has one
    signature per workspace type: a model without states compiles no state path, one
    with explicit states none of the residual's."""
    if name.startswith("lag_"):
        # compiled here if no earlier test did (test_implicit_states compiles it too; the
        # write is atomic, so a worker importing it meanwhile sees one whole file)
        module = mbdgen.compile(TEST_MODELS / f"{name}.py", TEST_GENERATED)
    else:
        module = import_generated(GENERATED / f"{name}.py")
    assert shared._index3(module)[0] is getattr(shared, routine)
    run = {"h": 1e-4, "t_end": 5e-3} if name == "andrews" else RUN  # Andrews' fast motion
    shared_run = mbdgen.simulate(module, method=method, **run)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MBDGEN_SHARED_ENTRY", "0")
        inlined = mbdgen.simulate(module, method=method, **run)
    _same_bits(shared_run, inlined)
    # other tests of this process may have run other models (a dense or a sparse
    # workspace) through the routine, but never two signatures for one workspace type
    dispatcher = getattr(shared, routine)
    at = list(inspect.signature(dispatcher.py_func).parameters).index("ws")
    workspaces = [signature[at] for signature in dispatcher.signatures]
    assert len(workspaces) == len(set(workspaces))


@pytest.mark.parametrize("name", ["slider_crank", "pi_pendulum", "andrews", "iftomm_a04_bricard"])
def test_shared_energy_and_reactions_give_the_modules_bits(name, monkeypatch):
    """The energy check and the reactions through the shared routines (the ``energy``,
    ``phi_t`` and ``reactions`` kernels by pointer) against the module's own
    ``energy_rows`` and ``derived`` entry points, exactly: planar and spatial, a user
    state in p's tail (the PI pendulum), a sparse module."""
    from mbdgen import simulation
    from mbdgen.inputs import parameter_vector
    from mbdgen.simulation import derived_quantities

    monkeypatch.delenv("MBDGEN_SHARED_ENTRY", raising=False)
    module = import_generated(GENERATED / f"{name}.py")
    h = 1e-4 if name in ("andrews", "iftomm_a04_bricard") else 1e-3
    run = mbdgen.simulate(module, method="hht" if name == "pi_pendulum" else "abm", h=h,
                          t_end=20 * h)  # fmt: skip
    p = parameter_vector(module, None)
    arrays = {}
    for flag in ("1", "0"):
        with monkeypatch.context() as patch:
            if flag == "1":  # the shared routine, whatever the policy would choose
                patch.setattr(simulation, "_postprocess", shared.postprocess_entry)
            patch.setenv("MBDGEN_SHARED_ENTRY", flag)
            derived_quantities(module, run, p, reactions=False)
            energy, power = run._energy.copy(), run._power.copy()
            derived_quantities(module, run, p)
        arrays[flag] = (energy, power, run._energy, run._power, run._reactions)
    for a, b in zip(arrays["1"], arrays["0"], strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite(arrays["1"][0]).any()


def test_post_processing_takes_the_modules_own_code_once_it_is_compiled(monkeypatch):
    """The energy rows as the entry points are chosen: under the policy "now" the
    module's own ``energy_rows``; under "background" one Specializing per module, which
    takes the own code where it is compiled or cached (here: the run compiled it) and
    the shared routine meanwhile; the same bits either way."""
    from mbdgen import simulation, specialize
    from mbdgen.inputs import parameter_vector

    module = import_generated(GENERATED / "slider_crank.py")
    monkeypatch.setenv(specialize.POLICY_ENV, "now")
    run = mbdgen.simulate(module, "abm", h=1e-3, t_end=0.02)
    energy = run.energy.copy()
    assert simulation._postprocess(module, "energy_rows") is module.energy_rows
    monkeypatch.setenv(specialize.POLICY_ENV, "background")
    chosen = simulation._postprocess(module, "energy_rows")
    assert isinstance(chosen, specialize.Specializing)
    assert simulation._postprocess(module, "energy_rows") is chosen
    simulation.derived_quantities(module, run, parameter_vector(module, None), reactions=False)
    assert chosen._target is module.energy_rows
    np.testing.assert_array_equal(run.energy, energy)


@pytest.mark.parametrize(
    ("name", "method", "constraints"),
    [("pi_pendulum", "hht", None), ("slider_crank", "abm", "gcp"), ("slider_crank", "abm", None)],
)
def test_energy_rows_read_the_output_record_in_place(name, method, constraints):
    """The post-processing reads q, q̇, λ and X where the integrator wrote them
    (:func:`~mbdgen.simulation.column_block` finds the record behind the Result's
    views: no strided copies), with the same bits as from contiguous copies: HHT's
    record with a user state, GCP's aux record, the index-1 record (λ in aux)."""
    from mbdgen.inputs import parameter_vector
    from mbdgen.simulation import column_block

    module = import_generated(GENERATED / f"{name}.py")
    run = mbdgen.simulate(module, method, h=1e-3, t_end=0.02, constraints=constraints)
    arrays = (run.q, run.qd, run.lam, run.states)
    blocks = [column_block(a) for a in arrays]
    for a, (rows, col, width) in zip(arrays, blocks, strict=True):
        assert rows.flags.c_contiguous and width == a.shape[1]
        if width:
            assert np.shares_memory(rows, a)  # the record itself, not a copy
            np.testing.assert_array_equal(rows[:, col : col + width], a)
    copies = [(np.ascontiguousarray(a), 0, a.shape[1]) for a in arrays]
    p = parameter_vector(module, None, dict(run.info["initial_states"]) or None)
    out = []
    for q, qd, lam, states in (blocks, copies):
        energy, power = np.empty((len(run), 2)), np.empty(len(run))
        react = np.empty((len(run), module.N_REACTIONS, 12))
        module.derived(run.t, q, qd, lam, p, states, energy, power, react)
        out.append((energy, power, react))
    for a, b in zip(*out, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(out[0][0], run.energy)
    np.testing.assert_array_equal(out[0][1], run.power)
    # an array that is not a view of a C-contiguous record: a contiguous copy
    fortran = np.asfortranarray(run.q.copy())
    rows, col, width = column_block(fortran)
    assert col == 0 and rows.flags.c_contiguous and not np.shares_memory(rows, fortran)
    np.testing.assert_array_equal(rows, fortran)


_KERNELS_LOADED = """
import json, warnings
import mbdgen
from mbdgen.compiler import import_generated
from mbdgen.methods import get_method
from mbdgen.steppers import evaluation_kernel
warnings.simplefilter("ignore")
module = import_generated({path!r})
result = mbdgen.simulate(module, {method!r}, h=1e-3, t_end=2e-3, constraints={constraints!r})
names = ("phi", "phi_q", "phi_t", "dynamics", "dynamics_values", "reactions", "energy")
print(json.dumps({{
    "loaded": [k for k in names if getattr(module, k).signatures],
    "kernel": evaluation_kernel(module, get_method({method!r}).family, {constraints!r}),
}}))
"""


@pytest.mark.parametrize(
    ("model", "method", "constraints"),
    [
        ("slider_crank", "abm", None),  # dense: the module's own entry point
        ("andrews", "abm", None),  # sparse index-1, shared entry point
        ("andrews", "hht_adaptive", None),  # sparse index 3, with the consistent start
        ("andrews", "abm", "gcp"),  # sparse GCP: the partition on Φ_q's pattern at t0
        ("slider_crank", "abm", "hybrid"),  # dense: the partition by full pivoting at t0
    ],
)
def test_a_run_compiles_no_kernel_beyond_its_entry_points(model, method, constraints):
    """Cold latency (issue 11): the checks around a run — Φ(q0) and the consistent
    start at t0, the energy balance at the end — use the kernel the run's entry point
    evaluates (``evaluation_kernel``) and the energy-only ``energy_rows``, so a first
    run on a new model compiles neither ``phi`` (1.5-3.8 s for the spatial examples),
    nor ``phi_q`` (not for the partition of GCP and the hybrid algorithm either), nor
    the reactions (3.4-8.1 s; compiled when the reactions are first used), nor the
    other of ``dynamics``/``dynamics_values``.  Checked in a
    fresh interpreter: a kernel shows signatures there once it was compiled or loaded
    from Numba's cache for a call from Python or a function pointer."""
    import json

    code = _KERNELS_LOADED.format(
        path=str(GENERATED / f"{model}.py"), method=method, constraints=constraints
    )
    seen = json.loads(run_python(code).strip().splitlines()[-1])
    loaded, kernel = set(seen["loaded"]), seen["kernel"]
    other = {"dynamics", "dynamics_values"} - {kernel}
    assert kernel in loaded and not loaded & ({"phi", "phi_q", "reactions"} | other), seen
