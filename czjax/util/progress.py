"""Progress lines for host-side work that can take more than a few seconds.

Two kinds, because the compiled programs never call back to the host: a :func:`heartbeat`
while one compiled call runs (elapsed time only: nothing inside the call can be counted), and
a :class:`Progress` over a known number of steps (a count, the elapsed time and an estimate of
the time left from the steps done so far). Every estimate of the time left, here and in the
training and scan lines, comes from a :class:`Pace`. Nothing here imports the rest of czjax.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

HEARTBEAT_S = 5.0  # the longest silence while a compile or a slow compiled call runs


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 20 s``, ``2 h 05 min``."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def eta_text(seconds: float | None) -> str:
    """``about 3 min 20 s left``; ``under a second left`` below one (never ``0 s`` while work
    remains), ``done`` at none; empty without an estimate."""
    if seconds is None:
        return ""
    if seconds <= 0:
        return "done"
    return "under a second left" if seconds < 1 else f"about {duration(seconds)} left"


@dataclasses.dataclass(frozen=True)
class Pace:
    """The pace of a job's steps, smoothed: every estimate of the time left here comes from one.

    The first step alone sets the pace until a second comes; then it is left out, because a
    first step compiles. From the second on, the pace is the ratio of exponentially weighted
    sums of units and seconds, each step weighing half as much after a further span of work as
    long as all the work counted so far (a half-life that grows with the job). So noisy or
    bursty steps average out almost as over the whole run (a pool of searches whose stops come
    in waves, a tournament's matches of unlike players), while a pace that drifts (later
    searches shorter) is still followed, where a fixed window would swing with each wave."""

    units: float = 0.0  # the weighted sums of the steps counted
    seconds: float = 0.0
    span_s: float = 0.0  # the seconds of the steps counted, unweighted
    steps: int = 0  # the steps added, the first included

    def add(self, units: float, seconds: float) -> Pace:
        """The pace after one more step: ``units`` of work in ``seconds``."""
        counted = Pace(steps=1) if self.steps == 1 else self  # the first step leaves when the second comes
        span = counted.span_s + seconds
        weight = 0.5 ** (seconds / span) if span > 0 else 1.0
        return Pace(counted.units * weight + units, counted.seconds * weight + seconds, span, self.steps + 1)

    def time_left(self, remaining: float) -> float | None:
        """Seconds for ``remaining`` units at this pace: 0 when none remain, None before a unit
        was counted."""
        if remaining <= 0:
            return 0.0
        return None if self.units <= 0 else self.seconds / self.units * remaining


def pace_of(steps: Iterable[tuple[float, float]]) -> Pace:
    """The :class:`Pace` of ``(units, seconds)`` steps, in order."""
    pace = Pace()
    for units, seconds in steps:
        pace = pace.add(units, seconds)
    return pace


@contextlib.contextmanager
def every(period_s: float, tick: Callable[[], None]):
    """While the body runs, call ``tick()`` every ``period_s`` seconds from a daemon thread (the
    compiled programs never call back to the host, so the host keeps time beside them)."""
    stop = threading.Event()

    def ticker():
        while not stop.wait(period_s):
            tick()

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def heartbeat(log: Callable[[str], None], message: Callable[[], str], every_s: float | None = None):
    """While the body runs, log ``message()`` every ``every_s`` seconds, so that a slow compile
    or compiled call still shows it is alive."""
    return every(HEARTBEAT_S if every_s is None else every_s, lambda: log(message()))


class Progress:
    """``what: done/total unit (elapsed, about T left)`` lines over ``total`` units of work.

    :meth:`step` runs one step (a compiled call) and counts its units; with no ``log``
    (``Progress()``) it only runs it. A line is logged every
    ``every_s`` seconds, during a step too (its estimate counting down), and after the last step
    if the whole took that long (a quick job prints nothing). The estimate is the :class:`Pace`
    of the steps so far, each timed from the end of the one before (the host's work between
    them counted). ``clock``: where the time comes from (a test's fake one)."""

    def __init__(
        self,
        log: Callable[[str], None] | None = None,
        what: str = "",
        total: int = 0,
        unit: str = "",
        every_s: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.log, self.what, self.total, self.unit, self.clock = log, what, total, unit, clock
        self.every_s = HEARTBEAT_S if every_s is None else every_s
        self.done = 0
        self.start = self.last_line = self.last_step = clock()
        self.pace = Pace()
        self.estimate: tuple[float | None, float] = (None, self.start)  # (seconds left, when estimated)
        self.last_text = ""

    def counting_down(self, now: float) -> float | None:
        """The estimate made after the last step less the time since; None once a step has
        outlasted it (no estimate rather than ``0 s`` while work remains)."""
        left, when = self.estimate
        rest = None if left is None else left - (now - when)
        return rest if rest is not None and rest > 0 else None

    def line(self, now: float, label: str = "") -> str:
        eta = "done" if self.done >= self.total else eta_text(self.counting_down(now))
        unit = f" {self.unit}" if self.unit else ""
        details = ", ".join(x for x in (duration(now - self.start), eta, label) if x)
        return f"  {self.what}: {self.done:,}/{self.total:,}{unit} ({details})"

    def _emit(self, now: float, label: str = "") -> None:
        assert self.log is not None  # reached only from step with a log
        text = self.line(now, label)
        if text != self.last_text:  # a line that says nothing new is left out
            self.log(text)
            self.last_text = text
        self.last_line = now

    def step(self, fn: Callable, units: int | Callable[[Any], int], label: str = ""):
        """``fn()``, counted as ``units`` of the total (or as ``units(result)``, for a step that
        learns its count as it runs); returns what it returns. ``label`` names the step in the
        lines logged while it runs."""
        if self.log is None:
            return fn()

        def tick():  # a line when the last is every_s old, checked often so that lines keep their pace
            if self.clock() - self.last_line >= self.every_s:
                self._emit(self.clock(), label)

        with every(min(1.0, max(0.05, self.every_s)), tick):
            out = fn()
        self._count(units(out) if callable(units) else units)
        return out

    def _count(self, units: int) -> None:
        self.done += units
        now = self.clock()
        self.pace = self.pace.add(units, now - self.last_step)
        self.last_step = now
        self.estimate = (self.pace.time_left(self.total - self.done), now)
        finished_slowly = self.done >= self.total and now - self.start >= self.every_s
        if now - self.last_line >= self.every_s or finished_slowly:
            self._emit(now)
