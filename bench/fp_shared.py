"""Prototype (issue 11, item 3a): integrators compiled once for all models.

The model kernel arrives as a first-class function (a ``numba.cfunc`` of the
``dynamics`` ABI), so the compiled integrator's argument types do not depend on the
model and its on-disk cache entry serves every model.  Sizes are read at run time.
"""

from numba import njit

from mbdgen.runtime import explicit, index1


@njit(cache=True, nogil=True, error_model="numpy")
def abm_chunk_fp(kern, p, ctrl, ws, aux, t0, h, x, hist, scratch, state, ab_coef, am_coef,
                 rk_a, rk_b, rk_c, n_steps, stride, out_t, out_x, out_f, out_aux):  # fmt: skip
    n = ws.force.shape[0]
    m = ws.phi.shape[0]
    return explicit.abm_chunk(index1.index1_rhs, kern, n, m, p, ctrl, ws, aux, t0, h, x, hist,
                              scratch, state, ab_coef, am_coef, rk_a, rk_b, rk_c, n_steps, stride,
                              out_t, out_x, out_f, out_aux)  # fmt: skip
