"""The kernel ABI, defined once (STYLE lesson 3).

Every generated module exports the kernels listed in :data:`KERNELS`, with exactly
these argument names and order, and the runtime entry points of :data:`ENTRY_POINTS`.
Templates render from these tables; the runtime and the tests read them; their
digest (:func:`abi_hash`) is stamped into every generated module.

Argument kinds: ``t`` time (float); ``q``, ``qd``, ``a``, ``qdd`` vectors of length n;
``lam`` a vector of length m; ``xd`` a vector of length nd (the user states' rates Ẋ);
``p`` the parameter vector; output arrays come last and are written in place (kernels
allocate nothing).

User differential states X (nd of them, Negrut et al. 2007, Eq. 8a) are passed as the
tail of the parameter vector, p = [parameters; X] (length N_PARAMETERS + N_STATES), so
that every kernel keeps its signature and the forces see X like a parameter; the
runtime writes X_{n+1} into p[N_PARAMETERS:] before each evaluation.  Two sets of
state kernels: the explicit form's ``state_rate*`` (f, f_q, f_q̇, f_X of Ẋ = f; the rows
of implicit states are 0) and the residual's ``state_residual*`` (d of d(Ẋ, X, q, q̇,
q̈, λ, t) = 0 and its six partials; an explicit state's row is d = Ẋ − f).  The
runtime uses the first when every state is explicit (module constant
``IMPLICIT_STATES`` False) and the second otherwise.  With nd = 0 the state kernels
write nothing and p is the parameters alone.  Names follow the literature
(DESIGN rule 8): Φ → phi, Φ_q → phi_q, γ → gamma, ν → nu, λ → lam.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Output:
    """One output array of a kernel: its argument name and the expression block."""

    arg: str
    block: str
    sparse: bool = False  # values on the block's static pattern, not the dense array


@dataclass(frozen=True)
class Kernel:
    """A generated kernel: ``name(*inputs, *outputs)``, all outputs written in place."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[Output, ...]
    doc: str


def _single(name: str, inputs: tuple[str, ...], doc: str) -> Kernel:
    return Kernel(name, inputs, (Output("out", name),), doc)


#: Shapes of the expression blocks, as (rows, cols) in terms of n, m and nd (the number
#: of user states); cols None = vector.
BLOCK_SHAPES: dict[str, tuple[str, str | None]] = {
    "phi": ("m", None),
    "phi_q": ("m", "n"),
    "phi_t": ("m", None),
    "nu": ("m", None),
    "gamma": ("m", None),
    "mass": ("n", "n"),
    "force": ("n", None),
    "mass_a_q": ("n", "n"),
    "phi_q_lam_q": ("n", "n"),
    "force_q": ("n", "n"),
    "force_qd": ("n", "n"),
    "phi_q_a_q": ("m", "n"),
    "gamma_q": ("m", "n"),
    "gamma_qd": ("m", "n"),
    "energy": ("3", None),
    "state_rate": ("nd", None),
    "state_rate_q": ("nd", "n"),
    "state_rate_qd": ("nd", "n"),
    "state_rate_x": ("nd", "nd"),
    "force_x": ("n", "nd"),
    "state_residual": ("nd", None),
    "state_residual_qdd": ("nd", "n"),
    "state_residual_q": ("nd", "n"),
    "state_residual_qd": ("nd", "n"),
    "state_residual_lam": ("nd", "m"),
    "state_residual_xd": ("nd", "nd"),
    "state_residual_x": ("nd", "nd"),
}
#: Blocks of the states' rates: whole-model user expressions, printed flat on both paths.
STATE_RATE_BLOCKS: tuple[str, ...] = ("state_rate", "state_rate_q", "state_rate_qd", "state_rate_x")
#: Blocks of the states' residual d (Negrut et al. 2007, Eq. 8a) and its partials, in
#: the order the third block row of Eq. 12 takes them: whole-model user expressions,
#: printed flat on both paths.
STATE_RESIDUAL_BLOCKS: tuple[str, ...] = (
    "state_residual", "state_residual_qdd", "state_residual_q", "state_residual_qd",
    "state_residual_lam", "state_residual_xd", "state_residual_x",
)  # fmt: skip
#: Every block of the user states' own expressions (printed flat on both paths).
STATE_BLOCKS: tuple[str, ...] = STATE_RATE_BLOCKS + STATE_RESIDUAL_BLOCKS
#: Inputs of the residual kernels: d(Ẋ, X, q, q̇, q̈, λ, t), X in the tail of p.
_RESIDUAL_INPUTS = ("t", "q", "qd", "qdd", "lam", "xd", "p")

