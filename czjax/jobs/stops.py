"""How a training run or a scan stops before its target: one rule for both.

Between chunks, a run or scan stops when its output's reader has gone (a broken pipe: ``czjax
train | head``, or the reader killed by the same Ctrl-C; "broken pipe") or when its deadline has
passed ("time limit", never before its first chunk, so that every call makes progress). During a
chunk, Ctrl-C ("interrupt") and SIGTERM ("SIGTERM": ``timeout``, ``docker stop``, SLURM) end it.
Either way the last completed chunk is saved, one line says so (:meth:`StopRule.report`), and the
run's summary (``summary["interrupted"]``) or the scan's result (``ScanResult.interrupted``)
holds the reason, which the command line turns into its exit status (:data:`EXIT_CODES`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable

# Exit statuses of a run or scan stopped before its target (after saving): as the shell reports
# a process ended by that signal; a time limit is no failure (0).
EXIT_CODES = {"interrupt": 130, "SIGTERM": 143, "broken pipe": 141}


class Stopped(Exception):
    """SIGTERM arrived: stop after saving, as for Ctrl-C."""


@contextlib.contextmanager
def sigterm_as_stop():
    """Within the block, SIGTERM raises :class:`Stopped` in the main thread (elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Stopped()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class QuietLog:
    """A log that swallows a broken pipe and remembers it (``.broken``): output is a courtesy,
    the run's files are what must not be lost."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.broken = False

    def __call__(self, message: str) -> None:
        if self.broken:
            return
        try:
            self.log(message)
        except BrokenPipeError:
            self.broken = True
            with contextlib.suppress(OSError):  # stdout's buffer still holds the line: drop it
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)


@dataclasses.dataclass
class StopRule:
    """The stop rule of one run or scan: ``log`` (its progress, a :class:`QuietLog`), ``notice``
    (where the line to read after a stop goes: the command line sends it to stderr, stdout may be
    a pipe already closed), an optional ``deadline`` (``time.monotonic()``), and once it has
    stopped, why (``reason``; False while it has not)."""

    log: QuietLog
    notice: Callable[[str], None]
    deadline: float | None = None
    reason: str | bool = False
    chunks: int = 0  # completed in this process

    def due(self) -> bool:
        """Whether to stop before the next chunk: the output's reader is gone, or the deadline has
        passed after at least one chunk (the reason is recorded)."""
        if not self.reason and self.log.broken:
            self.reason = "broken pipe"
        elif not self.reason and self.deadline is not None and self.chunks and time.monotonic() >= self.deadline:
            self.reason = "time limit"
        return bool(self.reason)

    @contextlib.contextmanager
    def watching(self):
        """Ctrl-C or SIGTERM (with :func:`sigterm_as_stop`) within the block end it, the reason
        recorded; the caller saves what the last completed chunk left."""
        try:
            yield
        except KeyboardInterrupt:
            self.reason = "interrupt"
        except Stopped:
            self.reason = "SIGTERM"

    def report(self, saved: str) -> None:
        """After a stop, and after the save: ``REASON: saved SAVED``."""
        if self.reason:
            self.notice(f"{self.reason}: saved {saved}")


def stop_rule(log: Callable[[str], None], notice: Callable[[str], None] | None = None, deadline=None) -> StopRule:
    """The stop rule of a run or scan logging to ``log`` (made quiet when its pipe breaks), its
    stop's line to ``notice`` (default: that log)."""
    quiet = log if isinstance(log, QuietLog) else QuietLog(log)
    return StopRule(quiet, notice or quiet, deadline)


def exit_code(reason: str | bool) -> int:
    """The exit status after a run or scan that stopped for ``reason`` (0: it did not, or for a time limit)."""
    return EXIT_CODES.get(reason, 0) if isinstance(reason, str) else 0
