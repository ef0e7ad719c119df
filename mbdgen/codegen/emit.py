"""Code generation: a :class:`SymbolicSystem` → the source of a generated module.

Stages: for each kernel of the ABI, its output expressions are put through one
common-subexpression elimination (so the fused ``dynamics`` kernel shares work
between M, Q, Φ, Φ_q, Φ_t and γ), printed as Python/Numba statements that index the
ABI arguments (``q[0]``, ``p[3]``), and rendered with the Jinja templates in
``mbdgen/templates``.  The output is deterministic: the same model and the same
mbdgen give byte-identical text.
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import jinja2
import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

from mbdgen import __version__, timing
from mbdgen.codegen.abi import (
    BLOCK_SHAPES,
    KERNELS,
    REACTION_COLUMNS,
    SPARSE_BLOCKS,
    abi_hash,
    entry_points_for,
)
from mbdgen.codegen.stamp import (
    BODY_HASH_PLACEHOLDER,
    TEMPLATE_DIR,
    compiler_hash,
    dependencies_literal,
    py_str,
    seal,
)
from mbdgen.errors import CompileError
from mbdgen.symbolic.derive import SymbolicSystem


class KernelPrinter(PythonCodePrinter):
    """Prints SymPy expressions as Numba-compatible Python indexing ABI arguments."""

    def __init__(self, names: dict[sp.Symbol, str]) -> None:
        super().__init__({"fully_qualified_modules": True, "strict": True})
        self._names = names

    def _print_Symbol(self, expr: sp.Symbol) -> str:
        name = self._names.get(expr)
        return name if name is not None else super()._print_Symbol(expr)

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        """x**(-k), k ≥ 2 an integer, as (1/x**k): Numba's integer power raises
        ZeroDivisionError at x = 0 whatever the error model, where 1/x**k is inf under
        NumPy's (:data:`JIT`) — the same bits elsewhere.  A raise inside a kernel that a
        shared entry point calls through its C wrapper cannot propagate: Numba prints
        it and the kernel's output is left unwritten."""
        exp = expr.exp
        if exp.is_Integer and exp < -1:  # (x**(-1) prints as 1/x already)
            return f"(1/{self._print(sp.Pow(expr.base, -exp, evaluate=False))})"
        return super()._print_Pow(expr, rational=rational)


#: Decorator of every generated kernel.  NumPy's error model makes kernels follow
#: IEEE arithmetic (1/0 is inf, 0/0 is NaN) instead of raising ZeroDivisionError,
#: which would end a run with nothing kept: the runtime's NaN/inf checks stop it at
#: the right time with the steps so far, and :mod:`mbdgen.diagnose` names the quantity.
JIT = '@njit(cache=True, error_model="numpy")'


@dataclass(frozen=True)
class Statement:
    target: str
    value: str
    op: str = "="


@dataclass(frozen=True)
class KernelCode:
    """What the kernel template needs for one kernel."""

    name: str
    args: tuple[str, ...]
    doc: str
    zero_fill: tuple[str, ...]
    temporaries: tuple[Statement, ...]
    assignments: tuple[Statement, ...]
    prologue: tuple[Statement, ...] = ()
    decorator: str = JIT
    #: an element kernel that loops over the instances itself: the name of its count
    #: argument (``for k in range(count)`` around the body), else ""
    loop: str = ""


def _symbol_names(system: SymbolicSystem) -> dict[sp.Symbol, str]:
    from mbdgen.model.core import t

    names: dict[sp.Symbol, str] = {t: "t"}
    for vec, arg in ((system.q, "q"), (system.qd, "qd"), (system.a, "a"), (system.lam, "lam")):
        for i, s in enumerate(vec):
            names[s] = f"{arg}[{i}]"
    for i, s in enumerate(system.p):
        names[s] = f"p[{i}]"
    # User states are the tail of the parameter vector: p = [parameters; X].
    for k, s in enumerate(system.x):
        names[s] = f"p[{len(system.p) + k}]"
    names.update(residual_names(system.xd, system.qdd, system.multipliers))
    return names


