"""Long element kernels compiled once per installation (mbdgen.runtime.library).

A generated module inlines its short element kernels into its loop kernels and
decorates each long one ``@rt.library_kernel("<digest>")``: the kernel's text becomes a
module of the library folder next to Numba's cache, compiled there once and shared by
every model whose kernel has that text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import GENERATED, MODELS, run_python

import mbdgen
from mbdgen.codegen import elements
from mbdgen.compiler import import_generated
from mbdgen.runtime import library, module_name

_DECORATED = re.compile(r'^@rt\.library_kernel\("([0-9a-f]+)"\)\ndef (\w+)\(', re.MULTILINE)


def _library_kernels(path) -> dict[str, str]:
    """Kernel name → digest of the module's library kernels, read from its text."""
    return {name: digest for digest, name in _DECORATED.findall(path.read_text())}


def test_long_element_kernels_come_from_the_library():
    """Every kernel of the committed modules decorated for the library is the library's
    (its text has the digest the compiler wrote; no local fallback); the planar
    examples evaluate their right sides with inlined kernels only (the planar TSDA's
    Jacobian ``force_q`` is the one planar library kernel); spatial models share
    kernels, one object per digest in a process."""
    seen: dict[str, object] = {}
    for path in sorted(GENERATED.glob("*.py")):
        kernels = _library_kernels(path)
        module = import_generated(path)
        planar = all(not str(k).startswith("spatial") for k in getattr(module, "BODY_KINDS", ()))
        if planar:
            kinds = {n.split("_", 2)[-1] for n in kernels}
            assert kinds <= {"force_q", "force_q_values"}, path.name
        for name, digest in kernels.items():
            kernel = getattr(module, name)
            assert kernel.py_func.__module__ == f"mbdgen_library_k{digest}", (path.name, name)
            assert (library.library_dir() / f"k{digest}.py").is_file()
            assert seen.setdefault(digest, kernel) is kernel
    flyball = _library_kernels(GENERATED / "iftomm_a05_flyball_governor.py")
    bricard = _library_kernels(GENERATED / "iftomm_a04_bricard.py")
    assert len(flyball) == 64
    assert set(flyball.values()) & set(bricard.values())


def test_the_compiler_decorates_by_length():
    """Kernels of LIBRARY_STATEMENTS statements or more go to the library, with the
    digest of their library module's text; shorter ones are inlined."""
    text = (GENERATED / "welch_pendulum3d.py").read_text()
    lines = text.splitlines()
    for digest, name in _DECORATED.findall(text):
        start = lines.index(f'@rt.library_kernel("{digest}")')
        end = start + 1
        while end + 1 < len(lines) and lines[end + 1][:1] in ("", " "):
            end += 1
        body = lines[start : end + 1]
        assert library.digest(library.library_text(body)) == digest, name
        statements = [s for s in body[3:] if s.strip()]  # after decorator, def, docstring
        assert len(statements) >= elements.LIBRARY_STATEMENTS, name
    inlined = re.findall(r'inline="always".*\ndef (\w+)\(', text)
    assert inlined and not set(inlined) & set(_library_kernels(GENERATED / "welch_pendulum3d.py"))


def test_library_text_names_the_kernel_and_keeps_its_body():
    lines = ['@rt.library_kernel("00")', "def _e3_phi_q(t, q, out):", '    """doc"""']
    lines += ["    x = 1", ""]
    text = library.library_text(lines)
    assert text.startswith(library.HEADER)
    assert text.endswith('def kernel(t, q, out):\n    """doc"""\n    x = 1\n')


