"""Timing a compiled program: compiled once (its compile time reported apart) and warmed up,
then timed over calls with different arguments, optionally one more call under the profiler
(:mod:`czjax.bench.profiling`); the figures a benchmark reports are the medians.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax

from czjax.bench import profiling
from czjax.util import compiling


class Timed(NamedTuple):
    """What :func:`time_compiled` measured."""

    compile_s: float
    times: list[float]
    output: Any  # the last timed call's: what fn returns
    phases: list[tuple[str, float]] | None  # czjax.bench.profiling.phase_times of one more call, when profiled
    kinds: dict | None  # czjax.bench.profiling.op_kind_table of that call, when profiled


def compile_warm(fn: Callable, make_args: Callable[[int], tuple], options: dict | None = None):
    """``(compiled, compile_s)``: ``fn`` compiled for ``make_args(0)`` (with the compiler
    ``options``, or without them where this jaxlib refuses them) and run once on it (the warm-up
    run's allocations are not timed)."""
    start = time.perf_counter()
    lowered = jax.jit(fn).lower(*make_args(0))
    try:
        compiled = compiling.compile_lowered(lowered, options)
    except Exception:  # noqa: BLE001 - any refusal of the extra options: compiled as usual
        if not options:
            raise
        compiled = compiling.compile_lowered(lowered)
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(*make_args(0)))
    return compiled, compile_s


def timed_call(compiled, args) -> tuple[float, Any]:
    """``(seconds, output)`` of one call, waited for."""
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    return time.perf_counter() - start, out


def time_compiled(
    fn: Callable,
    make_args: Callable[[int], tuple],
    runs: int,
    profile: str | Path | None = None,
    step: profiling.LoopStep | None = None,
    options: dict | None = None,
) -> Timed:
    """Compile ``fn`` for ``make_args(0)`` (with the compiler ``options``, see :func:`compile_warm`),
    then time ``runs`` calls. With ``profile`` (a folder), one more call runs under the
    profiler, its trace written there and its time split into phases and kinds of operation
    (czjax.bench.profiling; ``step`` as in :func:`czjax.bench.profiling.kind_table`); with
    ``runs=0`` that call's own time is the timing."""
    if runs < 1 and profile is None:
        raise ValueError("time_compiled needs runs >= 1, or a profile whose call is timed")
    compiled, compile_s = compile_warm(fn, make_args, options)
    times, out = [], None
    for i in range(runs):
        seconds, out = timed_call(compiled, make_args(i + 1))
        times.append(seconds)
    phases = kinds = None
    if profile is not None:
        args = make_args(runs + 1)
        with profiling.trace(profile):
            seconds, profiled = timed_call(compiled, args)
        if not times:
            times, out = [seconds], profiled
        text = compiled.as_text()
        phases = profiling.phase_times(profile, [text])
        busy = profiling.device_busy(profile)
        if busy is not None:
            phases.append(("(device busy)", busy[0]))
            phases.append(("(device span)", busy[1]))
        kinds = profiling.op_kind_table(profile, text, step)
    return Timed(compile_s, times, out, phases, kinds)


def peak_bytes() -> int | None:
    """The first device's peak memory in use so far, or None where the backend keeps no count."""
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def time_interleaved(settings, runs: int, names):
    """``[(name, times, compile_s)]`` for ``settings`` (``(fn, make_args)`` pairs), each compiled
    once, then timed in turn run after run, so that a shared machine's drift reaches them alike."""
    compiled, compile_times = zip(*(compile_warm(fn, make_args) for fn, make_args in settings))
    times: list[list[float]] = [[] for _ in settings]
    for i in range(runs):
        for k, (c, (_, make_args)) in enumerate(zip(compiled, settings)):
            times[k].append(timed_call(c, make_args(i + 1))[0])
    return list(zip(names, times, compile_times))


def step_fields(step: str, call_s: float, steps_per_call: int) -> dict:
    """A row's compiled step: what it is (``step``) and its time (``step_s``: a call's time over
    the steps it runs)."""
    return {"step": step, "step_s": call_s / steps_per_call}