def residual_names(xd: sp.Matrix, qdd: sp.Matrix, lam: sp.Matrix) -> dict[sp.Symbol, str]:
    """The residual kernels' arguments for the symbols of Ẋ, q̈ and λ
    (:func:`mbdgen.symbolic.derive.residual_symbols`): ``xd[k]``, ``qdd[i]``, ``lam[i]``."""
    names: dict[sp.Symbol, str] = {}
    for vec, arg in ((xd, "xd"), (qdd, "qdd"), (lam, "lam")):
        for i, s in enumerate(vec):
            names[s] = f"{arg}[{i}]"
    return names


#: An output of a kernel: (argument, matrix, target(i, j) -> text, operator).
OutputSpec = tuple[str, sp.Matrix, "Callable[[int, int], str]", str]


def _vector_target(arg: str) -> Callable[[int, int], str]:
    return lambda i, j: f"{arg}[{i}]"


def _matrix_target(arg: str) -> Callable[[int, int], str]:
    return lambda i, j: f"{arg}[{i}, {j}]"


def _kernel_code(
    name: str,
    args: tuple[str, ...],
    doc: str,
    outputs: list[tuple[str, sp.Matrix, bool]],
    printer: KernelPrinter,
) -> KernelCode:
    """CSE over all outputs of one kernel, then print (the flat path).

    ``outputs`` holds (argument name, matrix, is_vector).  Entries that are
    structurally zero are written as ``0.0`` one by one in a small output
    (:data:`EXPLICIT_ZEROS_MAX`), else by one ``out[:] = 0.0`` fill.
    """
    specs = [
        (arg, mat, _vector_target(arg) if is_vector else _matrix_target(arg), "=")
        for arg, mat, is_vector in outputs
    ]
    return _generic_kernel(name, args, doc, specs, printer, zero_all=False)


@dataclass(frozen=True)
class _Reduced:
    """One kernel's expressions after CSE, printed: the temporaries, each output's
    value, and the model symbols they read."""

    temporaries: tuple[Statement, ...]
    values: tuple[str, ...]
    used: frozenset[sp.Symbol]


#: The last few kernels' :class:`_Reduced` by printer and expressions.  A dense block
#: and its ``_values`` kernel (and ``dynamics``, ``dynamics_values``) list the same
#: non-zero entries in the same order, so the second kernel of each pair reuses the
#: first one's CSE and printing: the text is the same, made once (the flyball
#: governor's cse stage: 24.7 → 9 s).
_MEMO: collections.OrderedDict[tuple, _Reduced] = collections.OrderedDict()
_MEMO_SIZE = 16


def _reduce(name: str, exprs: tuple[sp.Expr, ...], printer: KernelPrinter) -> _Reduced:
    """SymPy's CSE of ``exprs`` in canonical order (temporaries ``_c0``, ``_c1``, ...),
    printed by ``printer``; deterministic, so memoized (:data:`_MEMO`)."""
    key = (printer, exprs)
    hit = _MEMO.get(key)
    if hit is not None:
        _MEMO.move_to_end(key)
        return hit
    replacements, reduced = sp.cse(
        list(exprs), symbols=sp.numbered_symbols("_c"), order="canonical"
    )
    try:
        temporaries = tuple(Statement(str(s), printer.doprint(e)) for s, e in replacements)
        values = tuple(printer.doprint(e) for e in reduced)
    except Exception as exc:  # PrintMethodNotImplementedError and friends
        raise CompileError(f"kernel {name!r}: cannot generate code: {exc}") from None
    # The symbols of the reduced forms: the same set as the expressions' own, found
    # without walking their trees (which share subtrees that a walk visits each time).
    made = {s for s, _ in replacements}
    used = set().union(
        *(e.free_symbols for _, e in replacements), *(e.free_symbols for e in reduced)
    )
    result = _Reduced(temporaries, values, frozenset(used - made))
    _MEMO[key] = result
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return result


