"""The package's import graph: no two modules in a circle.

A circle of imports, even one closed by an import inside a function, means two
modules that cannot be read, tested or replaced alone, and an import order that works
by accident.  The graph is read from the sources (``ast``, no import): an edge for each
``import mbdgen.x`` or ``from mbdgen.x import y`` (to the submodule ``mbdgen.x.y``
where ``y`` is one, not to the package), at module level or in a function; imports
under ``if TYPE_CHECKING:`` are annotations only and make no edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mbdgen"

#: Circles that stay, each closed by a deferred import, with the reason it is deferred.
KNOWN_CIRCLES = {
    # Result.plot() is a convenience for mbdgen.plot, which draws Results; deferred so
    # that `import mbdgen` does not load matplotlib.
    frozenset({"mbdgen.plot", "mbdgen.results"}),
    # the benchmark's Exudyn column (optional dependency) takes the bench's sample plan
    frozenset({"mbdgen.bench", "mbdgen.bench_exudyn"}),
    # the kernel helper's background compiles (Python process management) and the
    # shared entry points (Numba) each start the other only when a run asks for it
    frozenset({"mbdgen.runtime.shared", "mbdgen.specialize"}),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports (see the module docstring)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    targets.append(sub if sub in modules else node.module)
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _is_package_init_edge(a: str, b: str) -> bool:
    """A package's ``__init__`` re-exporting its own submodule, which imports a sibling
    through the package: not a circle between two modules' code."""
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_no_import_circles_but_the_known_ones():
    graph = import_graph()
    pruned = {v: {w for w in ws if not _is_package_init_edge(v, w)} for v, ws in graph.items()}
    circles = [frozenset(c) for c in _circles(pruned)]
    unknown = [sorted(c) for c in circles if c not in KNOWN_CIRCLES]
    assert not unknown, f"import circles: {unknown}"
    # a known circle that is gone should leave the list too
    assert set(circles) == KNOWN_CIRCLES


def test_the_graph_sees_deferred_imports():
    """The reader finds an import inside a function and skips one under TYPE_CHECKING."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import mbdgen.results\n"
        "def f():\n    from mbdgen.model import planar\n"
    )
    skip = _type_checking_nodes(tree)
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [id(n) in skip for n in imports] == [False, True, False]
    graph = import_graph()
    assert "mbdgen.model.planar" in graph["mbdgen.model.mechanism"]
    assert "mbdgen.model.mechanism" not in graph["mbdgen.model.elements"]  # TYPE_CHECKING
