"""Damaged files that mbdgen reads back: Numba's cache entries and a sweep's batches.

Each test works on a private copy: the Numba cache of the cache test lives in the
test's own folder (``NUMBA_CACHE_DIR``), never the shared one in ``~/.cache`` that the
rest of the suite and other processes use.
"""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys

import numba
import pandas as pd
import pytest
from conftest import GENERATED, MODELS, ROOT, cli

import mbdgen
from mbdgen.errors import MbdgenError

PENDULUM = MODELS / "pendulum.py"


def _mbdgen_in_process_of_its_own(*args: object, env: dict[str, str]) -> tuple[int, str]:
    """``mbdgen ARGS`` in a fresh interpreter (what it loads from Numba's cache is what
    the disk holds): (exit code, stdout and stderr)."""
    code = "import sys; sys.argv[0] = 'mbdgen'; from mbdgen.cli import entry; entry()"
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_a_damaged_numba_cache_entry_is_compiled_again_and_replaced(tmp_path):
    """Random bytes in an index, an index whose signature table makes pickle
    ask for 4 EiB (the issue's MemoryError) and a data file cut to half its length: the
    next run compiles those functions again, says so once per file, and writes over
    them, so that the run after it loads them without a word."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), "MBDGEN_SPECIALIZE": "shared"}
    run = ("simulate", PENDULUM, "--out-dir", GENERATED, "--method", "rk4", "--t-end", 0.01)
    rc, out = _mbdgen_in_process_of_its_own(*run, env=env)
    assert rc == 0, out
    # entries the next run loads (a callee linked into its caller's code is not read)
    found = [
        sorted((tmp_path / "numba").glob(f"runtime-*/{pattern}"))
        for pattern in (
            "runtime_*/shared.abm_chunk-*.nbi",  # the shared integrator loop
            "runtime_*/postprocess.energy_balance-*.nbi",
            "generated_*/pendulum.dynamics-*.nbc",
        )
    ]
    assert all(len(files) == 1 for files in found), sorted((tmp_path / "numba").rglob("*"))
    (random_bytes,), (huge,), (truncated,) = found
    random_bytes.write_bytes(random.Random(46).randbytes(300))
    version = pickle.dumps(numba.__version__, protocol=-1)
    huge.write_bytes(version + b"\x80\x05\x8e" + (2**62).to_bytes(8, "little"))
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])

    rc, out = _mbdgen_in_process_of_its_own(*run, env=env)
    assert rc == 0, out
    assert "Traceback" not in out and "internal error" not in out and "error:" not in out, out
    warned = [line for line in out.splitlines() if line.startswith("warning")]
    assert len(warned) == 3, out
    for damaged in (random_bytes, huge, truncated):
        (line,) = [w for w in warned if str(damaged) in w]
        assert line.startswith("warning: the compiled-code cache entry "), line
        assert "was damaged" in line and "compiled again" in line, line
    assert "MemoryError" in out and "truncated" in out, out
    assert not list((tmp_path / "numba").rglob("*.tmp.*"))  # replaced by a rename

    rc, out = _mbdgen_in_process_of_its_own(*run, env=env)
    assert rc == 0 and "warning" not in out and "damaged" not in out, out
    with huge.open("rb") as f:  # a whole index again
        assert pickle.load(f) == numba.__version__ and pickle.load(f)

    # another command than simulate says it in one line too (not Python's file:line form)
    assemble = ("assemble", PENDULUM, "--out-dir", GENERATED)
    rc, out = _mbdgen_in_process_of_its_own(*assemble, env=env)
    assert rc == 0, out
    (phi,) = (tmp_path / "numba").glob("runtime-*/generated_*/pendulum.phi-*.nbc")
    phi.write_bytes(phi.read_bytes()[:300])
    rc, out = _mbdgen_in_process_of_its_own(*assemble, env=env)
    assert rc == 0 and "DamagedCacheWarning" not in out, out
    assert [line for line in out.splitlines() if "damaged" in line] == [
        f"warning: the compiled-code cache entry {phi} was damaged (UnpicklingError: pickle "
        "data was truncated); compiled again and written over it"
    ], out


def _zero_the_pages(file) -> None:
    """Overwrite a parquet file's data pages with zeros, keeping its magic and footer."""
    data = bytearray(file.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    end = len(data) - 8 - footer
    data[4:end] = bytes(end - 4)
    file.write_bytes(bytes(data))


def test_a_damaged_sweep_batch_is_run_again_on_resume(tmp_path):
    """A batch file cut short (its footer gone) and one whose data pages are
    zeros (its footer intact): the folder's table names the file and how to recover,
    and --resume sets each file aside, says so in one line and runs its runs again, to
    the table of the undamaged sweep."""
    out = tmp_path / "sweep"
    args = ["sweep", PENDULUM, "--out-dir", GENERATED, "--method", "rk4", "--t-end", 0.02]
    rc, output = cli(*args, "-p", "m=1:2:6", "--batch-size", 2, "--workers", 1, "-o", out)
    assert rc == 0 and "6 runs (6 finished)" in output, output
    whole = mbdgen.load_sweep(out).table
    cut, zeroed = out / "batches" / "batch-000001.parquet", out / "batches" / "batch-000002.parquet"
    cut.write_bytes(cut.read_bytes()[:100])
    _zero_the_pages(zeroed)

    with pytest.raises(MbdgenError, match=r"batch-000001\.parquet is damaged .*--resume"):
        mbdgen.load_sweep(out)

    rc, output = cli(*args, "--resume", "-o", out)
    assert rc == 0 and "6 runs (6 finished)" in output, output
    assert "Traceback" not in output and "internal error" not in output, output
    warned = [line for line in output.splitlines() if line.startswith("warning")]
    assert len(warned) == 2, output
    assert warned[0].startswith("warning: batch-000001.parquet was damaged (ArrowInvalid")
    assert "running the runs it held again" in warned[0]
    assert warned[1].startswith("warning: batch-000002.parquet was damaged (OSError")
    assert "running its 2 runs again" in warned[1]
    assert "kept as batches/damaged-batch-000002.parquet" in warned[1]
    assert (out / "batches" / "damaged-batch-000001.parquet").is_file()
    resumed = mbdgen.load_sweep(out).table
    keep = [c for c in whole.columns if not c.startswith("counter.") or "time" not in c]
    pd.testing.assert_frame_equal(resumed[keep], whole[keep])
    pd.testing.assert_frame_equal(pd.read_parquet(out / "runs.parquet")[keep], whole[keep])

    rc, output = cli(*args, "--resume", "-o", out)  # nothing damaged, nothing to run
    assert rc == 0 and "6 runs (6 finished)" in output and "warning" not in output, output