#: Outputs of at most this many entries get their structural zeros as ``out[i, j] =
#: 0.0`` statements, each entry written once, instead of an ``out[:] = 0.0`` fill, which
#: Numba lowers to a ``memset`` call (run-time shape) before the entries are written again:
#: 3 % of the slider-crank's HHT step (design notes, stop 40).  Larger outputs keep
#: the fill, one vectorised pass.
EXPLICIT_ZEROS_MAX = 64


def _generic_kernel(
    name: str,
    args: tuple[str, ...],
    doc: str,
    outputs: list[OutputSpec],
    printer: KernelPrinter,
    *,
    zero_all: bool,
    prologue: Callable[[set[sp.Symbol]], tuple[Statement, ...]] | None = None,
) -> KernelCode:
    """CSE over all outputs, then print; ``zero_all`` fills no output (callers do).

    Its time is recorded as the ``cse`` stage (:mod:`mbdgen.timing`)."""
    start = time.perf_counter()
    # (target, op, index into exprs, or None for an explicit 0.0)
    targets: list[tuple[str, str, int | None]] = []
    exprs: list[sp.Expr] = []
    zero_fill: list[str] = []
    written = collections.Counter(arg for arg, _, _, _ in outputs)
    for arg, mat, target, op in outputs:
        size = mat.rows * mat.cols
        explicit = not zero_all and op == "=" and written[arg] == 1 and size <= EXPLICIT_ZEROS_MAX
        nonzero = 0
        for i in range(mat.rows):
            for j in range(mat.cols):
                e = mat[i, j]
                if e != 0:
                    nonzero += 1
                    targets.append((target(i, j), op, len(exprs)))
                    exprs.append(e)
                elif explicit:
                    targets.append((target(i, j), op, None))
        if not zero_all and not explicit and nonzero < size:
            zero_fill.append(arg)
    reduced = _reduce(name, tuple(exprs), printer)
    assignments = tuple(
        Statement(tgt, "0.0" if k is None else reduced.values[k], op) for tgt, op, k in targets
    )
    pro = prologue(set(reduced.used)) if prologue is not None else ()
    timing.accumulate("cse", time.perf_counter() - start)
    return KernelCode(name, args, doc, tuple(zero_fill), reduced.temporaries, assignments, pro)


@functools.cache  # one per process: building it and parsing a template takes ~10 ms
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["py"] = py_str  # a Python string literal (never ``tojson``: JSON is not Python)
    return env


def render_template(name: str, context: dict) -> str:
    """Render template ``name`` and seal the text with its body hash (see
    :func:`mbdgen.codegen.stamp.seal`)."""
    return seal(_environment().get_template(name).render(**context))


def render_kernel(code: KernelCode) -> str:
    """The text of one kernel as a module prints it (``kernel.py.j2``'s ``kernel``)."""
    return str(_environment().get_template("kernel.py.j2").module.kernel(code))  # type: ignore[attr-defined]


_BASE_KEYS = frozenset(
    {
        "version",
        "source_file",
        "source_hash",
        "dependencies",
        "compiler_hash",
        "body_hash",
        "abi_hash",
        "model",
        "description",
        "n",
        "m",
        "n_euler",
        "reaction_columns",
        "has_potential",
        "n_parameters",
        "n_states",
        "state_names",
        "implicit_states",
        "linear_algebra",
    }
)
#: Context keys ``module.py.j2`` declares; checked before rendering (STYLE lesson 4).
TEMPLATE_KEYS = _BASE_KEYS | {
    "coordinates",
    "velocities",
    "parameters",
    "p_default",
    "q0",
    "qd0",
    "x0",
    "constraint_names",
    "kernels",
    "sparse",
    "entry_points",
}
#: Context keys ``elements.py.j2`` declares.
ELEMENT_TEMPLATE_KEYS = _BASE_KEYS | {
    "types",
    "data_lines",
    "data_size",
    "n_bodies",
    "n_reactions",
    "element_kernels",
    "state_kernels",
    "kernels",
    "sparse_names",
    "entry_points",
}


