"""The element cache: library element types derived once per installation (issue 11,
item 2), and the stage report of ``mbdgen compile -v`` (item 4).

Cheap by construction: small planar models (a few element types, well under a second
of SymPy each), one cache folder per test under ``tmp_path``; the one JIT run reuses
the committed ``generated/pendulum.py`` and its ``abm`` entry point, which the suite
compiles anyway.
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
import sympy as sp
from click.testing import CliRunner

from mbdgen import timing
from mbdgen.cli import main
from mbdgen.codegen import element_cache
from mbdgen.codegen.element_cache import ElementCache, default_cache, type_identity
from mbdgen.compiler import render
from mbdgen.model import planar
from mbdgen.model.core import t
from mbdgen.model.elements import Contribution, Element

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
#: A driver f(t) (user expression) and revolute joints: 4 element types.
FOURBAR = MODELS / "fourbar.py"
#: A torque whose user expression reads a user state (state-bound local parameter).
PI_PENDULUM = MODELS / "pi_pendulum.py"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "elements"
    monkeypatch.setenv("MBDGEN_ELEMENT_CACHE_DIR", str(folder))
    monkeypatch.delenv("MBDGEN_NO_ELEMENT_CACHE", raising=False)
    return folder


def _render(model: Path, **kwargs) -> tuple[str, dict[str, str]]:
    """Text of the module and {element type: "cached"/"derived"...} of one render."""
    report = timing.CompileReport()
    with timing.recording(report):
        text = render(model, **kwargs)
    how = dict(
        s.detail.split(": ", 1) for s in report.stages if s.name == "derive" and ": " in s.detail
    )
    return text, how


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.json"))


@pytest.mark.parametrize("model", [FOURBAR, PI_PENDULUM], ids=lambda p: p.stem)
def test_module_is_byte_identical_with_and_without_the_cache(cache_dir, model):
    reference, how = _render(model, element_cache=False)
    assert set(how.values()) == {"derived"}
    assert not cache_dir.exists()  # --no-cache neither reads nor writes
    cold, how = _render(model)
    assert set(how.values()) == {"derived"}
    assert len(_entries(cache_dir)) == len(how)
    warm, how = _render(model)
    assert set(how.values()) == {"cached"}
    assert cold == reference
    assert warm == reference


def test_a_cached_type_needs_no_sympy_derivation(cache_dir, monkeypatch):
    reference = render(FOURBAR)

    def forbidden(*args, **kwargs):
        raise AssertionError("a cached element type was derived again")

    from mbdgen.codegen import elements as codegen_elements
    from mbdgen.symbolic import elements as symbolic_elements

    monkeypatch.setattr(symbolic_elements, "_type_blocks", forbidden)
    monkeypatch.setattr(codegen_elements, "_element_kernels", forbidden)
    text, how = _render(FOURBAR)
    assert set(how.values()) == {"cached"}
    assert text == reference


def test_types_are_shared_between_models(cache_dir):
    """planar_chain's bodies and revolute joints are fourbar's; its gravity is not."""
    render(FOURBAR)
    _, how = _render(MODELS / "planar_chain.py")
    assert how == {
        "planar_body_p": "cached",
        "revolute_gp": "cached",
        "revolute_pp": "cached",
        "planar_gravity_p": "derived",
    }


@pytest.mark.parametrize("what", ["version", "digest"])
def test_a_new_version_or_element_source_invalidates_the_entries(cache_dir, monkeypatch, what):
    reference, _ = _render(FOURBAR)
    if what == "version":
        monkeypatch.setattr(element_cache, "__version__", "999.0")
    else:
        monkeypatch.setattr(element_cache, "source_digest", lambda: "edited-source")
    text, how = _render(FOURBAR)
    assert set(how.values()) == {"derived"}
    assert text == reference
    _, how = _render(FOURBAR)
    assert set(how.values()) == {"cached"}


def test_an_entry_of_another_version_in_the_right_place_is_refused(cache_dir, monkeypatch):
    """Entries repeat the version and digest; a copy under the wrong folder is not used."""
    render(FOURBAR)
    cache = ElementCache()
    old = cache.folder
    monkeypatch.setattr(element_cache, "__version__", "999.0")
    new = cache.folder
    new.mkdir(parents=True)
    for f in old.iterdir():
        (new / f.name).write_bytes(f.read_bytes())
    _, how = _render(FOURBAR)
    assert set(how.values()) == {"derived"}


@pytest.mark.parametrize("damage", ["truncated", "garbage", "tampered", "empty"])
def test_a_damaged_entry_is_ignored_and_rewritten(cache_dir, damage):
    reference, _ = _render(FOURBAR)
    entries = _entries(cache_dir)
    victim = entries[-1]
    good = victim.read_bytes()
    if damage == "truncated":
        victim.write_bytes(good[: len(good) // 2])
    elif damage == "garbage":
        victim.write_bytes(b"\x00\xff not json")
    elif damage == "empty":
        victim.write_bytes(b"")
    else:  # valid JSON whose statements were edited: the checksum no longer holds
        doc = json.loads(good)
        kernel = doc["payload"]["type"]["kernels"][0]
        kernel["assignments"][0][1] = "__import__('os').system('true')"
        victim.write_text(json.dumps(doc))
    text, how = _render(FOURBAR)
    assert list(how.values()).count("derived") == 1
    assert text == reference
    assert victim.read_bytes() == good  # rewritten, complete


def _fill(folder: str, model: str, barrier) -> None:
    import os

    os.environ["MBDGEN_ELEMENT_CACHE_DIR"] = folder
    from mbdgen.codegen.element_cache import ElementCache
    from mbdgen.compiler import render

    barrier.wait()
    render(model)
    # Hammer the same entries: every write replaces a complete file by a complete one.
    cache = ElementCache()
    entries = sorted(cache.folder.glob("*.json"))
    for _ in range(20):
        for path in entries:
            doc = json.loads(path.read_text())
            identity = doc["payload"]["identity"]
            entry = cache.load(identity)
            assert entry is not None
            cache.store(identity, entry)


def test_two_processes_filling_the_cache_at_once_corrupt_nothing(cache_dir):
    reference = render(FOURBAR, element_cache=False)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [
        ctx.Process(target=_fill, args=(str(cache_dir), str(FOURBAR), barrier)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    entries = _entries(cache_dir)
    assert len(entries) == 4
    assert not [f for f in cache_dir.rglob("*") if f.is_file() and f.suffix != ".json"]
    text, how = _render(FOURBAR)
    assert set(how.values()) == {"cached"}
    assert text == reference


def test_only_library_builders_with_sympy_functions_are_cacheable():
    body = planar.body("b", 1.0, 0.1)
    assert type_identity(planar.revolute("r", planar.GROUND, (0, 0), body, (1, 0)), ()) is not None

    def own_build(loc):
        return Contribution(phi=[loc.q[0][0]])

    custom = Element("c", "revolute", "joint", ("planar",), (body,), (), own_build)
    assert type_identity(custom, ()) is None  # a model's own element: not in the digest

    class Ramp(sp.Function):
        @classmethod
        def eval(cls, x):
            return None

    user_fn = planar.angle_driver("d", body, Ramp(t))
    plain = planar.angle_driver("d", body, sp.sin(t))
    assert type_identity(user_fn, ()) is None
    assert type_identity(plain, ()) is not None
    # user expressions of other structure are other types
    assert type_identity(plain, ()) != type_identity(planar.angle_driver("d", body, sp.cos(t)), ())


def test_environment_switches(tmp_path, monkeypatch):
    monkeypatch.setenv("MBDGEN_ELEMENT_CACHE_DIR", str(tmp_path / "x"))
    monkeypatch.delenv("MBDGEN_NO_ELEMENT_CACHE", raising=False)
    assert default_cache().root == tmp_path / "x"
    assert default_cache(False) is None
    monkeypatch.setenv("MBDGEN_NO_ELEMENT_CACHE", "1")
    assert default_cache() is None
    assert default_cache(True) is not None
    monkeypatch.delenv("MBDGEN_ELEMENT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert element_cache.cache_root() == tmp_path / "xdg" / "mbdgen" / "elements"


def test_an_unwritable_cache_is_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MBDGEN_ELEMENT_CACHE_DIR", str(blocker))
    monkeypatch.delenv("MBDGEN_NO_ELEMENT_CACHE", raising=False)
    assert render(FOURBAR) == render(FOURBAR, element_cache=False)


# -- mbdgen compile -v ----------------------------------------------------------------
def _stages(output: str) -> list[list[str]]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stage"))
    return [line.split() for line in lines[start + 1 :]]


def test_compile_verbose_reports_every_stage(cache_dir, tmp_path):
    runner = CliRunner()
    args = ["compile", "-v", "-o", str(tmp_path / "out"), str(FOURBAR)]
    first = runner.invoke(main, args, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    rows = _stages(first.output)
    names = [r[0] for r in rows]
    assert names[0] == "load" and names[-1] == "total"
    assert {"derive", "cse", "render", "write"} <= set(names)
    derived = [r for r in rows if r[0] == "derive" and r[1].endswith(":")]
    assert len(derived) == 4 and all(r[2] == "derived" for r in derived)
    for r in rows:
        float(r[-1])  # every row ends with its seconds
    total = float(rows[-1][-1])
    assert total == pytest.approx(sum(float(r[-1]) for r in rows[:-1]), abs=5e-3)

    second = runner.invoke(main, [*args[:1], "--force", *args[1:]], catch_exceptions=False)
    rows = _stages(second.output)
    assert all(r[2] == "cached" for r in rows if r[0] == "derive" and r[1].endswith(":"))
    assert "(unchanged)" in second.output

    third = runner.invoke(main, [*args[:1], "--force", "--no-cache", *args[1:]])
    rows = _stages(third.output)
    assert all(r[2] == "derived" for r in rows if r[0] == "derive" and r[1].endswith(":"))


def test_compile_jit_times_each_entry_point():
    """--jit on the committed, up-to-date pendulum: reuses the suite's abm entry point."""
    result = CliRunner().invoke(
        main,
        ["compile", "-v", "--jit", "abm", str(MODELS / "pendulum.py")],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "is up to date" in result.output
    rows = _stages(result.output)
    assert [r[:2] for r in rows if r[0] == "jit"] == [["jit", "abm:"]]


def test_compile_jit_refuses_an_unknown_method(tmp_path):
    result = CliRunner().invoke(
        main, ["compile", "--jit", "abm,nope", "-o", str(tmp_path), str(FOURBAR)]
    )
    assert result.exit_code == 1
    assert "unknown method 'nope'" in result.output
    assert not (tmp_path / "fourbar.py").exists()  # checked before any work


#: Links along (0.6, 0, −0.8): the products of inertia are Jxz only; along (0, 0.6, −0.8)
#: (the double pendulum), Jyz only: five local parameters each, two layouts.
SPHERICAL_CHAIN = ROOT / "tests" / "models" / "spherical_chain.py"
SPATIAL_DOUBLE_PENDULUM = ROOT / "tests" / "models" / "spatial_double_pendulum.py"


def _fresh_types(monkeypatch) -> None:
    """Forget the element types built so far in this process (as a new process would)."""
    from mbdgen.model import elements

    monkeypatch.setattr(elements, "_TYPES", {})


@pytest.mark.parametrize("where", ["process", "cache"])
def test_a_module_does_not_depend_on_the_models_compiled_before(cache_dir, monkeypatch, where):
    """The double pendulum's text, alone or after the spherical chain: in one process
    (the in-memory types) or in two sharing the element cache.  Its bodies' type once
    shared the chain's key (the number of local parameters, not their names): its
    kernels then read its Jyz as Jxz, a different mass matrix."""
    _fresh_types(monkeypatch)
    reference = render(SPATIAL_DOUBLE_PENDULUM, element_cache=False)
    _fresh_types(monkeypatch)
    render(SPHERICAL_CHAIN, element_cache=where == "cache")
    if where == "cache":
        _fresh_types(monkeypatch)
    text, how = _render(SPATIAL_DOUBLE_PENDULUM, element_cache=where == "cache")
    assert text == reference
    if where == "cache":
        assert how["spatial_body_s"] == "derived"  # the chain's entry is not its type
        assert how["spatial_gravity_s"] == "cached"


def test_an_instance_gets_the_equations_of_its_own_parameters(monkeypatch):
    """Two bodies of one model with five inertia parameters each, the product Jxz on
    one and Jyz on the other, are two types: each instance's mass matrix is the one its
    own parameters give, whichever body's type was built first."""
    from mbdgen.model import elements, spatial

    a = spatial.inertia(spatial.body("b1", 2.0, (1.0, 2.0, 3.0, 0.0, 0.5, 0.0)))
    b = spatial.inertia(spatial.body("b2", 2.0, (1.0, 2.0, 3.0, 0.0, 0.0, 0.5)))
    assert [n for n, _ in a.params] == ["m", "Jxx", "Jyy", "Jzz", "Jxz"]
    assert [n for n, _ in b.params] == ["m", "Jxx", "Jyy", "Jzz", "Jyz"]
    assert a.type_key != b.type_key

    def mass(e: Element) -> sp.Matrix:
        et = elements.element_type(e)
        return et.local_mass.xreplace(dict(zip(et.p, (s for _, s in e.params), strict=True)))

    _fresh_types(monkeypatch)
    own = mass(b)
    _fresh_types(monkeypatch)
    mass(a)
    assert mass(b) == own
