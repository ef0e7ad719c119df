"""Results: HDF5 next to npz, DataFrame, summaries, labelled reactions, plots, and the
CLI commands `show` and `plot` (issue 12 §2), and what the everyday command imports
(§6).  Cheap by construction: the committed generated/ modules, runs of ≤ 0.2 s."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GENERATED, MODELS, ROOT

import mbdgen
from mbdgen import simulation
from mbdgen.cli import main
from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError, ResultFileError
from mbdgen.plot import coordinate_groups, plot_result
from mbdgen.results import STEP_HISTORY_COLUMNS, Result

ARRAYS = (
    "t", "q", "qd", "qdd", "lam", "phi_norm", "phid_norm", "energy", "power", "reactions",
    "states", "state_rates", "step_history",
)  # fmt: skip


@pytest.fixture(scope="module")
def planar():
    """The slider-crank as planar bodies with a spring (element path: energy,
    reactions; its index-3 entry point is JIT-compiled by test_hht too), with HHT-α
    under error control so that the step history varies."""
    module = import_generated(GENERATED / "slider_crank_tsda.py")
    return mbdgen.simulate(module, "hht_adaptive", None, 0.01, 0.2)


@pytest.fixture(scope="module")
def spatial():
    module = import_generated(GENERATED / "spatial_slider_crank.py")
    return mbdgen.simulate(module, "hht", None, 1e-3, 0.01)


def assert_same(a: Result, b: Result) -> None:
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.shape == y.shape and x.dtype == y.dtype, name
            np.testing.assert_array_equal(x, y, err_msg=name)  # NaN == NaN here
    for name in ("coordinates", "counters", "info", "reaction_names", "constraint_names"):
        assert getattr(a, name) == getattr(b, name), name
    assert a.state_names == b.state_names


def test_hdf5_round_trips_everything_npz_does(planar, tmp_path):
    back_h5 = mbdgen.load(planar.save(tmp_path / "r.h5"))
    back_npz = mbdgen.load(planar.save(tmp_path / "r.npz"))
    assert_same(planar, back_h5)
    assert_same(back_npz, back_h5)
    assert planar.step_history.shape[1] == len(STEP_HISTORY_COLUMNS)
    assert len(planar.step_history) > 10  # error control: a history worth plotting


def test_hdf5_metadata_are_attributes(planar, tmp_path):
    path = planar.save(tmp_path / "r.hdf5")
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "mbdgen-result"
        assert f.attrs["model"] == "slider_crank_tsda"
        assert f.attrs["method"] == "hht_adaptive"
        assert f.attrs["mbdgen_version"] == mbdgen.__version__
        module = import_generated(GENERATED / "slider_crank_tsda.py")
        assert f.attrs["model_hash"] == module.SOURCE_HASH
        assert f.attrs["hht_alpha"] == planar.info["hht_alpha"]
        assert f["counters"].attrs["steps"] == planar.counters["steps"]
        params = dict(f["parameters"].attrs)
        assert params == pytest.approx(planar.info["parameters"])
        assert list(f["lam"].attrs["columns"]) == list(planar.constraint_names)
        assert list(f["q"].attrs["columns"]) == list(planar.coordinates)
        assert json.loads(f.attrs["bodies"]) == planar.info["bodies"]


def test_user_states_round_trip_in_hdf5(tmp_path):
    rows, names = 4, ("e_int", "lag")
    r = Result(
        t=np.linspace(0, 0.3, rows), q=np.ones((rows, 1)), qd=np.zeros((rows, 1)),
        qdd=np.zeros((rows, 1)), lam=np.zeros((rows, 0)), phi_norm=np.zeros(rows),
        phid_norm=np.zeros(rows), coordinates=("s",), state_names=names,
        states=np.arange(8.0).reshape(rows, 2), state_rates=-np.arange(8.0).reshape(rows, 2),
        info={"model": "states", "method": "hht", "initial_states": {"e_int": 0.0, "lag": 1.0},
              "repartitioned_at_steps": list(range(20_000))},  # beyond HDF5's 64 kB attributes
    )  # fmt: skip
    back = mbdgen.load(r.save(tmp_path / "x.h5"))
    assert_same(r, back)  # the long list too, from the meta dataset
    with h5py.File(tmp_path / "x.h5", "r") as f:
        assert list(f["states"].attrs["columns"]) == list(names)
        assert dict(f["initial_states"].attrs) == {"e_int": 0.0, "lag": 1.0}
        assert f.attrs["repartitioned_at_steps"].endswith("(complete in the meta dataset)")


def test_hdf5_write_is_atomic_and_bad_files_are_named(planar, tmp_path, monkeypatch):
    path = planar.save(tmp_path / "r.h5")
    before = path.read_bytes()

    def broken(self, fh):
        fh.write(b"\x89HDF half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Result, "_save_h5", broken)
    with pytest.raises(mbdgen.OutputError, match="No space left"):
        planar.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before  # the old file, untouched
    assert [p.name for p in tmp_path.iterdir()] == ["r.h5"]  # no temporary left
    truncated = tmp_path / "cut.h5"
    truncated.write_bytes(before[: len(before) // 2])
    with pytest.raises(ResultFileError, match="damaged"):
        mbdgen.load(truncated)
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["t"] = np.arange(3.0)
    with pytest.raises(ResultFileError, match="HDF5 file but not an mbdgen result"):
        mbdgen.load(foreign)


def test_dataframe_columns_and_values(planar):
    df = planar.to_dataframe(energy=True, reactions=True)
    assert list(df.columns[: 1 + 2 * 6]) == [
        "t", *planar.coordinates, *(f"{c}_d" for c in planar.coordinates)
    ]  # fmt: skip
    np.testing.assert_array_equal(df["rod_phi"], planar.coordinate("rod_phi"))
    np.testing.assert_array_equal(df["lam[pin[1]]"], planar.lam[:, 3])
    np.testing.assert_array_equal(df["total"], planar.total_energy)
    row = planar.reaction_names.index("pin.rod")
    np.testing.assert_array_equal(df["pin.rod.Tz"], planar.reactions[:, row, 5])
    assert len(df) == len(planar)
    assert "kinetic" not in planar.to_dataframe().columns


def test_print_is_a_short_summary(planar):
    text = str(planar)
    assert len(text.splitlines()) <= 10 and "[" not in text.split("\n", 1)[0]
    for word in ("slider_crank_tsda", "hht_adaptive", f"rows: {len(planar)}", "finished"):
        assert word in text
    assert f"steps {planar.counters['steps']}" in text
    assert repr(planar).startswith("<Result slider_crank_tsda: hht_adaptive")
    assert len(repr(planar)) < 200
    final = planar.summary(final=True)
    assert f"{planar.q[-1, 2]:.10g}" in final


@pytest.mark.filterwarnings("ignore::mbdgen.simulation.ConstraintWarning")  # 5 steps of HHT
def test_reactions_are_labelled_and_named_before_first_use(planar, spatial):
    module = import_generated(GENERATED / "slider_crank_tsda.py")
    fresh = mbdgen.simulate(module, "hht", None, 1e-3, 0.005)
    assert fresh._reactions is None  # not computed yet ...
    assert fresh.reaction_names == module.REACTION_NAMES  # ... but already named
    pin = planar.reaction("pin.rod")
    row = planar.reaction_names.index("pin.rod")
    assert pin.columns == ("Fx", "Fy", "Tz") and pin.shape == (len(planar), 3)
    np.testing.assert_array_equal(pin, planar.reactions[:, row, [0, 1, 5]])
    np.testing.assert_array_equal(pin["Fy"], planar.reactions[:, row, 1])
    body = planar.reaction("pin.rod", frame="body")
    np.testing.assert_array_equal(body["Tz"], planar.reactions[:, row, 11])
    # a joint with one moving body is found by its own name
    np.testing.assert_array_equal(planar.reaction("pivot"), planar.reaction("pivot.crank"))
    assert pin.to_dataframe().columns.tolist() == ["Fx", "Fy", "Tz"]
    with pytest.raises(MbdgenError, match="no column 'Fz'"):
        pin["Fz"]
    with pytest.raises(MbdgenError, match="no reaction 'pin'"):  # two bodies: ambiguous
        planar.reaction("pin")
    name = spatial.reaction_names[0]
    assert spatial.reaction(name).columns == ("Fx", "Fy", "Fz", "Tx", "Ty", "Tz")


def test_step_history_does_not_change_the_solution(pendulum, monkeypatch):
    """The driver cuts an error-controlled run into ~HISTORY_ROWS chunks to record
    the step sizes; the integrator state carries over, so q is bit-identical."""
    fine = mbdgen.simulate(pendulum, "vabm", None, 0.01, 0.3)
    monkeypatch.setattr(simulation, "HISTORY_ROWS", 1)
    coarse = mbdgen.simulate(pendulum, "vabm", None, 0.01, 0.3)
    np.testing.assert_array_equal(fine.q, coarse.q)
    assert len(fine.step_history) > len(coarse.step_history)
    steps = fine.step_history[:, STEP_HISTORY_COLUMNS.index("steps")]
    assert steps[-1] == fine.counters["steps"] and np.all(np.diff(steps) >= 0)


def test_plot_every_quantity(planar, tmp_path):
    path = plot_result(planar, tmp_path / "all.png", what="q,qd,energy,phi,lam,reactions,steps")
    assert path.stat().st_size > 5_000
    assert planar.plot(tmp_path / "few.pdf", what=["q"], coords=["rod"]).is_file()
    with pytest.raises(MbdgenError, match="cannot plot 'omega'; choose from q, qd"):
        plot_result(planar, tmp_path / "x.png", what="q,omega")
    with pytest.raises(MbdgenError, match="no coordinate or body 'rud'"):
        plot_result(planar, tmp_path / "x.png", coords=["rud"])


def test_plot_groups_bodies_and_keeps_angles_apart(planar):
    groups = coordinate_groups(planar)
    assert [g.title for g in groups] == ["crank", "rod"]
    rod = groups[1]
    names = planar.coordinates
    assert [names[i] for i in rod.left] == ["rod_x", "rod_y"] and rod.left_kind == "length"
    assert [names[i] for i in rod.right] == ["rod_phi"] and rod.right_kind == "angle"
    generalized = Result(
        t=np.zeros(1), q=np.zeros((1, 4)), qd=np.zeros((1, 4)), qdd=np.zeros((1, 4)),
        lam=np.zeros((1, 0)), phi_norm=np.zeros(1), phid_norm=np.zeros(1),
        coordinates=("theta", "phi", "x", "y"),
    )  # fmt: skip
    kinds = {
        g.title: [generalized.coordinates[i] for i in g.left]
        for g in coordinate_groups(generalized)
    }
    assert kinds == {"lengths": ["x", "y"], "angles": ["theta", "phi"]}


def test_log_axis_survives_exact_zeros(tmp_path):
    rows = 5
    r = Result(
        t=np.linspace(0, 1, rows), q=np.zeros((rows, 1)), qd=np.zeros((rows, 1)),
        qdd=np.zeros((rows, 1)), lam=np.zeros((rows, 1)), phi_norm=np.zeros(rows),
        phid_norm=np.array([0.0, 1e-12, 0.0, 1e-10, 0.0]), coordinates=("s",),
        info={"model": "zeros", "method": "abm", "h": 0.25},
    )  # fmt: skip
    assert plot_result(r, tmp_path / "z.png", what="phi,steps").is_file()


def test_cli_h5_show_and_plot(tmp_path):
    runner = CliRunner()
    out = tmp_path / "sc.h5"
    res = runner.invoke(
        main,
        ["simulate", str(MODELS / "slider_crank_tsda.py"), "--method", "hht", "--h", "1e-3",
         "--t-end", "0.01", "-o", str(out), "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["show", str(out), "--final"])
    assert res.exit_code == 0, res.output
    assert "result of slider_crank_tsda: hht" in res.output and "rows: 11" in res.output
    assert "final values at t = 0.01" in res.output and "rod_phi" in res.output
    fig = tmp_path / "fig.png"
    res = runner.invoke(main, ["plot", str(out), "--what", "q,energy,steps", "-o", str(fig)])
    assert res.exit_code == 0 and fig.stat().st_size > 5_000, res.output
    res = runner.invoke(main, ["plot", str(out), "--what", "q,bogus"])
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert "error: cannot plot 'bogus'" in res.output
    csv = mbdgen.load(out).save(tmp_path / "sc.csv")
    res = runner.invoke(main, ["show", str(csv)])
    assert res.exit_code == 0 and "rows: 11" in res.output, res.output


def test_simulate_path_imports_no_heavy_package():
    """§6: what `mbdgen simulate` of a compiled model imports (a fresh interpreter
    loading the CLI, the driver, results, plot's suffix list and the generated
    module) holds no SymPy, matplotlib, pandas, h5py or Jinja."""
    code = (
        "import sys, json\n"
        "import mbdgen.cli, mbdgen.simulation, mbdgen.results, mbdgen.plot\n"
        "from mbdgen.compiler import compile\n"
        f"compile({str(MODELS / 'slider_crank.py')!r}, {str(GENERATED)!r})\n"
        "heavy = ('sympy', 'matplotlib', 'pandas', 'h5py', 'jinja2')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_a_command_that_compiles_says_so(tmp_path):
    """`mbdgen info` compiled silently for up to a minute; now it says so on stderr
    (and an up-to-date module is loaded without a word)."""
    model = ROOT / "tests" / "models" / "spring_pendulum.py"
    first = CliRunner().invoke(main, ["info", str(model), "--out-dir", str(tmp_path)])
    assert first.exit_code == 0, first.output
    assert "compiling" in first.stderr and "compiled in" in first.stderr
    again = CliRunner().invoke(main, ["info", str(model), "--out-dir", str(tmp_path)])
    assert again.exit_code == 0 and "compiling" not in again.stderr


def test_console_entry_keeps_output_and_exit_codes(planar, tmp_path):
    """`mbdgen` ends with os._exit after flushing (no interpreter teardown, §6): what it
    printed reaches a pipe whole, and the exit codes are those of `main`."""
    path = planar.save(tmp_path / "r.h5")
    cli = [sys.executable, "-m", "mbdgen.cli"]
    ok = subprocess.run([*cli, "show", str(path), "--final"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == planar.summary(final=True) + "\n"
    bad = subprocess.run([*cli, "show", str(tmp_path / "none.h5")], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr == f"error: result file {str(tmp_path / 'none.h5')!r} does not exist\n"


def test_settings_line_names_what_the_user_chose():
    """k only where the user picks it (Adams), tolerances and the output interval for
    an error-controlled method (its h is no step), HHT's α and ρ∞, Baumgarte's gains;
    keys an older file lacks are left out."""
    from mbdgen.results import settings_text

    assert settings_text({"method": "abm", "order": 4, "h": 1e-3}) == "abm k=4, h=0.001"
    assert settings_text({"method": "rk4", "order": 4, "h": 0.01}) == "rk4, h=0.01"
    assert settings_text(
        {"method": "hht_adaptive", "order": 2, "h": 0.01, "rtol": 1e-5, "atol": 1e-7,
         "hht_alpha": -0.05}
    ) == "hht_adaptive, rtol=1e-05, atol=1e-07, output every 0.01, hht_alpha=-0.05"  # fmt: skip
    assert settings_text({"method": "vabm", "order": 12, "h": 0.1}) == "vabm k=12, h=0.1"
    assert (
        settings_text({"method": "genalpha", "order": 2, "h": 0.1, "rho_inf": 0.5})
        == "genalpha, h=0.1, rho_inf=0.5"
    )
    assert (
        settings_text({"method": "rk4", "h": 0.1, "constraints": "baumgarte", "alpha": 5.0})
        == "rk4, h=0.1, baumgarte α=5 β=0"
    )
    assert settings_text({"analysis": "kinematics", "h": 0.1}) == "kinematics, h=0.1"


def test_the_step_panel_of_a_fixed_step_run_is_linear(pendulum):
    """A fixed step's chunk means differ by rounding alone: drawn on a linear axis from
    0, not stretched over a log axis; a variable step keeps its log axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mbdgen.plot import _Panels, _step_panels

    for method, scale in (("abm", "linear"), ("vabm", "log")):
        result = mbdgen.simulate(pendulum, method, h=1e-3 if method == "abm" else 0.05, t_end=1.0)
        panels = _Panels()
        _step_panels(result, panels)
        fig, ax = plt.subplots()
        try:
            panels.draw[0](ax)
            assert ax.get_yscale() == scale, method
        finally:
            plt.close(fig)
