"""Every example in the README and in docs/*.md runs, in the order written.

The documents follow three conventions, which this file is the executable form of:

* a ```python block whose first line is ``# file: NAME`` is a file the reader saves:
  it is written to ``NAME`` in the document's working folder;
* any other ```python block is executed, all blocks of one document in one namespace
  (later blocks use the names of earlier ones), in the working folder;
* every command of a ```sh block is run (``\\`` continues a line, ``#`` starts a
  comment) with the ``mbdgen`` of this environment and must exit 0, except the
  set-up lines (``make …``, ``source …``) that the test environment has already done,
  ``mbdgen bench`` and ``mbdgen warmup``, which run for minutes and have their own
  tests (tests/test_bench.py, tests/test_warmup.py), and a command whose comment says
  ``not run in CI`` (one that needs what CI has not, e.g. a Dask scheduler of the
  user's cluster).

Each document runs in a fresh temporary folder in which ``models/`` and ``tests/`` of
the repository are linked (and ``docs/``) and ``generated/`` holds links to the committed generated
modules: the README's paths resolve, its example models load their modules (whose
resolved paths key Numba's disk cache, so their compiled code is shared with the
other tests), and a model compiled by an example writes into the temporary folder.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP_COMMANDS = ("make", "source")
SKIP_MBDGEN = ("bench", "warmup")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
MBDGEN = str(Path(sys.executable).with_name("mbdgen"))


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced (language, body) blocks of a Markdown document."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def commands(body: str) -> list[list[str]]:
    """The commands of a ```sh block, continuation lines joined, comments dropped; a
    command whose comment says ``not run in CI`` is left out."""
    joined = body.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words and "not run in CI" not in line:
            out.append(words)
    return out


def runnable(words: list[str]) -> bool:
    if words[0] in SKIP_COMMANDS:
        return False
    return not (words[0] == "mbdgen" and len(words) > 1 and words[1] in SKIP_MBDGEN)


def test_conventions_parse_this_repository() -> None:
    """The parser sees the blocks it should: the tutorial has files, code and commands."""
    kinds = [lang for lang, _ in blocks((ROOT / "docs" / "tutorial.md").read_text())]
    assert "python" in kinds and "sh" in kinds
    block = "mbdgen a \\\n  b  # note\n\n# only a comment\nmake x\nmbdgen c  # not run in CI\n"
    assert commands(block) == [
        ["mbdgen", "a", "b"],
        ["make", "x"],
    ]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_document_examples_run(document: Path, tmp_path: Path) -> None:
    for name in ("models", "tests", "docs"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "generated").mkdir()
    for module in (ROOT / "generated").glob("*.py"):
        (tmp_path / "generated" / module.name).symlink_to(module)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    namespace: dict[str, object] = {"__name__": f"docs_{document.stem}"}
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        for index, (lang, body) in enumerate(blocks(document.read_text())):
            where = f"{document.name}, block {index + 1}"
            if lang == "python":
                first = body.splitlines()[0] if body.strip() else ""
                if first.startswith("# file: "):
                    (tmp_path / first.removeprefix("# file: ").strip()).write_text(body)
                    continue
                exec(compile(body, where, "exec"), namespace)  # noqa: S102
            elif lang == "sh":
                for words in commands(body):
                    if not runnable(words):
                        continue
                    argv = {"mbdgen": [MBDGEN], "python": [sys.executable]}.get(
                        words[0], words[:1]
                    ) + words[1:]
                    done = subprocess.run(
                        argv, cwd=tmp_path, env=env, capture_output=True, text=True
                    )
                    assert done.returncode == 0, (
                        f"{where}: `{shlex.join(words)}` exited {done.returncode}:\n"
                        f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
                    )
    finally:
        os.chdir(cwd)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
REPO_PATH = re.compile(r"`((?:models|tests|docs|mbdgen|generated)/[\w./-]+\.(?:py|md|png|toml))`")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_document_references_exist(document: Path) -> None:
    """Links and repository paths a document names exist (no references to missing files)."""
    text = document.read_text()
    missing = []
    for target in LINK.findall(text):
        if "://" in target:
            continue
        if not (document.parent / target).exists():
            missing.append(target)
    for path in REPO_PATH.findall(text):
        if Path(path).stem.isupper():  # a placeholder such as generated/NAME.py
            continue
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"{document.name} refers to missing files: {missing}"


def test_api_reference_builds(tmp_path: Path) -> None:
    """`make docs` builds the API reference with pdoc; here the public entry modules."""
    pdoc = Path(sys.executable).with_name("pdoc")
    done = subprocess.run(
        [str(pdoc), "-d", "numpy", "-o", str(tmp_path), "mbdgen", "mbdgen.model.planar"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "mbdgen" / "model" / "planar.html").read_text()
    assert "revolute" in page and "Haug 1989" in page


def test_the_readme_names_the_reserved_symbols() -> None:
    """The README's list of reserved names is the one the compiler refuses."""
    import re

    from mbdgen.model.names import RESERVED

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = text[text.index("so these are reserved:") :].split("\n\n", 1)[0]
    listed = set(re.findall(r"`(\w+)`", paragraph.split("(time is", 1)[0]))
    assert listed == set(RESERVED)