def _base_context(
    model_name: str,
    description: str,
    n: int,
    m: int,
    source_file: str,
    source_hash: str,
    dependencies: Mapping[str, str] | None = None,
    n_euler: int = 0,
    has_potential: bool = True,
    n_parameters: int = 0,
    state_names: tuple[str, ...] = (),
    linear_algebra: str = "dense",
    implicit_states: bool = False,
) -> dict:
    return {
        "version": __version__,
        "source_file": source_file,
        "source_hash": source_hash,
        "dependencies": dependencies_literal(dependencies or {}),
        "compiler_hash": compiler_hash(),
        "body_hash": BODY_HASH_PLACEHOLDER,
        "abi_hash": abi_hash(),
        "model": model_name,
        "description": description,
        "n": n,
        "m": m,
        "n_euler": n_euler,
        "reaction_columns": REACTION_COLUMNS,
        "has_potential": has_potential,
        "n_parameters": n_parameters,
        "n_states": len(state_names),
        "state_names": list(state_names),
        "implicit_states": bool(implicit_states),
        "linear_algebra": linear_algebra,
    }


def _values(system: SymbolicSystem, block: str) -> sp.Matrix:
    """The entries of ``block`` on its static pattern, as a column."""
    mat = system.blocks[block]
    pattern = system.patterns[block]
    return sp.Matrix([[mat[i, j] for i, j in pattern]]).T if pattern else sp.zeros(0, 1)


def render_module(
    system: SymbolicSystem,
    source_file: str,
    source_hash: str,
    dependencies: Mapping[str, str] | None = None,
) -> str:
    """Source text of the generated module for ``system`` (the flat path).

    ``dependencies`` maps each input the model read besides its own file (path
    relative to the model's folder) to its SHA-256; it is stamped into the module.
    """
    model = system.model
    printer = KernelPrinter(_symbol_names(system))
    kernels: list[KernelCode] = []
    for spec in KERNELS:
        outputs = [
            (o.arg, _values(system, o.block), True)
            if o.sparse
            else (o.arg, system.blocks[o.block], BLOCK_SHAPES[o.block][1] is None)
            for o in spec.outputs
        ]
        kernels.append(
            _kernel_code(
                spec.name,
                spec.inputs + tuple(o.arg for o in spec.outputs),
                spec.doc,
                outputs,
                printer,
            )
        )
    sparse = []
    for block in SPARSE_BLOCKS:
        pattern = system.patterns[block]
        values = _values(system, block)
        spec = next(k for k in KERNELS if k.name == block)
        kernels.append(
            _kernel_code(
                f"{block}_values",
                spec.inputs + ("out",),
                f"Values of {block} on its static pattern {block.upper()}_ROWS/COLS.",
                [("out", values, True)],
                printer,
            )
        )
        sparse.append(
            {
                "name": block.upper(),
                "rows": [i for i, _ in pattern],
                "cols": [j for _, j in pattern],
            }
        )
    context = _base_context(
        model.name,
        model.description,
        model.n,
        model.m,
        source_file,
        source_hash,
        dependencies,
        has_potential=model.has_potential,
        n_parameters=len(model.parameters),
        state_names=tuple(s.name for s in model.states),  # type: ignore[attr-defined]
        implicit_states=system.implicit,
    )
    context.update(
        {
            "coordinates": [c.name for c in model.coordinates],
            "velocities": [v.name for v in model.velocities],  # type: ignore[union-attr]
            "parameters": [s.name for s in model.parameter_symbols],
            "p_default": [repr(float(v)) for v in model.parameters.values()],
            "q0": [repr(float(v)) for v in model.q0],
            "qd0": [repr(float(v)) for v in model.qd0],  # type: ignore[union-attr]
            "x0": [repr(float(s.x0)) for s in model.states],  # type: ignore[attr-defined]
            "constraint_names": list(model.constraint_names),  # type: ignore[arg-type]
            "kernels": kernels,
            "sparse": sparse,
            "entry_points": entry_points_for(
                model.n,
                model.m,
                len(model.states),  # type: ignore[attr-defined]
            ),
        }
    )
    assert set(context) == TEMPLATE_KEYS, set(context) ^ TEMPLATE_KEYS
    return render_template("module.py.j2", context)
