"""The linear model about an equilibrium and its modes (:mod:`mbdgen.analysis.linearize`).

Checked against closed forms (the pendulum, a planar double pendulum of rigid links
and the same links on spherical joints with Euler parameters), against an independent
derivation by sympy.physics.mechanics (tests/linearization_reference.py: the double
pendulum and a spring four-bar with its loop-closure constraints), and against central
differences of mbdgen's own nonlinear accelerations (a damped slider-crank).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import GENERATED, MODELS, TEST_GENERATED, TEST_MODELS, cli, one_line_error

import mbdgen
from mbdgen.analysis.assembly import _kernel
from mbdgen.analysis.linearize import linearize
from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError


@pytest.fixture(scope="module")
def double_pendulum():
    return import_generated(GENERATED / "double_pendulum.py")


def _same_spectrum(a: np.ndarray, b: np.ndarray, rtol: float) -> bool:
    """Two sets of eigenvalues agree: imaginary parts sorted within ``rtol``, real parts
    within ``rtol`` of the largest |λ| (undamped: both at rounding level)."""
    scale = float(np.abs(b).max())
    by_imag = np.argsort(a.imag, kind="stable"), np.argsort(b.imag, kind="stable")
    a, b = a[by_imag[0]], b[by_imag[1]]
    return bool(
        np.allclose(a.imag, b.imag, rtol=rtol, atol=rtol * scale)
        and np.allclose(a.real, b.real, rtol=0, atol=rtol * scale)
    )


def _frequencies(lin) -> np.ndarray:
    """The non-neutral modes' natural frequencies ω = 2π f, ascending."""
    return np.array([2 * math.pi * m.frequency_hz for m in lin.modes() if m.eigenvalue != 0])


@pytest.mark.parametrize("params", [{}, {"m": 2.0, "l": 0.5, "J": 0.1, "g": 3.0}])
def test_pendulum_small_oscillations(pendulum, params):
    """(J + m l²) δφ̈ + m g l δφ = 0 about φ = −π/2 (Haug 1989 Example 7.2.1)."""
    lin = linearize(pendulum, params=params)
    m, J, l, g = ({"m": 1.0, "J": 1.0 / 3.0, "l": 1.0, "g": 9.81} | params).values()
    omega = math.sqrt(m * g * l / (J + m * l * l))
    assert lin.q[2] == pytest.approx(-math.pi / 2, abs=1e-9)
    assert np.allclose(np.sort(lin.eigenvalues.imag), [-omega, omega], rtol=1e-10, atol=0)
    assert np.abs(lin.eigenvalues.real).max() <= 1e-12 * omega
    (mode,) = lin.modes()
    assert mode.damping_ratio == pytest.approx(0.0, abs=1e-12)
    assert mode.frequency_hz == pytest.approx(omega / (2 * math.pi), rel=1e-10)
    assert set(mode.dominant) == {"x1", "phi1"}  # δx1 = −l sin φ δφ = l δφ


def test_a_torque_input_and_the_state_space_forms(pendulum):
    """B for a generalized force on φ1: the DC gain of δφ per N·m is 1/(m g l)."""
    lin = linearize(pendulum, inputs=["phi1"])
    k_static = 1.0 * 9.81 * 1.0
    (state,) = [i for i, name in enumerate(lin.state_names) if name == "phi1"]
    gain = -(lin.C @ np.linalg.solve(lin.A, lin.B))  # y = −C A⁻¹ B u at steady state
    assert gain[lin.output_names.index("phi1"), 0] == pytest.approx(1.0 / k_static, rel=1e-10)
    assert lin.B[len(lin.independent) + state, 0] == pytest.approx(1.0 / (1.0 / 3.0 + 1.0))
    ss = lin.to_scipy()
    assert np.array_equal(ss.A, lin.A) and ss.B.shape == (2, 1)
    control = pytest.importorskip("control")
    sys = lin.to_control()
    assert isinstance(sys, control.StateSpace)
    assert sys.input_labels == ["phi1"] and sys.state_labels == ["phi1", "phi1_d"]
    assert control.dcgain(sys)[lin.output_names.index("phi1")] == pytest.approx(1 / k_static)


def _two_link_frequencies(m, J, L, c, g) -> np.ndarray:
    """ω of a planar double pendulum of rigid links (mass m, centroidal inertia J,
    length L, centroid at c from the proximal joint) hanging under g: the
    eigenvalues of K φ = ω² M φ in the absolute link angles."""
    M = np.array(
        [[J[0] + m[0] * c[0] ** 2 + m[1] * L[0] ** 2, m[1] * L[0] * c[1]],
         [m[1] * L[0] * c[1], J[1] + m[1] * c[1] ** 2]]
    )  # fmt: skip
    K = g * np.diag([m[0] * c[0] + m[1] * L[0], m[1] * c[1]])
    return np.sqrt(np.sort(np.linalg.eigvals(np.linalg.solve(M, K)).real))


