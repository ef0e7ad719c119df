"""Entry points compiled once per installation, for every model (issue 11, item 3).

A generated module's own entry points inline the integrator with the model's
kernels, so each (model, method, constraint handling) pays its own JIT (5-120 s
cold, most of it Numba's IR inliner).  For models whose sizes are read at run time
(n + m + nd above :data:`mbdgen.codegen.abi.UNROLL_LIMIT`) nothing in the
integrator depends on the model but the kernel itself.  The routines here take the
model's ``dynamics`` kernel as a first-class function (:class:`KernelPointer`, the
C wrapper of the kernel's own compiled code, typed :data:`DYNAMICS_SIGNATURE`):
their argument types are the same for every model, so the one on-disk cache entry
of each serves them all, and a new model compiles its kernel once, as before, and
no integrator.  The call through a function pointer cannot be inlined; for these
sizes the step costs the same (planar 8-link chain, ABM: 0.97-1.04x the inlined
entry point, bit-identical results), while for the small unrolled models it would
cost 1.6-2.2x, so those keep their own entry points, and step through these routines
only while their own code compiles in the background (:mod:`mbdgen.specialize`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils, config
from numba.experimental.function_type import FunctionModel, WrapperAddressProtocol
from numba.extending import NativeValue, register_model, typeof_impl, unbox

from mbdgen.runtime import (
    adaptive,
    adaptive_rk,
    dop853,
    explicit,
    hht,
    index1,
    newmark_gcp,
    partition,
    postprocess,
    radau,
    welch,
)

_V = types.float64[::1]
_M = types.float64[:, ::1]
#: ``dynamics(t, q, qd, p, mass, force, phi, phi_q, phi_t, gamma)`` as the right
#: sides call it (:func:`mbdgen.runtime.index1.index1_rhs`).
DYNAMICS_SIGNATURE = types.void(types.float64, _V, _V, _V, _M, _V, _V, _M, _V, _V)

_OPTS = {"cache": True, "nogil": True, "error_model": "numpy"}


@njit(**_OPTS)
def abm_chunk(kern, p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef, am_coef,
              rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.explicit.abm_chunk` on the index-1 right side."""
    return explicit.abm_chunk(index1.index1_rhs, kern, ws.force.shape[0], ws.phi.shape[0], p,
                              ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef, am_coef,
                              rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f,
                              out_aux)  # fmt: skip


