"""Regression baselines (mbdgen.baseline): the committed baselines of models/ pass
through the CLI and the pytest plugin; a perturbed run fails with the right table,
exit code and JUnit XML; unusable settings or a missing baseline are one-line errors.

Every run here is short (at most 0.5 s of model time on a coarse grid) and uses the
committed generated/ modules and integrators the other tests compile anyway.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GENERATED, MODELS

import mbdgen
from mbdgen import baseline
from mbdgen.cli import main

pytest_plugins = ["pytester"]

SUITE = MODELS / "mbdgen-baseline.toml"

#: The perturbed case: the pendulum of Haug 1989 Example 7.2.1 under ABM 4.
PEND = dict(method="abm", order=4, h=1e-3, t_end=0.5, output_every=25)
#: Tolerances the test states itself (not the defaults): q to 1e-6 of its peak, λ to 1e-5.
TOLS = {"q": (1e-6, 1e-9), "lam": (1e-5, 1e-8)}


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _write_suite(folder, g=9.81, extra=""):
    text = f"""
generated = "{GENERATED.as_posix()}"
[tolerances]
q = {{ rtol = {TOLS["q"][0]}, atol = {TOLS["q"][1]} }}
lam = {{ rtol = {TOLS["lam"][0]}, atol = {TOLS["lam"][1]} }}
[cases.pend]
model = "{(MODELS / "pendulum.py").as_posix()}"
quantities = ["q", "lam"]
params = {{ g = {g!r} }}
{"".join(f"{k} = {v!r}" + chr(10) for k, v in PEND.items())}
{extra}
"""
    path = folder / "mbdgen-baseline.toml"
    path.write_text(text)
    return path


def _table_rows(output):
    """{(quantity, column): (first t, worst t, ratio)} of the rows of case ``pend``."""
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if cells[:1] == ["pend"] and len(cells) == 8:
            rows[(cells[1], cells[2])] = (float(cells[3]), float(cells[4]), float(cells[7]))
    return rows


def test_cli_check_passes_on_the_committed_baselines_of_models(tmp_path):
    report = tmp_path / "report.xml"
    res = _invoke("baseline", "check", MODELS, "--junit", report)
    assert res.exit_code == 0, res.output
    cases = baseline.load_settings(SUITE).cases
    assert len(cases) == 6
    for name in cases:
        assert re.search(rf"^ok +{name}: ", res.output, re.M), res.output
    root = ET.parse(report).getroot()
    suite = root.find("testsuite")
    assert suite.get("tests") == str(len(cases))
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    assert [c.get("name") for c in suite.iter("testcase")] == list(cases)
    # what Jenkins' junit-10.xsd requires (the schema CI systems read; checked once
    # against it with xmlschema, see mbdgen.baseline.write_junit)
    assert root.tag == "testsuites" and root.findall("*") == [suite]
    assert {"name", "tests", "failures", "errors"} <= suite.attrib.keys()
    assert re.fullmatch(r"[0-9]*\.[0-9]*", suite.get("time"))
    assert [child.tag for child in suite][-2:] == ["system-out", "system-err"]
    assert all(c.get("name") and c.get("classname") for c in suite.iter("testcase"))


def test_the_committed_suite_covers_the_method_families_and_a_spatial_model():
    cases = baseline.load_settings(SUITE).cases.values()
    methods = {c.settings["method"] for c in cases}
    assert {"abm", "vabm", "hht_adaptive", "newmark_gcp", "genalpha"} <= methods
    assert any(c.model.name.startswith("spatial") for c in cases)


def test_pytest_plugin_collects_the_settings_file_and_serves_the_fixture(pytester):
    pytester.makepyfile(
        test_user=f"""
        def test_pendulum(mbdgen_baseline):
            report = mbdgen_baseline.check("slider_crank_abm", settings={str(SUITE)!r})
            assert report.status == "ok"
        """
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--mbdgen-baseline", SUITE, "test_user.py"
    )
    result.assert_outcomes(passed=len(baseline.load_settings(SUITE).cases) + 1)
    # without the flag (or the ini option) a settings file is not collected
    result = pytester.runpytest("-p", "no:cacheprovider", SUITE)
    result.assert_outcomes()


def test_a_perturbed_parameter_moves_with_the_right_table_exit_code_and_junit(tmp_path, pendulum):
    settings = _write_suite(tmp_path)
    res = _invoke("baseline", "record", settings)
    assert res.exit_code == 0 and "1 of 1 baseline(s) recorded" in res.output
    assert _invoke("baseline", "check", settings).exit_code == 0

    # the expected table, from two runs of the API and the bound |Δ| <= atol + rtol·peak
    old = mbdgen.simulate(pendulum, params={"g": 9.81}, **PEND)
    new = mbdgen.simulate(pendulum, params={"g": 9.80}, **PEND)
    expected = {}
    for quantity, names in (("q", old.coordinates), ("lam", old.constraint_names)):
        a, b = getattr(old, quantity), getattr(new, quantity)
        for j, name in enumerate(names):
            diff = np.abs(b[:, j] - a[:, j])
            rtol, atol = TOLS[quantity]
            bound = atol + rtol * np.abs(a[:, j]).max()
            if (diff > bound).any():
                first = old.t[np.argmax(diff > bound)]
                expected[(quantity, name)] = (first, old.t[np.argmax(diff)], diff.max() / bound)
    assert len(expected) == 5  # x1, y1, phi1 and both λ: a 0.1 % change of g moves them all

    _write_suite(tmp_path, g=9.80)
    report = tmp_path / "report.xml"
    res = _invoke("baseline", "check", settings, "--junit", report)
    assert res.exit_code == baseline.EXIT_MOVED == 1, res.output
    assert "MOVED  pend: q, lam (5 column(s))" in res.output
    assert "params: {'g': 9.81} -> {'g': 9.8}" in res.output  # the note says why
    rows = _table_rows(res.output)
    assert rows.keys() == expected.keys()
    for key, (first, worst, ratio) in expected.items():
        # times are printed to 6 significant digits, the ratio to 3
        assert rows[key][0] == pytest.approx(first, rel=1e-6, abs=1e-12), key
        assert rows[key][1] == pytest.approx(worst, rel=1e-6, abs=1e-12), key
        assert rows[key][2] == pytest.approx(ratio, rel=5e-3), key

    suite = ET.parse(report).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "1", "0")
    failure = suite.find("testcase[@name='pend']/failure")
    assert failure.get("message") == "q, lam moved beyond tolerance in 5 column(s)"
    assert _table_rows(failure.text) == rows

    # a looser tolerance of one column takes exactly that row out of the table
    _write_suite(tmp_path, g=9.80, extra='tolerances = { "q.phi1" = { rtol = 1.0 } }')
    res = _invoke("baseline", "check", settings)
    assert res.exit_code == 1 and _table_rows(res.output).keys() == expected.keys() - {
        ("q", "phi1")
    }


def test_the_pytest_plugin_fails_a_moved_case_with_the_table(tmp_path, pytester):
    settings = _write_suite(tmp_path)
    assert _invoke("baseline", "record", settings).exit_code == 0
    _write_suite(tmp_path, g=9.80)
    pytester.makepyfile(
        test_user=f"""
        def test_pend(mbdgen_baseline):
            mbdgen_baseline.check("pend", settings={str(settings)!r})
        """
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--mbdgen-baseline", settings, "test_user.py"
    )
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert text.count("case 'pend' moved beyond its tolerances: q, lam (5 column(s))") >= 2
    assert re.search(r"^pend +q +phi1 +\S+ +0\.5 ", text, re.M)
    assert "Traceback" not in text


def test_a_changed_output_grid_is_a_structural_move(tmp_path):
    settings = _write_suite(tmp_path)
    assert _invoke("baseline", "record", settings).exit_code == 0
    text = settings.read_text().replace("output_every = 25", "output_every = 50")
    settings.write_text(text)
    res = _invoke("baseline", "check", settings)
    assert res.exit_code == 1
    assert "output grid of 21 times became 11" in res.output


def test_rerecording_an_unchanged_run_writes_the_same_bytes(tmp_path):
    settings = _write_suite(tmp_path)
    assert _invoke("baseline", "record", settings).exit_code == 0
    first = (tmp_path / "baselines" / "pend.npz").read_bytes()
    assert _invoke("baseline", "record", settings, "--case", "pend").exit_code == 0
    assert (tmp_path / "baselines" / "pend.npz").read_bytes() == first


def _one_line_error(res, *fragments):
    assert res.exit_code == baseline.EXIT_ERROR == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in res.output


def test_a_missing_baseline_is_a_one_line_error_with_exit_2(tmp_path):
    settings = _write_suite(tmp_path)
    report = tmp_path / "report.xml"
    res = _invoke("baseline", "check", settings, "--junit", report)
    _one_line_error(res, "no baseline for case 'pend'", "mbdgen baseline record --case pend")
    error = ET.parse(report).getroot().find("testsuite/testcase[@name='pend']/error")
    assert error is not None and "no baseline" in error.get("message")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("[cases.a\nmodel = 1", ["is not valid TOML", "line 1"]),
        ("", ["has no cases"]),
        ('[cases.a]\nmodel = "nowhere.py"', ["model file", "does not exist"]),
        ('[cases.a]\nmodel = "PENDULUM"\nstep = 1', ["step is not a setting of mbdgen.simulate"]),
        ('[cases.a]\nmodel = "PENDULUM"\nquantities = ["x"]', ["quantities must be a list"]),
        ("[tolerances]\nq = { rtol = -1 }", ["tolerance q.rtol must be a finite number >= 0"]),
        ("[tolerances]\nenergies = { rtol = 1 }", ["unknown quantity 'energies'"]),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, text, fragments):
    (tmp_path / "mbdgen-baseline.toml").write_text(
        text.replace("PENDULUM", (MODELS / "pendulum.py").as_posix())
    )
    _one_line_error(_invoke("baseline", "check", tmp_path), *fragments)


def test_missing_settings_file_and_unknown_case_are_one_line_errors(tmp_path):
    _one_line_error(_invoke("baseline", "record", tmp_path), "no baseline settings file")
    _one_line_error(_invoke("baseline", "check", SUITE, "--case", "nope"), "no case 'nope'")


def test_a_case_that_fails_to_run_is_reported_and_the_others_still_run(tmp_path):
    settings = _write_suite(tmp_path)
    bad = f'\n[cases.bad]\nmodel = "{(MODELS / "pendulum.py").as_posix()}"\nmethod = "nope"\n'
    settings.write_text(settings.read_text() + bad)
    res = _invoke("baseline", "record", settings)
    assert res.exit_code == 2 and "1 of 2 baseline(s) recorded" in res.output
    assert "ERROR  bad: unknown method 'nope'" in res.stderr
    report = tmp_path / "report.xml"
    res = _invoke("baseline", "check", settings, "--junit", report)
    assert res.exit_code == 2
    assert re.search(r"^ok +pend: identical to its baseline", res.output, re.M)
    assert "ERROR  bad: no baseline for case 'bad'" in res.stderr
    suite = ET.parse(report).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "1")


# --------------------------------------------------------------------------- compare()


def _run(t, **arrays):
    return baseline.Run(
        t=np.asarray(t, float),
        arrays={k: np.asarray(v, float).reshape(len(t), -1) for k, v in arrays.items()},
        columns={
            k: [f"{k}{j}" for j in range(np.asarray(v).reshape(len(t), -1).shape[1])]
            for k, v in arrays.items()
        },
    )


def _case(**tolerances):
    tol = {q: baseline.Tolerance(*baseline.DEFAULT_TOLERANCES[q]) for q in baseline.QUANTITIES}
    tol.update({k: baseline.Tolerance(*v) for k, v in tolerances.items()})
    return baseline.Case("c", MODELS / "pendulum.py", {}, None, tol)


def test_compare_bound_is_relative_to_the_column_peak_first_and_worst_times():
    t = [0.0, 1.0, 2.0, 3.0]
    old = _run(t, q=[0.0, 2.0, -4.0, 1.0])
    # bound = 0.1 + 0.01 * 4 = 0.14: exceeded first at t = 2, worst at t = 3
    new = _run(t, q=[0.1, 2.1, -3.8, 1.3])
    report = baseline.compare(_case(q=(0.01, 0.1)), old, new)
    (row,) = report.rows
    assert (row.first_t, row.worst_t) == (2.0, 3.0)
    assert row.bound == pytest.approx(0.14) and row.ratio == pytest.approx(0.3 / 0.14)
    assert report.status == "moved"


def test_compare_nan_on_both_sides_is_equal_on_one_side_moves():
    t = [0.0, 1.0]
    old = _run(t, energy=[[1.0, math.nan], [2.0, math.nan]])
    assert baseline.compare(_case(), old, old).status == "ok"
    new = _run(t, energy=[[1.0, math.nan], [2.0, 0.0]])
    (row,) = baseline.compare(_case(), old, new).rows
    assert (row.column, row.first_t, row.deviation) == ("energy1", 1.0, math.inf)


def test_compare_a_column_that_is_zero_with_atol_zero_moves_on_any_change():
    t = [0.0, 1.0]
    old = _run(t, lam=[0.0, 0.0])
    assert baseline.compare(_case(lam=(0.0, 0.0)), old, old).status == "ok"
    (row,) = baseline.compare(_case(lam=(0.0, 0.0)), old, _run(t, lam=[0.0, 1e-300])).rows
    assert row.ratio == math.inf and row.first_t == 1.0


def test_compare_reports_a_quantity_that_appeared_or_vanished():
    t = [0.0, 1.0]
    report = baseline.compare(_case(), _run(t, q=[1, 2]), _run(t, q=[1, 2], lam=[3, 4]))
    (row,) = report.rows
    assert (row.quantity, row.detail) == ("lam", "not in the baseline")