def test_double_pendulum_closed_form_and_sympy(double_pendulum):
    from linearization_reference import double_pendulum_eigenvalues

    lin = linearize(double_pendulum)
    reference = double_pendulum_eigenvalues()
    assert _same_spectrum(lin.eigenvalues, reference, 1e-9)


def test_spatial_links_on_spherical_joints_swing_as_the_planar_pair_twice():
    """The spatial double pendulum (Euler parameters, tests/models): its links hang
    along g and swing in any plane, so each planar frequency appears twice, and the
    spin of each link about its own axis has no stiffness (two neutral modes)."""
    module = mbdgen.compile(TEST_MODELS / "spatial_double_pendulum.py", TEST_GENERATED)
    lin = linearize(module)
    lengths, density, g = (1.0, 0.8), 7800.0, 10.0  # |(-5, -5√2, -5)| = 10
    m = [density * L * (L / 10) ** 2 for L in lengths]
    J = [mk * (L**2 + (L / 10) ** 2) / 12 for mk, L in zip(m, lengths, strict=True)]
    planar = _two_link_frequencies(m, J, lengths, [L / 2 for L in lengths], g)
    assert np.allclose(_frequencies(lin), np.repeat(planar, 2), rtol=1e-9)
    neutral = [mode for mode in lin.modes() if mode.eigenvalue == 0]
    assert len(neutral) == 2 and len(lin.independent) == 6
    down = np.array([-5.0, -5.0 * math.sqrt(2.0), -5.0]) / g
    tip = module.COORDINATE_NAMES.index("link2_x")
    assert np.allclose(lin.q[tip : tip + 3], 1.4 * down, atol=1e-9)  # L1 + L2/2 along g


def test_spring_fourbar_equilibrium_and_modes_agree_with_sympy():
    from linearization_reference import spring_fourbar_eigenvalues, spring_fourbar_equilibrium

    module = mbdgen.compile(TEST_MODELS / "spring_fourbar.py", TEST_GENERATED)
    lin = linearize(module)
    for name, value in spring_fourbar_equilibrium().items():
        if name == "static_residual":
            continue
        assert lin.q[lin.coordinates.index(name)] == pytest.approx(value, abs=1e-9), name
    assert _same_spectrum(lin.eigenvalues, spring_fourbar_eigenvalues(), 1e-9)


def _accelerations(module, p, q, qd) -> np.ndarray:
    """q̈ of M q̈ + Φ_qᵀλ = Q, Φ_q q̈ = γ (Haug 1989 Eq. 7.2.1), from the kernels."""
    n, m = module.N_COORDINATES, module.N_CONSTRAINTS
    jac = _kernel(module, "phi_q", 0.0, q, p)
    K = np.block([[_kernel(module, "mass", 0.0, q, p), jac.T], [jac, np.zeros((m, m))]])
    rhs = np.concatenate(
        [_kernel(module, "force", 0.0, q, qd, p), _kernel(module, "gamma", 0.0, q, qd, p)]
    )
    return np.linalg.solve(K, rhs)[:n]


def test_a_damped_model_matches_central_differences_of_its_accelerations():
    """The slider-crank with a spring-damper (models/slider_crank_tsda.py): A from the
    generated blocks against central differences of the nonlinear v̈(v, v̇), with u and
    u̇ solved from Φ = 0 and Φ_q q̇ = 0 at each perturbed state."""
    module = import_generated(GENERATED / "slider_crank_tsda.py")
    lin = linearize(module)
    p = np.array([lin.info["parameters"][name] for name in module.PARAMETER_NAMES])
    ind = [lin.coordinates.index(name) for name in lin.independent]
    dep = [i for i in range(module.N_COORDINATES) if i not in ind]
    k = len(ind)

    def rate(x: np.ndarray) -> np.ndarray:
        q = lin.q.copy()
        q[ind] = lin.q[ind] + x[:k]
        for _ in range(50):  # Newton for u
            jac = _kernel(module, "phi_q", 0.0, q, p)
            q[dep] -= np.linalg.solve(jac[:, dep], _kernel(module, "phi", 0.0, q, p))
        jac = _kernel(module, "phi_q", 0.0, q, p)
        qd = np.zeros_like(q)
        qd[ind] = x[k:]
        qd[dep] = -np.linalg.solve(jac[:, dep], jac[:, ind] @ x[k:])
        return np.concatenate([qd[ind], _accelerations(module, p, q, qd)[ind]])

    step = 1e-6
    fd = np.column_stack([(rate(step * e) - rate(-step * e)) / (2 * step) for e in np.eye(2 * k)])
    assert np.allclose(fd, lin.A, rtol=1e-6, atol=1e-6 * np.abs(lin.A).max())
    assert lin.damping.any() and all(m.damping_ratio > 0 for m in lin.modes())


