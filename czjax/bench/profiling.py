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
import functools
import gzip
import json
import re
from pathlib import Path
from typing import NamedTuple

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


# --- Where the time goes by kind of operation ---------------------------------------------------
#
# Every operation the device ran (a kernel or a memory copy on a GPU's streams, an executed thunk
# on a CPU) names its HLO instruction in the trace (``args.hlo_op``); the compiled program's text
# says what that instruction is, a fusion with what it fuses. The first kind below that an
# instruction holds is its kind, so a fusion of a gather and a sum counts as the gather, one of a
# product and its bias as the product. Copies to and from the host are known by the trace's own
# names for them, and a GPU kernel whose instruction the program does not name (a library kernel
# inside a command buffer, say) by its kernel's name.


class Instruction(NamedTuple):
    opcode: str
    ops: frozenset[str]  # its opcode (``custom-call:TARGET`` for a custom call) and, for a fusion, those it fuses
    op_name: str  # the JAX operation it came from, with its named scopes
    loop: str | None  # the innermost while loop it runs in (its instruction's name), None outside any


# (kind, HLO opcodes, substrings of a custom call's target or of a kernel's name), in order of precedence
OP_KINDS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    ("convolution", frozenset({"convolution"}), ("convolution", "cudnn", "fprop", "dgrad", "wgrad")),
    ("product", frozenset({"dot", "ragged-dot"}), ("gemm", "cublas", "matmul")),
    (
        "gather/scatter",
        frozenset({"gather", "scatter", "dynamic-slice", "dynamic-update-slice"}),
        ("gather", "scatter", "dynamic_slice", "dynamic_update_slice"),
    ),
    ("reduction", frozenset({"reduce", "reduce-window", "all-reduce", "reduce-scatter"}), ("reduce", "reduction")),
    # transfers between host and device, host callbacks, and the control of loops and branches
    # (their predicate is read by the host, once a loop step or a branch)
    (
        "host",
        frozenset({"send", "recv", "send-done", "recv-done", "infeed", "outfeed", "while", "conditional", "call"}),
        ("callback",),
    ),
    ("copy", frozenset({"copy", "copy-start", "copy-done", "transpose"}), ("memcpy", "memset", "copy", "transpose")),
)
# Compiler options, per backend, under which each kernel names its own instruction in a trace: a
# GPU otherwise replays runs of kernels as CUDA graphs (command buffers), whose kernels all name
# the graph's instruction (see op_times). The program then runs without those graphs.
EACH_KERNEL_OPTIONS: dict[str, dict[str, str | bool]] = {"gpu": {"xla_gpu_enable_command_buffer": ""}}
ELEMENTWISE = "elementwise"  # the rest: elementwise fusions, iota, random bits, sorts, ...
IDLE = "idle"  # time in the program's span when no operation ran
KINDS = tuple(kind for kind, _, _ in OP_KINDS) + (ELEMENTWISE,)
# instructions that run others: on a CPU their thunk encloses its body's, and only the time it
# spends outside them is its own
CONTROL = frozenset({"while", "conditional", "call"})
_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*->.*\{\s*$")
_NAMED = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"\s*([\w\-]+)\(")
_HOST_DIRECTIONS = ("dtoh", "htod", "d2h", "h2d", "host", "pinned", "pageable")


def _opcode(rhs: str) -> str | None:
    """The opcode of an instruction's right-hand side: its type (a token, or a tuple in
    parentheses) comes first."""
    rest = rhs[_closing(rhs) + 1 :] if rhs.startswith("(") else rhs.partition(" ")[2]
    match = _OPCODE.match(rest)
    return match.group(1) if match else None


def _closing(text: str) -> int:
    """The index of the parenthesis that closes the one ``text`` opens with."""
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return index
    return len(text)


_CALLED = re.compile(r"\b(?:calls|to_apply|body|condition|branch_computations|true_computation|false_computation)=")


