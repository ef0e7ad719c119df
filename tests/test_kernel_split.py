"""Long kernels split in two parts compiled on their own (mbdgen.codegen.elements.split_kernel).

A new spatial model's first explicit step is mostly the compile of one kernel, the
evaluation kernel (the flyball governor's ``dynamics_values``: 1547 statements, 10-12 s).
Split in two, the user's process compiles one part while the kernel helper compiles the
other (:func:`mbdgen.runtime.shared.kernel_queue`).  The parts run the element loops in
their order, so the outputs accumulate in the same order and every bit is the whole
kernel's.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest
from conftest import GENERATED, MODELS

import mbdgen
from mbdgen import specialize
from mbdgen.codegen import elements
from mbdgen.codegen.elements import Call, LoopKernel, split_kernel
from mbdgen.compiler import import_generated
from mbdgen.runtime import module_name, shared


def _loop(sizes: list[int], name: str = "dynamics") -> tuple[LoopKernel, dict[str, int]]:
    calls = tuple(Call(f"E{i}_COUNT", f"_e{i}_k", ("t", "k", "out")) for i in range(len(sizes)))
    kernel = LoopKernel(name, ("t", "out"), "doc", ("out",), calls)
    return kernel, {f"_e{i}_k": s for i, s in enumerate(sizes)}


def test_the_cut_keeps_the_order_where_the_longer_half_is_shortest():
    """The flyball governor's ``dynamics_values`` element sizes: the cut after the
    fourth type leaves 906 and 641 statements (any other cut, a longer half); below
    :data:`~mbdgen.codegen.elements.SPLIT_STATEMENTS`, with one element type, or for a
    kernel that is not an evaluation kernel, the kernel stays whole."""
    kernel, sizes = _loop([82, 8, 180, 636, 397, 95, 123, 15, 11])
    part0, part1, whole = split_kernel(kernel, sizes)
    assert [c.callee for c in part0.calls] == ["_e0_k", "_e1_k", "_e2_k", "_e3_k"]
    assert [c.callee for c in part1.calls] == ["_e4_k", "_e5_k", "_e6_k", "_e7_k", "_e8_k"]
    assert part0.zero_fill == part1.zero_fill == ()  # the whole kernel zeroes, then calls
    assert whole.zero_fill == ("out",) and whole.calls == ()
    assert whole.parts == ("dynamics_part0", "dynamics_part1") == (part0.name, part1.name)
    assert part0.args == part1.args == whole.args
    for sizes_list in ([300, 200], [1000]):  # 500 statements: whole; one type: whole
        small, s = _loop(sizes_list)
        assert split_kernel(small, s) == [small]
    block, s = _loop([82, 8, 180, 636, 397, 95, 123, 15, 11], "phi_q_lam_q_values")
    assert split_kernel(block, s) == [block]


def test_only_long_kernels_are_split():
    """Among the examples the spatial ones split their evaluation kernels; the planar
    ones have none that long.  Every part is a function of the module."""
    flyball = import_generated(GENERATED / "iftomm_a05_flyball_governor.py")
    assert set(flyball.KERNEL_PARTS) == {"dynamics", "dynamics_values"}
    assert flyball.KERNEL_PARTS["dynamics_values"] == (
        "dynamics_values_part0",
        "dynamics_values_part1",
    )
    for name, parts in flyball.KERNEL_PARTS.items():
        assert all(hasattr(flyball, part) for part in parts), name
    assert (
        shared.kernel_signature("dynamics_values_part1")
        is shared.KERNEL_SIGNATURES["dynamics_values"]
    )
    assert shared.kernel_queue(flyball, "dynamics_values", ["energy"]) == [
        "dynamics_values_part1",  # an explicit run: the helper has little else to do
        "energy",
    ]
    assert shared.kernel_queue(flyball, "dynamics_values", ["force_q_values", "energy"]) == [
        "force_q_values",  # a Newton block, needed at the first step
        "energy",
        "dynamics_values_part1",
    ]
    chain = import_generated(GENERATED / "planar_chain.py")
    assert chain.KERNEL_PARTS == {}


@pytest.fixture
def split_copy(tmp_path, monkeypatch):
    """A copy of the planar slider-crank compiled with its evaluation kernels split
    (above 10 statements); the committed module keeps them whole."""
    name = module_name("slider_crank_planar.py")
    if name in sys.modules:
        monkeypatch.setitem(sys.modules, name, sys.modules[name])
    monkeypatch.setattr(elements, "SPLIT_STATEMENTS", 10)
    model = tmp_path / "slider_crank_planar.py"
    source = (MODELS / "slider_crank_planar.py").read_text()
    model.write_text(source + f"\n# copy {time.time_ns()}\n")
    return mbdgen.compile(model, tmp_path / "gen")


def test_a_split_kernel_has_the_bits_of_the_whole_one(split_copy):
    """Split and whole ``dynamics`` and ``dynamics_values`` give the same bits at random
    states, and so does a run."""
    whole = import_generated(GENERATED / "slider_crank_planar.py")
    assert {"dynamics", "dynamics_values"} <= set(split_copy.KERNEL_PARTS)
    assert whole.KERNEL_PARTS == {}
    n, m = whole.N_COORDINATES, whole.N_CONSTRAINTS
    rng = np.random.default_rng(7)
    for _ in range(5):
        q, qd = rng.normal(size=n), rng.normal(size=n)
        p = whole.P_DEFAULT * (1 + 0.1 * rng.random(len(whole.P_DEFAULT)))
        out = {}
        for label, module in (("split", split_copy), ("whole", whole)):
            dense = (np.zeros((n, n)), np.zeros(n), np.zeros(m), np.zeros((m, n)))
            dense += (np.zeros(m), np.zeros(m))
            module.dynamics(0.3, q, qd, p, *dense)
            values = (np.zeros(len(module.MASS_ROWS)), np.zeros(n), np.zeros(m))
            values += (np.zeros(len(module.PHI_Q_ROWS)), np.zeros(m), np.zeros(m))
            module.dynamics_values(0.3, q, qd, p, *values)
            out[label] = dense + values
        for a, b in zip(out["split"], out["whole"], strict=True):
            np.testing.assert_array_equal(a, b)
    runs = [mbdgen.simulate(mod, h=1e-3, t_end=0.1) for mod in (split_copy, whole)]
    np.testing.assert_array_equal(runs[0].q, runs[1].q)


def test_the_parts_compile_on_two_cores(split_copy, monkeypatch):
    """Under the policy "background" an explicit run's helper starts with the
    evaluation kernel's last part, which this process, compiling from the first part,
    waits for, finds done, or compiles itself: each part and kernel is compiled once,
    in one of the two processes, and the run has the committed module's bits."""
    if (specialize.os.cpu_count() or 1) < 2:
        pytest.skip("one core: no helper")
    monkeypatch.setenv(specialize.POLICY_ENV, "background")
    monkeypatch.delenv("MBDGEN_SHARED_ENTRY", raising=False)
    path = str(split_copy.__file__)
    kernel = "dynamics"
    queue = shared.kernel_queue(
        split_copy, kernel, shared.kernels_after_start(split_copy, "adams", "direct")
    )
    assert queue[0] == "dynamics_part1"
    first = mbdgen.simulate(split_copy, h=1e-3, t_end=0.1)
    helper = specialize._HELPERS[path]
    assert helper.wait(300) == 0
    everything = [*queue, "dynamics_part0", kernel]
    here = {k for k in everything if sum(getattr(split_copy, k).stats.cache_misses.values())}
    line = specialize.kernel_log_path(path).read_text().splitlines()[-1]
    there = set(line.split("compiled:")[1].split())
    assert here.isdisjoint(there), (here, there)
    assert {"dynamics_part0", "dynamics_part1", kernel} <= here | there
    whole = import_generated(GENERATED / "slider_crank_planar.py")
    reference = mbdgen.simulate(whole, h=1e-3, t_end=0.1)
    np.testing.assert_array_equal(first.q, reference.q)