def test_bad_operating_points_get_one_line(pendulum, tmp_path):
    with pytest.raises(MbdgenError, match=r"q is not an equilibrium of 'pendulum': at q0 the "
                       r"force along the independent coordinates \(phi1\) is 9\.81"):  # fmt: skip
        linearize(pendulum, find_equilibrium=False)
    with pytest.raises(MbdgenError, match="depend on time"):
        linearize(
            mbdgen.compile(TEST_MODELS / "rheonomic.py", TEST_GENERATED), find_equilibrium=False
        )
    with pytest.raises(MbdgenError, match="has user states"):
        linearize(import_generated(GENERATED / "pi_pendulum.py"))
    with pytest.raises(MbdgenError, match="no coordinate 'nope' to take an input force"):
        linearize(pendulum, inputs=["nope"])
    for args, needle in (
        (("modes", MODELS / "pendulum.py", "--at-q0"), "q is not an equilibrium"),
        (("modes", MODELS / "pendulum.py", "-p", "gg=1"), "did you mean g"),
        (("linearize", MODELS / "pendulum.py", "-o", tmp_path / "l.h5"), "ending in .npz"),
    ):
        code, output = cli(*args, "--out-dir", GENERATED)
        assert code == 1 and needle in one_line_error(output, only=True), output


def test_the_cli_prints_the_modes_and_writes_the_matrices(tmp_path):
    code, output = cli("linearize", MODELS / "pendulum.py", "--out-dir", GENERATED,
                       "--input", "phi1", "-o", tmp_path / "new" / "lin.npz")  # fmt: skip
    assert code == 0, output
    assert "pendulum: linearized at the equilibrium found near q0" in output
    assert "0.431703" in output and "0 ± 2.71247j" in output  # ω = √(9.81 · 3/4)
    with np.load(tmp_path / "new" / "lin.npz") as f:
        assert f["A"].shape == (2, 2) and f["B"].shape == (2, 1) and f["C"].shape == (6, 2)
        assert np.allclose(np.sort(f["eigenvalues"].imag), [-2.7124712, 2.7124712], atol=1e-7)
    code, output = cli("modes", MODELS / "double_pendulum.py", "--out-dir", GENERATED)
    assert code == 0 and output.count("± ") == 2, output
    from mbdgen.analysis.linearize import Linearization
    from mbdgen.errors import ResultFileError

    back = Linearization.load(tmp_path / "new" / "lin.npz")
    assert back.inputs == ("phi1",) and back.independent == ("phi1",)
    assert back.table() == linearize(mbdgen.compile(MODELS / "pendulum.py", GENERATED)).table()
    with pytest.raises(ResultFileError, match=r"is a linear model .*Linearization\.load"):
        mbdgen.load(tmp_path / "new" / "lin.npz")
    code, output = cli("show", tmp_path / "new" / "lin.npz")
    assert code == 1 and "is a linear model" in one_line_error(output, only=True)
    pendulum = mbdgen.compile(MODELS / "pendulum.py", GENERATED)
    mbdgen.simulate(pendulum, h=0.1, t_end=0.2).save(tmp_path / "r.npz")
    with pytest.raises(MbdgenError, match="not a linear model"):
        Linearization.load(tmp_path / "r.npz")


def test_a_sweep_follows_the_closed_form_and_writes_its_table_and_plot(pendulum, tmp_path):
    from mbdgen.analysis.linearize import sweep_modes

    lengths = np.linspace(0.2, 2.0, 7)
    sweep = sweep_modes(pendulum, "l", lengths)
    omega = np.sqrt(9.81 * lengths / (1.0 / 3.0 + lengths**2))
    assert np.allclose(np.abs(sweep.eigenvalues).max(axis=1), omega, rtol=1e-10)
    assert np.allclose(sweep.equilibria[:, 1], -lengths, atol=1e-9)  # hanging at y = −l
    table = sweep.to_dataframe()
    assert list(table.columns) == ["l", "re_1", "im_1", "re_2", "im_2"] and len(table) == 7
    code, output = cli("modes", MODELS / "pendulum.py", "--out-dir", GENERATED,
                       "--sweep", "l=0.2:2:7", "-o", tmp_path / "s.csv",
                       "--plot", tmp_path / "s.png")  # fmt: skip
    assert code == 0, output
    assert "eigenvalues [1/s] of the linear model at 7 values of l" in output
    assert f"l = 2          0 ± {omega[-1]:.5g}j" in output
    import pandas as pd

    written = pd.read_csv(tmp_path / "s.csv")
    assert np.allclose(written["im_2"], omega, rtol=1e-10)
    from PIL import Image

    with Image.open(tmp_path / "s.png") as image:
        assert image.size[0] > 400
    for args, needle in (
        (("--sweep", "l=1:2"), "give NAME=START:STOP:COUNT"),
        (("--sweep", "ll=1:2:3"), "has no parameter 'll'; did you mean l?"),
        (("-o", tmp_path / "x.csv"), "-o and --plot go with --sweep"),
        (("--sweep", "l=1:2:3", "-o", tmp_path / "x.txt"), "x.txt"),
    ):
        code, output = cli("modes", MODELS / "pendulum.py", "--out-dir", GENERATED, *args)
        assert code == 1 and needle in one_line_error(output, only=True), (args, output)


