"""Stage timings of a compile: load, derive (per element type), CSE, render, write, JIT.

:func:`mbdgen.compiler.generate` fills a :class:`CompileReport` when given one
(``mbdgen compile -v`` prints it).  The stages record themselves through
:func:`timed` / :func:`add`, which do nothing unless a report is being recorded
(:func:`recording`), so the pipeline's functions need no extra argument.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Stage:
    """One timed stage: its name, wall time and what it did (``revolute_pp: cached``)."""

    name: str
    seconds: float
    detail: str = ""


@dataclass
class CompileReport:
    """The stages of one compile, in the order they ran."""

    stages: list[Stage] = field(default_factory=list)

    def add(self, name: str, seconds: float, detail: str = "") -> None:
        self.stages.append(Stage(name, seconds, detail))

    def accumulate(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to the stage ``name`` without detail (one row per kind)."""
        for s in self.stages:
            if s.name == name and not s.detail:
                s.seconds += seconds
                return
        self.add(name, seconds)

    def seconds(self, name: str) -> float:
        """Total wall time of the stages called ``name``."""
        return sum(s.seconds for s in self.stages if s.name == name)

    def table(self) -> str:
        """An aligned text table: stage, detail, seconds, and the total."""
        rows = [(s.name, s.detail, f"{s.seconds:.3f}") for s in self.stages]
        total = sum(s.seconds for s in self.stages)
        rows.append(("total", "", f"{total:.3f}"))
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        w2 = max(len(r[2]) for r in rows)
        head = f"{'stage':<{w0}}  {'detail':<{w1}}  {'s':>{w2}}".rstrip()
        lines = [head]
        lines += [f"{a:<{w0}}  {b:<{w1}}  {c:>{w2}}" for a, b, c in rows]
        return "\n".join(lines)


_CURRENT: ContextVar[CompileReport | None] = ContextVar("mbdgen_compile_report", default=None)


@contextmanager
def recording(report: CompileReport | None) -> Iterator[CompileReport | None]:
    """Record the stages run inside the block into ``report`` (None: record nothing)."""
    token = _CURRENT.set(report)
    try:
        yield report
    finally:
        _CURRENT.reset(token)


def current() -> CompileReport | None:
    """The report being recorded, if any."""
    return _CURRENT.get()


def add(name: str, seconds: float, detail: str = "") -> None:
    report = _CURRENT.get()
    if report is not None:
        report.add(name, seconds, detail)


def accumulate(name: str, seconds: float) -> None:
    report = _CURRENT.get()
    if report is not None:
        report.accumulate(name, seconds)


@contextmanager
def timed(name: str, detail: str = "") -> Iterator[None]:
    """Time the block as stage ``name`` (when a report is being recorded)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        add(name, time.perf_counter() - start, detail)
