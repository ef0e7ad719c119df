"""What a run's output costs, said before the run.

A run recording every one of 1e7 steps wrote an 877 MB npz with a 2.08 GB peak
without a word: the size estimate only refused outputs beyond half the machine's
memory.  Now an output estimated above :data:`~mbdgen.simulation.MEMORY_WARN_SHARE`
(25 %) of the memory available when the run starts is announced in one line before
the first step, with its size and the remedy (``--output-every``).  The memory
reading is replaced here (``_available_bytes``) so that a short run of the pendulum
(1001 rows, 256 kB) stands for a large one.
"""

from __future__ import annotations

import warnings

import pytest
from conftest import GENERATED, MODELS, cli, one_line_error

import mbdgen
from mbdgen import simulation

PENDULUM = MODELS / "pendulum.py"
#: The pendulum (n = 3, m = 2) at h = 1e-3 to t = 1: 1001 rows of 7n + m + 9 = 32 numbers.
ROWS, WIDTH = 1001, 32
NEED = 8 * ROWS * WIDTH


@pytest.fixture
def available(monkeypatch):
    """Set the memory available to ``bytes`` (physical: plenty, no refusal)."""

    def set_to(nbytes: int) -> None:
        monkeypatch.setattr(simulation, "_available_bytes", lambda: nbytes, raising=False)
        monkeypatch.setattr(simulation, "_memory_bytes", lambda: 1 << 40)

    return set_to


def _size_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if w.category.__name__ == "OutputSizeWarning"]


def test_an_output_over_a_quarter_of_available_memory_is_announced_before_the_run(
    pendulum, available
):
    """256 kB of output with 800 kB available (32 %): one warning, before the first
    step, naming the size, the share, the rows and the remedy."""
    available(800_000)
    steps_seen_warning: list[bool] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def progress(t: float, t_end: float) -> None:
            if not steps_seen_warning:
                steps_seen_warning.append(bool(_size_warnings(caught)))

        mbdgen.simulate(pendulum, "rk4", None, 1e-3, 1.0, progress=progress)
    said = _size_warnings(caught)
    assert len(said) == 1 and steps_seen_warning == [True]
    assert said[0] == (
        f"the output will take about 256 kB in memory ({ROWS:,} rows of {WIDTH} numbers), "
        "more than 25 % of the 800 kB available: record fewer rows with a larger "
        "output_every (--output-every, now 1) or a shorter t_end, or keep the rows on disk "
        "while the run goes (stream_to=FOLDER; mbdgen simulate -o FILE.h5 --stream)"
    )
    assert issubclass(caught[0].category, simulation.OutputSizeWarning)
    assert not issubclass(simulation.OutputSizeWarning, simulation.ConstraintWarning)


def test_an_output_under_a_quarter_is_not_announced(pendulum, available):
    """The same run with 2 MB available (13 %), or recording every 10th step with
    800 kB: nothing said."""
    available(2_000_000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mbdgen.simulate(pendulum, "rk4", None, 1e-3, 1.0)
        available(800_000)
        mbdgen.simulate(pendulum, "rk4", None, 1e-3, 1.0, output_every=10)
    assert _size_warnings(caught) == []


def test_the_cli_says_it_in_one_line_before_the_run_and_strict_does_not_fail(available, tmp_path):
    """The CLI prints the warning as it comes (before the run's summary line, not
    after it with the run's checks), once; --strict does not fail on it (it is no
    check of the result), and the result is written."""
    available(800_000)
    out = tmp_path / "r.npz"
    args = ["simulate", PENDULUM, "--out-dir", GENERATED, "--no-progress", "--method", "rk4"]
    code, output = cli(*args, "--t-end", 1, "--strict", "-o", out)
    assert code == 0, output
    lines = output.splitlines()
    said = [i for i, line in enumerate(lines) if "the output will take about" in line]
    summary = [i for i, line in enumerate(lines) if " steps of " in line]
    assert len(said) == 1 and summary and said[0] < summary[0], output
    assert lines[said[0]].startswith("warning: the output will take about 256 kB")
    assert out.exists()


def test_an_output_beyond_half_the_machine_is_still_refused(monkeypatch):
    """The refusal is unchanged: beyond half the physical memory, one line, no run."""
    monkeypatch.setattr(simulation, "_memory_bytes", lambda: 400_000)
    code, output = cli(
        "simulate", PENDULUM, "--out-dir", GENERATED, "--method", "rk4", "--t-end", 1
    )
    assert code == 1 and "record fewer rows" in one_line_error(output, only=True)
    assert " steps of " not in output