KERNELS: tuple[Kernel, ...] = (
    _single("phi", ("t", "q", "p"), "Constraints Φ(q, t) (Haug 1989, Eq. 7.2.2)."),
    _single("phi_q", ("t", "q", "p"), "Constraint Jacobian Φ_q."),
    _single("phi_t", ("t", "q", "p"), "Partial time derivative Φ_t."),
    _single("nu", ("t", "q", "p"), "Velocity right side ν = −Φ_t (Haug 1989, Eq. 7.2.3)."),
    _single(
        "gamma",
        ("t", "q", "qd", "p"),
        "Acceleration right side γ = −(Φ_q q̇)_q q̇ − 2Φ_qt q̇ − Φ_tt (Haug 1989, Eq. 7.3.6).",
    ),
    _single("mass", ("t", "q", "p"), "Mass matrix M(q)."),
    _single("force", ("t", "q", "qd", "p"), "Generalized applied force Q(q, q̇, t)."),
    _single("mass_a_q", ("t", "q", "a", "p"), "(M(q) a)_q (Negrut et al. 2007, Eq. 12)."),
    _single("phi_q_lam_q", ("t", "q", "lam", "p"), "(Φ_qᵀ λ)_q (Negrut et al. 2007, Eq. 12)."),
    _single("force_q", ("t", "q", "qd", "p"), "Q_q."),
    _single("force_qd", ("t", "q", "qd", "p"), "Q_q̇."),
    _single("phi_q_a_q", ("t", "q", "a", "p"), "(Φ_q a)_q (Haug et al. 1997, Eq. 29)."),
    _single("gamma_q", ("t", "q", "qd", "p"), "γ_q."),
    _single("gamma_qd", ("t", "q", "qd", "p"), "γ_q̇."),
    _single(
        "energy",
        ("t", "q", "qd", "p"),
        "Kinetic and potential energy and non-conservative power [T, V, P], "
        "P = q̇ᵀ(Q + V_qᵀ) (Haug 1989, Eq. 7.5.13 for V).",
    ),
    Kernel(
        "dynamics",
        ("t", "q", "qd", "p"),
        (
            Output("mass", "mass"),
            Output("force", "force"),
            Output("phi", "phi"),
            Output("phi_q", "phi_q"),
            Output("phi_t", "phi_t"),
            Output("gamma", "gamma"),
        ),
        "M, Q, Φ, Φ_q, Φ_t and γ with shared subexpressions: everything one evaluation "
        "of the index-1 equations (Haug 1989, Eq. 7.2.1 with Eq. 7.3.8) needs.",
    ),
    Kernel(
        "dynamics_values",
        ("t", "q", "qd", "p"),
        (
            Output("mass", "mass", sparse=True),
            Output("force", "force"),
            Output("phi", "phi"),
            Output("phi_q", "phi_q", sparse=True),
            Output("phi_t", "phi_t"),
            Output("gamma", "gamma"),
        ),
        "``dynamics`` with M and Φ_q as values on their static patterns MASS_ROWS/COLS "
        "and PHI_Q_ROWS/COLS: the sparse index-1 right side (mbdgen.runtime.sparse).",
    ),
    _single(
        "state_rate",
        ("t", "q", "qd", "p"),
        "User states' rates f of Ẋ = f(q, q̇, X, t), X = p[N_PARAMETERS:] "
        "(Negrut et al. 2007, Eq. 8a with d = Ẋ − f).",
    ),
    _single("state_rate_q", ("t", "q", "qd", "p"), "f_q = −d_q (Negrut et al. 2007, Eq. 12)."),
    _single("state_rate_qd", ("t", "q", "qd", "p"), "f_q̇ = −d_q̇ (Negrut et al. 2007, Eq. 12)."),
    _single("state_rate_x", ("t", "q", "qd", "p"), "f_X = −d_X (Negrut et al. 2007, Eq. 12)."),
    _single(
        "force_x",
        ("t", "q", "qd", "p"),
        "Q_X, the force's dependence on the user states (the −Π column of Negrut et al. "
        "2007, Eq. 12, with the force states eliminated).",
    ),
    _single(
        "state_residual",
        _RESIDUAL_INPUTS,
        "User states' residual d(Ẋ, X, q, q̇, q̈, λ, t) (Negrut et al. 2007, Eq. 8a; an "
        "explicit state's row is Ẋ − f), X = p[N_PARAMETERS:], Ẋ = xd.",
    ),
    _single("state_residual_qdd", _RESIDUAL_INPUTS, "d_q̈ (Negrut et al. 2007, Eq. 12)."),
    _single("state_residual_q", _RESIDUAL_INPUTS, "d_q (Negrut et al. 2007, Eq. 12)."),
    _single("state_residual_qd", _RESIDUAL_INPUTS, "d_q̇ (Negrut et al. 2007, Eq. 12)."),
    _single("state_residual_lam", _RESIDUAL_INPUTS, "d_λ (Negrut et al. 2007, Eq. 12)."),
    _single("state_residual_xd", _RESIDUAL_INPUTS, "d_Ẋ (Negrut et al. 2007, Eq. 12)."),
    _single("state_residual_x", _RESIDUAL_INPUTS, "d_X (Negrut et al. 2007, Eq. 12)."),
    Kernel(
        "state_residual_blocks",
        _RESIDUAL_INPUTS,
        tuple(Output("d_" + b[len("state_residual_") :], b) for b in STATE_RESIDUAL_BLOCKS[1:]),
        "d_q̈, d_q, d_q̇, d_λ, d_Ẋ, d_X with shared subexpressions: the implicit states' "
        "blocks of the Newton matrix (Negrut et al. 2007, Eq. 12).",
    ),
    Kernel(
        "state_residual_blocks_values",
        _RESIDUAL_INPUTS,
        tuple(
            Output("d_" + b[len("state_residual_") :], b, sparse=True)
            for b in STATE_RESIDUAL_BLOCKS[1:]
        ),
        "``state_residual_blocks`` as values on the blocks' static patterns "
        "STATE_RESIDUAL_*_ROWS/COLS (mbdgen.runtime.sparse_newton).",
    ),
)
#: Kernels of the user states printed flat over the global symbols on both paths: the
#: blocks' own kernels (and their ``*_values``) and the fused residual blocks.
FLAT_STATE_KERNELS: tuple[str, ...] = STATE_BLOCKS + (
    "state_residual_blocks",
    "state_residual_blocks_values",
)


