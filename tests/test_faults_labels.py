"""Issue 46, cases 19-20: multipliers named by their constraint and unit, files that
carry only the settings their method used and the units of their datasets.

Case 19: λ and reactions were shown without names or units (plot panels of λ had no
unit, the Euler-parameter normalization rows were labelled as joints, ``assemble``
printed λ as a bare list, ``inverse`` printed driving forces without N or N·m).
Case 20: an ``.h5`` from ``hht_adaptive`` carried ``alpha = 0``, ``start = 'rkf45'``,
``constraints = 'direct'`` and its datasets had no units.
"""

from __future__ import annotations

import pytest

from mbdgen.compiler import import_generated
from mbdgen.simulation import simulate
from tests.conftest import GENERATED, MODELS, cli


@pytest.fixture(scope="module")
def spatial():
    return import_generated(GENERATED / "spatial_slider_crank.py")


@pytest.fixture(scope="module")
def spatial_run(spatial):
    return simulate(spatial, t_end=0.02, h=0.005, method="hht_adaptive")


# -- case 19 ------------------------------------------------------------------------


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
