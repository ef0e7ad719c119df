"""pytest plugin: check mbdgen regression baselines inside a test suite.

Installed with mbdgen (entry point ``pytest11``), so it is active in every pytest
run of an environment that has mbdgen; it imports nothing heavy until used.

Two ways to use it, both with the tolerances, table and messages of
``mbdgen baseline check`` (:mod:`mbdgen.baseline`):

* **Collection** (opt-in, like ``--doctest-modules``): with ``--mbdgen-baseline`` on
  the command line, or ``mbdgen_baseline = true`` in the ini file
  (``[tool.pytest.ini_options]``), every ``mbdgen-baseline.toml`` that pytest meets
  while collecting becomes one test per case, ``mbdgen-baseline.toml::<case>``.
* **Fixture** ``mbdgen_baseline``: ``mbdgen_baseline.check("case")`` runs the case of
  the ``mbdgen-baseline.toml`` next to the test file (or the nearest one above it,
  up to the root folder; ``settings=`` names another) and fails the test with the
  table of what moved; it returns the :class:`~mbdgen.baseline.CaseReport`.

``--mbdgen-baseline-record`` records the baselines instead of checking them (the
tests pass unless a case fails to run), like ``mbdgen baseline record``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mbdgen.baseline import CaseReport, Suite

SETTINGS_NAME = "mbdgen-baseline.toml"  # = mbdgen.baseline.SETTINGS_NAME (kept light here)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mbdgen", "mbdgen regression baselines")
    group.addoption(
        "--mbdgen-baseline",
        action="store_true",
        default=None,
        help=f"collect each {SETTINGS_NAME} as one test per case",
    )
    group.addoption(
        "--mbdgen-baseline-record",
        action="store_true",
        default=False,
        help="record mbdgen baselines instead of checking them",
    )
    parser.addini(
        "mbdgen_baseline",
        type="bool",
        default=False,
        help=f"collect each {SETTINGS_NAME} as one test per case",
    )


def _collecting(config: pytest.Config) -> bool:
    option = config.getoption("mbdgen_baseline")
    return bool(option) if option is not None else bool(config.getini("mbdgen_baseline"))


def _suite(config: pytest.Config, path: Path) -> Suite:
    """The parsed settings file, once per session."""
    from mbdgen.baseline import load_settings

    cache: dict[Path, Suite] = config.stash.setdefault(_SUITES, {})
    key = path.resolve()
    if key not in cache:
        cache[key] = load_settings(key)
    return cache[key]


_SUITES = pytest.StashKey[dict]()


def _run(config: pytest.Config, suite: Suite, case: str) -> CaseReport:
    """Check (or record, with --mbdgen-baseline-record) one case."""
    from mbdgen import baseline

    if config.getoption("mbdgen_baseline_record"):
        return baseline.record(suite, [case])[0]
    return baseline.check_case(suite, suite.cases[case])


class BaselineFailure(Exception):
    """A case that moved or could not be checked; its text is the test's report."""


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name == SETTINGS_NAME and _collecting(parent.config):
        return BaselineFile.from_parent(parent, path=file_path)
    return None


class BaselineFile(pytest.File):
    """A settings file: one :class:`BaselineItem` per case."""

    def collect(self) -> Iterator[pytest.Item]:
        from mbdgen.errors import MbdgenError

        try:
            suite = _suite(self.config, self.path)
        except MbdgenError as exc:
            raise self.CollectError(str(exc)) from None
        for name in suite.cases:
            yield BaselineItem.from_parent(self, name=name)


class BaselineItem(pytest.Item):
    """One case of a settings file, checked against its baseline."""

    def runtest(self) -> None:
        from mbdgen.baseline import failure_text

        report = _run(self.config, _suite(self.config, self.path), self.name)
        if not report.ok:
            raise BaselineFailure(failure_text(report))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, BaselineFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"mbdgen baseline: {self.name}"


class BaselineFixture:
    """What the ``mbdgen_baseline`` fixture returns."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._config = request.config
        self._start = Path(request.path).parent
        self._root = Path(request.config.rootpath)

    def settings_path(self, settings: str | Path | None = None) -> Path:
        """The settings file: ``settings`` (relative to the test file's folder), else the
        nearest ``mbdgen-baseline.toml`` from the test file's folder up to the root."""
        if settings is not None:
            path = self._start / settings
            return path / SETTINGS_NAME if path.is_dir() else path
        for folder in (self._start, *self._start.parents):
            if (folder / SETTINGS_NAME).is_file():
                return folder / SETTINGS_NAME
            if folder == self._root:
                break
        pytest.fail(
            f"no {SETTINGS_NAME} in {self._start} or above it up to {self._root}; pass "
            "settings= to mbdgen_baseline.check",
            pytrace=False,
        )

    def check(self, case: str, settings: str | Path | None = None) -> CaseReport:
        """Run ``case`` and compare it with its baseline; fail the test with the table of
        what moved (or why it could not be checked)."""
        from mbdgen.baseline import failure_text
        from mbdgen.errors import MbdgenError

        try:
            suite = _suite(self._config, self.settings_path(settings))
            suite.select([case])
        except MbdgenError as exc:
            problem = str(exc)
        else:
            problem = ""
        if problem:  # failed outside the handler: no "during handling" chain in the report
            pytest.fail(problem, pytrace=False)
        report = _run(self._config, suite, case)
        if not report.ok:
            pytest.fail(failure_text(report), pytrace=False)
        return report


@pytest.fixture
def mbdgen_baseline(request: pytest.FixtureRequest) -> BaselineFixture:
    """Check mbdgen regression baselines: ``mbdgen_baseline.check("case")``."""
    return BaselineFixture(request)