#: Blocks that also get a ``<name>_values`` kernel writing the static sparse pattern.
def block_shape(block: str, n: int, m: int, nd: int = 0) -> tuple[int, ...]:
    """The array shape of ``block`` for a model with n coordinates, m constraints and
    nd user states."""
    size = {"n": n, "m": m, "nd": nd}
    rows, cols = BLOCK_SHAPES[block]
    first = size[rows] if rows in size else int(rows)  # "3": a fixed length (energy)
    return (first,) if cols is None else (first, size[cols])


SPARSE_BLOCKS: tuple[str, ...] = tuple(b for b, (_, c) in BLOCK_SHAPES.items() if c is not None)


@dataclass(frozen=True)
class EntryPoint:
    """A cached binding in each generated module of a generic runtime function.

    The generated function ``name(*args)`` returns ``runtime.<target>(*bound, *args)``.
    ``bound`` lists runtime functions (``rt.``-prefixed), kernels and constants of the
    module that are passed first: the sizes n and m, so that after inlining the
    compiler sees them as constants and unrolls the small loops.  Binding kernels
    inside the generated module lets Numba cache the specialised integrator with the
    module (a dispatcher passed from Python is part of the cache key and would never
    hit the cache across processes).
    """

    name: str
    target: str
    bound: tuple[str, ...]
    args: tuple[str, ...]


_CHUNK_ARGS = (
    "p",
    "ctrl",
    "ws",
    "aux",
    "t0",
    "h",
    "x",
    "hist",
    "scratch",
    "state",
    "ab_coef",
    "am_coef",
    "rk_a",
    "rk_b",
    "rk_c",
    "n_steps",
    "stride",
    "out_t",
    "out_x",
    "out_f",
    "out_aux",
)

_VARIABLE_STEP_ARGS = (
    "p",
    "ctrl",
    "ws",
    "aux",
    "x",
    "tol",
    "fstate",
    "istate",
    "phi",
    "coef",
    "work",
) + (
    "t_out",
    "n_out",
    "max_steps",
    "out_x",
    "out_f",
    "out_aux",
)

