"""Multipliers named by their constraint and unit, files that carry only the settings
their method used and the units of their datasets.

λ and reactions are shown with names and units: plot panels of λ with a unit, the
Euler-parameter normalization rows not labelled as joints, ``assemble``'s λ one row a
line, ``inverse``'s driving forces in N or N·m.  An ``.h5`` from ``hht_adaptive``
carries no ``alpha``, ``start`` or ``constraints`` it did not use, and its datasets
carry units.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from mbdgen.compiler import import_generated
from mbdgen.results import load
from mbdgen.simulation import simulate
from tests.conftest import GENERATED, MODELS, cli

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def spatial():
    return import_generated(GENERATED / "spatial_slider_crank.py")


@pytest.fixture(scope="module")
def spatial_run(spatial):
    return simulate(spatial, t_end=0.02, h=0.005, method="hht_adaptive")


# -- multipliers by constraint and unit ------------------------------------------------


def test_assemble_names_every_multiplier_with_its_unit():
    code, out = cli("assemble", MODELS / "spatial_slider_crank.py")
    assert code == 0, out
    assert "λ = [" not in out
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith("λ ")}
    assert "[N·m]" in lines["crank[0]"] and "Euler-parameter normalization" in lines["crank[0]"]
    assert "joint" not in lines["crank[0]"]
    assert "[N]" in lines["crank_rev[0]"] and "revolute joint" in lines["crank_rev[0]"]
    assert "[N·m]" in lines["crank_rev[3]"]  # a dot product of directions
    assert len(lines) == 20


def test_assemble_says_unit_unknown_for_a_generalized_model():
    code, out = cli("assemble", MODELS / "pendulum.py")
    assert code == 0, out
    rows = [line for line in out.splitlines() if line.startswith("λ ")]
    assert len(rows) == 2 and all("unit unknown" in line for line in rows), out


def test_inverse_prints_driving_forces_with_their_unit():
    code, out = cli("inverse", MODELS / "fourbar.py", "--t-end", "0.1", "--steps", "5")
    assert code == 0, out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("t "))
    assert "drive[0] [N·m]" in header, out


def test_lam_panels_name_units_and_normalization_rows(spatial_run, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    seen = {}

    def capture(fig, *args, **kwargs):
        seen["axes"] = [
            (ax.get_title(loc="left"), ax.get_ylabel(), [t.get_text() for t in ax.texts])
            for ax in fig.axes
        ]
        seen["legends"] = [
            [t.get_text() for t in ax.get_legend().get_texts()]
            for ax in fig.axes
            if ax.get_legend()
        ]

    monkeypatch.setattr(Figure, "savefig", capture)
    spatial_run.plot(tmp_path / "lam.png", what="lam")
    titles = {title: ylabel for title, ylabel, _ in seen["axes"]}
    crank = [t for t in titles if t.startswith("λ: crank") and "rev" not in t]
    assert crank and "Euler-parameter normalization" in crank[0], titles
    assert "N·m" in titles[crank[0]]
    rev = next(t for t in titles if t.startswith("λ: crank_rev"))
    assert "N" in titles[rev] and "N·m" in titles[rev], titles  # [N] and [N·m] rows
    legend = next(item for item in seen["legends"] if any("crank_rev[0]" in s for s in item))
    assert any("crank_rev[0] [N]" in s for s in legend) and any("[N·m]" in s for s in legend)


def test_summary_names_multiplier_units(spatial_run):
    text = spatial_run.summary(final=True)
    assert "λ crank_rev[0] [N]:" in text and "λ crank[0] [N·m]" in text, text


# -- settings and units in files -------------------------------------------------------


def test_hht_adaptive_h5_holds_only_the_settings_it_used(spatial_run, tmp_path):
    path = spatial_run.save(tmp_path / "a.h5")
    with h5py.File(path) as f:
        attrs = dict(f.attrs)
    for key in ("alpha", "beta", "start", "constraints"):
        assert key not in attrs, (key, attrs.get(key))
    assert attrs["hht_alpha"] == pytest.approx(spatial_run.info["hht_alpha"])
    assert attrs["rtol"] > 0 and attrs["method"] == "hht_adaptive"
    for key in ("alpha", "beta", "start", "constraints"):
        assert key not in spatial_run.info


def test_settings_kept_where_the_method_uses_them():
    from mbdgen.simulation import method_settings

    assert method_settings("abm", "rkf45", "baumgarte", 5.0, 5.0) == {
        "start": "rkf45",
        "constraints": "baumgarte",
        "alpha": 5.0,
        "beta": 5.0,
    }
    assert method_settings("rk4", "rkf45", "direct", 0.0, 0.0) == {"constraints": "direct"}
    assert method_settings("vabm", "rkf45", "gcp", 0.0, 0.0) == {"constraints": "gcp"}
    for method in ("hht_adaptive", "radau5", "welch2", "newmark_gcp"):
        assert method_settings(method, "rkf45", "direct", 0.0, 0.0) == {}


def test_h5_datasets_carry_units(spatial_run, tmp_path):
    path = spatial_run.save(tmp_path / "u.h5")
    with h5py.File(path) as f:
        assert f["t"].attrs["units"] == "s"
        q = list(f["q"].attrs["units"])
        columns = list(f["q"].attrs["columns"])
        assert q[columns.index("crank_x")] == "m" and q[columns.index("crank_e0")] == "1"
        qd = list(f["qd"].attrs["units"])
        assert qd[columns.index("crank_x")] == "m/s" and qd[columns.index("crank_e1")] == "1/s"
        qdd = list(f["qdd"].attrs["units"])
        assert qdd[columns.index("rod_z")] == "m/s^2"
        lam = dict(zip(f["lam"].attrs["columns"], f["lam"].attrs["units"], strict=True))
        assert lam["crank[0]"] == "N m" and lam["crank_rev[0]"] == "N"
        assert lam["crank_rev[3]"] == "N m"
        assert f["energy"].attrs["units"] == "J" and f["power"].attrs["units"] == "W"
        reactions = list(f["reactions"].attrs["units"])
        assert reactions[:6] == ["N", "N", "N", "N m", "N m", "N m"]
    back = load(path)
    assert back.constraint_units == spatial_run.constraint_units
    assert back.constraint_units[0] == "N·m"


def test_planar_coordinate_units():
    from mbdgen.simulation import body_layout
    from mbdgen.units import coordinate_units

    module = import_generated(GENERATED / "slider_crank_planar.py")
    units = coordinate_units(tuple(module.COORDINATE_NAMES), body_layout(module))
    assert dict(zip(module.COORDINATE_NAMES, units, strict=True)) == {
        "crank_x": "m",
        "crank_y": "m",
        "crank_phi": "rad",
        "rod_x": "m",
        "rod_y": "m",
        "rod_phi": "rad",
    }
    flat = import_generated(GENERATED / "pendulum.py")  # its units are the user's
    assert coordinate_units(tuple(flat.COORDINATE_NAMES), body_layout(flat)) == ["", "", ""]


@pytest.mark.parametrize("suffix", [".h5", ".npz"])
def test_files_written_before_units_still_load(suffix, tmp_path):
    """Written by the code before this change (commit b629823), hht_adaptive on the
    spatial slider-crank: no units, the settings alpha, start, constraints."""
    old = load(DATA / f"before_units_spatial_slider_crank{suffix}")
    assert old.lam.shape == (5, 20) and old.constraint_units == ()
    assert old.info["start"] == "rkf45"  # as it was written
    assert "λ crank_rev[0]" in old.summary(final=True)
    old.plot(tmp_path / "old.png", what="lam")
    again = load(old.save(tmp_path / f"again{suffix}"))
    np.testing.assert_array_equal(again.lam, old.lam)