def test_a_kernel_whose_text_differs_is_compiled_where_it_is(tmp_path, monkeypatch):
    """A function whose text does not have the digest it was given (an edited module) is
    compiled in its own module, as before the library; one that has it is written to
    the library folder once, loaded, and shared; a library file edited by hand is
    written again."""
    monkeypatch.setattr(library.config, "CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setattr(library, "_LOADED", {})
    source = tmp_path / "kernels.py"
    source.write_text(
        'def _e0_k(t, q, out):\n    """An element kernel."""\n    out[0] = math.sin(q[0]) * t\n'
    )
    namespace = {"math": __import__("math"), "__name__": "kernels"}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    func = namespace["_e0_k"]
    wrong = library.library_kernel("0" * library.DIGEST_LENGTH)(func)
    assert wrong.py_func is func
    assert not (tmp_path / "numba" / "library").exists()
    digest = library.digest(library.library_text(source.read_text().splitlines()))
    kernel = library.library_kernel(digest)(func)
    assert kernel.py_func is not func
    assert kernel.py_func.__module__ == f"mbdgen_library_k{digest}"
    assert library.library_kernel(digest)(func) is kernel
    path = tmp_path / "numba" / "library" / f"k{digest}.py"
    assert path.read_text() == library.library_text(source.read_text().splitlines())
    path.write_text(path.read_text().replace("* t", "* t * 2.0"))  # edited by hand
    monkeypatch.setattr(library, "_LOADED", {})
    again = library.library_kernel(digest)(func)
    assert path.read_text() == library.library_text(source.read_text().splitlines())
    out = np.zeros(1)
    again(2.0, np.array([0.5]), out)
    assert out[0] == np.sin(0.5) * 2.0
    out = np.zeros(1)
    kernel(2.0, np.array([0.5]), out)
    assert out[0] == np.sin(0.5) * 2.0


@pytest.fixture
def welch_copy(tmp_path, monkeypatch):
    """Welch's 3-D pendulum compiled anew into a new file, every element kernel
    inlined (LIBRARY_STATEMENTS out of reach): the module as before the library."""
    name = module_name("welch_pendulum3d.py")
    if name in sys.modules:
        monkeypatch.setitem(sys.modules, name, sys.modules[name])
    monkeypatch.setattr(elements, "LIBRARY_STATEMENTS", 10**9)
    model = tmp_path / "welch_pendulum3d.py"
    model.write_text((MODELS / "welch_pendulum3d.py").read_text() + f"\n# {time.time_ns()}\n")
    return mbdgen.compile(model, tmp_path / "gen")


def test_library_kernels_give_the_bits_of_inlined_ones(welch_copy):
    """Called from the library or inlined, the element code performs the same
    floating-point operations (no fast-math): the same bits at random states."""
    assert "library_kernel" not in open(welch_copy.__file__).read()
    committed = import_generated(GENERATED / "welch_pendulum3d.py")
    n, m = committed.N_COORDINATES, committed.N_CONSTRAINTS
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, qd, lam = rng.normal(size=n), rng.normal(size=n), rng.normal(size=m)
        p = committed.P_DEFAULT * (1 + 0.1 * rng.random(len(committed.P_DEFAULT)))
        out = {}
        for label, module in (("library", committed), ("inlined", welch_copy)):
            values = (np.zeros(len(module.MASS_ROWS)), np.zeros(n), np.zeros(m))
            values += (np.zeros(len(module.PHI_Q_ROWS)), np.zeros(m), np.zeros(m))
            module.dynamics_values(0.3, q, qd, p, *values)
            plq = np.zeros(len(module.PHI_Q_LAM_Q_ROWS))
            module.phi_q_lam_q_values(0.3, q, lam, p, plq)
            out[label] = (*values, plq)
        for a, b in zip(out["library"], out["inlined"], strict=True):
            np.testing.assert_array_equal(a, b)


def test_a_new_model_links_library_kernels_from_the_cache(tmp_path):
    """A new model whose types were compiled before (here: by the committed module, in
    another process) compiles its loop kernel without compiling any element kernel of
    the library again: each is a cache hit, none a miss."""
    warm = (
        "from mbdgen.compiler import import_generated; "
        f"m = import_generated({str(GENERATED / 'welch_pendulum3d.py')!r}); "
        "from mbdgen.runtime import shared; "
        "m.phi_q_lam_q_values.compile(tuple(shared.KERNEL_SIGNATURES['phi_q_lam_q_values'].args))"
    )
    run_python(warm)
    model = tmp_path / "welch_pendulum3d.py"
    model.write_text((MODELS / "welch_pendulum3d.py").read_text() + "\n# a new model\n")
    new = (
        "import mbdgen; from mbdgen.runtime import shared; "
        f"m = mbdgen.compile({str(model)!r}, {str(tmp_path / 'gen')!r}); "
        "k = m.phi_q_lam_q_values; "
        "k.compile(tuple(shared.KERNEL_SIGNATURES['phi_q_lam_q_values'].args)); "
        "lib = [getattr(m, n) for n in dir(m) if n.endswith('_phi_q_lam_q_values') "
        "and n.startswith('_e') and hasattr(getattr(m, n), 'py_func') "
        "and getattr(m, n).py_func.__module__.startswith('mbdgen_library_k')]; "
        "print(len(lib), sum(sum(d.stats.cache_hits.values()) for d in lib), "
        "sum(sum(d.stats.cache_misses.values()) for d in lib), "
        "sum(k.stats.cache_misses.values()))"
    )
    found, hits, misses, own = map(int, run_python(new).split()[-4:])
    assert found >= 1 and hits == found and misses == 0 and own == 1, (found, hits, misses, own)


def test_two_processes_filling_the_library_at_once(tmp_path):
    """Two processes that load one new library kernel at the same moment both get it,
    and the file is whole (each writes a temporary file and renames it)."""
    source = tmp_path / "kernels.py"
    source.write_text('def _e0_k(t, out):\n    """An element kernel."""\n    out[0] = 2.0 * t\n')
    digest = library.digest(library.library_text(source.read_text().splitlines()))
    code = (
        "import math, sys, time; import numpy as np; from mbdgen.runtime import library; "
        f"ns = {{'math': math}}; exec(compile(open({str(source)!r}).read(), {str(source)!r}, "
        "'exec'), ns); time.sleep(max(0.0, float(sys.argv[1]) - time.time())); "
        f"k = library.library_kernel({digest!r})(ns['_e0_k']); out = np.zeros(1); "
        "k(1.5, out); print(k.py_func.__module__, out[0])"
    )
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    start = time.time() + 3.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(start)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )  # fmt: skip
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=300)[0].split() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert outputs == [[f"mbdgen_library_k{digest}", "3.0"]] * 2
    (folder,) = (tmp_path / "numba").glob("runtime-*/library")
    assert [p.name for p in folder.glob("*.py")] == [f"k{digest}.py"]
    text = (folder / f"k{digest}.py").read_text()
    assert text == library.library_text(source.read_text().splitlines())


