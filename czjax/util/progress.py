"""Progress lines for host-side work that can take more than a few seconds.

Two kinds, because the compiled programs never call back to the host: a :func:`heartbeat`
while one compiled call runs (elapsed time only: nothing inside the call can be counted), and
a :class:`Progress` over a known number of steps (a count, the elapsed time and an estimate of
the time left from the steps done so far). Nothing here imports the rest of czjax.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
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


def time_left(done: float, total: float, elapsed_s: float) -> float | None:
    """Seconds left at the rate so far (``elapsed_s`` for ``done`` of ``total``); None before
    anything is done."""
    if done <= 0 or total <= done:
        return None if done <= 0 else 0.0
    return elapsed_s / done * (total - done)


def time_left_after_compile(
    first_chunk: tuple[float, float], since_first: tuple[float, float] | None, remaining: float
) -> float | None:
    """Seconds for ``remaining`` units at the wall-clock pace since the first chunk
    (``since_first = (units, seconds)``: its compile left out, the host's work counted), or at
    that first chunk's own pace (``first_chunk = (units, seconds)``) while it is the only one."""
    done, seconds = since_first if since_first is not None and since_first[0] > 0 else first_chunk
    return time_left(done, done + remaining, seconds)


def eta_text(seconds: float | None) -> str:
    return "" if seconds is None else f"about {duration(seconds)} left"


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
    if the whole took that long (a quick job prints nothing). The estimate is the pace of the
    steps so far, leaving out the first when there are more (it compiles)."""

    def __init__(
        self,
        log: Callable[[str], None] | None = None,
        what: str = "",
        total: int = 0,
        unit: str = "",
        every_s: float | None = None,
    ):
        self.log, self.what, self.total, self.unit = log, what, total, unit
        self.every_s = HEARTBEAT_S if every_s is None else every_s
        self.done = 0
        self.start = self.last_line = time.perf_counter()
        self.first_done: tuple[int, float] | None = None  # (units, time) after the first step
        self.estimate: tuple[float | None, float] = (None, self.start)  # (seconds left, when estimated)

    def line(self, now: float, label: str = "") -> str:
        left, when = self.estimate
        eta = "done" if self.done >= self.total else eta_text(None if left is None else max(0.0, left - (now - when)))
        unit = f" {self.unit}" if self.unit else ""
        details = ", ".join(x for x in (duration(now - self.start), eta, label) if x)
        return f"  {self.what}: {self.done:,}/{self.total:,}{unit} ({details})"

    def _emit(self, now: float, label: str = "") -> None:
        assert self.log is not None  # reached only from step with a log
        self.log(self.line(now, label))
        self.last_line = now

    def step(self, fn: Callable, units: int | Callable[[Any], int], label: str = ""):
        """``fn()``, counted as ``units`` of the total (or as ``units(result)``, for a step that
        learns its count as it runs); returns what it returns. ``label`` names the step in the
        lines logged while it runs."""
        if self.log is None:
            return fn()

        def tick():  # a line when the last is every_s old, checked often so that lines keep their pace
            if time.perf_counter() - self.last_line >= self.every_s:
                self._emit(time.perf_counter(), label)

        with every(min(1.0, max(0.05, self.every_s)), tick):
            out = fn()
        self._count(units(out) if callable(units) else units)
        return out

    def _count(self, units: int) -> None:
        self.done += units
        now = time.perf_counter()
        if self.first_done is None:
            self.first_done = (self.done, now)
        base_done, base_time = self.first_done if self.done > self.first_done[0] else (0, self.start)
        self.estimate = (time_left(self.done - base_done, self.total - base_done, now - base_time), now)
        finished_slowly = self.done >= self.total and now - self.start >= self.every_s
        if now - self.last_line >= self.every_s or finished_slowly:
            self._emit(now)
