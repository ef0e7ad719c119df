"""Equilibrium analysis (Haug 1989 §7.5, Eqs. 7.5.1-7.5.24, and §7.1).

An equilibrium is a configuration q_e with q̇ = q̈ = 0 (Eq. 7.5.1), where the applied
forces are balanced by the constraint reactions, Φ_qᵀλ = Q^A (Eq. 7.5.2).  Haug
advises against solving Eq. 7.5.2 by Newton's method (ill-conditioning, poor
estimates of λ, unstable equilibria) and offers two methods, both here:

``method="minimize"`` — minimum total potential energy (Eqs. 7.5.3-7.5.24).  The
coordinates are partitioned into dependent u and independent v (Gaussian elimination
with full pivoting on Φ_q, :func:`mbdgen.runtime.partition.choose_partition`); for
each v the dependent u solve Φ(u, v) = 0 by Newton's method, so V(v) is an
unconstrained function whose gradient is (Eqs. 7.5.14, 7.5.23, 7.5.24)

    dVᵀ/dv = −Q_v − Hᵀ Q_u,     Φ_u H = −Φ_v   (Eqs. 7.5.17, 7.5.19),

with Q = Q^A(q, q̇ = 0, t).  The models give forces, not potentials, so V itself is
not available: the minimizer is BFGS (Haug names the related Fletcher-Powell method
of §4.3) with a line search on the directional derivative alone, which brackets a
sign change of dV/dα = (dV/dv)·d from − to + (a minimum along the line) and accepts
the strong-Wolfe curvature condition |dV/dα| ≤ c₂|dV/dα(0)|.  Because it only
follows the reduced gradient downhill, it converges to minima of V (stable
equilibria), and for forces without a potential it finds where the reduced force
vanishes.

``method="settle"`` — dynamic settling (§7.1): the equations of motion with added
mass-proportional viscous damping, M q̈ + Φ_qᵀλ = Q − c M q̇ (every mode then decays at
rate c/2 or faster when underdamped, whatever the units of q), are integrated until
the velocities and accelerations vanish.  The integration is generalized coordinate
partitioning in the independent [v, v̇] (Haug 1989 §7.3; u and u̇ from Newton's
method and Φ_u u̇ = ν − Φ_v v̇, q̈ from Eq. 7.2.1) with SciPy's explicit DOP853 at
tight tolerances, in windows after each of which the partition is chosen anew.  It is
Python-level (kernels called from Python), which is adequate for the few thousand
right-side evaluations settling takes; it works for non-conservative systems too.

Both report q, the residual reduced gradient (Eq. 7.5.24), the iterations and λ from
Φ_qᵀλ = Q (Eq. 7.5.2).  Forces and constraints are frozen at time ``t``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from mbdgen.analysis.assembly import _kernel, redundant_rows
from mbdgen.analysis.kinematics import newton_positions
from mbdgen.errors import MbdgenError

#: Newton tolerance ‖Φ‖∞ for the dependent coordinates.
NEWTON_TOL = 1e-12


@dataclass
class Equilibrium:
    """An equilibrium configuration and how it was found.

    Attributes
    ----------
    q : equilibrium coordinates.
    lam : Lagrange multipliers, Φ_qᵀλ = Q (Haug 1989 Eq. 7.5.2).
    gradient : the reduced gradient dVᵀ/dv at q (Eq. 7.5.24), the residual force.
    residual : ‖gradient‖∞.
    iterations : BFGS iterations (minimize) or integration windows (settle).
    evaluations : gradient (minimize) or right-side (settle) evaluations.
    independent : names of the independent coordinates v at q.
    phi_norm : ‖Φ(q, t)‖∞.
    settle_time : simulated time to rest (settle only).
    """

    q: np.ndarray
    lam: np.ndarray
    gradient: np.ndarray
    residual: float
    iterations: int
    evaluations: int
    method: str
    t: float
    coordinates: tuple[str, ...]
    independent: tuple[str, ...]
    phi_norm: float
    settle_time: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def coordinate(self, name: str) -> float:
        """The equilibrium value of the coordinate called ``name``."""
        try:
            return float(self.q[self.coordinates.index(name)])
        except ValueError:
            raise MbdgenError(
                f"no coordinate {name!r}; the coordinates are {', '.join(self.coordinates)}"
            ) from None


class _Reduced:
    """V(v) on the constraint manifold: Newton for u, the gradient of Eq. 7.5.24."""

    def __init__(self, module: ModuleType, p: np.ndarray, t: float, q: np.ndarray) -> None:
        self.module, self.p, self.t = module, p, t
        self.n = module.N_COORDINATES
        self.evaluations = 0
        jac = _kernel(module, "phi_q", t, q, p)
        # drop rows that depend on earlier ones: Φ_u must be square and nonsingular
        _, redundant = redundant_rows(jac) if jac.size else (0, [])
        self.rows = [i for i in range(module.N_CONSTRAINTS) if i not in redundant]
        self.partition(q)

    def partition(self, q: np.ndarray) -> None:
        from mbdgen.runtime.partition import choose_partition

        jac = self.jacobian(q)
        if jac.shape[0]:
            try:
                self.u, self.v, _ = choose_partition(jac)
            except ValueError as exc:
                raise MbdgenError(f"cannot partition the coordinates at {q}: {exc}") from None
        else:
            self.u, self.v = np.zeros(0, dtype=np.int64), np.arange(self.n)
        self.cond0 = self.cond(q)

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        return _kernel(self.module, "phi_q", self.t, q, self.p)[self.rows]

    def cond(self, q: np.ndarray) -> float:
        if not self.u.size:
            return 1.0
        return float(np.linalg.cond(self.jacobian(q)[:, self.u]))

    def degraded(self, q: np.ndarray) -> bool:
        """Φ_u has lost a factor 10 of conditioning since the partition was chosen."""
        return self.cond(q) > 10.0 * max(self.cond0, 1.0)

    def position(self, v: np.ndarray, q: np.ndarray) -> np.ndarray | None:
        """q with independent coordinates ``v`` and u from Φ(u, v) = 0 (Newton from
        ``q``'s u corrected by H Δv, Eq. 7.5.18); ``None`` if Newton fails."""
        q = q.copy()
        if self.u.size:
            jac = self.jacobian(q)
            dv = v - q[self.v]
            try:
                q[self.u] -= np.linalg.solve(jac[:, self.u], jac[:, self.v] @ dv)
            except np.linalg.LinAlgError:
                return None
        q[self.v] = v
        for _ in range(25):
            phi = _kernel(self.module, "phi", self.t, q, self.p)[self.rows]
            if np.abs(phi).max(initial=0.0) <= NEWTON_TOL:
                return q
            if not np.all(np.isfinite(phi)):
                return None
            try:
                q[self.u] -= np.linalg.solve(self.jacobian(q)[:, self.u], phi)
            except np.linalg.LinAlgError:
                return None
        return None

    def influence(self, q: np.ndarray) -> np.ndarray:
        """H = −Φ_u⁻¹Φ_v (Eqs. 7.5.17, 7.5.19)."""
        if not self.u.size:
            return np.zeros((0, self.v.size))
        jac = self.jacobian(q)
        return -np.linalg.solve(jac[:, self.u], jac[:, self.v])

    def gradient(self, q: np.ndarray) -> np.ndarray:
        """dVᵀ/dv = −Q_v − Hᵀ Q_u with Q = Q^A(q, 0, t) (Eq. 7.5.24)."""
        self.evaluations += 1
        force = _kernel(self.module, "force", self.t, q, np.zeros(self.n), self.p)
        return -force[self.v] - self.influence(q).T @ force[self.u]


def _multipliers(module: ModuleType, p: np.ndarray, t: float, q: np.ndarray) -> np.ndarray:
    """λ from Φ_qᵀλ = Q (Eq. 7.5.2), least squares (minimum norm if rows are redundant)."""
    if not module.N_CONSTRAINTS:
        return np.zeros(0)
    jac = _kernel(module, "phi_q", t, q, p)
    force = _kernel(module, "force", t, q, np.zeros(module.N_COORDINATES), p)
    lam, *_ = np.linalg.lstsq(jac.T, force, rcond=None)
    return lam


def _line_search(
    red: _Reduced,
    x: np.ndarray,
    q: np.ndarray,
    d: np.ndarray,
    g: np.ndarray,
    alpha: float,
    c2: float,
    max_evaluations: int = 40,
) -> tuple[float, np.ndarray, np.ndarray] | None:
    """A step α along d with |φ'(α)| ≤ c₂|φ'(0)|, φ'(α) = dV/dv(x + α d) · d, found by
    bracketing a − → + sign change of φ' (expansion by 2, then safeguarded secant);
    a failed Newton solve for u counts as overshooting.  Returns (α, q, g) or None."""
    slope0 = float(g @ d)
    lo, slope_lo = 0.0, slope0
    hi, slope_hi = None, None
    best = None
    for _ in range(max_evaluations):
        q_try = red.position(x + alpha * d, q)
        if q_try is None:
            hi, slope_hi = alpha, None
        else:
            g_try = red.gradient(q_try)
            slope = float(g_try @ d)
            if abs(slope) <= c2 * abs(slope0):
                return alpha, q_try, g_try
            if slope < 0.0:
                lo, slope_lo, best = alpha, slope, (alpha, q_try, g_try)
            else:
                hi, slope_hi = alpha, slope
        if hi is None:
            alpha *= 2.0
        elif slope_hi is None:
            alpha = 0.5 * (lo + hi)
        else:
            secant = lo - slope_lo * (hi - lo) / (slope_hi - slope_lo)
            width = hi - lo
            alpha = min(max(secant, lo + 0.1 * width), hi - 0.1 * width)
    return best


def _minimize(
    red: _Reduced, q: np.ndarray, gtol: float, max_iterations: int, max_step: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """BFGS on V(v) with the gradient of Eq. 7.5.24 (Nocedal & Wright Alg. 6.1)."""
    g = red.gradient(q)
    x = q[red.v].copy()
    hinv = np.eye(x.size)
    scaled = False
    iterations = 0
    while np.abs(g).max(initial=0.0) > gtol:
        if iterations == max_iterations:
            raise MbdgenError(
                f"the minimization did not converge in {max_iterations} iterations: "
                f"‖dV/dv‖∞ = {np.abs(g).max():.3e} > {gtol:.1e} remains (raise "
                "max_iterations or try method='settle')"
            )
        if red.degraded(q):
            red.partition(q)
            x, g = q[red.v].copy(), red.gradient(q)
            hinv, scaled = np.eye(x.size), False
        d = -hinv @ g
        if g @ d >= 0.0:
            hinv, scaled = np.eye(x.size), False
            d = -g
        alpha = min(1.0, max_step / float(np.abs(d).max()))
        found = _line_search(red, x, q, d, g, alpha, c2=0.5)
        iterations += 1
        if found is None:
            # the line left the partition's reach before V stopped falling (a point mass
            # on a circle, y independent, going down to where x's row turns singular):
            # another partition at q may follow it further
            dependent = red.u.copy()
            red.partition(q)
            if not np.array_equal(red.u, dependent):
                x, g = q[red.v].copy(), red.gradient(q)
                hinv, scaled = np.eye(x.size), False
                continue
            raise MbdgenError(
                f"the line search found no descent at v = {x} after {iterations} iterations "
                f"(‖dV/dv‖∞ = {np.abs(g).max():.3e}): the dependent coordinates cannot be "
                "solved for near this configuration"
            )
        alpha, q, g_new = found
        s = alpha * d
        y = g_new - g
        x, g = q[red.v].copy(), g_new
        ys = float(y @ s)
        if ys > 1e-14 * np.linalg.norm(y) * np.linalg.norm(s):
            if not scaled:
                hinv = (ys / float(y @ y)) * np.eye(x.size)
                scaled = True
            rho = 1.0 / ys
            a = np.eye(x.size) - rho * np.outer(s, y)
            hinv = a @ hinv @ a.T + rho * np.outer(s, s)
    return q, g, iterations


class _Settling:
    """The damped equations of motion in the independent [v, v̇] of one partition
    (generalized coordinate partitioning, Haug 1989 §7.3), as SciPy right side and
    events."""

    def __init__(self, red: _Reduced, q: np.ndarray, damping: float, tol: float) -> None:
        self.red, self.q, self.damping, self.tol = red, q.copy(), damping, tol
        self.evaluations = 0

    def rhs(self, _t: float, x: np.ndarray) -> np.ndarray:
        """[v̇, v̈] from M q̈ + Φ_qᵀλ = Q − c M q̇, Φ_q q̈ = γ (Eq. 7.2.1)."""
        red = self.red
        module, p, t_eq, n, u, v, rows = red.module, red.p, red.t, red.n, red.u, red.v, red.rows
        self.evaluations += 1
        k = v.size
        q = red.position(x[:k], self.q)
        if q is None:
            # no u for these v (a trial stage past the partition's reach): the
            # integrator rejects the step and retries a shorter one
            return np.full(x.size, np.nan)
        self.q = q
        qd = np.zeros(n)
        qd[v] = x[k:]
        b = _kernel(module, "phi_q", t_eq, q, p)[rows]
        if u.size:
            nu = _kernel(module, "nu", t_eq, q, p)[rows]
            qd[u] = np.linalg.solve(b[:, u], nu - b[:, v] @ x[k:])
        mass = _kernel(module, "mass", t_eq, q, p)
        force = _kernel(module, "force", t_eq, q, qd, p) - self.damping * (mass @ qd)
        gamma = _kernel(module, "gamma", t_eq, q, qd, p)[rows]
        m = b.shape[0]
        a = np.block([[mass, b.T], [b, np.zeros((m, m))]])
        qdd = np.linalg.solve(a, np.concatenate([force, gamma]))[:n]
        return np.concatenate([x[k:], qdd[v]])

    def at_rest(self, t: float, x: np.ndarray) -> float:
        """max(‖v̇‖∞, ‖v̈‖∞) − tol: negative at rest."""
        k = self.red.v.size
        return float(np.abs(np.concatenate([x[k:], self.rhs(t, x)[k:]])).max()) - self.tol

    def degraded(self, _t: float, x: np.ndarray) -> float:
        """Positive once Φ_u has lost a factor 10 of conditioning (time to re-partition)."""
        q = self.red.position(x[: self.red.v.size], self.q)
        if q is None:
            return 1.0
        return self.red.cond(q) - 10.0 * max(self.red.cond0, 1.0)


def _settle(
    red: _Reduced,
    q: np.ndarray,
    damping: float,
    tol: float,
    t_max: float,
    rtol: float,
) -> tuple[np.ndarray, int, int, float]:
    """Integrate M q̈ + Φ_qᵀλ = Q − c M q̇ in [v, v̇] (GCP) until ‖[v̇, v̈]‖∞ ≤ tol,
    re-partitioning at the end of each window of 10/c s or when Φ_u degrades."""
    from scipy.integrate import solve_ivp

    n = red.n
    window = 10.0 / damping
    elapsed, windows, evaluations = 0.0, 0, 0
    qd = np.zeros(n)
    while True:
        red.partition(q)
        v = red.v
        system = _Settling(red, q, damping, tol)
        at_rest, degraded = system.at_rest, system.degraded
        at_rest.__func__.terminal = True  # type: ignore[attr-defined]
        at_rest.__func__.direction = -1  # type: ignore[attr-defined]
        degraded.__func__.terminal = True  # type: ignore[attr-defined]
        degraded.__func__.direction = 1  # type: ignore[attr-defined]
        try:
            sol = solve_ivp(
                system.rhs,
                (0.0, min(window, t_max - elapsed)),
                np.concatenate([q[v], qd[v]]),
                method="DOP853",
                rtol=rtol,
                atol=rtol * 1e-2,
                events=(at_rest, degraded),
            )
        except np.linalg.LinAlgError:
            raise MbdgenError(
                f"settling failed after {elapsed:.3g} s: the mass matrix is singular on the "
                "constraint manifold"
            ) from None
        windows += 1
        evaluations += system.evaluations
        if sol.status < 0:
            raise MbdgenError(f"settling failed after {elapsed:.3g} s: {sol.message}")
        x = sol.y[:, -1]
        elapsed += float(sol.t[-1])
        q_end = red.position(x[: v.size], system.q)
        if q_end is None:
            raise MbdgenError(f"settling failed after {elapsed:.3g} s: Newton did not converge")
        q = q_end
        qd = np.zeros(n)
        qd[v] = x[v.size :]
        if sol.t_events[0].size or system.at_rest(0.0, x) <= 0.0:
            return q, windows, evaluations, elapsed
        if elapsed >= t_max:
            raise MbdgenError(
                f"the system did not come to rest in t_max = {t_max:g} s of settling "
                f"(‖q̇‖∞ = {np.abs(qd).max():.3e}); raise t_max or the damping c = {damping:g}"
            )


def equilibrium(
    model: ModuleType | str | Path,
    *,
    method: str = "minimize",
    q0: Sequence[float] | np.ndarray | None = None,
    t: float = 0.0,
    params: Mapping[str, float] | None = None,
    gtol: float = 1e-10,
    max_iterations: int = 500,
    max_step: float = 0.5,
    damping: float = 1.0,
    settle_tol: float = 1e-9,
    t_max: float = 1000.0,
    rtol: float = 1e-10,
) -> Equilibrium:
    """An equilibrium configuration of ``model`` near ``q0`` (default: its ``Q0``).

    Haug 1989 §7.5 and §7.1; see the module docstring for both methods.

    Parameters
    ----------
    method : ``"minimize"`` (minimum total potential energy by coordinate partitioning,
        Eqs. 7.5.15-7.5.24) or ``"settle"`` (damped dynamic settling).
    t : the time at which forces and constraints are evaluated.
    gtol : minimize: stop when ‖dV/dv‖∞ ≤ gtol · max(1, ‖Q(q0)‖∞).
    max_step : minimize: the largest change of an independent coordinate tried first
        in a line search.
    damping : settle: c of the added damping force −c M q̇, in 1/s.
    settle_tol : settle: at rest when ‖v̇‖∞ and ‖v̈‖∞ are both below it.
    t_max : settle: the longest simulated time.
    rtol : settle: relative tolerance of the integrator.

    Raises
    ------
    MbdgenError
        q0 cannot be assembled, the minimization or the settling fails (the message
        says why), or ``method`` is unknown.
    """
    from mbdgen.inputs import parameter_vector, resolve_model, state_vector

    if method not in ("minimize", "settle"):
        raise MbdgenError(f"unknown equilibrium method {method!r}: use 'minimize' or 'settle'")
    if method == "settle" and not damping > 0:
        raise MbdgenError(f"the settling damping c = {damping:g} must be positive")
    module = resolve_model(model)
    p = parameter_vector(module, params)
    q = state_vector(q0, np.asarray(module.Q0, dtype=float), "q0")
    solved = newton_positions(module, t, q, p, tol=NEWTON_TOL, max_iterations=100)
    if solved is None:
        raise MbdgenError(
            f"cannot assemble {module.MODEL_NAME!r} near q0: no q satisfies Φ(q, t) = 0 there"
        )
    q = solved[0]
    red = _Reduced(module, p, t, q)
    force = _kernel(module, "force", t, q, np.zeros(module.N_COORDINATES), p)
    scale = max(1.0, float(np.abs(force).max(initial=0.0)))
    settle_time = None
    if method == "minimize":
        q, grad, iterations = _minimize(red, q, gtol * scale, max_iterations, max_step)
        evaluations = red.evaluations
    else:
        q, iterations, evaluations, settle_time = _settle(red, q, damping, settle_tol, t_max, rtol)
        grad = red.gradient(q)
    names = tuple(module.COORDINATE_NAMES)
    return Equilibrium(
        q=q,
        lam=_multipliers(module, p, t, q),
        gradient=grad,
        residual=float(np.abs(grad).max(initial=0.0)),
        iterations=iterations,
        evaluations=evaluations,
        method=method,
        t=t,
        coordinates=names,
        independent=tuple(names[i] for i in red.v),
        phi_norm=float(np.abs(_kernel(module, "phi", t, q, p)).max(initial=0.0)),
        settle_time=settle_time,
        info={"model": module.MODEL_NAME, "damping": damping if method == "settle" else None},
    )