def test_a_found_equilibrium_is_polished_and_an_unstable_one_is_said(pendulum):
    """The search stops at its gradient tolerance; Newton with the exact K_v takes the
    static force to rounding.  A point mass hanging from a horizontal start (the
    IFToMM A01 pendulum), where the minimizer's partition turns singular, is found by
    settling.  Upright, the pendulum's mode grows and the CLI says so."""
    lin = linearize(pendulum)
    assert lin.residual <= 1e-14 and not lin.unstable
    a01 = mbdgen.compile(MODELS / "iftomm_a01_pendulum.py", GENERATED)
    lin = linearize(a01)
    assert _same_spectrum(lin.eigenvalues, np.array([-1j, 1j]) * math.sqrt(9.81), 1e-12)
    upright = {"x1": 0.0, "y1": 1.0, "phi1": math.pi / 2}
    lin = linearize(pendulum, upright)
    (mode,) = lin.unstable
    assert mode.eigenvalue.real == pytest.approx(math.sqrt(9.81 * 0.75), rel=1e-10)
    code, output = cli("modes", MODELS / "pendulum.py", "--out-dir", GENERATED, "--q0", "x1=0",
                       "--q0", "y1=1", "--q0", "phi1=1.5707963267948966")  # fmt: skip
    assert code == 0 and f"grows, τ = {1 / math.sqrt(9.81 * 0.75):.4g} s" in output
    assert (
        "warning: the equilibrium is unstable: 1 mode(s) grow, the fastest at Re λ = 2.712"
        in output
    )
    assert linearize(pendulum, inputs="phi1").inputs == ("phi1",)  # a name, not its letters


def test_a_mode_is_animated_as_its_shape_on_the_constraints(tmp_path):
    """The slider-crank with a spring-damper: mode 1's motion keeps Φ = 0 at every row,
    swings its largest coordinate by the amplitude, over two periods of Im λ; the CLI
    writes the GIF and says which mode it drew."""
    from mbdgen.analysis.linearize import mode_motion

    module = import_generated(GENERATED / "slider_crank_tsda.py")
    lin = linearize(module)
    motion = mode_motion(module, lin, 1, amplitude=0.05)
    p = np.array([lin.info["parameters"][name] for name in module.PARAMETER_NAMES])
    phi = [np.abs(_kernel(module, "phi", 0.0, q, p)).max() for q in motion.q]
    assert max(phi) <= 1e-10
    big = int(np.argmax(np.abs(lin.modes()[0].shape)))
    swing = motion.q[:, big] - lin.q[big]
    assert np.abs(swing).max() == pytest.approx(0.05, rel=0.02)  # Newton moves it by O(a²)
    omega = lin.modes()[0].eigenvalue.imag
    assert motion.t[-1] == pytest.approx(2 * 2 * math.pi / omega)
    code, output = cli("modes", MODELS / "slider_crank_tsda.py", "--out-dir", GENERATED,
                       "--animate", "2", "-o", tmp_path / "m.gif")  # fmt: skip
    assert code == 0 and "(mode 2: 7.477 Hz, amplitude 0.1, damping left out)" in output, output
    from PIL import Image

    with Image.open(tmp_path / "m.gif") as gif:
        assert gif.n_frames > 20
    for args, needle in (
        (("--animate", "3", "-o", tmp_path / "x.gif"), "mode 3 does not exist"),
        (("--animate", "1"), "--animate needs -o FILE.gif"),
        (("--animate", "1", "-o", tmp_path / "x.png"), "x.png"),
    ):
        code, output = cli("modes", MODELS / "slider_crank_tsda.py", "--out-dir", GENERATED, *args)
        assert code == 1 and needle in one_line_error(output, only=True), (args, output)
