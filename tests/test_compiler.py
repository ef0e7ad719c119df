"""The compiler end to end: determinism, up-to-date check, staleness, Numba's cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import GENERATED, MODELS, ROOT, run_python

from mbdgen.codegen.stamp import body_hash
from mbdgen.compiler import compile as compile_model
from mbdgen.compiler import generate, render, stale_reason
from mbdgen.errors import StaleModuleError


@pytest.mark.parametrize("model", sorted(p.name for p in MODELS.glob("*.py")))
def test_committed_generated_modules_are_up_to_date(model):
    """generated/ is committed; a compiler or template change must show in review.

    Fix a failure with ``make generate`` and commit the result.
    """
    committed = (GENERATED / model).read_text(encoding="utf-8")
    assert render(MODELS / model) == committed, f"generated/{model} is stale: run `make generate`"
    assert stale_reason(MODELS / model, GENERATED / model) is None


@pytest.mark.parametrize("model", ["slider_crank.py", "slider_crank_tsda.py"])
def test_generation_is_deterministic_across_processes(tmp_path, model):
    """Same model + same mbdgen → byte-identical file, whatever the hash seed: a flat
    model, and a mechanism whose element types (a TSDA among them) each process
    derives afresh, through SymEngine (its own hash tables must not leak into the text)."""
    texts = []
    for seed in ("1", "2"):
        code = (
            "import sys; from mbdgen.compiler import render; "
            f"sys.stdout.write(render('models/{model}'))"
        )
        env = {"PYTHONHASHSEED": seed, "MBDGEN_ELEMENT_CACHE_DIR": str(tmp_path / seed)}
        texts.append(run_python(code, env=env))
    assert texts[0] == texts[1]
    assert texts[0] == (GENERATED / model).read_text(encoding="utf-8")


def _copy_model(tmp_path: Path, name: str = "pendulum") -> Path:
    target = tmp_path / f"{name}.py"
    shutil.copy(MODELS / f"{name}.py", target)
    return target


def test_stale_module_is_detected_and_regenerated(tmp_path):
    model = _copy_model(tmp_path)
    out = tmp_path / "gen"
    assert "does not exist" in stale_reason(model, out / "pendulum.py")
    path, written = generate(model, out)
    assert written and stale_reason(model, path) is None
    assert generate(model, out) == (path, False)  # unchanged text is not rewritten
    mtime = path.stat().st_mtime_ns
    model.write_text(model.read_text().replace("g: 9.81", "g: 9.80665"))
    assert "changed since" in stale_reason(model, path)
    with pytest.raises(StaleModuleError, match="mbdgen compile"):
        compile_model(model, out, recompile=False)
    module = compile_model(model, out)
    assert path.stat().st_mtime_ns != mtime
    assert module.P_DEFAULT[3] == 9.80665
    # a module from another compiler version is stale too (its own body hash matches)
    text = path.read_text(encoding="utf-8").replace(module.COMPILER_HASH, "0" * 16)
    path.write_text(text.replace(module.BODY_HASH, body_hash(text)), encoding="utf-8")
    assert "another compiler" in stale_reason(model, path)
    # the same edit by hand, without a matching body hash, is refused
    path.write_text(text, encoding="utf-8")
    with pytest.raises(StaleModuleError, match="edited by hand or damaged"):
        stale_reason(model, path)


_RUN = """
import json, mbdgen
m = mbdgen.compile({model!r}, {out!r})
r = mbdgen.simulate(m, h=0.01, t_end=0.5)
print(json.dumps({{"q": r.q[-1].tolist(),
                  "hits": sum(m.abm_chunk.stats.cache_hits.values()),
                  "misses": sum(m.abm_chunk.stats.cache_misses.values())}}))
"""


#: The module's own entry point, compiled at the first call (not the shared routine).
OWN_ENTRY = {"MBDGEN_SPECIALIZE": "now"}


@pytest.mark.slow
def test_second_process_reuses_numba_cache_and_recompiles_after_a_change(tmp_path):
    """DESIGN rules 6-7: the bound integrator is cached across processes, and a
    changed generated module is compiled afresh (not served from a stale cache)."""
    model = _copy_model(tmp_path)
    out = tmp_path / "gen"
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), **OWN_ENTRY}
    code = _RUN.format(model=str(model), out=str(out))
    first = json.loads(run_python(code, env=env).splitlines()[-1])
    second = json.loads(run_python(code, env=env).splitlines()[-1])
    assert (first["hits"], first["misses"]) == (0, 1)
    assert (second["hits"], second["misses"]) == (1, 0)
    assert second["q"] == first["q"]
    # change the model: the pendulum becomes twice as long
    model.write_text(model.read_text().replace("l: 1.0", "l: 2.0").replace("q0=[1.0", "q0=[2.0"))
    third = json.loads(run_python(code, env=env).splitlines()[-1])
    assert third["misses"] == 1
    assert third["q"] != first["q"]


_PLAIN_IMPORT = """
import json, sys
sys.path.insert(0, {out!r})
import pendulum
import mbdgen
r = mbdgen.simulate(pendulum, h=0.01, t_end=0.5)
print(json.dumps({{"q": r.q[-1].tolist(), "name": pendulum.abm_chunk.py_func.__module__,
                  "hits": sum(pendulum.abm_chunk.stats.cache_hits.values())}}))