ENTRY_POINTS: tuple[EntryPoint, ...] = (
    EntryPoint(
        "abm_chunk",
        "explicit.abm_chunk",
        ("rt.index1.index1_rhs", "dynamics", "N_COORDINATES", "N_CONSTRAINTS"),
        _CHUNK_ARGS,
    ),
    EntryPoint(
        "abm_gcp_chunk",
        "explicit.abm_chunk",
        ("rt.partition.gcp_rhs", "dynamics", "N_COORDINATES", "N_CONSTRAINTS"),
        _CHUNK_ARGS,
    ),
    EntryPoint(
        "abm_hybrid_chunk",
        "explicit.abm_chunk",
        ("rt.partition.hybrid_rhs", "dynamics", "N_COORDINATES", "N_CONSTRAINTS"),
        _CHUNK_ARGS,
    ),
    *(
        EntryPoint(
            f"{name}{suffix}_chunk",
            routine,
            (rhs, "dynamics", "N_COORDINATES", "N_CONSTRAINTS"),
            _VARIABLE_STEP_ARGS,
        )
        for name, routine in (
            ("vabm", "adaptive.vabm_chunk"),
            ("rkf45_adaptive", "adaptive_rk.rkf45_chunk"),
            ("dop853", "dop853.dop853_chunk"),
        )
        for suffix, rhs in (
            ("", "rt.index1.index1_rhs"),
            ("_gcp", "rt.partition.gcp_rhs"),
            ("_hybrid", "rt.partition.hybrid_rhs"),
        )
    ),
    EntryPoint(
        "welch_chunk",
        "welch.welch_chunk",
        ("dynamics", "phi", "N_COORDINATES", "N_CONSTRAINTS", "N_EULER_BODIES"),
        ("p", "ws", "t0", "h", "x", "state", "n_steps", "stride")
        + ("out_t", "out_x", "out_f", "out_aux"),
    ),
    # HHT-α and generalized-α, fixed step and error-controlled: one compiled loop,
    # the method chosen by ``ctrl`` (a second entry point cost a second 15-20 s compile)
    EntryPoint(
        "index3_chunk",
        "hht.index3_chunk",
        ("dynamics", "mass_a_q", "phi_q_lam_q", "force_q", "force_qd")
        + ("state_rate", "state_rate_q", "state_rate_qd", "state_rate_x", "force_x")
        + ("state_residual", "state_residual_blocks")
        + ("N_COORDINATES", "N_CONSTRAINTS", "N_STATES", "N_PARAMETERS", "IMPLICIT_STATES"),
        ("p", "ctrl", "ws", "t0", "h", "x", "state", "n_steps", "stride")
        + ("out_t", "out_x", "out_aux"),
    ),
    EntryPoint(
        "newmark_gcp_chunk",
        "newmark_gcp.newmark_gcp_chunk",
        ("dynamics", "phi", "phi_q", "force", "gamma", "mass_a_q", "phi_q_lam_q")
        + ("force_q", "force_qd", "phi_q_a_q", "gamma_q", "gamma_qd")
        + ("N_COORDINATES", "N_CONSTRAINTS"),
        ("p", "ctrl", "ws", "t0", "h", "x", "state", "n_steps", "stride")
        + ("out_t", "out_x", "out_aux"),
    ),
    EntryPoint(
        "derived",
        "postprocess.derived",
        ("energy", "reactions", "phi_t"),
        ("t", "q", "qd", "lam", "p", "states", "energy_out", "power_out", "reactions_out"),
    ),
    # the energy check that ends every run: without the reactions kernel, whose compile
    # (3-8 s for a spatial model) a run pays only when its reactions are used
    EntryPoint(
        "energy_rows",
        "postprocess.energy_rows",
        ("energy", "phi_t"),
        ("t", "q", "qd", "lam", "p", "states", "energy_out", "power_out"),
    ),
)


#: Columns of the ``reactions(t, q, lam, p, out)`` kernel's rows: the reaction force and
#: torque a joint exerts on one of its bodies at the joint point, in the global frame
#: and in the body frame (Haug 1989, Eqs. 6.6.5-6.6.6 and 11.5.x: F = −CᵀΦ_qᵀλ form).
REACTION_COLUMNS: tuple[str, ...] = (
    "Fx", "Fy", "Fz", "Tx", "Ty", "Tz", "Fx_body", "Fy_body", "Fz_body", "Tx_body", "Ty_body",
    "Tz_body",
)  # fmt: skip


