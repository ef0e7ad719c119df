"""The element path: each element *type* derived once, instances as index tables.

For a :class:`~mbdgen.model.mechanism.Mechanism`, every distinct element type gets the
blocks of :func:`~mbdgen.symbolic.derive.derive_blocks` over its local symbols (its
bodies' coordinates, its parameters, its own multipliers), plus its joint reactions.
The instances of a type become integer tables:

* ``iq[k, j]``: global index of local coordinate j of instance k;
* ``ip[k, j]``: index in the parameter vector of local parameter j;
* ``ix[k, s]``: index among the user states X of the s-th state-bound local parameter
  (force elements whose expressions use a state: the type's ``force_x`` = ∂Q/∂p over
  those parameters; instances that bind a local parameter to a state and instances
  that bind it to a parameter are different types here);
* ``ir[k]``: first global constraint row of instance k;
* ``rr[k]``: first reaction row of instance k;
* ``pos[block][k, e]``: position of the e-th local non-zero of ``block`` in the global
  sparse pattern (the union over instances, sorted row-major like the flat path's).

Symbolic work is per type; per instance it is integer bookkeeping only, so a chain of
512 links costs what a chain of 8 does (DESIGN "Scale: element kernels").

The user states' rates Ẋ = f(q, q̇, X, t) and residuals d(Ẋ, X, q, q̇, q̈, λ, t) are
whole-model user expressions: they are derived once over the global symbols
(:func:`~mbdgen.symbolic.derive.derive_state_blocks`,
:func:`~mbdgen.symbolic.derive.derive_residual_blocks`) and printed flat.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from mbdgen.codegen.abi import BLOCK_SHAPES, SPARSE_BLOCKS, STATE_BLOCKS
from mbdgen.model.elements import (
    SLOT_SIZES,
    Body,
    Element,
    ElementType,
    element_type,
)
from mbdgen.model.mechanism import Mechanism
from mbdgen.symbolic.derive import (
    _jac,
    _pattern,
    derive_blocks,
    derive_residual_blocks,
    derive_state_blocks,
    residual_symbols,
    state_column,
)


@dataclass(frozen=True)
class TypeSystem:
    """One element type: its local blocks and the tables of its instances.

    A type found in the element cache (:mod:`mbdgen.codegen.element_cache`) is not
    derived: ``q``, ``qd``, ``a``, ``lam``, ``blocks`` and ``reactions`` are None and
    ``cached`` holds its printed kernels; ``patterns``, ``m`` and ``n_reactions`` are
    always set.  ``identity`` is the cache's key of the type (None: not cacheable).
    """

    index: int
    etype: ElementType
    q: sp.Matrix | None
    qd: sp.Matrix | None
    a: sp.Matrix | None
    lam: sp.Matrix | None
    p: tuple[sp.Symbol, ...]
    blocks: dict[str, sp.Matrix] | None
    patterns: dict[str, tuple[tuple[int, int], ...]]
    reactions: sp.Matrix | None
    instances: tuple[Element, ...]
    iq: np.ndarray
    ip: np.ndarray
    ir: np.ndarray
    rr: np.ndarray
    pos: dict[str, np.ndarray]
    ix: np.ndarray
    m: int = 0
    n_reactions: int = 0
    identity: str | None = None
    cached: Any = None

    @property
    def name(self) -> str:
        return self.etype.name

    def __repr__(self) -> str:
        return f"TypeSystem({self.name!r}, {len(self.instances)} instances)"


@dataclass(frozen=True)
class ElementSystem:
    """A mechanism derived element type by element type."""

    mechanism: Mechanism
    types: tuple[TypeSystem, ...]
    patterns: dict[str, tuple[tuple[int, int], ...]]
    reaction_names: tuple[str, ...]
    #: Global symbols and the states' blocks (:data:`~mbdgen.codegen.abi.STATE_BLOCKS`).
    q: sp.Matrix
    qd: sp.Matrix
    x: sp.Matrix
    state_blocks: dict[str, sp.Matrix]
    #: The residual kernels' symbols Ẋ, q̈, λ (:func:`~mbdgen.symbolic.derive.residual_symbols`).
    xd: sp.Matrix = field(default_factory=lambda: sp.zeros(0, 1))
    qdd: sp.Matrix = field(default_factory=lambda: sp.zeros(0, 1))
    multipliers: sp.Matrix = field(default_factory=lambda: sp.zeros(0, 1))
    implicit: bool = False

    def __repr__(self) -> str:
        return f"ElementSystem({self.mechanism.name!r}, {len(self.types)} types)"

    @property
    def n(self) -> int:
        return self.mechanism.n

    @property
    def m(self) -> int:
        return self.mechanism.m


def _reactions(et: ElementType, phi_q: sp.Matrix, lam: sp.Matrix) -> sp.Matrix:
    """Reaction rows (one per moving body of a joint or driver), 12 columns.

    The generalized reaction on the body's coordinates is −Φ_{q_i}ᵀλ (Haug 1989,
    Eq. 6.6.2); its translational part is the force F and its rotational part a torque
    about the body origin, carried to the joint point P: T_P = T_O − s^P × F with
    s^P = A s'^P (planar: Haug 1989, Eq. 6.6.6; spatial: n' = ½ G Q_p, Eq. 11.6.x).
    """
    from mbdgen.model import planar, spatial

    if et.role not in ("joint", "driver") or lam.rows == 0:
        return sp.zeros(0, 12)
    generalized = -phi_q.T * lam
    points = et.contribution.points
    rows = []
    off = 0
    for s, (slot, ground) in enumerate(zip(et.slots, et.ground, strict=True)):
        if ground:
            continue
        size = et.slot_sizes[s] if et.slot_sizes else SLOT_SIZES[slot]
        # a point mass: zero generalized reaction on the rotations it does not have
        gen = generalized[off : off + size, 0].col_join(sp.zeros(SLOT_SIZES[slot] - size, 1))
        q = et.slot_q[s]
        off += size
        point = points[s] if points is not None else None
        if slot == "planar":
            sp_local = sp.Matrix(point) if point is not None else sp.zeros(2, 1)
            rot = planar.A(q[2])
            F = sp.Matrix(gen[0:2])
            s_glob = rot * sp_local
            torque = gen[2] - (s_glob[0] * F[1] - s_glob[1] * F[0])
            Fb = rot.T * F
            rows.append([F[0], F[1], 0, 0, 0, torque, Fb[0], Fb[1], 0, 0, 0, torque])
        else:
            sp_local = sp.Matrix(point) if point is not None else sp.zeros(3, 1)
            p = sp.Matrix(q[3:7])
            rot = spatial.A(p)
            F = sp.Matrix(gen[0:3])
            Fb = rot.T * F
            n_body = spatial.G(p) * sp.Matrix(gen[3:7]) / 2
            Tb = n_body - spatial.tilde(sp_local) * Fb
            T = rot * Tb
            rows.append([*F, *T, *Fb, *Tb])
    return sp.Matrix(rows) if rows else sp.zeros(0, 12)


def _type_blocks(
    et: ElementType, state_params: tuple[int, ...]
) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix, sp.Matrix, dict[str, sp.Matrix], sp.Matrix]:
    nq = len(et.q)
    c = et.contribution
    q = sp.Matrix(et.q) if nq else sp.zeros(0, 1)
    qd = sp.Matrix(et.qd) if nq else sp.zeros(0, 1)
    a = sp.Matrix([sp.Symbol(f"_a{i}") for i in range(nq)]) if nq else sp.zeros(0, 1)
    phi = sp.Matrix(list(c.phi)) if c.phi else sp.zeros(0, 1)
    lam = (
        sp.Matrix([sp.Symbol(f"_lam{i}") for i in range(phi.rows)]) if phi.rows else sp.zeros(0, 1)
    )
    energy = sp.Matrix([c.kinetic, c.potential])
    blocks = derive_blocks(q, qd, a, lam, et.local_mass, et.local_force, phi, energy)
    # Q_X over the local parameters this group binds to user states (nq × its states).
    xs = sp.Matrix([et.p[j] for j in state_params]) if state_params else sp.zeros(0, 1)
    blocks["force_x"] = _jac(et.local_force, xs)
    reactions = _reactions(et, blocks["phi_q"], lam)
    return q, qd, a, lam, blocks, reactions


def _global_entries(
    block: str, pattern, iq: np.ndarray, ir: np.ndarray, ix: np.ndarray
) -> np.ndarray:
    """Global (row, col) of each local pattern entry, for every instance: (count, nnz, 2)."""
    rows_kind, cols_kind = BLOCK_SHAPES[block]
    loc = np.array(pattern, dtype=np.int64).reshape(-1, 2)
    if rows_kind == "m":
        grow = ir[:, None] + loc[None, :, 0]
    else:
        grow = iq[:, loc[:, 0]]
    gcol = (ix if cols_kind == "nd" else iq)[:, loc[:, 1]]
    return np.stack([grow, gcol], axis=-1)


def derive_mechanism(mech: Mechanism, cache: Any = None) -> ElementSystem:
    """Derive each element type of ``mech`` once and tabulate its instances.

    ``cache`` (an :class:`~mbdgen.codegen.element_cache.ElementCache`, optional)
    supplies types derived before on this installation: they are not derived again.
    Each type's time is recorded as a ``derive`` stage (:mod:`mbdgen.timing`).
    """
    from mbdgen import timing

    # p = [parameters; X]: a local parameter bound to a user state reads p[N_PARAMETERS + k].
    n_params = len(mech.parameter_symbols)
    param_index = {s: i for i, s in enumerate(mech.parameter_symbols)}
    state_index = {s: k for k, s in enumerate(mech.state_symbols)}
    param_index.update({s: n_params + k for s, k in state_index.items()})
    groups: dict[tuple, list[tuple[Element, int]]] = {}
    for e, row, _ in mech.element_rows():
        state_params = tuple(j for j, (_, s) in enumerate(e.params) if s in state_index)
        groups.setdefault((e.type_key, state_params), []).append((e, row))
    types: list[TypeSystem] = []
    reaction_names: list[str] = []
    raw = []
    extra: list[tuple[int, int, str | None, Any]] = []
    for index, ((_, state_params), members) in enumerate(groups.items()):
        start = time.perf_counter()
        et = element_type(members[0][0])
        identity, cached = (
            cache.lookup(members[0][0], state_params) if cache is not None else (None, None)
        )
        if cached is not None:
            q = qd = a = lam = reactions = None
            blocks = None
            patterns = cached.patterns
            m_rows, n_react = cached.m, cached.n_reactions
        else:
            q, qd, a, lam, blocks, reactions = _type_blocks(et, state_params)
            patterns = {name: _pattern(mat) for name, mat in blocks.items()}
            m_rows, n_react = blocks["phi"].rows, reactions.rows
        how = "cached" if cached is not None else "derived"
        if cached is None and identity is None:
            how += " (not cacheable)" if cache is not None else ""
        timing.add("derive", time.perf_counter() - start, f"{et.name}: {how}")
        nq = len(et.q)
        iq = np.array([mech.local_indices(e) for e, _ in members], dtype=np.int64).reshape(
            len(members), nq
        )
        ip = np.array(
            [[param_index[s] for _, s in e.params] for e, _ in members], dtype=np.int64
        ).reshape(len(members), len(et.p))
        ir = np.array([row for _, row in members], dtype=np.int64)
        ix = np.array(
            [[state_index[e.params[j][1]] for j in state_params] for e, _ in members],
            dtype=np.int64,
        ).reshape(len(members), len(state_params))
        rr = np.arange(len(members), dtype=np.int64) * n_react + len(reaction_names)
        for e, _ in members:
            moving = [b for b in e.bodies if isinstance(b, Body)]
            reaction_names.extend(f"{e.name}.{b.name}" for b in moving[:n_react])
        raw.append(
            (index, et, q, qd, a, lam, blocks, patterns, reactions, members, iq, ip, ir, rr, ix)
        )
        extra.append((m_rows, n_react, identity, cached))

    start = time.perf_counter()
    gq = sp.Matrix(mech.coordinates)
    gqd = sp.Matrix(mech.velocities)
    gx, rates = state_column(mech.states)
    state_blocks = derive_state_blocks(gq, gqd, gx, rates)
    gxd, gqdd, glam = residual_symbols(mech.states, mech.coordinates, mech.constraint_names)
    state_blocks.update(derive_residual_blocks(gq, gqd, gqdd, glam, gx, gxd, mech.states))
    global_patterns: dict[str, tuple[tuple[int, int], ...]] = {
        name: _pattern(mat) for name, mat in state_blocks.items()
    }
    entries: dict[str, list[np.ndarray]] = {}
    for block in SPARSE_BLOCKS:
        if block in STATE_BLOCKS:
            continue
        parts = [
            _global_entries(block, r[7][block], r[10], r[12], r[14]).reshape(-1, 2)
            for r in raw
            if r[7][block]
        ]
        allrc = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
        uniq = np.unique(allrc, axis=0) if allrc.size else allrc
        global_patterns[block] = tuple((int(i), int(j)) for i, j in uniq)
        entries[block] = [uniq]
    for block in BLOCK_SHAPES:
        if block not in global_patterns:
            global_patterns[block] = ()

    for (index, et, q, qd, a, lam, blocks, patterns, reactions, members, iq, ip, ir, rr, ix), (
        m_rows,
        n_react,
        identity,
        cached,
    ) in zip(raw, extra, strict=True):
        pos: dict[str, np.ndarray] = {}
        for block in SPARSE_BLOCKS:
            if block in STATE_BLOCKS:
                continue
            uniq = entries[block][0]
            local = patterns[block]
            if not local:
                continue
            ge = _global_entries(block, local, iq, ir, ix)
            ncols = max(int(uniq[:, 1].max()) + 1, 1) if uniq.size else 1
            keys = uniq[:, 0] * ncols + uniq[:, 1]
            want = ge[..., 0] * ncols + ge[..., 1]
            pos[block] = np.searchsorted(keys, want).astype(np.int64)
        types.append(
            TypeSystem(
                index=index,
                etype=et,
                q=q,
                qd=qd,
                a=a,
                lam=lam,
                p=et.p,
                blocks=blocks,
                patterns=patterns,
                reactions=reactions,
                instances=tuple(e for e, _ in members),
                iq=iq,
                ip=ip,
                ir=ir,
                rr=rr,
                pos=pos,
                ix=ix,
                m=m_rows,
                n_reactions=n_react,
                identity=identity,
                cached=cached,
            )
        )
    timing.add("derive", time.perf_counter() - start, "user states, tables")
    return ElementSystem(
        mechanism=mech,
        types=tuple(types),
        patterns=global_patterns,
        reaction_names=tuple(reaction_names),
        q=gq,
        qd=gqd,
        x=gx,
        state_blocks=state_blocks,
        xd=gxd,
        qdd=gqdd,
        multipliers=glam,
        implicit=any(s.implicit for s in mech.states),
    )