@njit(**_OPTS)
def abm_gcp_chunk(kern, p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef, am_coef,
                  rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.explicit.abm_chunk` on the GCP right side."""
    return explicit.abm_chunk(partition.gcp_rhs, kern, ws.force.shape[0], ws.phi.shape[0], p,
                              ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef, am_coef,
                              rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f,
                              out_aux)  # fmt: skip


@njit(**_OPTS)
def abm_hybrid_chunk(kern, p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef,
                     am_coef, rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f,
                     out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.explicit.abm_chunk` on the hybrid (DADS) right side."""
    return explicit.abm_chunk(partition.hybrid_rhs, kern, ws.force.shape[0], ws.phi.shape[0], p,
                              ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef, am_coef,
                              rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f,
                              out_aux)  # fmt: skip


@njit(**_OPTS)
def vabm_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out, n_out,
               max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive.vabm_chunk` on the index-1 right side."""
    return adaptive.vabm_chunk(index1.index1_rhs, kern, ws.force.shape[0], ws.phi.shape[0], p,
                               ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                               n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def vabm_gcp_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                   n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive.vabm_chunk` on the GCP right side."""
    return adaptive.vabm_chunk(partition.gcp_rhs, kern, ws.force.shape[0], ws.phi.shape[0], p,
                               ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                               n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def vabm_hybrid_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                      n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive.vabm_chunk` on the hybrid right side."""
    return adaptive.vabm_chunk(partition.hybrid_rhs, kern, ws.force.shape[0], ws.phi.shape[0], p,
                               ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                               n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def rkf45_adaptive_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                         t_out, n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive_rk.rkf45_chunk` on the index-1 right side."""
    return adaptive_rk.rkf45_chunk(index1.index1_rhs, kern, ws.force.shape[0], ws.phi.shape[0],
                                   p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                                   t_out, n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def rkf45_adaptive_gcp_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                             t_out, n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive_rk.rkf45_chunk` on the GCP right side."""
    return adaptive_rk.rkf45_chunk(partition.gcp_rhs, kern, ws.force.shape[0], ws.phi.shape[0],
                                   p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                                   t_out, n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def rkf45_adaptive_hybrid_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef,
                                work, t_out, n_out, max_steps, out_x, out_f,
                                out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive_rk.rkf45_chunk` on the hybrid right side."""
    return adaptive_rk.rkf45_chunk(partition.hybrid_rhs, kern, ws.force.shape[0], ws.phi.shape[0],
                                   p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                                   t_out, n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def dop853_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out, n_out,
                 max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.dop853.dop853_chunk` on the index-1 right side."""
    return dop853.dop853_chunk(index1.index1_rhs, kern, ws.force.shape[0], ws.phi.shape[0], p,
                               ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                               n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def dop853_gcp_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                     n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.dop853.dop853_chunk` on the GCP right side."""
    return dop853.dop853_chunk(partition.gcp_rhs, kern, ws.force.shape[0], ws.phi.shape[0], p,
                               ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                               n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def dop853_hybrid_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                        t_out, n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.dop853.dop853_chunk` on the hybrid right side."""
    return dop853.dop853_chunk(partition.hybrid_rhs, kern, ws.force.shape[0], ws.phi.shape[0],
                               p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                               n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


#: ``dynamics_values(t, q, qd, p, mass, force, phi, phi_q, phi_t, gamma)`` with M and
#: Φ_q as values on their patterns (:func:`mbdgen.runtime.index1.index1_rhs_sparse`).
DYNAMICS_VALUES_SIGNATURE = types.void(types.float64, _V, _V, _V, _V, _V, _V, _V, _V, _V)


@njit(**_OPTS)
def abm_sparse_chunk(kern, p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef, am_coef,
                     rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f,
                     out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.explicit.abm_chunk` on the sparse index-1 right side."""
    return explicit.abm_chunk(index1.index1_rhs_sparse, kern, ws.force.shape[0], ws.phi.shape[0],
                              p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef,
                              am_coef, rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f,
                              out_aux)  # fmt: skip


@njit(**_OPTS)
def vabm_sparse_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work, t_out,
                      n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive.vabm_chunk` on the sparse index-1 right side."""
    return adaptive.vabm_chunk(index1.index1_rhs_sparse, kern, ws.force.shape[0], ws.phi.shape[0],
                               p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                               t_out, n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def rkf45_adaptive_sparse_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef,
                                work, t_out, n_out, max_steps, out_x, out_f,
                                out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive_rk.rkf45_chunk` on the sparse index-1 right side."""
    return adaptive_rk.rkf45_chunk(index1.index1_rhs_sparse, kern, ws.force.shape[0],
                                   ws.phi.shape[0], p, ctrl, ws, aux, x, tol, fstate, istate,
                                   phi, coef, work, t_out, n_out, max_steps, out_x, out_f,
                                   out_aux)  # fmt: skip


@njit(**_OPTS)
def abm_gcp_sparse_chunk(kern, p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef,
                         am_coef, rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f,
                         out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.explicit.abm_chunk` on the sparse GCP right side."""
    return explicit.abm_chunk(partition.gcp_rhs_sparse, kern, ws.force.shape[0], ws.phi.shape[0],
                              p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef,
                              am_coef, rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f,
                              out_aux)  # fmt: skip


@njit(**_OPTS)
def vabm_gcp_sparse_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                          t_out, n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive.vabm_chunk` on the sparse GCP right side."""
    return adaptive.vabm_chunk(partition.gcp_rhs_sparse, kern, ws.force.shape[0], ws.phi.shape[0],
                               p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                               t_out, n_out, max_steps, out_x, out_f, out_aux)  # fmt: skip


@njit(**_OPTS)
def rkf45_adaptive_gcp_sparse_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef,
                                    work, t_out, n_out, max_steps, out_x, out_f,
                                    out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.adaptive_rk.rkf45_chunk` on the sparse GCP right side."""
    return adaptive_rk.rkf45_chunk(partition.gcp_rhs_sparse, kern, ws.force.shape[0],
                                   ws.phi.shape[0], p, ctrl, ws, aux, x, tol, fstate, istate,
                                   phi, coef, work, t_out, n_out, max_steps, out_x, out_f,
                                   out_aux)  # fmt: skip


@njit(**_OPTS)
def dop853_sparse_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                        t_out, n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.dop853.dop853_chunk` on the sparse index-1 right side."""
    return dop853.dop853_chunk(index1.index1_rhs_sparse, kern, ws.force.shape[0],
                               ws.phi.shape[0], p, ctrl, ws, aux, x, tol, fstate, istate, phi,
                               coef, work, t_out, n_out, max_steps, out_x, out_f,
                               out_aux)  # fmt: skip


@njit(**_OPTS)
def dop853_gcp_sparse_chunk(kern, p, ctrl, ws, aux, x, tol, fstate, istate, phi, coef, work,
                            t_out, n_out, max_steps, out_x, out_f, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.dop853.dop853_chunk` on the sparse GCP right side."""
    return dop853.dop853_chunk(partition.gcp_rhs_sparse, kern, ws.force.shape[0],
                               ws.phi.shape[0], p, ctrl, ws, aux, x, tol, fstate, istate, phi,
                               coef, work, t_out, n_out, max_steps, out_x, out_f,
                               out_aux)  # fmt: skip


#: Index-1 entry point name → shared routine on the sparse right side, for modules
#: whose ``LINEAR_ALGEBRA`` is "sparse" (their own entry points bind the same).  The
#: GCP ones exist only here: a sparse module's own GCP entry points stay dense, so
#: the driver gives them a :func:`mbdgen.runtime.partition.gcp_sparse_workspace` only
#: when :func:`sparse_gcp` says these run.
SHARED_SPARSE: dict[str, Any] = {
    "abm_chunk": abm_sparse_chunk,
    "vabm_chunk": vabm_sparse_chunk,
    "rkf45_adaptive_chunk": rkf45_adaptive_sparse_chunk,
    "abm_gcp_chunk": abm_gcp_sparse_chunk,
    "vabm_gcp_chunk": vabm_gcp_sparse_chunk,
    "rkf45_adaptive_gcp_chunk": rkf45_adaptive_gcp_sparse_chunk,
    "dop853_chunk": dop853_sparse_chunk,
    "dop853_gcp_chunk": dop853_gcp_sparse_chunk,
}

#: Entry point name → shared routine taking the ``dynamics`` kernel first.
SHARED: dict[str, Any] = {
    f.__name__: f
    for f in (
        abm_chunk, abm_gcp_chunk, abm_hybrid_chunk, vabm_chunk, vabm_gcp_chunk,
        vabm_hybrid_chunk, rkf45_adaptive_chunk, rkf45_adaptive_gcp_chunk,
        rkf45_adaptive_hybrid_chunk, dop853_chunk, dop853_gcp_chunk, dop853_hybrid_chunk,
    )
}  # fmt: skip

_KERNELS: dict[tuple[str, str, int], Any] = {}


def enabled() -> bool:
    """Shared entry points are on unless ``MBDGEN_SHARED_ENTRY=0`` (to compare) or
    Numba is off (``NUMBA_DISABLE_JIT``: a plain kernel has no compiled wrapper)."""
    return os.environ.get("MBDGEN_SHARED_ENTRY", "1") != "0" and not config.DISABLE_JIT


def sparse_gcp(module: Any) -> bool:
    """Whether GCP runs on the sparse right side for ``module`` (a sparse module, with
    the shared entry points on; n + m ≥ SPARSE_LIMIT is above UNROLL_LIMIT, so its
    stepper takes the shared entry point)."""
    return enabled() and getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse"


class KernelPointer(WrapperAddressProtocol):
    """A compiled kernel as a first-class function: the C wrapper that Numba builds
    for every compiled function, taken from the kernel's own dispatcher (compiled or
    loaded from its cache for ``signature``), so the kernel is not compiled twice."""

    def __init__(self, dispatcher: Any, signature: Any) -> None:
        self._signature = signature
        from mbdgen.specialize import load_cached

        self.signature_text = str(signature)  # a key part of every binding (_Bound)
        load_cached(dispatcher, signature)  # under either cache key (see load_cached)
        cres = dispatcher.get_compile_result(signature)
        self._address = cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name)
        self._keep = cres  # the machine code lives as long as its library

    def __wrapper_address__(self) -> int:
        return self._address

    def signature(self) -> Any:
        return self._signature


class KernelType(types.FunctionType):
    """The Numba type of a :class:`KernelPointer`: a first-class function like any
    other inside jitted code, unboxed by reading the pointer's ``_address``.  Numba's
    own unboxing of a first-class function calls back into Python twice and
    deserializes the signature each time: 2-5 µs per kernel and call, measured 25 µs
    per call of a routine that takes five kernels, as much as a stiff run's steps
    in a chunk."""


register_model(KernelType)(FunctionModel)


@unbox(KernelType)
def _unbox_kernel(typ: KernelType, obj: Any, c: Any) -> NativeValue:
    sfunc = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    address = c.pyapi.object_getattr_string(obj, "_address")
    failed = cgutils.is_null(c.builder, address)
    with c.builder.if_then(c.builder.not_(failed), likely=True):
        sfunc.c_addr = c.pyapi.long_as_voidptr(address)
        c.pyapi.decref(address)
    voidptr = c.context.get_value_type(types.voidptr)
    sfunc.py_addr = c.builder.bitcast(obj, voidptr)
    sfunc.jit_addr = ir.Constant(voidptr, None)  # called through its C wrapper
    return NativeValue(sfunc._getvalue(), is_error=failed)


@typeof_impl.register(KernelPointer)
def _typeof_kernel(val: KernelPointer, c: Any) -> KernelType:
    return KernelType(val.signature())


def dynamics_pointer(module: Any, name: str = "dynamics") -> Any:
    """The module's ``dynamics`` (or ``dynamics_values``) kernel as a first-class
    function (kept per process)."""
    kernel = getattr(module, name)
    key = (module.__name__, name, id(kernel))
    kern = _KERNELS.get(key)
    if kern is None:
        signature = DYNAMICS_VALUES_SIGNATURE if name == "dynamics_values" else DYNAMICS_SIGNATURE
        kern = _KERNELS[key] = KernelPointer(kernel, signature)
    return kern


def _route(module: Any, name: str) -> tuple[Any, str, tuple[str, ...]] | None:
    """(shared routine, its dynamics kernel, the kernels it takes after that) for
    ``module.<name>``, or None where ``name`` has no shared form or they are off."""
    if not enabled():
        return None
    sparse = getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse"
    if name == "index3_chunk":
        routine, names = _index3(module)
        return routine, "dynamics_values" if sparse else "dynamics", names
    if name == "radau_chunk":
        names = tuple(f"{k}_values" for k in INDEX3_BLOCKS) if sparse else INDEX3_BLOCKS
        return radau.radau_chunk, "dynamics_values" if sparse else "dynamics", names
    if sparse and name in SHARED_SPARSE and ("_gcp" not in name or sparse_gcp(module)):
        return SHARED_SPARSE[name], "dynamics_values", ()
    if name in SHARED:
        return SHARED[name], "dynamics", SHARED_KERNELS.get(name, ())
    return None


def available(module: Any, name: str) -> bool:
    """Whether :func:`entry` has a shared routine for ``module.<name>`` (nothing is
    compiled to answer)."""
    return _route(module, name) is not None


def entry(module: Any, name: str) -> Callable[..., Any] | None:
    """A callable with the signature of ``module.<name>`` that runs the shared routine,
    or None when ``name`` has no shared form."""
    route = _route(module, name)
    if route is None:
        return None
    routine, dynamics, names = route
    kern = dynamics_pointer(module, dynamics)
    # from the last: a helper (mbdgen.specialize.start_kernels) takes them from the first
    extra = [kernel_pointer(module, k) for k in reversed(names)][::-1]
    return _Bound(routine, (kern, *extra), name)


def kernel_parts(module: Any, name: str) -> tuple[str, ...]:
    """The parts ``module.<name>`` calls in turn, each compiled on its own, or ()
    (:func:`mbdgen.codegen.elements.split_kernel`)."""
    return tuple(getattr(module, "KERNEL_PARTS", {}).get(name, ()))


def kernel_signature(name: str) -> Any:
    """The signature of kernel ``name`` (:data:`KERNEL_SIGNATURES`); a part's is its
    kernel's."""
    base, _, part = name.rpartition("_part")
    return KERNEL_SIGNATURES[base if base and part.isdigit() else name]


def kernel_queue(module: Any, first: str, then: list[str]) -> list[str]:
    """What the kernel helper compiles, in its order: each kernel of ``then`` as its
    parts and itself (this process takes those from the end, :func:`entry`), and the
    parts of ``first``, the evaluation kernel, from the last (this process compiles
    them from the first, :func:`mbdgen.specialize.compile_claimed`).

    The parts go first where ``then`` holds only the energy check's kernels, needed at
    the end of the run (an explicit method: a new flyball governor's first ABM step
    7.8 s, 9.8 s with the parts last), and last where the run needs Newton blocks at
    its first step: this process waits for a part the helper holds, while with the
    blocks first in line it compiles both parts itself as the helper compiles blocks
    (Welch's 3-D pendulum, compile and first HHT step: 7.4 s with the part first,
    6.4 s last, 6.6 s unsplit)."""
    queue = []
    for name in then:
        queue += [*kernel_parts(module, name), name]
    parts = list(reversed(kernel_parts(module, first)[1:]))
    if set(then) <= set(POSTPROCESS["energy_rows"][1]):
        return parts + queue
    return queue + parts


def kernels_after_start(module: Any, family: str, constraints: str) -> list[str]:
    """The kernels a run of ``family`` will compile after its evaluation kernel (which
    the checks at t0 compile first): the Newton matrix's blocks, the energy check's."""
    sparse = getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse"
    names: tuple[str, ...] = ()
    if family in ("hht", "genalpha", "hht_adaptive", "genalpha_adaptive"):
        names = _index3(module)[1]
    elif family == "radau":
        names = tuple(f"{k}_values" for k in INDEX3_BLOCKS) if sparse else INDEX3_BLOCKS
    elif family == "newmark_gcp":
        names = SHARED_KERNELS["newmark_gcp_chunk"]
    elif family == "welch":
        names = SHARED_KERNELS["welch_chunk"]
    names = (*names, *POSTPROCESS["energy_rows"][1])
    return [k for k in dict.fromkeys(names) if hasattr(module, k)]


#: Compiled entry points of the shared routines by (routine, kernel signatures, the
#: arguments' :func:`_arg_key`): one dispatch per process and argument types, not per run.
_ENTRY_POINTS: dict[tuple[Any, ...], Any] = {}


#: Argument types whose Numba type the Python type decides.
_SCALARS = (float, int, bool)


def _arg_key(a: Any) -> Any:
    """What decides a Numba argument type of the arguments the routines take: arrays by
    dtype, dimensions and contiguity, tuples (workspaces, the post-processing's column
    blocks) by their items', other values by their Python type."""
    if hasattr(a, "dtype"):
        return (type(a), a.dtype, a.ndim, a.flags.c_contiguous)
    if isinstance(a, tuple):
        return (type(a), *(_arg_key(v) if hasattr(v, "dtype") else type(v) for v in a))
    return type(a)


class _Bound:
    """``routine`` with its kernels bound first.  The dispatcher types every argument
    of every call in Python where it has no fast fingerprint, and a first-class
    function has none: about 100 µs per chunk with four or five kernels, as much as a
    short implicit run steps (stiff Andrews, radau5: 26 steps in 8 calls).  Once the
    routine ran for some argument types, their compiled entry point is called directly
    (:data:`_ENTRY_POINTS`); arguments of other types go through the dispatcher."""

    def __init__(self, routine: Any, kernels: tuple[Any, ...], name: str) -> None:
        self.routine = routine
        self.kernels = kernels
        self.__name__ = name
        self._head = (routine, tuple(k.signature_text for k in kernels))
        self._last: tuple[tuple[Any, ...], Any] | None = None

    def _same_types(self, args: tuple[Any, ...]) -> Any:
        """The entry point of the last call if ``args`` have its types for certain: the
        same objects where they are arrays or workspaces (whose fields cannot change),
        scalars of the same Python type.  :func:`_arg_key` of a workspace of fifty
        arrays takes ~30 µs, more than the call; this test ~1 µs."""
        if self._last is None:
            return None
        last, fast = self._last
        if len(args) != len(last):
            return None
        for a, b in zip(args, last, strict=True):
            if a is not b and (type(a) is not type(b) or type(a) not in _SCALARS):
                return None
        return fast

    def __call__(self, *args: Any) -> Any:
        full = (*self.kernels, *args)
        fast = self._same_types(args)
        if fast is not None:
            return fast(*full)
        key = (*self._head, *(_arg_key(a) for a in args))
        fast = _ENTRY_POINTS.get(key)
        if fast is not None:
            self._last = (args, fast)
            return fast(*full)
        result = self.routine(*full)
        if not config.DISABLE_JIT:
            overloads = self.routine.overloads
            if len(overloads) == 1:
                cres = next(iter(overloads.values()))
            else:
                cres = overloads[tuple(self.routine.typeof_pyval(a) for a in full)]
            _ENTRY_POINTS[key] = cres.entry_point
        return result


# -- Welch (issue 11, item 3): a second kernel, and N_EULER_BODIES read at run time ----

#: ``phi(t, q, p, out)``.
PHI_SIGNATURE = types.void(types.float64, _V, _V, _V)

#: ``phi_q(t, q, p, out)``, out (m, n).
PHI_Q_SIGNATURE = types.void(types.float64, _V, _V, _M)
#: ``force(t, q, qd, p, out)``, ``gamma(t, q, qd, p, out)``.
RHS_SIGNATURE = types.void(types.float64, _V, _V, _V, _V)
#: The Jacobian blocks ``mass_a_q(t, q, a, p, out)``, ``force_q(t, q, qd, p, out)``, ...
BLOCK_SIGNATURE = types.void(types.float64, _V, _V, _V, _M)
#: The Jacobian-block kernels that Newmark-GCP's iteration matrix uses (Eq. 29).
NEWMARK_BLOCKS = ("mass_a_q", "phi_q_lam_q", "force_q", "force_qd", "phi_q_a_q", "gamma_q",
                  "gamma_qd")  # fmt: skip

#: Kernel name → its signature as a first-class function (:func:`kernel_pointer`).
KERNEL_SIGNATURES: dict[str, Any] = {
    "dynamics": DYNAMICS_SIGNATURE,
    "dynamics_values": DYNAMICS_VALUES_SIGNATURE,
    "phi": PHI_SIGNATURE,
    "phi_q": PHI_Q_SIGNATURE,
    "force": RHS_SIGNATURE,
    "gamma": RHS_SIGNATURE,
    **dict.fromkeys(NEWMARK_BLOCKS, BLOCK_SIGNATURE),
}


@njit(**_OPTS)
def welch_chunk(kern, phi_kern, p, ws, t0, h, x, state, n_steps, stride, out_t, out_x, out_f,
                out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.welch.welch_chunk` with n, m and the number of
    Euler-parameter bodies (``ws.quat``, their q offsets) read from the workspace."""
    return welch.welch_chunk(kern, phi_kern, ws.force.shape[0], ws.phi.shape[0], ws.quat.shape[0],
                             p, ws, t0, h, x, state, n_steps, stride, out_t, out_x, out_f,
                             out_aux)  # fmt: skip


@njit(**_OPTS)
def newmark_gcp_chunk(kern, phi_k, phi_q_k, force_k, gamma_k, mass_a_q, phi_q_lam_q, force_q,
                      force_qd, phi_q_a_q, gamma_q, gamma_qd, p, ctrl, ws, t0, h, x, state,
                      n_steps, stride, out_t, out_x, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.newmark_gcp.newmark_gcp_chunk` with n, m read from the
    workspace (Q and Φ are its fields 1 and 2)."""
    return newmark_gcp.newmark_gcp_chunk(kern, phi_k, phi_q_k, force_k, gamma_k, mass_a_q,
                                         phi_q_lam_q, force_q, force_qd, phi_q_a_q, gamma_q,
                                         gamma_qd, ws.force.shape[0], ws.phi.shape[0], p, ctrl, ws,
                                         t0, h, x, state, n_steps, stride, out_t, out_x,
                                         out_aux)  # fmt: skip


SHARED["welch_chunk"] = welch_chunk
SHARED["newmark_gcp_chunk"] = newmark_gcp_chunk

#: Entry point name → the kernels its shared routine takes after ``dynamics``.
SHARED_KERNELS: dict[str, tuple[str, ...]] = {
    "welch_chunk": ("phi",),
    "newmark_gcp_chunk": ("phi", "phi_q", "force", "gamma", *NEWMARK_BLOCKS),
}


def kernel_pointer(module: Any, name: str) -> Any:
    """The module's kernel ``name`` (one of :data:`KERNEL_SIGNATURES`) as a first-class
    function (kept per process; compiled under its lock where a helper compiles this
    module's kernels, :func:`mbdgen.specialize.kernel_claimed`)."""
    kernel = getattr(module, name)
    key = (module.__name__, name, id(kernel))
    kern = _KERNELS.get(key)
    if kern is None:
        from mbdgen import specialize

        signature = KERNEL_SIGNATURES[name]
        with specialize.kernel_claimed(module, name, signature):
            kern = _KERNELS[key] = KernelPointer(kernel, signature)
    return kern


# -- HHT-α and generalized-α (issue 11, item 3): the index-3 loop's twelve kernels ----

#: ``state_residual(t, q, qd, qdd, lam, xd, p, out)``: d(Ẋ, X, q, q̇, q̈, λ, t).
RESIDUAL_SIGNATURE = types.void(types.float64, _V, _V, _V, _V, _V, _V, _V)
#: ``state_residual_blocks(t, q, qd, qdd, lam, xd, p, d_qdd, d_q, d_qd, d_lam, d_xd,
#: d_x)``, dense blocks; ``..._values``: the same outputs as values on their patterns.
RESIDUAL_BLOCKS_SIGNATURE = types.void(types.float64, *(_V,) * 6, *(_M,) * 6)
RESIDUAL_BLOCKS_VALUES_SIGNATURE = types.void(types.float64, *(_V,) * 12)

#: The index-3 loop's kernels after ``dynamics`` (:func:`mbdgen.runtime.hht.index3_chunk`):
#: the Newton matrix's blocks of Eq. 12, then the explicit states' f, f_q, f_q̇, f_X and
#: Q_X, then the implicit states' d and its blocks.
INDEX3_BLOCKS = ("mass_a_q", "phi_q_lam_q", "force_q", "force_qd")
INDEX3_STATE_RATES = ("state_rate", "state_rate_q", "state_rate_qd", "state_rate_x", "force_x")
INDEX3_RESIDUALS = ("state_residual", "state_residual_blocks")

KERNEL_SIGNATURES.update(
    {
        "state_rate": RHS_SIGNATURE,
        "state_rate_q": BLOCK_SIGNATURE,
        "state_rate_qd": BLOCK_SIGNATURE,
        "state_rate_x": BLOCK_SIGNATURE,
        "force_x": BLOCK_SIGNATURE,
        "state_residual": RESIDUAL_SIGNATURE,
        "state_residual_blocks": RESIDUAL_BLOCKS_SIGNATURE,
        "state_residual_blocks_values": RESIDUAL_BLOCKS_VALUES_SIGNATURE,
        # values on the static patterns: ``(t, q, x, p, out)`` with a vector ``out``
        **{
            f"{k}_values": RHS_SIGNATURE
            for k in (*INDEX3_BLOCKS, "state_rate_q", "state_rate_qd", "state_rate_x", "force_x")
        },
    }
)


@njit(cache=True)
def _absent(*args):  # pragma: no cover - the loop calls it only where nd > 0 or implicit
    """Stands for a state kernel that the loop does not call: no states (nd = 0, a
    constant, so Numba prunes the calls) or explicit states only (no residual)."""


@njit(**_OPTS)
def index3_chunk(kern, mass_a_q, phi_q_lam_q, force_q, force_qd, p, ctrl, ws, t0, h, x,
                 state, n_steps, stride, out_t, out_x, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.hht.index3_chunk` for a model without user states
    (nd = 0 as a constant: no state path is compiled), n and m read from the
    workspace, dense or sparse by the workspace's type."""
    return hht.index3_chunk(kern, mass_a_q, phi_q_lam_q, force_q, force_qd, _absent, _absent,
                            _absent, _absent, _absent, _absent, _absent, ws.force.shape[0],
                            ws.phi.shape[0], 0, p.shape[0], False, p, ctrl, ws, t0, h, x, state,
                            n_steps, stride, out_t, out_x, out_aux)  # fmt: skip


@njit(**_OPTS)
def index3_states_chunk(kern, mass_a_q, phi_q_lam_q, force_q, force_qd, state_rate,
                        state_rate_q, state_rate_qd, state_rate_x, force_x, p, ctrl, ws, t0, h,
                        x, state, n_steps, stride, out_t, out_x, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.hht.index3_chunk` for explicit user states Ẋ = f (nd read
    from the workspace's X_{n+1}, the parameters before X in ``p``)."""
    nd = ws.x1.shape[0]
    return hht.index3_chunk(kern, mass_a_q, phi_q_lam_q, force_q, force_qd, state_rate,
                            state_rate_q, state_rate_qd, state_rate_x, force_x, _absent, _absent,
                            ws.force.shape[0], ws.phi.shape[0], nd, p.shape[0] - nd, False, p,
                            ctrl, ws, t0, h, x, state, n_steps, stride, out_t, out_x,
                            out_aux)  # fmt: skip


@njit(**_OPTS)
def index3_implicit_chunk(kern, mass_a_q, phi_q_lam_q, force_q, force_qd, state_rate,
                          state_rate_q, state_rate_qd, state_rate_x, force_x, state_residual,
                          state_residual_blocks, p, ctrl, ws, t0, h, x, state, n_steps, stride,
                          out_t, out_x, out_aux):  # fmt: skip
    """:func:`mbdgen.runtime.hht.index3_chunk` for implicit user states
    d(Ẋ, X, q, q̇, q̈, λ, t) = 0 (the module's ``IMPLICIT_STATES``)."""
    nd = ws.x1.shape[0]
    return hht.index3_chunk(kern, mass_a_q, phi_q_lam_q, force_q, force_qd, state_rate,
                            state_rate_q, state_rate_qd, state_rate_x, force_x, state_residual,
                            state_residual_blocks, ws.force.shape[0], ws.phi.shape[0], nd,
                            p.shape[0] - nd, True, p, ctrl, ws, t0, h, x, state, n_steps, stride,
                            out_t, out_x, out_aux)  # fmt: skip


def _index3(module: Any) -> tuple[Any, tuple[str, ...]]:
    """The shared index-3 routine for ``module`` and the kernels it takes after
    ``dynamics`` (``*_values`` on a sparse module, as its own entry point binds)."""
    if not getattr(module, "N_STATES", 0):
        routine, names = index3_chunk, INDEX3_BLOCKS
    elif getattr(module, "IMPLICIT_STATES", False):
        routine = index3_implicit_chunk
        names = INDEX3_BLOCKS + INDEX3_STATE_RATES + INDEX3_RESIDUALS
    else:
        routine, names = index3_states_chunk, INDEX3_BLOCKS + INDEX3_STATE_RATES
    if getattr(module, "LINEAR_ALGEBRA", "dense") == "sparse":
        names = tuple(k if k in ("state_rate", "state_residual") else f"{k}_values" for k in names)
    return routine, names


# -- The energy check and the reactions (issue 11, item 3): per result, not per step ----

#: ``energy(t, q, qd, p, out)`` → [T, V, P]; ``phi_t(t, q, p, out)``;
#: ``reactions(t, q, lam, p, out)``, out (reaction rows × 12).
KERNEL_SIGNATURES.update(
    {
        "energy": RHS_SIGNATURE,
        "phi_t": PHI_SIGNATURE,
        "reactions": BLOCK_SIGNATURE,
    }
)


@njit(**_OPTS)
def energy_rows(energy, phi_t, t, q, qd, lam, p, states, energy_out, power_out):
    """:func:`mbdgen.runtime.postprocess.energy_rows` with the kernels by pointer."""
    postprocess.energy_rows(energy, phi_t, t, q, qd, lam, p, states, energy_out, power_out)


@njit(**_OPTS)
def derived(energy, reactions, phi_t, t, q, qd, lam, p, states, energy_out, power_out,
            reactions_out):  # fmt: skip
    """:func:`mbdgen.runtime.postprocess.derived` with the kernels by pointer."""
    postprocess.derived(energy, reactions, phi_t, t, q, qd, lam, p, states, energy_out,
                        power_out, reactions_out)  # fmt: skip


@njit(**_OPTS)
def project_rows(kern, la, t, x, aux, n, m, nd, p, active, tol):
    """:func:`mbdgen.runtime.postprocess.project_rows` with ``dynamics`` (or
    ``dynamics_values``) by pointer: one compile per installation for every model."""
    return postprocess.project_rows(kern, la, t, x, aux, n, m, nd, p, active, tol)


def project_entry(module: Any, name: str) -> Callable[..., Any]:
    """The output-row projection (:func:`project_rows`) with the module's kernel
    ``name`` ("dynamics" or "dynamics_values") bound: by pointer, or where shared entry
    points are off, the kernel itself (Numba specializes the routine for it)."""
    if not enabled():
        kernel = getattr(module, name)
        return lambda *args: postprocess.project_rows(kernel, *args)
    bound = module.__dict__.setdefault("_mbdgen_project", {})
    if name not in bound:  # one per module: it keeps its last call's entry point
        bound[name] = _Bound(project_rows, (dynamics_pointer(module, name),), "project_rows")
    return bound[name]


#: Post-processing entry point → (shared routine, its kernels in order).  They run once
#: per result, where a loop over rows does not need constant sizes: every model takes
#: them, and a new model compiles its ``energy`` and ``phi_t`` kernels but no wrapper.
POSTPROCESS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "energy_rows": (energy_rows, ("energy", "phi_t")),
    "derived": (derived, ("energy", "reactions", "phi_t")),
}


def postprocess_entry(module: Any, name: str) -> Callable[..., Any]:
    """``module.<name>`` ("energy_rows" or "derived") through its shared routine, or the
    module's own where shared entry points are off."""
    if not enabled():
        return getattr(module, name)
    routine, names = POSTPROCESS[name]
    return _Bound(routine, tuple(kernel_pointer(module, k) for k in names), name)
