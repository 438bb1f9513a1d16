"""Where a compiled program's time goes (host side): ``czjax bench train --profile DIR``.

The compiled core marks its phases with ``jax.named_scope``: ``selfplay`` (the batch of
games: ``network`` forwards, the ``rules``, the ``compaction`` of live games), ``update``
(``targets``, ``gradient``, ``optimizer``), ``bookkeeping`` and ``evaluation``. XLA keeps
those names in each instruction's ``op_name``; the backward pass of a scope appears as
``transpose(jvp(scope))``. :func:`trace` records a ``jax.profiler`` trace (a Perfetto
``perfetto_trace.json.gz``, readable in ui.perfetto.dev) and :func:`phase_times` adds up the
time of the device's operations per phase, from the trace and the compiled program's text.
"""

from __future__ import annotations

import collections
import contextlib
import gzip
import json
import re
from pathlib import Path

import jax

PHASES = (
    "selfplay",
    "evaluation",
    "update",
    "bookkeeping",
    "targets",
    "gradient",
    "optimizer",
    "network",
    "rules",
    "compaction",
    "descend",
    "backup",
)
_INSTRUCTION = re.compile(r'^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*?op_name="([^"]*)"')


@contextlib.contextmanager
def trace(folder: str | Path):
    """Record a profiler trace of what runs inside the context into ``folder``."""
    with jax.profiler.trace(str(folder), create_perfetto_trace=True):
        yield


def op_names(hlo_text: str) -> dict[str, str]:
    """``{instruction name: op_name}`` from a compiled program's text (``compiled.as_text()``)."""
    names = {}
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if match:
            names[match.group(1)] = match.group(2)
    return names


def phase(op_name: str) -> str:
    """The known scopes on an ``op_name``'s path, outermost first, e.g. ``update/gradient/network
    (backward)``; ``other`` when it has none."""
    parts = [name for name in re.findall(r"[A-Za-z_]+", op_name) if name in PHASES]
    parts = list(dict.fromkeys(parts))
    if not parts:
        return "other"
    backward = "transpose(" in op_name
    return "/".join(parts) + (" (backward)" if backward else "")


def _events(folder: Path) -> list[dict]:
    files = sorted(Path(folder).rglob("perfetto_trace.json.gz"))
    if not files:
        raise ValueError(f"no perfetto_trace.json.gz under {folder}")
    with gzip.open(files[-1]) as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def op_times(folder: str | Path) -> dict[str, float]:
    """Seconds per HLO instruction in the newest trace under ``folder``: the kernels on a GPU's
    streams (each names its instruction in ``args.hlo_op``), the executed thunks on a CPU.

    On a GPU, XLA replays runs of kernels as CUDA graphs whose kernels all name the graph's
    ``command_buffer`` instruction: profile with ``XLA_FLAGS=--xla_gpu_enable_command_buffer=``
    to see each kernel's own instruction (and so its phase)."""
    events = [e for e in _events(Path(folder)) if e.get("ph") in ("X", "M")]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    device = {pid for pid, name in processes.items() if name.startswith("/device:")}
    timed = [e for e in events if e.get("ph") == "X"]
    if any(e["pid"] in device for e in timed):
        timed = [e for e in timed if e["pid"] in device]
    times: dict[str, float] = collections.defaultdict(float)
    for e in timed:
        name = (e.get("args") or {}).get("hlo_op") or e["name"].removeprefix("end: ")
        times[name] += float(e.get("dur", 0.0)) * 1e-6
    return dict(times)


def device_busy(folder: str | Path) -> tuple[float, float] | None:
    """``(seconds the device's streams were busy, seconds from the first to the last)`` in the
    newest trace under ``folder``; None without device events (a CPU). A small busy share
    means the program waits on launches and host round trips, not on arithmetic."""
    events = _events(Path(folder))
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    spans = sorted(
        (e["ts"], e["ts"] + e.get("dur", 0.0))
        for e in events
        if e.get("ph") == "X" and processes.get(e["pid"], "").startswith("/device:")
    )
    if not spans:
        return None
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:  # the union of the intervals: streams may overlap
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy * 1e-6, (end - spans[0][0]) * 1e-6


def phase_times(folder: str | Path, hlo_texts: list[str]) -> list[tuple[str, float]]:
    """``[(phase, seconds)]``, largest first, for the operations of the programs ``hlo_texts``
    found in the trace (operations of other programs are left out)."""
    names: dict[str, str] = {}
    for text in hlo_texts:
        names.update(op_names(text))
    totals: dict[str, float] = collections.defaultdict(float)
    for op, seconds in op_times(folder).items():
        if op in names:
            totals[phase(names[op])] += seconds
    return sorted(totals.items(), key=lambda item: -item[1])


def format_phases(rows: list[tuple[str, float]]) -> str:
    """Phases with their share of the phases' total; entries named in parentheses (the device's
    busy time and span) are printed after them, without a share."""
    phases = [(name, seconds) for name, seconds in rows if not name.startswith("(")]
    total = sum(seconds for _, seconds in phases) or 1.0
    lines = [f"  {name:44s} {seconds * 1e3:10.2f} ms {100 * seconds / total:6.1f}%" for name, seconds in phases]
    lines += [f"  {name:44s} {seconds * 1e3:10.2f} ms" for name, seconds in rows if name.startswith("(")]
    return "\n".join(lines)