_CALLER = '''import math

from numba import njit

from mbdgen.runtime.library import library_kernel


@library_kernel("{digest}")
def _e0_k(t, q, out):
    """An element kernel."""
    out[0] += math.sin(q[0]) * t


@njit(cache=True)
def loop(t, q, out):
    for _ in range(3):
        _e0_k(t, q, out)
'''


def test_a_caller_calls_its_library_kernel_by_symbol_also_from_the_cache(tmp_path):
    """A loop kernel does not link its library kernels (their code is not in its LLVM
    module: it calls ``mbdgen_library_<digest>_<types>``); compiled in one process and
    loaded from Numba's cache in another, it finds the symbol there (the cached
    caller's ``reload_init``) and gives the same result."""
    lines = _CALLER.format(digest="0").splitlines()
    start = lines.index('@library_kernel("0")')
    digest = library.digest(library.library_text(lines[start : start + 4]))
    (tmp_path / "kernels_by_symbol.py").write_text(_CALLER.format(digest=digest))
    code = (
        "import numpy as np, kernels_by_symbol as m; out = np.zeros(1); "
        "m.loop(2.0, np.array([0.5]), out); sig = m.loop.signatures[0]; "
        "llvm = m.loop.inspect_llvm(sig) if m.loop.stats.cache_misses else ''; "
        f"print(repr(out[0]), sum(m.loop.stats.cache_hits.values()), "
        f"'mbdgen_library_{digest}_' in llvm, 'mbdgen_library_k{digest}' in llvm)"
    )
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PYTHONPATH": str(tmp_path)}
    first = run_python(code, env=env, cwd=tmp_path).split()
    second = run_python(code, env=env, cwd=tmp_path).split()
    assert first == [repr(3 * np.sin(0.5) * 2.0), "0", "True", "False"]
    assert second == [repr(3 * np.sin(0.5) * 2.0), "1", "False", "False"]