"""


@pytest.mark.slow
def test_plain_import_and_compile_share_the_numba_cache(tmp_path):
    """A generated module runs under one canonical name however it is imported, so
    machine code cached by ``import pendulum`` loads in a process that uses
    ``mbdgen.compile`` (it used to fail there with ModuleNotFoundError), and back."""
    model = _copy_model(tmp_path)
    out = tmp_path / "gen"
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), **OWN_ENTRY}
    compile_model(model, out)
    plain = json.loads(run_python(_PLAIN_IMPORT.format(out=str(out)), env=env).splitlines()[-1])
    assert plain["name"] == "mbdgen_generated_pendulum"
    via_compile = run_python(_RUN.format(model=str(model), out=str(out)), env=env)
    loaded = json.loads(via_compile.splitlines()[-1])
    assert (loaded["hits"], loaded["misses"]) == (1, 0)
    assert loaded["q"] == plain["q"]
    again = json.loads(run_python(_PLAIN_IMPORT.format(out=str(out)), env=env).splitlines()[-1])
    assert again["hits"] == 1


@pytest.mark.slow
def test_no_jit_mode_runs_end_to_end(tmp_path):
    """NUMBA_DISABLE_JIT=1: the same code runs as plain Python (readable tracebacks)."""
    code = (
        "import json, mbdgen, numba; "
        "r = mbdgen.simulate('models/slider_crank.py', h=0.01, t_end=0.2, alpha=5, beta=5); "
        "print(json.dumps([numba.config.DISABLE_JIT, r.q[-1].tolist()]))"
    )
    plain = json.loads(run_python(code, env={"NUMBA_DISABLE_JIT": "1"}).splitlines()[-1])
    jitted = json.loads(run_python(code).splitlines()[-1])
    assert plain[0] and not jitted[0]
    assert plain[1] == pytest.approx(jitted[1], rel=1e-12, abs=1e-14)


def test_generated_module_imports_no_sympy():
    """DESIGN rule 4: importing a generated module must not pull in SymPy."""
    code = (
        "import sys; from mbdgen.compiler import import_generated; "
        "import_generated('generated/slider_crank.py'); print('sympy' in sys.modules)"
    )
    assert run_python(code, cwd=ROOT).strip() == "False"


@pytest.mark.slow
def test_time_loop_allocates_nothing_per_step():
    """DESIGN rule 1: Numba's runtime allocation counter is the same for 10 and for
    4000 steps, both one chunk (NRT stats count every allocation of jitted code; the
    ones there are come from wrapping the NumPy arguments once per call)."""
    code = """
import json, mbdgen
from numba.core.runtime import _nrt_python, rtsys
_nrt_python.memsys_enable_stats()
m = mbdgen.compile("models/slider_crank.py")
counts = []
for t_end in (0.01, 0.01, 4.0):
    before = rtsys.get_allocation_stats().alloc
    mbdgen.simulate(m, h=1e-3, t_end=t_end, alpha=5, beta=5)
    counts.append(rtsys.get_allocation_stats().alloc - before)
print(json.dumps(counts))
"""
    counts = json.loads(run_python(code, env={"NUMBA_NRT_STATS": "1"}).splitlines()[-1])
    assert counts[2] == counts[1], counts


def test_a_kernels_cse_is_reused_only_with_its_printer():
    """``emit._reduce`` memoizes CSE and printing by (printer, expressions): the dense
    block and its ``_values`` kernel share one, a kernel printed with other symbol
    names (another element type) gets its own."""
    import sympy as sp

    from mbdgen.codegen import emit

    x = sp.Symbol("x")
    exprs = (sp.sin(x) ** 2 + sp.sin(x), sp.cos(sp.sin(x)))
    first = emit.KernelPrinter({x: "q[0]"})
    a = emit._reduce("k", exprs, first)
    assert emit._reduce("k", exprs, first) is a
    b = emit._reduce("k", exprs, emit.KernelPrinter({x: "q[1]"}))
    assert "q[0]" in a.temporaries[0].value and "q[1]" in b.temporaries[0].value
    assert a.used == b.used == {x}
    assert [s.target for s in a.temporaries] == ["_c0"]
