"""Where a jitted loop spends its time, instruction by instruction (``perf`` on JIT code).

Numba's machine code lives in anonymous memory, which ``perf report`` cannot
disassemble once the process has exited.  This script runs the workload in its own
process, attaches ``perf record`` to itself for a few seconds, then copies the
executable mapping that holds most samples to a file, disassembles it with
``objdump`` and prints each instruction with its sample count (``annot.txt``) and
the hottest regions with the instructions that characterise them (divisions,
calls, square roots).  Stop 40 found the HHT predictor's integer divisions and the
generated kernels' ``memset`` calls this way (design notes).

Usage: python bench/perf_jit.py WORKLOAD [--seconds 8] [--out /tmp/perf_jit]
(WORKLOAD: hht, hht_hand, andrews_radau5, andrews_vabm, stiff_hht_adaptive, stiff_radau5,
stiff_vabm; the slider-crank's 20 000 HHT steps, or an Andrews run of the bench)
Needs ``perf`` (with permission to attach to the own process) and ``objdump``.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: mnemonics worth naming in a region's summary
NOTABLE = ("div", "idiv", "vdivsd", "vsqrtsd", "call", "vmulsd", "vaddsd", "vsubsd", "vmaxsd")


def workload(name: str) -> Callable[[], object]:
    from mbdgen import bench

    if name == "hht":
        module = bench.mbdgen_module()
        return lambda: bench.mbdgen_hht(module, 20000)
    if name == "hht_hand":
        return lambda: bench.handwritten_hht(20000)
    cases = {  # Andrews' mechanism at the bench's tolerances for a 1e-6 final error
        "andrews_radau5": ("standard", "radau5", 3e-9),
        "andrews_vabm": ("standard", "vabm", 1e-8),
        "stiff_hht_adaptive": ("stiff", "hht_adaptive", 1e-6),
        "stiff_radau5": ("stiff", "radau5", 1e-6),
        "stiff_vabm": ("stiff", "vabm", 1e-8),
    }
    if name in cases:
        module = bench.andrews_module()
        case, method, tol = cases[name]
        return lambda: bench.andrews_mbdgen(module, case, method, rtol=tol, atol=tol)
    raise SystemExit(f"unknown workload {name!r} (hht, hht_hand, {', '.join(cases)})")


def samples(data: Path) -> collections.Counter[int]:
    """Sample addresses that fall in anonymous (JIT) memory."""
    text = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,dso"], capture_output=True, text=True
    ).stdout
    ips: collections.Counter[int] = collections.Counter()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and ("perf-" in parts[1] or "[unknown]" in parts[1]):
            ips[int(parts[0], 16)] += 1
    return ips


def hot_mapping(ips: collections.Counter[int]) -> tuple[int, int]:
    """(start, end) of the executable mapping with the most samples."""
    best = (0, 0, 0)
    for line in Path(f"/proc/{os.getpid()}/maps").read_text().splitlines():
        fields = line.split()
        if "x" not in fields[1]:
            continue
        a, b = (int(x, 16) for x in fields[0].split("-"))
        count = sum(k for ip, k in ips.items() if a <= ip < b)
        if count > best[0]:
            best = (count, a, b)
    return best[1], best[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/perf_jit"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run = workload(args.workload)
    for _ in range(5):
        run()  # JIT or cache load, warm-up
    data = args.out / "perf.data"
    perf = subprocess.Popen(
        ["perf", "record", "-q", "-F", "20000", "-p", str(os.getpid()), "-o", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    t0 = time.time()
    while time.time() - t0 < args.seconds:
        run()
    perf.send_signal(2)
    perf.wait()
    ips = samples(data)
    if not ips:
        raise SystemExit("no samples in JIT memory (is perf allowed to attach?)")
    start, end = hot_mapping(ips)
    code = args.out / "code.bin"
    code.write_bytes(ctypes.string_at(start, end - start))
    asm = subprocess.run(
        ["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f"--adjust-vma={start:#x}",
         str(code)],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    rows: list[tuple[int, str]] = []
    for line in asm:
        m = re.match(r"\s*([0-9a-f]+):\s", line)
        rows.append((ips.get(int(m.group(1), 16), 0) if m else 0, line))
    (args.out / "annot.txt").write_text("".join(f"{k:6d} {a}\n" for k, a in rows))
    total = sum(k for k, _ in rows)
    print(
        f"{total} of {sum(ips.values())} JIT samples in {start:#x}-{end:#x}; {args.out}/annot.txt"
    )
    # regions: runs of sampled instructions separated by a dozen cold ones
    regions, first, last, quiet = [], None, 0, 0
    for i, (k, _) in enumerate(rows):
        if k > 2:
            first = i if first is None else first
            last, quiet = i, 0
        elif first is not None:
            quiet += 1
            if quiet > 12:
                regions.append((first, last))
                first = None
    if first is not None:
        regions.append((first, last))
    ranked = sorted(((sum(k for k, _ in rows[a : b + 1]), a, b) for a, b in regions), reverse=True)
    for s, a, b in ranked[:15]:
        ops = collections.Counter(
            r.split("\t")[-1].split()[0] for _, r in rows[a : b + 1] if r.count("\t") >= 2
        )
        notable = ", ".join(f"{o} {ops[o]}" for o in NOTABLE if ops[o])
        print(f"{100 * s / total:5.1f} %  lines {a + 1}-{b + 1} of annot.txt  ({notable})")


if __name__ == "__main__":
    main()