def instructions(hlo_text: str) -> dict[str, Instruction]:
    """``{instruction name: Instruction}`` for every instruction of a compiled program's text."""
    parsed: dict[str, tuple[str, str, str | None]] = {}  # name -> (opcode with its target, op_name, fused computation)
    members: dict[str, list[str]] = collections.defaultdict(list)  # computation -> its instructions
    caller: dict[str, str] = {}  # computation -> the instruction that runs it
    home: dict[str, str] = {}  # instruction -> its computation
    computation = ""
    for line in hlo_text.splitlines():
        named = _NAMED.match(line)
        if named is None:
            header = _HEADER.match(line)
            computation = header.group(1) if header else computation
            continue
        name, rhs = named.groups()
        opcode = _opcode(rhs)
        if opcode is None:
            continue
        target = re.search(r'custom_call_target="([^"]*)"', rhs)
        fused = re.search(r"\bcalls=%?([\w.\-]+)", rhs) if opcode == "fusion" else None
        op_name = re.search(r'op_name="([^"]*)"', rhs)
        parsed[name] = (
            f"{opcode}:{target.group(1)}" if target else opcode,
            op_name.group(1) if op_name else "",
            fused.group(1) if fused else None,
        )
        members[computation].append(name)
        home[name] = computation
        for match in _CALLED.finditer(rhs):
            called = re.match(r"\{?([^}]*?)\}?(?:,\s*\w+=|$)", rhs[match.end() :])
            for callee in re.findall(r"%?([\w.\-]+)", called.group(1) if called else ""):
                caller.setdefault(callee, name)

    @functools.cache
    def ops(name: str) -> frozenset[str]:
        op, _, fused = parsed[name]
        inner = [ops(member) for member in members.get(fused, ())] if fused else []
        return frozenset({op}).union(*inner)

    def loop(name: str) -> str | None:
        seen = set()
        while name in home and name not in seen:
            seen.add(name)
            outer = caller.get(home[name])
            if outer is None:
                return None
            if parsed[outer][0] == "while":
                return outer
            name = outer
        return None

    return {
        name: Instruction(op.partition(":")[0], ops(name), op_name, loop(name))
        for name, (op, op_name, _) in parsed.items()
    }


def _transfer_kind(event_name: str) -> str | None:
    """``host`` or ``copy`` for a trace's memory copy (``MemcpyDtoH``, ``Memcpy HtoD``,
    ``MemcpyD2D``, ``Memset``), by whether the host is one end; None for any other event."""
    plain = re.sub(r"[^a-z0-9]", "", event_name.lower())
    if "memcpy" not in plain and "memset" not in plain:
        return None
    return "host" if any(way in plain for way in _HOST_DIRECTIONS) else "copy"


def op_kind(instruction: Instruction | None, event_name: str = "") -> str:
    """The kind of one operation of a trace: a memory copy by the event's name, then the first
    of :data:`OP_KINDS` that ``instruction`` holds, by opcode or by a custom call's target; an
    operation the program does not name (None) by its kernel's name; :data:`ELEMENTWISE` for
    the rest."""
    transfer = _transfer_kind(event_name)
    if transfer is not None:
        return transfer
    if instruction is None:
        plain = event_name.lower()
        return next((kind for kind, _, hints in OP_KINDS if any(hint in plain for hint in hints)), ELEMENTWISE)
    targets = " ".join(op.partition(":")[2].lower() for op in instruction.ops)
    for kind, opcodes, hints in OP_KINDS:
        if instruction.ops & opcodes or (targets.strip() and any(hint in targets for hint in hints)):
            return kind
    return ELEMENTWISE


class OpEvent(NamedTuple):
    start: float  # microseconds, the trace's clock
    end: float
    instruction: str  # its HLO instruction's name (the event's name where it names none)
    kind: str
    control: bool  # a loop's or a branch's own event, which encloses the operations it ran
    named: bool  # whether the program holds its instruction


# Lines of a device in a trace that restate its streams' events (per HLO op, per module, per
# step) rather than add to them: left out, so that no operation counts twice
DERIVED_LINES = ("XLA Modules", "XLA Ops", "XLA TraceMe", "Async XLA Ops", "Steps", "Framework", "Source code")


def _module(name: str) -> str:
    """A module's name as the trace or the program's text spells it, without a run's ``(id)``."""
    return re.sub(r"\(\d+\)$", "", name)


