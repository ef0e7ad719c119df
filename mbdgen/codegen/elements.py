"""Code generation for the element path: element kernels + loops over index tables.

For every element type and every ABI kernel it contributes to, one *element kernel*
is printed over the type's local symbols.  It loads its inputs through the index
tables (``q[IQ[k, j]]``, ``p[IP[k, j]]``, ``lam[IR[k] + i]``) and adds its entries
into the global output (``out[IQ[k, i], IQ[k, j]] += ...``; sparse values through
the position table ``POS[k, e]``).  The ABI kernel itself zero-fills its outputs and
loops over the instances of each type.  The code therefore grows with the number
of element types; the tables (data) with the number of instances, and they are
stored compressed (:mod:`mbdgen.runtime.tables`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import sympy as sp

from mbdgen.codegen.abi import (
    BLOCK_SHAPES,
    FLAT_STATE_KERNELS,
    KERNELS,
    SPARSE_BLOCKS,
    STATE_BLOCKS,
    Kernel,
    entry_points_for,
    linear_algebra,
)
from mbdgen.codegen.element_cache import CachedType, ElementCache
from mbdgen.codegen.emit import (
    ELEMENT_TEMPLATE_KEYS,
    JIT,
    KernelCode,
    KernelPrinter,
    Statement,
    _base_context,
    _generic_kernel,
    _kernel_code,
    render_kernel,
    render_template,
    residual_names,
)
from mbdgen.codegen.geometry import geometry_tables
from mbdgen.model.core import t
from mbdgen.runtime import library
from mbdgen.runtime.tables import encode, pack_names
from mbdgen.symbolic.elements import ElementSystem, TypeSystem


@dataclass(frozen=True)
class Call:
    count: str
    callee: str
    args: tuple[str, ...]
    #: the callee loops over the instances itself (a library kernel): one call, with the
    #: count where a per-instance call has ``k``
    looped: bool = False


@dataclass(frozen=True)
class LoopKernel:
    name: str
    args: tuple[str, ...]
    doc: str
    zero_fill: tuple[str, ...]
    calls: tuple[Call, ...]
    #: the kernels this one calls in turn instead of looping itself (:func:`split_kernel`)
    parts: tuple[str, ...] = ()


#: A loop kernel whose element code is longer than this (statements of the element
#: kernels it inlines) is split in two (:func:`split_kernel`).  Numba compiles ~1.5
#: statements per ms, flat in the statement's kind: the flyball governor's 1547-
#: statement ``dynamics_values`` took 10-12 s, most of a new model's first explicit step.
SPLIT_STATEMENTS = 500
#: The kernels split: the evaluation kernels (:func:`mbdgen.steppers.evaluation_kernel`),
#: which a run compiles first and alone.  The others are compiled two at a time already
#: (the run and the kernel helper take them from either end of one list); split, they
#: only add a third compile each: Bricard's and Welch's compile and first HHT step took
#: 7.1-9.0 s with every long kernel split, 6.2-6.6 s with none.
SPLIT_KERNELS = ("dynamics", "dynamics_values")


def split_kernel(kernel: LoopKernel, sizes: Mapping[str, int]) -> list[LoopKernel]:
    """``kernel`` as [itself], or, for an evaluation kernel (:data:`SPLIT_KERNELS`)
    whose element code exceeds :data:`SPLIT_STATEMENTS`, as two parts and a kernel that
    calls them: the element loops cut in one place, in order (outputs accumulate in the
    same order, so the sums and their bits are the module's own), where the longer half
    is shortest.

    Each part is its own compiled function (not inlined): the user's process and the
    kernel helper (:func:`mbdgen.specialize.start_kernels`) compile one each.  Two calls
    with ten arrays each: ~0.1-0.2 µs per evaluation, lost in a step (measured in the
    design notes).
    """
    weights = [sizes[c.callee] for c in kernel.calls]
    total = sum(weights)
    if kernel.name not in SPLIT_KERNELS or total <= SPLIT_STATEMENTS or len(weights) < 2:
        return [kernel]
    cut = min(range(1, len(weights)), key=lambda i: max(sum(weights[:i]), sum(weights[i:])))
    names = (f"{kernel.name}_part0", f"{kernel.name}_part1")
    parts = [
        LoopKernel(name, kernel.args, f"Part {i + 1} of 2 of ``{kernel.name}``.", (), calls)
        for i, (name, calls) in enumerate(
            zip(names, (kernel.calls[:cut], kernel.calls[cut:]), strict=True)
        )
    ]
    return [*parts, dataclasses.replace(kernel, calls=(), parts=names)]


def _target(kind: str) -> Callable[[str], Callable[[int, int], str]]:
    """Target text of local entry (i, j) for an output of block shape ``kind``."""
    rows, cols = BLOCK_SHAPES[kind]
    if cols == "nd":  # force_x: columns are user states, through the IX table
        return lambda arg: lambda i, j: f"{arg}[_i{i}, _x{j}]"
    if cols is None:
        if rows == "m":
            return lambda arg: lambda i, j: f"{arg}[_r + {i}]"
        if rows == "n":
            return lambda arg: lambda i, j: f"{arg}[_i{i}]"
        return lambda arg: lambda i, j: f"{arg}[{i}]"
    if rows == "m":
        return lambda arg: lambda i, j: f"{arg}[_r + {i}, _i{j}]"
    return lambda arg: lambda i, j: f"{arg}[_i{i}, _i{j}]"


def _prologue(
    ts: TypeSystem, states: bool = False
) -> Callable[[set[sp.Symbol]], tuple[Statement, ...]]:
    """Loads of the instance's indices and inputs; ``states``: also the state indices
    ``_x<j> = IX[k, j]`` of the ``force_x`` kernels."""
    nq = len(ts.etype.q)
    sources: dict[sp.Symbol, str] = {}
    for j in range(nq):
        sources[ts.q[j]] = f"q[_i{j}]"
        sources[ts.qd[j]] = f"qd[_i{j}]"
        sources[ts.a[j]] = f"a[_i{j}]"
    for i in range(ts.lam.rows):
        sources[ts.lam[i]] = f"lam[_r + {i}]"
    for j, s in enumerate(ts.p):
        sources[s] = f"p[IP[k, {j}]]"
    order = {s: i for i, s in enumerate(sources)}

    def build(used: set[sp.Symbol]) -> tuple[Statement, ...]:
        out = [Statement(f"_i{j}", f"IQ[k, {j}]") for j in range(nq)]
        if ts.m:
            out.append(Statement("_r", "IR[k]"))
        if states:
            out += [Statement(f"_x{j}", f"IX[k, {j}]") for j in range(ts.ix.shape[1])]
        for s in sorted((s for s in used if s in sources), key=order.__getitem__):
            out.append(Statement(str(s), sources[s]))
        return tuple(out)

    return build


def _nonzero(mat: sp.Matrix) -> bool:
    return any(e != 0 for e in mat)


def _position_tables(spec: Kernel) -> tuple[str, ...]:
    """Position-table arguments of an element kernel with sparse outputs
    (``dynamics_values``: MASS_POS, PHI_Q_POS)."""
    return tuple(f"{o.block.upper()}_POS" for o in spec.outputs if o.sparse)


def _sparse_output(ts: TypeSystem, arg: str, block: str) -> tuple:
    """An output written as values on the type's local pattern of ``block``, through
    its position table (an empty column when the type has no entries there)."""
    pattern = ts.patterns[block]
    mat = ts.blocks[block]
    values = sp.Matrix([[mat[i, j] for i, j in pattern]]).T if pattern else sp.zeros(0, 1)
    table = f"{block.upper()}_POS"
    return (arg, values, lambda i, j: f"{arg}[{table}[k, {i}]]", "+=")


def _element_kernels(ts: TypeSystem, printer: KernelPrinter) -> tuple[list[KernelCode], dict]:
    """Element kernels of one derived type, named without the model's ``_e<index>``
    prefix (``_phi`` ...: what the element cache stores); returns them and
    {ABI kernel name: element kernel name}."""
    assert ts.blocks is not None and ts.reactions is not None
    tables = ("IQ", "IP", "IR")
    codes: list[KernelCode] = []
    used: dict[str, str] = {}
    doc = f"Element type {ts.name}: {{}} of one instance k ({ts.etype.role})."
    for spec in KERNELS:
        if spec.name in FLAT_STATE_KERNELS:
            continue
        mats = [ts.blocks[o.block] for o in spec.outputs]
        if not any(_nonzero(mt) for mt in mats):
            continue
        outputs = [
            _sparse_output(ts, o.arg, o.block)
            if o.sparse
            else (o.arg, ts.blocks[o.block], _target(o.block)(o.arg), "+=")
            for o in spec.outputs
        ]
        name = f"_{spec.name}"
        states = spec.name == "force_x"
        codes.append(
            _generic_kernel(
                name,
                spec.inputs
                + tables
                + (("IX",) if states else ())
                + _position_tables(spec)
                + ("k",)
                + tuple(o.arg for o in spec.outputs),
                doc.format(spec.name),
                outputs,
                printer,
                zero_all=True,
                prologue=_prologue(ts, states),
            )
        )
        used[spec.name] = name
    for block in SPARSE_BLOCKS:
        if block in STATE_BLOCKS:
            continue
        pattern = ts.patterns[block]
        if not pattern:
            continue
        mat = ts.blocks[block]
        values = sp.Matrix([[mat[i, j] for i, j in pattern]]).T
        spec = next(k for k in KERNELS if k.name == block)
        name = f"_{block}_values"
        codes.append(
            _generic_kernel(
                name,
                spec.inputs
                + tables
                + (("IX",) if block == "force_x" else ())
                + ("POS", "k", "out"),
                doc.format(f"{block} values"),
                [("out", values, lambda i, j: f"out[POS[k, {i}]]", "+=")],
                printer,
                zero_all=True,
                prologue=_prologue(ts),
            )
        )
        used[f"{block}_values"] = name
    if ts.reactions.rows:
        name = "_reactions"

        def target(i: int, j: int) -> str:
            return f"out[_rr + {i}, {j}]"

        kc = _generic_kernel(
            name,
            ("t", "q", "lam", "p") + tables + ("RR", "k", "out"),
            doc.format("joint reactions"),
            [("out", ts.reactions, target, "=")],
            printer,
            zero_all=True,
            prologue=_prologue(ts),
        )
        kc = KernelCode(
            kc.name,
            kc.args,
            kc.doc,
            kc.zero_fill,
            kc.temporaries,
            kc.assignments,
            kc.prologue + (Statement("_rr", "RR[k]"),),
        )
        codes.append(kc)
        used["reactions"] = name
    # Inlined into the loops of the ABI kernels: one compilation per ABI kernel rather
    # than one per element kernel (measured: cold JIT of every kernel of the test zoo
    # 82 s → 64 s, its ``dynamics`` 11 s → 7 s); the long ones are compiled in the
    # kernel library instead (:func:`library_decorated`, once the model's names are set).
    codes = [dataclasses.replace(c, decorator=INLINE) for c in codes]
    return codes, used


def _type_kernels(
    ts: TypeSystem, printer: KernelPrinter, cache: ElementCache | None
) -> tuple[list[KernelCode], dict]:
    """The element kernels of ``ts`` with this model's prefix ``_e<index>``: printed
    from the cache entry, or printed now (and stored when ``cache`` is given)."""
    entry: CachedType | None = ts.cached
    if entry is None:
        codes, used = _element_kernels(ts, printer)
        entry = CachedType(
            name=ts.name,
            m=ts.m,
            n_reactions=ts.n_reactions,
            patterns=dict(ts.patterns),
            kernels=tuple(codes),
            used=used,
        )
        if cache is not None and ts.identity is not None:
            cache.store(ts.identity, entry)
    prefix = f"_e{ts.index}"
    codes = [library_decorated(dataclasses.replace(c, name=prefix + c.name)) for c in entry.kernels]
    return codes, {k: prefix + v for k, v in entry.used.items()}


INLINE = '@njit(cache=True, inline="always", error_model="numpy")'
#: An element kernel of at least this many statements is compiled once per installation
#: in mbdgen's kernel library (:mod:`mbdgen.runtime.library`), looping over its
#: instances itself and called by symbol, not inlined into the model's loop kernels.
#: Planar right sides stay inlined (the longest planar per-evaluation kernel, the
#: revolute joint's ``dynamics``, has 45 statements; the planar TSDA's Jacobian
#: ``force_q``, 70, goes to the library); a spatial model's loop kernels become calls
#: (the flyball governor: 64 of its 99 element kernels).  Measured at 50 against 100
#: (design notes): the flyball's first Newmark-GCP step 11.7 → 5.7 s from a new model
#: file, per-step cost of the spatial examples within noise.
LIBRARY_STATEMENTS = 50


def _statements(code: KernelCode) -> int:
    return len(code.zero_fill) + len(code.prologue) + len(code.temporaries) + len(code.assignments)


def library_decorated(code: KernelCode) -> KernelCode:
    """``code`` with the decorator of a library kernel (:data:`LIBRARY_STATEMENTS` or
    more statements: ``@rt.library_kernel("<digest of its library module>")``), looping
    over the instances itself (its argument ``k`` becomes the count), else inlined into
    the loop kernels (:data:`INLINE`)."""
    if _statements(code) < LIBRARY_STATEMENTS:
        return dataclasses.replace(code, decorator=INLINE)
    looped = dataclasses.replace(
        code,
        args=tuple("count" if a == "k" else a for a in code.args),
        doc=code.doc.replace("of one instance k", "of instances k < count"),
        loop="count",
    )
    text = render_kernel(dataclasses.replace(looped, decorator=INLINE))
    name = library.digest(library.library_text(text.splitlines()))
    return dataclasses.replace(looped, decorator=f'@rt.library_kernel("{name}")')


def _data(esys: ElementSystem) -> dict[str, np.ndarray]:
    mech = esys.mechanism
    data: dict[str, np.ndarray] = {
        "COORDINATE_NAMES": pack_names([c.name for c in mech.coordinates]),
        "VELOCITY_NAMES": pack_names([c.name for c in mech.velocities]),
        "PARAMETER_NAMES": pack_names([s.name for s in mech.parameter_symbols]),
        "CONSTRAINT_NAMES": pack_names(list(mech.constraint_names)),
        "REACTION_NAMES": pack_names(list(esys.reaction_names)),
        "BODY_NAMES": pack_names([b.name for b in mech.bodies]),
        "BODY_KINDS": pack_names([f"{b.kind}_point" if b.point else b.kind for b in mech.bodies]),
        "ELEMENT_NAMES": pack_names([e.name for e in mech.elements]),
        "P_DEFAULT": np.array([float(v) for v in mech.parameters.values()], dtype=np.float64),
        "Q0": np.array(mech.q0, dtype=np.float64),
        "QD0": np.array(mech.qd0, dtype=np.float64),
        "X0": np.array([s.x0 for s in mech.states], dtype=np.float64),
    }
    pindex = {s: i for i, s in enumerate(mech.parameter_symbols)}
    data["BODY_OFFSETS"] = np.array([mech.body_offset[b] for b in mech.bodies], dtype=np.int64)
    data["BODY_SIZES"] = np.array([b.size for b in mech.bodies], dtype=np.int64)
    keys = ("m", "J", "Jxx", "Jyy", "Jzz", "Jxy", "Jxz", "Jyz")
    data["BODY_INERTIA_INDEX"] = np.array(
        [[pindex[b.inertia[k]] if k in b.inertia else -1 for k in keys] for b in mech.bodies],
        dtype=np.int64,
    ).reshape(len(mech.bodies), len(keys))
    type_of = {}
    rows = {}
    for ts in esys.types:
        for e in ts.instances:
            type_of[e] = ts.index
    for e, r, k in mech.element_rows():
        rows[e] = (r, k)
    data["ELEMENT_TYPES"] = np.array([type_of[e] for e in mech.elements], dtype=np.int64)
    data["ELEMENT_ROWS"] = np.array([rows[e] for e in mech.elements], dtype=np.int64).reshape(
        len(mech.elements), 2
    )
    for ts in esys.types:
        pre = f"E{ts.index}"
        data[f"{pre}_IQ"] = ts.iq
        data[f"{pre}_IP"] = ts.ip
        data[f"{pre}_IR"] = ts.ir
        data[f"{pre}_RR"] = ts.rr
        if ts.ix.shape[1]:
            data[f"{pre}_IX"] = ts.ix
        for block, pos in ts.pos.items():
            data[f"{pre}_{block.upper()}_POS"] = pos
    for block in SPARSE_BLOCKS:
        pattern = esys.patterns[block]
        data[f"{block.upper()}_ROWS"] = np.array([i for i, _ in pattern], dtype=np.int64)
        data[f"{block.upper()}_COLS"] = np.array([j for _, j in pattern], dtype=np.int64)
    data.update(geometry_tables(mech))
    return data


def _state_kernels(esys: ElementSystem) -> list[KernelCode]:
    """The states' rate and residual kernels and their ``*_values``, printed flat over
    the global symbols (whole-model user expressions); X_k is read from
    p[N_PARAMETERS + k], Ẋ, q̈, λ from the residual kernels' ``xd``, ``qdd``, ``lam``."""
    mech = esys.mechanism
    names: dict[sp.Symbol, str] = {t: "t"}
    for i, (c, v) in enumerate(zip(mech.coordinates, mech.velocities, strict=True)):
        names[c], names[v] = f"q[{i}]", f"qd[{i}]"
    n_params = len(mech.parameter_symbols)
    for i, s in enumerate(mech.parameter_symbols):
        names[s] = f"p[{i}]"
    for k, s in enumerate(esys.x):
        names[s] = f"p[{n_params + k}]"
    names.update(residual_names(esys.xd, esys.qdd, esys.multipliers))
    printer = KernelPrinter(names)
    codes: list[KernelCode] = []
    for block in STATE_BLOCKS:
        spec = next(k for k in KERNELS if k.name == block)
        mat = esys.state_blocks[block]
        codes.append(
            _kernel_code(
                block,
                spec.inputs + ("out",),
                spec.doc,
                [("out", mat, BLOCK_SHAPES[block][1] is None)],
                printer,
            )
        )
    for block in STATE_BLOCKS:
        if BLOCK_SHAPES[block][1] is None:
            continue
        spec = next(k for k in KERNELS if k.name == block)
        mat = esys.state_blocks[block]
        pattern = esys.patterns[block]
        values = sp.Matrix([[mat[i, j] for i, j in pattern]]).T if pattern else sp.zeros(0, 1)
        codes.append(
            _kernel_code(
                f"{block}_values",
                spec.inputs + ("out",),
                f"Values of {block} on its static pattern {block.upper()}_ROWS/COLS.",
                [("out", values, True)],
                printer,
            )
        )
    for spec in KERNELS:
        if spec.name not in FLAT_STATE_KERNELS or spec.name in STATE_BLOCKS:
            continue
        outputs = []
        for o in spec.outputs:
            mat = esys.state_blocks[o.block]
            if o.sparse:
                pattern = esys.patterns[o.block]
                values = (
                    sp.Matrix([[mat[i, j] for i, j in pattern]]).T if pattern else sp.zeros(0, 1)
                )
                outputs.append((o.arg, values, True))
            else:
                outputs.append((o.arg, mat, BLOCK_SHAPES[o.block][1] is None))
        codes.append(
            _kernel_code(
                spec.name,
                spec.inputs + tuple(o.arg for o in spec.outputs),
                spec.doc,
                outputs,
                printer,
            )
        )
    assert all(c.decorator == JIT for c in codes)
    return codes


def render_element_module(
    esys: ElementSystem,
    source_file: str,
    source_hash: str,
    dependencies: Mapping[str, str] | None = None,
    cache: ElementCache | None = None,
) -> str:
    """Source text of the element-path module of ``esys`` (same ABI as the flat path);
    ``dependencies`` as in :func:`mbdgen.codegen.emit.render_module`.  The kernels of
    types derived here are stored in ``cache`` (when given) for the next model."""
    mech = esys.mechanism
    printer = KernelPrinter({t: "t"})
    element_kernels: list[KernelCode] = []
    per_type: list[tuple[TypeSystem, dict[str, str]]] = []
    for ts in esys.types:
        codes, used = _type_kernels(ts, printer, cache)
        element_kernels += codes
        per_type.append((ts, used))
    looped = {c.name for c in element_kernels if c.loop}

    def calls(kernel: str, inputs: tuple[str, ...], outs: tuple[str, ...]) -> tuple[Call, ...]:
        out = []
        for ts, used in per_type:
            if kernel not in used:
                continue
            pre = f"E{ts.index}"
            tables = (f"{pre}_IQ", f"{pre}_IP", f"{pre}_IR")
            if kernel in ("force_x", "force_x_values"):
                tables += (f"{pre}_IX",)
            spec = next((k for k in KERNELS if k.name == kernel), None)
            if spec is not None and _position_tables(spec):
                tables += tuple(
                    f"{pre}_{t}" if t[:-4].lower() in ts.pos else "_NO_POSITIONS"
                    for t in _position_tables(spec)
                )
            elif kernel.endswith("_values"):
                block = kernel[: -len("_values")]
                tables += (f"{pre}_{block.upper()}_POS",)
            if kernel == "reactions":
                tables += (f"{pre}_RR",)
            callee, count = used[kernel], pre + "_COUNT"
            if callee in looped:
                out.append(Call(count, callee, (*inputs, *tables, count, *outs), True))
            else:
                out.append(Call(count, callee, (*inputs, *tables, "k", *outs)))
        return tuple(out)

    loops: list[LoopKernel] = []
    for spec in KERNELS:
        if spec.name in FLAT_STATE_KERNELS:
            continue
        outs = tuple(o.arg for o in spec.outputs)
        loops.append(
            LoopKernel(
                spec.name, spec.inputs + outs, spec.doc, outs, calls(spec.name, spec.inputs, outs)
            )
        )
    for block in SPARSE_BLOCKS:
        if block in STATE_BLOCKS:
            continue
        spec = next(k for k in KERNELS if k.name == block)
        loops.append(
            LoopKernel(
                f"{block}_values",
                spec.inputs + ("out",),
                f"Values of {block} on its static pattern {block.upper()}_ROWS/COLS.",
                ("out",),
                calls(f"{block}_values", spec.inputs, ("out",)),
            )
        )
    loops.append(
        LoopKernel(
            "reactions",
            ("t", "q", "lam", "p", "out"),
            "Joint reactions (N_REACTIONS × 12, columns REACTION_COLUMNS): force and torque "
            "on each body of each joint at the joint point, global and body frame "
            "(Haug 1989, Eq. 6.6.2: the generalized reaction is −Φ_qᵀλ).",
            ("out",),
            calls("reactions", ("t", "q", "lam", "p"), ("out",)),
        )
    )
    sizes = {
        c.name: len(c.prologue) + len(c.temporaries) + len(c.assignments) for c in element_kernels
    }
    kernels = [part for loop in loops for part in split_kernel(loop, sizes)]
    data = _data(esys)
    lines = encode(data)
    state_kernels = _state_kernels(esys)
    types = [
        {
            "index": ts.index,
            "name": ts.name,
            "role": ts.etype.role,
            "count": len(ts.instances),
            "nq": len(ts.etype.q),
            "np": len(ts.p),
            "m": ts.m,
            "tables": [k for k in sorted(data) if k.startswith(f"E{ts.index}_")],
        }
        for ts in esys.types
    ]
    n_euler = sum(1 for b in mech.bodies if b.kind == "spatial" and not b.point)
    linalg = linear_algebra(mech.n, mech.m, mechanism=True)
    context = _base_context(
        mech.name,
        mech.description,
        mech.n,
        mech.m,
        source_file,
        source_hash,
        dependencies,
        n_euler,
        n_parameters=len(mech.parameters),
        state_names=tuple(s.name for s in mech.states),
        linear_algebra=linalg,
        implicit_states=esys.implicit,
    )
    context.update(
        {
            "types": types,
            "data_lines": lines,
            "data_size": sum(len(x) for x in lines),
            "n_bodies": len(mech.bodies),
            "n_reactions": len(esys.reaction_names),
            "element_kernels": element_kernels,
            "state_kernels": state_kernels,
            "kernels": kernels,
            "sparse_names": [b.upper() for b in SPARSE_BLOCKS],
            "entry_points": entry_points_for(mech.n, mech.m, len(mech.states), linalg),
        }
    )
    assert set(context) == ELEMENT_TEMPLATE_KEYS, set(context) ^ ELEMENT_TEMPLATE_KEYS
    return render_template("elements.py.j2", context)