#: Largest n + m + nd for which entry points bind the sizes as compile-time constants.
#: Constant sizes let LLVM unroll the small dense loops (the slider-crank's 7×7
#: augmented solve), but beyond this it unrolls an LU of (n+m)³/3 operations and
#: compile time explodes (minutes for a 24-coordinate chain); larger models read
#: the sizes from the workspace at run time (every ``ws`` names Q ``force`` and Φ ``phi``; the
#: index-3 workspace has X_{n+1} in ``x1``, :class:`mbdgen.runtime.hht.Workspace`).
UNROLL_LIMIT = 16
RUNTIME_SIZES = {
    "N_COORDINATES": "ws.force.shape[0]",
    "N_CONSTRAINTS": "ws.phi.shape[0]",
    "N_STATES": "ws.x1.shape[0]",
    "N_PARAMETERS": "p.shape[0] - ws.x1.shape[0]",
}


#: Smallest n + m at which a mechanism's index-1 right side solves on the sparse
#: pattern (:mod:`mbdgen.runtime.sparse`) rather than by the dense LU; measured
#: crossover in docs/design-notes.md ("Sparse linear algebra").
SPARSE_LIMIT = 20
#: The index-1 binding of the dense path and its sparse replacement.
_DENSE_INDEX1 = ("rt.index1.index1_rhs", "dynamics")
_SPARSE_INDEX1 = ("rt.index1.index1_rhs_sparse", "dynamics_values")
#: The index-3 loop (HHT-α, generalized-α) and its kernels, dense and on the sparse
#: patterns (:mod:`mbdgen.runtime.sparse_newton`): a ``*_values`` kernel for each block
#: of the Newton matrix.
_DENSE_INDEX3 = "hht.index3_chunk"
_SPARSE_INDEX3 = (
    "hht.index3_chunk",
    ("dynamics_values", "mass_a_q_values", "phi_q_lam_q_values", "force_q_values")
    + ("force_qd_values", "state_rate", "state_rate_q_values", "state_rate_qd_values")
    + ("state_rate_x_values", "force_x_values", "state_residual", "state_residual_blocks_values"),
)


def linear_algebra(n: int, m: int, mechanism: bool) -> str:
    """ "sparse" for mechanisms (block-diagonal M, element patterns) with
    n + m ≥ :data:`SPARSE_LIMIT`, else "dense"."""
    return "sparse" if mechanism and n + m >= SPARSE_LIMIT else "dense"


def entry_points_for(n: int, m: int, nd: int = 0, linalg: str = "dense") -> tuple[EntryPoint, ...]:
    """:data:`ENTRY_POINTS` with the sizes bound as constants or read at run time
    (the index-3 methods' Newton matrix is (n + m + nd)²), and with the sparse
    index-1 right side and index-3 Newton matrix where ``linalg`` is "sparse"."""
    points = ENTRY_POINTS
    if linalg == "sparse":
        target3, kernels3 = _SPARSE_INDEX3
        points = tuple(
            EntryPoint(e.name, e.target, _SPARSE_INDEX1 + e.bound[2:], e.args)
            if e.bound[:2] == _DENSE_INDEX1
            else EntryPoint(e.name, target3, kernels3 + e.bound[len(kernels3) :], e.args)
            if e.target == _DENSE_INDEX3
            else e
            for e in points
        )
    if n + m + nd <= UNROLL_LIMIT:
        return points
    return tuple(
        EntryPoint(e.name, e.target, tuple(RUNTIME_SIZES.get(b, b) for b in e.bound), e.args)
        for e in points
    )


def abi_hash() -> str:
    """Digest of the ABI tables above (changes whenever a signature changes)."""
    text = repr(
        (
            BLOCK_SHAPES,
            KERNELS,
            SPARSE_BLOCKS,
            ENTRY_POINTS,
            REACTION_COLUMNS,
            UNROLL_LIMIT,
            STATE_RATE_BLOCKS,
            STATE_RESIDUAL_BLOCKS,
            FLAT_STATE_KERNELS,
            SPARSE_LIMIT,
            _SPARSE_INDEX1,
            _SPARSE_INDEX3,
        )
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]
