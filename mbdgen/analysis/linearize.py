"""The linear model about an equilibrium, and its modes: exact, from the generated blocks.

About an equilibrium q_e (q̇ = q̈ = 0 and Φ_qᵀλ_e = Q, Haug 1989 Eq. 7.5.2) the
equations of motion M(q) q̈ + Φ_qᵀλ = Q(q, q̇, t), Φ(q) = 0 (Haug 1989 Eq. 6.3.18)
perturbed by δq, δq̇, δλ are, to first order,

    M δq̈ + (K_λ − Q_q) δq − Q_q̇ δq̇ + Φ_qᵀ δλ = 0,     Φ_q δq = 0,

K_λ = (Φ_qᵀλ_e)_q the stiffness of the reactions as the constraint directions turn
with q (the block ``phi_q_lam_q`` of Negrut et al. 2007, Eq. 12); (M q̈)_q vanishes
with q̈.  The admissible δq are δq = H δv, v the independent coordinates of a
partition by Gaussian elimination with full pivoting (Haug 1989 Eq. 4.4.8) and H =
[−Φ_u⁻¹Φ_v; I] (Eqs. 7.5.17-7.5.19).  Premultiplied by Hᵀ, which removes Φ_qᵀδλ
because Φ_q H = 0:

    M_v δv̈ + C_v δv̇ + K_v δv = Hᵀ E u,
    M_v = HᵀMH,   C_v = −Hᵀ Q_q̇ H,   K_v = Hᵀ(K_λ − Q_q)H,

with E selecting the coordinates on which the inputs u (generalized forces) act.  In
the states x = [δv; δv̇]: ẋ = A x + B u, y = [δq; δq̇] = C x (D = 0), with

    A = [[0, I], [−M_v⁻¹K_v, −M_v⁻¹C_v]],   B = [[0], [M_v⁻¹HᵀE]],   C = [[H, 0], [0, H]].

Every matrix comes from the generated kernels (M, Φ_q, Q_q, Q_q̇, (Φ_qᵀλ)_q), so the
model is exact to rounding, never a finite difference (DESIGN rule 2).  K_v is also
the Hessian of the potential energy on the constraint manifold for conservative
forces (the λ term is the manifold's curvature).  The eigenvalues of A do not depend
on the partition; the mode shapes are given in the model's own coordinates, δq = H δv.

Not covered yet: user states, steady motions (a cyclic coordinate at constant speed)
and velocity constraints; a model with states is refused in one line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from mbdgen.analysis.assembly import _kernel, redundant_rows
from mbdgen.errors import MbdgenError

#: Eigenvalues below this share of the largest |λ| (and singular values of K_v below
#: it of the largest) are a neutral mode's zero (see :meth:`Linearization.modes`).
ZERO_SHARE = 1e-6
#: The ``format`` tag in the metadata of a saved linear model (:meth:`Linearization.save`).
LINEAR_FORMAT = "mbdgen-linear-model"
#: Newton iterations at most that polish a found equilibrium to rounding.
POLISH_ITERATIONS = 5
#: The operating point is an equilibrium where the reduced static force ‖Hᵀ Q‖∞ is at
#: most this share of max(1, ‖Q‖∞).
EQUILIBRIUM_TOL = 1e-8


def _shown_real(value: complex) -> float:
    """Re λ, as 0 where it is at the rounding level of |λ| (an undamped mode)."""
    return 0.0 if abs(value.real) <= 1e-12 * abs(value) else value.real


def eigenvalue_text(value: complex, digits: int = 6) -> str:
    """``-0.5 ± 3.2j`` (the pair of Im λ > 0), ``-0.5`` (real), Re λ at rounding level
    of |λ| shown as 0."""
    real = _shown_real(value)
    if value.imag > 0.0:
        return f"{real:.{digits}g} ± {value.imag:.{digits}g}j"
    return f"{real:.{digits}g}"


@dataclass(frozen=True)
class Mode:
    """One eigenvalue λ of A (of a complex pair, the one with Im λ > 0) and its shape.

    ``frequency_hz`` is the undamped natural frequency |λ|/2π, ``damped_hz`` Im λ/2π,
    ``damping_ratio`` −Re λ/|λ| (1 for a decaying real eigenvalue, −1 for a growing
    one, NaN at λ = 0), ``shape`` δq in the model's coordinates, scaled so that its
    largest component is 1 (real), and ``dominant`` the coordinates whose component is
    at least half of that.
    """

    eigenvalue: complex
    frequency_hz: float
    damped_hz: float
    damping_ratio: float
    shape: np.ndarray
    dominant: tuple[str, ...]

    @property
    def stable(self) -> bool:
        return self.eigenvalue.real < 0.0


@dataclass
class Linearization:
    """The linear model about ``q`` (see the module docstring for every matrix).

    Attributes
    ----------
    q, lam : the operating point and its multipliers (Φ_qᵀλ = Q).
    coordinates : names of q; ``independent`` those of v (the states are v, then v̇).
    H : (n, k) δq = H δv.
    mass, damping, stiffness : (k, k) M_v, C_v, K_v.
    A, B, C, D : the state-space model ẋ = A x + B u, y = C x + D u, x = [δv; δv̇],
        u the generalized forces on ``inputs``, y = [δq; δq̇].
    eigenvalues : of A, sorted by |λ| (then by Im λ).
    residual : ‖Hᵀ Q‖∞ at q, the static force left over.
    """

    q: np.ndarray
    lam: np.ndarray
    t: float
    coordinates: tuple[str, ...]
    independent: tuple[str, ...]
    inputs: tuple[str, ...]
    H: np.ndarray
    mass: np.ndarray
    damping: np.ndarray
    stiffness: np.ndarray
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    residual: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def state_names(self) -> tuple[str, ...]:
        return self.independent + tuple(f"{name}_d" for name in self.independent)

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.coordinates + tuple(f"{name}_d" for name in self.coordinates)

    def modes(self) -> list[Mode]:
        """The modes by |λ|: first the neutral ones, then one per real eigenvalue and per
        complex pair (the one with Im λ > 0).

        A neutral mode (a direction without stiffness, e.g. a link's spin about its own
        axis on spherical joints) is a double zero eigenvalue of A, a Jordan block,
        which rounding splits into ±√ε|λ|max: eigenvalues below :data:`ZERO_SHARE` ×
        max |λ| are taken as zero, and the neutral modes' shapes are the null space of
        K_v (its singular values below :data:`ZERO_SHARE` × the largest)."""
        modes = []
        k = len(self.independent)
        sizes = np.abs(self.eigenvalues)
        zero = ZERO_SHARE * float(sizes.max(initial=0.0))
        _, sv, vt = np.linalg.svd(self.stiffness)
        null = vt[sv <= ZERO_SHARE * float(sv.max(initial=0.0))]
        for direction in null:
            modes.append(self._mode(0j, self.H @ direction))
        for value, vector in zip(self.eigenvalues, self.eigenvectors.T, strict=True):
            if value.imag < 0.0 or abs(value) <= zero:
                continue
            modes.append(self._mode(complex(value), self.H @ vector[:k]))
        return modes

    def _mode(self, value: complex, shape: np.ndarray) -> Mode:
        big = int(np.argmax(np.abs(shape)))
        if abs(shape[big]) > 0.0:
            shape = shape / shape[big]
        if np.abs(np.imag(shape)).max(initial=0.0) <= 1e-12:
            shape = np.real(shape)
        size = abs(value)
        dominant = tuple(
            name for name, c in zip(self.coordinates, np.abs(shape), strict=True) if c >= 0.5
        )
        return Mode(
            eigenvalue=value,
            frequency_hz=size / (2.0 * math.pi),
            damped_hz=value.imag / (2.0 * math.pi),
            damping_ratio=-value.real / size if size > 0.0 else math.nan,
            shape=shape,
            dominant=dominant,
        )

    @property
    def unstable(self) -> list[Mode]:
        """The modes that grow (Re λ > 0 beyond rounding): the equilibrium is unstable
        where there is one (a maximum or a saddle of the potential, or a flutter)."""
        return [mode for mode in self.modes() if _shown_real(mode.eigenvalue) > 0.0]

    def table(self) -> str:
        """The modes as a text table: an oscillating mode's natural frequency f_n =
        |λ|/2π and damping ratio −Re λ/|λ|; a real eigenvalue (an overdamped or a
        growing motion) its time constant τ = 1/|λ| instead."""
        lines = [
            f"{'mode':>4}  {'f_n [Hz]':>12}  {'damping ratio':>13}  {'eigenvalue [1/s]':>30}  "
            "dominant coordinates"
        ]
        for i, mode in enumerate(self.modes(), 1):
            value = mode.eigenvalue
            text = "0 (neutral)" if value == 0 else eigenvalue_text(value)
            real = _shown_real(value)
            frequency = f"{mode.frequency_hz:>12.6g}"
            ratio = "-" if math.isnan(mode.damping_ratio) else f"{0.0 - real / abs(value):.6g}"
            if value != 0 and value.imag == 0.0:  # real: decays or grows, no frequency
                frequency = f"{'-':>12}"
                ratio = f"{'grows' if real > 0 else 'decays'}, τ = {1.0 / abs(real):.4g} s"
            lines.append(
                f"{i:>4}  {frequency}  {ratio:>13}  {text:>30}  {', '.join(mode.dominant)}"
            )
        return "\n".join(lines)

    def to_scipy(self) -> Any:
        """The model as a ``scipy.signal.StateSpace`` (inputs and outputs in the order
        of :attr:`inputs` and :attr:`output_names`)."""
        from scipy import signal

        return signal.StateSpace(self.A, self._b(), self.C, self._d())

    def to_control(self) -> Any:
        """The model as a python-control ``StateSpace`` (``control.ss``), with the
        state, input and output names; python-control is not a dependency of mbdgen."""
        try:
            import control
        except ImportError:
            raise MbdgenError(
                "python-control is not installed: pip install control (or use to_scipy())"
            ) from None
        return control.ss(
            self.A,
            self._b(),
            self.C,
            self._d(),
            states=list(self.state_names),
            inputs=list(self.inputs) or ["u"],
            outputs=list(self.output_names),
        )

    def _b(self) -> np.ndarray:
        # a system without inputs as one input that does nothing (state-space classes
        # need at least one)
        return self.B if self.B.shape[1] else np.zeros((self.A.shape[0], 1))

    def _d(self) -> np.ndarray:
        return self.D if self.D.shape[1] else np.zeros((self.C.shape[0], 1))

    def save(self, path: str | Path) -> Path:
        """Write the matrices, names and eigenvalues as a NumPy ``.npz``, atomically."""
        import json

        from mbdgen.fileio import atomic_write

        path = Path(path)
        if path.suffix.lower() != ".npz":
            raise MbdgenError(
                f"a linear model is written as .npz, not {path.suffix or path.name!r}"
            )
        names = {
            "format": LINEAR_FORMAT,
            "coordinates": list(self.coordinates),
            "independent": list(self.independent),
            "states": list(self.state_names),
            "inputs": list(self.inputs),
            "outputs": list(self.output_names),
            "t": self.t,
            "residual": self.residual,
            "info": self.info,
        }
        with atomic_write(path) as fh:
            np.savez(
                fh,
                A=self.A, B=self.B, C=self.C, D=self.D, H=self.H, mass=self.mass,
                damping=self.damping, stiffness=self.stiffness, q=self.q, lam=self.lam,
                eigenvalues=self.eigenvalues, eigenvectors=self.eigenvectors,
                meta=np.array(json.dumps(names)),
            )  # fmt: skip
        return path

    @classmethod
    def load(cls, path: str | Path) -> Linearization:
        """A linear model written by :meth:`save` (``mbdgen linearize -o``)."""
        import json
        import zipfile

        where = repr(str(path))
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                if not isinstance(meta, dict) or meta.get("format") != LINEAR_FORMAT:
                    raise MbdgenError(f"{where} is not a linear model written by mbdgen linearize")
                arrays = {key: data[key] for key in data.files if key != "meta"}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise MbdgenError(
                f"cannot read {where} as a linear model: {type(exc).__name__}: {exc}"
            ) from None
        return cls(
            q=arrays["q"], lam=arrays["lam"], t=float(meta["t"]),
            coordinates=tuple(meta["coordinates"]), independent=tuple(meta["independent"]),
            inputs=tuple(meta["inputs"]), H=arrays["H"], mass=arrays["mass"],
            damping=arrays["damping"], stiffness=arrays["stiffness"], A=arrays["A"],
            B=arrays["B"], C=arrays["C"], D=arrays["D"], eigenvalues=arrays["eigenvalues"],
            eigenvectors=arrays["eigenvectors"], residual=float(meta["residual"]),
            info=meta["info"],
        )  # fmt: skip


class _Point:
    """The partition, H, Q, λ and the blocks at one configuration q (module docstring)."""

    def __init__(self, module: ModuleType, q: np.ndarray, p: np.ndarray, t: float) -> None:
        from mbdgen.runtime.partition import choose_partition

        n, m = module.N_COORDINATES, module.N_CONSTRAINTS
        jac = _kernel(module, "phi_q", t, q, p)
        rows = list(range(m))
        if m:
            _, redundant = redundant_rows(jac)
            rows = [i for i in rows if i not in redundant]
        if rows:
            dep, ind, _ = choose_partition(jac[rows])
        else:
            dep, ind = np.zeros(0, dtype=np.int64), np.arange(n)
        if ind.size == 0:
            raise MbdgenError(
                f"model {module.MODEL_NAME!r} has no degree of freedom: nothing moves to linearize"
            )
        self.ind = ind
        self.H = np.zeros((n, ind.size))
        self.H[ind, np.arange(ind.size)] = 1.0
        if dep.size:
            self.H[dep] = -np.linalg.solve(jac[rows][:, dep], jac[rows][:, ind])
        zero = np.zeros(n)
        self.force = _kernel(module, "force", t, q, zero, p)
        self.residual = float(np.abs(self.H.T @ self.force).max(initial=0.0))
        self.scale = max(1.0, float(np.abs(self.force).max(initial=0.0)))
        self.lam = np.zeros(m)
        if m:
            self.lam = np.linalg.lstsq(jac.T, self.force, rcond=None)[0]
        self.blocks = {}
        for block, args in (
            ("mass", (t, q, p)),
            ("force_q", (t, q, zero, p)),
            ("force_qd", (t, q, zero, p)),
            ("phi_q_lam_q", (t, q, self.lam, p)),
        ):
            out = np.zeros((n, n))
            getattr(module, block)(*args, out)
            self.blocks[block] = out
        self.stiffness = self.H.T @ (self.blocks["phi_q_lam_q"] - self.blocks["force_q"]) @ self.H


def linearize(
    model: ModuleType | str | Path,
    q0: Sequence[float] | Mapping[str, float] | np.ndarray | None = None,
    *,
    params: Mapping[str, float] | None = None,
    t: float = 0.0,
    find_equilibrium: bool = True,
    inputs: Sequence[str] = (),
) -> Linearization:
    """The linear model of ``model`` about an equilibrium (see the module docstring).

    Parameters
    ----------
    q0 : the operating point, or the guess from which the equilibrium is found (every
        coordinate, or some by name; default the model's ``Q0``).
    find_equilibrium : find the equilibrium near ``q0`` first
        (:func:`mbdgen.analysis.equilibrium.equilibrium`, minimum potential energy);
        False: ``q0`` itself, put onto Φ = 0, which must be an equilibrium.
    inputs : coordinates on which an input generalized force acts (a column of B each).
    t : the time at which forces and constraints are evaluated.

    Raises
    ------
    MbdgenError
        The model has user states or moving constraints, the point is not an
        equilibrium, a name is unknown, or M_v is singular (the message says which).
    """
    from mbdgen.analysis.equilibrium import equilibrium
    from mbdgen.analysis.kinematics import newton_positions
    from mbdgen.inputs import coordinate_vector, parameter_vector, resolve_model

    module = resolve_model(model)
    name = module.MODEL_NAME
    if getattr(module, "N_STATES", 0):
        raise MbdgenError(
            f"model {name!r} has user states ({', '.join(module.STATE_NAMES)}): linearize "
            "covers models without them"
        )
    coordinates = tuple(module.COORDINATE_NAMES)
    if isinstance(inputs, str):  # one name, not its letters
        inputs = (inputs,)
    unknown = [c for c in inputs if c not in coordinates]
    if unknown:
        raise MbdgenError(
            f"no coordinate {unknown[0]!r} to take an input force; the coordinates are "
            f"{', '.join(coordinates)}"
        )
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    p = parameter_vector(module, params)
    q = coordinate_vector(module, q0, np.asarray(module.Q0, dtype=float), "q0")
    if find_equilibrium:
        try:
            q = equilibrium(module, q0=q, t=t, params=params).q
        except MbdgenError as first:
            # the minimizer's partition can turn singular on the way (a point mass
            # hanging below its pivot from a horizontal start): settle instead
            try:
                q = equilibrium(module, q0=q, t=t, params=params, method="settle").q
            except MbdgenError:
                raise MbdgenError(f"no equilibrium found near q0: {first}") from None
    else:
        solved = newton_positions(module, t, q, p, tol=1e-12, max_iterations=100)
        if solved is None:
            raise MbdgenError(f"no q near q0 satisfies the constraints of {name!r}")
        q = solved[0]
    if m and np.abs(_kernel(module, "phi_t", t, q, p)).max(initial=0.0) > 0.0:
        raise MbdgenError(
            f"the constraints of {name!r} depend on time (a driver): it has no equilibrium "
            "to linearize about"
        )
    point = _Point(module, q, p, t)
    if find_equilibrium:
        # Newton on Hᵀ Q = 0 with the exact K_v (its Jacobian, up to the sign): the
        # search above stops at its gradient tolerance, a few iterations reach rounding
        for _ in range(POLISH_ITERATIONS):
            if point.residual <= 1e-15 * point.scale:
                break
            step = np.linalg.lstsq(point.stiffness, point.H.T @ point.force, rcond=None)[0]
            solved = newton_positions(
                module, t, q + point.H @ step, p, tol=1e-14, max_iterations=20
            )
            if solved is None:
                break
            trial = _Point(module, solved[0], p, t)
            if not trial.residual < point.residual:
                break
            q, point = solved[0], trial
    H, ind, lam, blocks = point.H, point.ind, point.lam, point.blocks
    residual, scale = point.residual, point.scale
    if not residual <= EQUILIBRIUM_TOL * scale:
        where = "the equilibrium search ended at a point where" if find_equilibrium else "at q0"
        raise MbdgenError(
            f"q is not an equilibrium of {name!r}: {where} the force along the independent "
            f"coordinates ({', '.join(coordinates[i] for i in ind)}) is {residual:.3g}"
            + (
                ""
                if find_equilibrium
                else "; find one near q0 first (find_equilibrium=True, the default; on the "
                "command line leave out --at-q0)"
            )
        )
    mass = H.T @ blocks["mass"] @ H
    damping = -H.T @ blocks["force_qd"] @ H
    stiffness = point.stiffness
    k = ind.size
    select = np.zeros((n, len(inputs)))
    for j, coordinate in enumerate(inputs):
        select[coordinates.index(coordinate), j] = 1.0
    try:
        solved_all = np.linalg.solve(mass, np.hstack([stiffness, damping, H.T @ select]))
    except np.linalg.LinAlgError:
        raise MbdgenError(
            f"the reduced mass matrix of {name!r} is singular at q: a coordinate without inertia"
        ) from None
    A = np.zeros((2 * k, 2 * k))
    A[:k, k:] = np.eye(k)
    A[k:, :k] = -solved_all[:, :k]
    A[k:, k:] = -solved_all[:, k : 2 * k]
    B = np.zeros((2 * k, len(inputs)))
    B[k:] = solved_all[:, 2 * k :]
    C = np.zeros((2 * n, 2 * k))
    C[:n, :k] = H
    C[n:, k:] = H
    from scipy.linalg import eig

    values, vectors = eig(A)
    order = np.lexsort((values.imag, np.round(np.abs(values), 12)))
    return Linearization(
        q=q,
        lam=lam,
        t=t,
        coordinates=coordinates,
        independent=tuple(coordinates[i] for i in ind),
        inputs=tuple(inputs),
        H=H,
        mass=mass,
        damping=damping,
        stiffness=stiffness,
        A=A,
        B=B,
        C=C,
        D=np.zeros((2 * n, len(inputs))),
        eigenvalues=values[order],
        eigenvectors=vectors[:, order],
        residual=residual,
        info={
            "model": name,
            "parameters": dict(zip(module.PARAMETER_NAMES, p.tolist(), strict=True)),
        },
    )


@dataclass
class ModeSweep:
    """The eigenvalues of the linear model against one parameter (the stability plots
    of the field: real and imaginary parts against, e.g., a speed or a stiffness).

    ``eigenvalues[i]`` are those of ``values[i]``'s model, sorted by |λ| as
    :attr:`Linearization.eigenvalues`; ``equilibria[i]`` the operating point found.
    """

    model: str
    parameter: str
    values: np.ndarray
    eigenvalues: np.ndarray
    equilibria: np.ndarray
    coordinates: tuple[str, ...]

    def to_dataframe(self) -> Any:
        """One row per parameter value: the value, then Re and Im of each eigenvalue."""
        import pandas as pd

        columns: dict[str, np.ndarray] = {self.parameter: self.values}
        for j in range(self.eigenvalues.shape[1]):
            columns[f"re_{j + 1}"] = self.eigenvalues[:, j].real
            columns[f"im_{j + 1}"] = self.eigenvalues[:, j].imag
        return pd.DataFrame(columns)

    def save(self, path: str | Path) -> Path:
        """The table as ``.csv`` (:meth:`to_dataframe`), atomically."""
        from mbdgen.fileio import atomic_write

        path = Path(path)
        if path.suffix.lower() != ".csv":
            raise MbdgenError(f"an eigenvalue sweep is written as .csv, not {path.name!r}")
        with atomic_write(path, "w") as fh:
            self.to_dataframe().to_csv(fh, index=False, float_format="%.12g")
        return path

    def plot(self, path: str | Path, dpi: int = 120) -> Path:
        """Re λ and Im λ ≥ 0 against the parameter (.png, .pdf or .svg), atomically."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from mbdgen.fileio import atomic_write
        from mbdgen.results import PLOT_SUFFIXES

        path = Path(path)
        if path.suffix.lower() not in PLOT_SUFFIXES:
            raise MbdgenError(f"a plot is written as {', '.join(PLOT_SUFFIXES)}, not {path.name!r}")
        x = np.repeat(self.values, self.eigenvalues.shape[1])
        flat = self.eigenvalues.ravel()
        fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
        try:
            ax.axhline(0.0, color="0.5", lw=0.8)
            ax.plot(x, flat.real, ".", ms=3, color="C0", label="Re λ")
            upper = flat.imag >= 0.0
            ax.plot(x[upper], flat.imag[upper], ".", ms=3, color="C1", label="Im λ (≥ 0)")
            ax.set_xlabel(self.parameter)
            ax.set_ylabel("eigenvalue [1/s]")
            ax.set_title(f"{self.model}: eigenvalues of the linear model against {self.parameter}")
            ax.grid(True, alpha=0.3)
            ax.legend()
            with atomic_write(path) as fh:
                fig.savefig(fh, dpi=dpi, format=path.suffix.lower().lstrip("."))
        finally:
            plt.close(fig)
        return path


def sweep_modes(
    model: ModuleType | str | Path,
    parameter: str,
    values: Sequence[float] | np.ndarray,
    q0: Sequence[float] | Mapping[str, float] | None = None,
    *,
    params: Mapping[str, float] | None = None,
    t: float = 0.0,
    find_equilibrium: bool = True,
) -> ModeSweep:
    """The linear model's eigenvalues at each of ``values`` of ``parameter`` (the other
    parameters from ``params``, else the model's).  Each equilibrium is sought from the
    one before it (a continuation), so a branch is followed as the parameter moves."""
    from mbdgen.inputs import resolve_model

    module = resolve_model(model)
    names = tuple(module.PARAMETER_NAMES)
    if parameter not in names:
        from difflib import get_close_matches

        near = get_close_matches(parameter, names, n=3)
        hint = f"; did you mean {' or '.join(near)}?" if near else f"; they are {', '.join(names)}"
        raise MbdgenError(f"model {module.MODEL_NAME!r} has no parameter {parameter!r}{hint}")
    grid = np.asarray(values, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.isfinite(grid).all():
        raise MbdgenError(f"the values of {parameter} must be a non-empty list of finite numbers")
    rows, points = [], []
    guess: Sequence[float] | Mapping[str, float] | np.ndarray | None = q0
    for value in grid:
        try:
            lin = linearize(
                module,
                guess,
                params={**(params or {}), parameter: float(value)},
                t=t,
                find_equilibrium=find_equilibrium,
            )
        except MbdgenError as exc:
            raise MbdgenError(f"at {parameter} = {value:g}: {exc}") from None
        rows.append(lin.eigenvalues)
        points.append(lin.q)
        guess = lin.q
    return ModeSweep(
        model=module.MODEL_NAME,
        parameter=parameter,
        values=grid,
        eigenvalues=np.array(rows),
        equilibria=np.array(points),
        coordinates=tuple(module.COORDINATE_NAMES),
    )


def mode_motion(
    model: ModuleType | str | Path,
    lin: Linearization,
    mode: int,
    *,
    amplitude: float = 0.1,
    periods: float = 2.0,
    rows_per_period: int = 48,
) -> Any:
    """Mode ``mode`` (1-based, as :meth:`Linearization.table` numbers them) as a
    :class:`~mbdgen.results.Result` to animate (:func:`mbdgen.animate`): q(t) = q_e +
    amplitude · Re(φ e^{iωt}) over ``periods`` periods of ω = Im λ (the shape φ scaled
    so that its largest component is 1, in that coordinate's unit; the damping left
    out, so the shape is seen), each row put back onto Φ = 0 by Newton's method.  A
    real or neutral mode swings as φ sin(πt) over 2 s per period."""
    from mbdgen import geometry
    from mbdgen.analysis.kinematics import newton_positions
    from mbdgen.inputs import resolve_model
    from mbdgen.results import Result
    from mbdgen.simulation import body_layout
    from mbdgen.units import label_result

    module = resolve_model(model)
    modes = lin.modes()
    if not 1 <= mode <= len(modes):
        raise MbdgenError(f"mode {mode} does not exist: {lin.info['model']!r} has {len(modes)}")
    chosen = modes[mode - 1]
    omega = chosen.eigenvalue.imag
    period = 2.0 * math.pi / omega if omega > 0.0 else 2.0
    rows = max(2, int(round(periods * rows_per_period)) + 1)
    t = np.linspace(0.0, periods * period, rows)
    shape = np.asarray(chosen.shape, dtype=complex)
    if omega > 0.0:
        wave = np.exp(1j * omega * t)
    else:
        wave = np.sin(2.0 * math.pi * t / period) + 0j  # period 2 s: sin(πt)
    p = np.array([lin.info["parameters"][name] for name in module.PARAMETER_NAMES])
    q = np.empty((rows, lin.q.size))
    for i, w in enumerate(wave):
        guess = lin.q + amplitude * np.real(shape * w)
        solved = newton_positions(module, lin.t, guess, p, tol=1e-12, max_iterations=50)
        q[i] = guess if solved is None else solved[0]
    zeros = np.zeros_like(q)
    m = module.N_CONSTRAINTS
    result = Result(
        t=t,
        q=q,
        qd=zeros,
        qdd=zeros,
        lam=np.zeros((rows, m)),
        phi_norm=np.zeros(rows),
        phid_norm=np.zeros(rows),
        coordinates=tuple(module.COORDINATE_NAMES),
        info={
            "model": module.MODEL_NAME,
            "method": f"mode {mode}",
            "status": "finished",
            "message": (
                f"mode {mode}: {chosen.frequency_hz:.4g} Hz, amplitude {amplitude:g}, "
                "damping left out"
            ),
            "geometry": geometry.describe(module, p),
            "bodies": body_layout(module),
            "parameters": lin.info["parameters"],
        },
    )
    label_result(result, module)
    return result