def test_a_library_text_is_compiled_here_where_the_folder_cannot_be_used(tmp_path, monkeypatch):
    """Where the library folder cannot be read or written, the kernel's own text (which
    has the digest) is compiled in its module and still called by symbol."""
    monkeypatch.setattr(library, "_LOADED", {})

    def unusable(name, func):
        raise OSError("read-only")

    monkeypatch.setattr(library, "_load", unusable)
    source = tmp_path / "kernels_here.py"
    source.write_text(_CALLER.format(digest="0"))
    namespace = {"__name__": "kernels_here"}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    func = namespace["_e0_k"].py_func  # "0" is not its digest: compiled as it is
    lines = source.read_text().splitlines()
    start = lines.index('@library_kernel("0")')
    digest = library.digest(library.library_text(lines[start : start + 4]))
    kernel = library.library_kernel(digest)(func)
    assert isinstance(kernel, library.LibraryKernel) and kernel.py_func is func
    out = np.zeros(1)
    kernel(2.0, np.array([0.5]), out)
    assert out[0] == np.sin(0.5) * 2.0


def test_a_library_kernel_pickles_as_itself():
    """Numba pickles a loop kernel's globals with it when the loop kernel is a
    first-class argument (the cache index of ``rt.iteration_matrix``): a library kernel
    comes back as this process's own."""
    import pickle

    module = import_generated(GENERATED / "welch_pendulum3d.py")
    digest, name = next(iter(_DECORATED.findall((GENERATED / "welch_pendulum3d.py").read_text())))
    kernel = getattr(module, name)
    assert isinstance(kernel, library.LibraryKernel) and kernel.name == digest
    assert pickle.loads(pickle.dumps(kernel)) is kernel


_OUTER = """

@njit(cache=True)
def outer(t, q, out):
    loop(t, q, out)
"""


def test_a_caller_of_a_cached_caller_keeps_the_symbol(tmp_path):
    """An entry point compiled in a process that loaded its loop kernel from the cache
    records the loop kernel's library symbols too (mbdgen.runtime.library: a cached
    library is given its ``reload_init``).  Without that, a third process that loaded
    the entry point first called address 0 and died of a segmentation fault — what a
    background compile left for the slider-crank with a spring's ``index3_chunk``."""
    lines = _CALLER.format(digest="0").splitlines()
    start = lines.index('@library_kernel("0")')
    digest = library.digest(library.library_text(lines[start : start + 4]))
    (tmp_path / "kernels_outer.py").write_text(_CALLER.format(digest=digest) + _OUTER)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PYTHONPATH": str(tmp_path)}
    head = "import numpy as np, kernels_outer as m; out = np.zeros(1); q = np.array([0.5]); "
    report = "print(repr(out[0]), sum(f.stats.cache_hits.values()))"
    run_python(head + "m.loop(2.0, q, out); f = m.loop; " + report, env=env, cwd=tmp_path)
    # the loop kernel from the cache, the entry point compiled over it
    second = run_python(
        head + "m.loop(2.0, q, out); out[0] = 0.0; m.outer(2.0, q, out); f = m.loop; " + report,
        env=env,
        cwd=tmp_path,
    ).split()
    # the entry point first, from the cache
    third = run_python(head + "m.outer(2.0, q, out); f = m.outer; " + report, env=env, cwd=tmp_path)
    value = repr(3 * np.sin(0.5) * 2.0)
    assert second == [value, "1"]
    assert third.split() == [value, "1"]