def op_events(folder: str | Path, hlo_text: str, program: dict[str, Instruction] | None = None) -> list[OpEvent]:
    """The operations of the program ``hlo_text`` (its :func:`instructions`: ``program``) in the
    newest trace under ``folder``, in the order they started: a GPU's stream events (not the
    lines derived from them, :data:`DERIVED_LINES`), or the CPU's executed thunks. Events that
    name another module are left out, unless none names this one."""
    program = instructions(hlo_text) if program is None else program
    header = re.match(r"HloModule\s+([\w.\-]+)", hlo_text)
    module = _module(header.group(1)) if header else None
    events = _events(Path(folder))
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {
        (e["pid"], e.get("tid")): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    device = {pid for pid, name in processes.items() if name.startswith("/device:")}
    timed = [e for e in events if e.get("ph") == "X"]
    on_device = [
        e
        for e in timed
        if e["pid"] in device and not threads.get((e["pid"], e.get("tid")), "").startswith(DERIVED_LINES)
    ]
    chosen = on_device or [e for e in timed if (e.get("args") or {}).get("hlo_op")]
    modules = {_module(str((e.get("args") or {}).get("hlo_module", ""))) for e in chosen}
    kept = []
    for e in chosen:
        args = e.get("args") or {}
        if module in modules and args.get("hlo_module") is not None and _module(args["hlo_module"]) != module:
            continue  # another program's
        name = args.get("hlo_op") or e["name"]
        instruction = program.get(name)
        start = float(e["ts"])
        kept.append(
            OpEvent(
                start,
                start + float(e.get("dur", 0.0)),
                name,
                op_kind(instruction, e["name"]),
                instruction is not None and instruction.opcode in CONTROL and not on_device,
                instruction is not None,
            )
        )
    return sorted(kept)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(end - start for start, end in intervals)


def _outside(intervals: list[tuple[float, float]], covered: list[tuple[float, float]]) -> float:
    """Length of the union of ``intervals`` outside the union ``covered`` (both merged)."""
    overlap = 0.0
    for start, end in intervals:
        for c_start, c_end in covered:
            overlap += max(0.0, min(end, c_end) - max(start, c_start))
    return _length(intervals) - overlap


class LoopStep(NamedTuple):
    """What a program's launches are counted per: a step of the innermost loops that run the
    phase ``marker`` inside the phase ``work`` (each loop's steps counted as the most times any
    one of its ``marker`` instructions ran), and the launches of ``work``'s operations."""

    name: str
    work: str
    marker: str


SIMULATION = LoopStep("simulation", "selfplay", "backup")  # a search's simulation, in self-play
PLY_PAIR = LoopStep("pair of plies", "selfplay", "rules")  # the rollout loop's step, two plies


def _in_phase(instruction: Instruction | None, *names: str) -> bool:
    parts = set(re.findall(r"[A-Za-z_]+", phase(instruction.op_name))) if instruction else set()
    return all(name in parts for name in names)


def kind_table(
    events: list[OpEvent], program: dict[str, Instruction] | None = None, step: LoopStep | None = None
) -> dict:
    """Where a traced program's time went, by kind (:data:`KINDS`) and idle, from its
    operations. Seconds of each kind are summed over streams (a CPU's threads), so operations
    running side by side can add up past the span; a loop's or a branch's own time is what its
    event spans outside the operations it ran, counted as ``host``; ``idle`` is the span's time
    with no operation running. ``launches``: operations run (loops and branches not counted).
    With ``step`` and the ``program``'s instructions (:func:`instructions`): also the launches
    of the step's work per step (None where no step ran)."""
    leaves = [e for e in events if not e.control]
    seconds = dict.fromkeys(KINDS, 0.0)
    launches = dict.fromkeys(KINDS, 0)
    for e in leaves:
        seconds[e.kind] += (e.end - e.start) * 1e-6
        launches[e.kind] += 1
    busy_leaves = _union([(e.start, e.end) for e in leaves])
    control = _union([(e.start, e.end) for e in events if e.control])
    seconds["host"] += _outside(control, busy_leaves) * 1e-6
    everything = _union([(e.start, e.end) for e in events])
    span = (everything[-1][1] - everything[0][0]) * 1e-6 if everything else 0.0
    busy = _length(everything) * 1e-6
    table: dict = {
        "seconds": seconds,
        "launches": launches,
        "span_s": span,
        "busy_s": busy,
        "idle_s": span - busy,
        "total_launches": len(leaves),
        # operations whose instruction the program does not name (a GPU's command buffers' kernels):
        # known by their names only
        "unnamed_launches": sum(not e.named for e in leaves),
    }
    if step is not None and program is not None:
        runs = collections.Counter(
            e.instruction for e in leaves if _in_phase(program.get(e.instruction), step.work, step.marker)
        )
        per_loop: dict[str | None, int] = {}
        for name, count in runs.items():
            loop = program[name].loop
            per_loop[loop] = max(per_loop.get(loop, 0), count)
        steps = sum(per_loop.values())
        work = sum(_in_phase(program.get(e.instruction), step.work) for e in leaves)
        table.update(step=step.name, steps=steps, launches_per_step=work / steps if steps else None)
    return table


def op_kind_table(folder: str | Path, hlo_text: str, step: LoopStep | None = None) -> dict:
    """:func:`kind_table` of the program ``hlo_text`` in the newest trace under ``folder``."""
    program = instructions(hlo_text)
    return kind_table(op_events(folder, hlo_text, program), program, step)


def format_kinds(table: dict, per: float = 1.0) -> str:
    """The kind table's lines, each kind's seconds (over ``per``, e.g. the iterations traced)
    with its share of the span, its launches, then the idle time."""
    span = table["span_s"] or 1.0
    lines = [
        f"  {kind:16s} {table['seconds'][kind] / per * 1e3:10.2f} ms {100 * table['seconds'][kind] / span:6.1f}% "
        f"{table['launches'][kind] / per:10,.0f} launches"
        for kind in KINDS
    ]
    lines.append(f"  {IDLE:16s} {table['idle_s'] / per * 1e3:10.2f} ms {100 * table['idle_s'] / span:6.1f}%")
    if table.get("launches_per_step") is not None:
        lines.append(
            f"  {table['launches_per_step']:,.1f} launches of {table['steps']:,.0f} steps: per {table['step']}"
        )
    return "\n".join(lines)
