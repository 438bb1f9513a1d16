"""A program compiled for an accelerator on any machine, and read: its loops, the kernels and
host waits a run launches, its matrix FLOPs, and a predicted time.

JAX compiles for a GPU or a TPU it does not have (deviceless ahead-of-time compilation): for a
GPU from XLA's description of it (``czjax/data/targets/<name>.txtpb``, with the CUDA plugin
installed), for a TPU from a topology's name (with libtpu installed). The optimised program's
text then says what a run does on that device (:func:`read_program`):

- a *kernel* is each instruction of a control computation (the entry, a loop's body and test,
  a branch) that runs on the device: a fusion, a custom call (a library's matrix product or
  convolution), a copy, ...; bookkeeping (tuples, parameters, bitcasts) launches nothing;
- a *host wait* is each test of a ``while`` whose trip count XLA does not know (the device tells
  the host whether to go on) and each ``conditional`` (the host picks the branch);
- the FLOPs are those of its matrix products and convolutions, by operand type, counted in the
  fused computations the kernels run, each loop's body times its trips.

A loop without a known trip count is given the count its program states (the longest game's
pairs of plies, a descent's tests), shown as assumed. The predicted time is a sum over the
three (:class:`CostModel`), its rates fitted on the GPU times the repository holds
(docs/results/benchmarks/kernels/). Nothing here runs on the accelerator: a prediction is not a
measurement.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import jax

from czjax.models import pallas_conv, pallas_head, pallas_trunk

DATA = Path(__file__).resolve().parent.parent / "data" / "targets"


@dataclasses.dataclass(frozen=True)
class Target:
    """An accelerator to compile for: ``platform`` "gpu" (``description``: the file of XLA's
    GpuTargetConfig under czjax/data/targets) or "tpu" (``description``: a topology's name)."""

    name: str
    platform: str
    description: str
    title: str


TARGETS = {
    "h100": Target("h100", "gpu", "h100.txtpb", "NVIDIA H100 80GB (SXM)"),
    "h200": Target("h200", "gpu", "h200.txtpb", "NVIDIA H200"),
    "a100": Target("a100", "gpu", "a100.txtpb", "NVIDIA A100"),
    "tpu-v5e": Target("tpu-v5e", "tpu", "v5e:2x2", "TPU v5e (one chip of a 2x2 slice)"),
}
# What compiling for each platform needs beside jax: the module JAX loads, the packages (the
# CUDA plugin of the installed jaxlib's version; the libtpu jax[tpu] names), installed into a
# folder of their own and put on PYTHONPATH for the command (scripts/setup-plugins.sh does both).
PLUGINS = {"gpu": ("jax_cuda12_plugin", "cuda"), "tpu": ("libtpu", "tpu")}


def plugin_packages(platform: str) -> str:
    """The packages of ``platform``'s plugin for the installed jax, as pip takes them."""
    if platform == "gpu":
        version = importlib.metadata.version("jaxlib")
        return f"jax-cuda12-plugin=={version} jax-cuda12-pjrt=={version}"
    for requirement in importlib.metadata.requires("jax") or []:
        if requirement.startswith("libtpu") and 'extra == "tpu"' in requirement:
            return "'" + re.sub(r"\s*;.*", "", requirement).replace(" ", "") + "'"
    return "libtpu"


# Compiler options of a GPU program compiled without the GPU: no autotuning (it would time
# kernels on a device), and XLA's own gemms rather than Triton's, which at autotune level 0
# failed to tile Mk4's kernel gradient.
GPU_COMPILE_OPTIONS: dict[str, str | bool] = {"xla_gpu_autotune_level": "0", "xla_gpu_enable_triton_gemm": False}


# A Pallas kernel's call on a GPU (a Triton program: a kernel launch like XLA's own, not a library's)
TRITON = "__gpu$xla.gpu.triton"


class Unavailable(ValueError):
    """What a target needs is not installed (the message says what to install)."""


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; choose one of {', '.join(TARGETS)}") from None


def check_installed(target: Target) -> None:
    """``Unavailable``, one line naming the install, when ``target``'s plugin is missing."""
    module, folder = PLUGINS[target.platform]
    if importlib.util.find_spec(module) is None:
        raise Unavailable(
            f"compiling for {target.name} needs {module}: scripts/setup-plugins.sh in a checkout, or pip install "
            f"--no-deps --target .plugins/{folder} {plugin_packages(target.platform)}; then run with "
            f"PYTHONPATH=.plugins/{folder}"
        )


def prepare_environment() -> None:
    """Before jax starts its backends: the CPU is the machine's platform (a GPU plugin without a
    GPU would otherwise be tried first), and the CUDA plugin does not ask for a driver."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # the plugins' notes that no driver is here


def sharding(target: Target):
    """A replicated sharding on one device of ``target``'s topology: abstract arguments placed
    there make ``jit(f).lower`` build ``target``'s program."""
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    check_installed(target)
    if target.platform == "gpu":
        config = (DATA / target.description).read_text()
        topology = topologies.get_topology_desc(platform="cuda", target_config=config, topology="1x1x1")
    else:
        topology = topologies.get_topology_desc(topology_name=target.description, platform="tpu")
    return NamedSharding(Mesh(topology.devices[:1], ("device",)), PartitionSpec())


def compile_text(target: Target, fn: Callable, *args, static_argnums=()) -> str:
    """The optimised program of ``fn`` on ``args`` (arrays or ShapeDtypeStructs: only their
    shapes are used) compiled for ``target``, as text."""
    from czjax.util import platforms

    place = sharding(target)

    def abstract(x):
        x = x if hasattr(x, "shape") and hasattr(x, "dtype") else jax.numpy.asarray(x)
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=place)

    dynamic = [a if i in static_argnums else jax.tree.map(abstract, a) for i, a in enumerate(args)]
    options = GPU_COMPILE_OPTIONS if target.platform == "gpu" else None
    with platforms.building_for(target.platform):
        lowered = jax.jit(fn, static_argnums=static_argnums).lower(*dynamic)
    return str(lowered.compile(compiler_options=options).as_text())


# ---- reading the optimised program ---------------------------------------------------------

# Instructions that launch nothing: bookkeeping of values the kernels already hold.
FREE = {
    "parameter",
    "constant",
    "get-tuple-element",
    "tuple",
    "bitcast",
    "after-all",
    "add-dependency",
    "opt-barrier",
    "partition-id",
    "replica-id",
    "domain",
}
# Operations inside a fusion that compute nothing: they name, place or reshape values.
MOVES = FREE | {"broadcast", "reshape", "transpose", "slice", "dynamic-slice", "concatenate", "iota", "copy", "pad"}
# Instructions that hand control to other computations (read through, not counted as kernels).
CONTROL = {"while", "conditional", "call"}
_HEADER = re.compile(r"^(ENTRY )?%?([\w.\-]+) (\(.*\)) -> .*\{\s*$")
_NAME = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = ")
_CYCLES = re.compile(r'"estimated_cycles":"(\d+)"')
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_SHAPE = re.compile(r"\b(pred|[suf]\d+|bf16|f8e\w+)\[([\d,]*)\]")


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    shape: str  # the result's type as printed
    operands: str  # the text inside the operands' parentheses (their types printed with them)
    attributes: str  # what follows them


def _split_shape(rest: str) -> tuple[str, str]:
    """``(result type, what follows it)`` of an instruction's text after ``=``: a tuple type is
    a parenthesised list, any other a single word."""
    if not rest.startswith("("):
        shape, _, after = rest.partition(" ")
        return shape, after
    depth = 0
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return rest[: i + 1], rest[i + 1 :].lstrip()
    return rest, ""


def _instruction(line: str) -> Instruction | None:
    match = _NAME.match(line)
    if match is None:
        return None
    shape, after = _split_shape(line[match.end() :])
    opcode, paren, rest = after.partition("(")
    if not paren:
        return None
    depth, end = 1, len(rest)
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            end = i
            break
    return Instruction(match.group(1), opcode.strip(), shape, rest[:end], rest[end + 1 :])


def parse_computations(text: str) -> tuple[dict[str, list[Instruction]], dict[str, dict[str, str]], str]:
    """Every computation of an HLO module's text by name, its parameters' types by name (from its
    header), and the entry's name."""
    computations: dict[str, list[Instruction]] = {}
    parameters: dict[str, dict[str, str]] = {}
    entry, current = "", None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = header.group(2)
            computations[current] = []
            pairs = (item.partition(":") for item in _top_level_items(header.group(3)[1:-1]))
            parameters[current] = {name.strip().lstrip("%"): shape.strip() for name, _, shape in pairs}
            entry = current if header.group(1) else entry
        elif line.startswith("}"):
            current = None
        elif current is not None:
            instruction = _instruction(line)
            if instruction is not None:
                computations[current].append(instruction)
    if not entry:
        raise ValueError("no ENTRY computation in the program's text")
    return computations, parameters, entry


def _called(attributes: str, key: str) -> list[str]:
    """The computations an attribute names: ``body=%b`` or ``branch_computations={%a, %b}``."""
    match = re.search(rf"\b{key}=(\{{[^}}]*\}}|%?[\w.\-]+)", attributes)
    if match is None:
        return []
    return [name.strip().lstrip("%") for name in match.group(1).strip("{}").split(",") if name.strip()]


_ITEM_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s64": 8, "u64": 8, "f64": 8}


def _bytes(shape: str) -> float:
    """Bytes of a value of this printed type (a tuple's elements summed)."""
    return float(sum(_ITEM_BYTES.get(dtype, 4) * math.prod(dims) for dtype, dims in _dims(shape)))


# Operations in a fusion that read only part of an operand: what they read is their result.
PART_READS = {"slice", "dynamic-slice", "gather"}


def memory_traffic(instruction: Instruction, shapes: dict[str, str], parts: dict[int, float] | None = None) -> float:
    """Bytes a kernel reads and writes: its operands and its result, except a buffer updated in
    place (an operand of the result's type, as a dynamic-update-slice's) and a library call's
    scratch space (the byte array it returns beside its result). ``parts``: the bytes a fusion
    reads of the operands it only slices or gathers from (:func:`partial_reads`), which count
    that much, not the whole buffer."""
    items = _top_level_items(_without_marks(instruction.operands))
    operands = [shapes.get(name, "") or item for name, item in zip(_operand_names(instruction.operands), items)]
    result = instruction.shape
    if instruction.opcode == "custom-call" and result.startswith("("):
        result = _top_level_items(result[1:-1])[0]
    in_place = (
        [op for op in operands if _dims(op) and _dims(op) == _dims(result)] if "update" in instruction.name else []
    )
    read = [min(_bytes(op), (parts or {}).get(i, math.inf)) for i, op in enumerate(operands)]
    if in_place:
        skipped = operands.index(in_place[0])
        return sum(b for i, b in enumerate(read) if i != skipped)
    return _bytes(result) + sum(read)


def partial_reads(fused: list[Instruction]) -> dict[int, float]:
    """Of a fused computation's parameters, those it reads only through slices and gathers
    (through bitcasts): parameter index -> the bytes of what those read."""
    users: dict[str, list[Instruction]] = {}
    for instruction in fused:
        for name in _operand_names(instruction.operands):
            users.setdefault(name, []).append(instruction)

    def part(name: str, depth: int = 0) -> float:
        readers = users.get(name, [])
        if not readers or depth > 8:
            return math.inf
        total = 0.0
        for reader in readers:
            if reader.opcode == "bitcast":
                total += part(reader.name, depth + 1)
            elif reader.opcode in PART_READS and _operand_names(reader.operands)[0] == name:
                total += _bytes(reader.shape)
            else:
                return math.inf
        return total

    found = {}
    for instruction in fused:
        if instruction.opcode == "parameter" and instruction.operands.strip().isdigit():
            read = part(instruction.name)
            if read < math.inf:
                found[int(instruction.operands)] = read
    return found


def _operand_names(operands: str) -> list[str]:
    """The names of an instruction's operands (each printed with its type, or bare)."""
    return [item.strip().split(" ")[-1].lstrip("%") for item in _top_level_items(_without_marks(operands))]


def _without_marks(operands: str) -> str:
    """An operand list without XLA's ``/*index=5*/`` marks (printed before every fifth operand)."""
    return re.sub(r"/\*.*?\*/", "", operands)


def _tuple_index(instruction: Instruction) -> int:
    """The element a ``get-tuple-element`` takes."""
    found = re.search(r"\bindex=(\d+)", instruction.attributes)
    return int(found.group(1)) if found else -1


def _tuple_item(named: dict[str, Instruction], names: list[str], element: int) -> Instruction | None:
    """Operand ``element`` of the ``tuple`` that ``names[0]`` names, if it is one (a loop's start
    or the result of its step)."""
    whole = named.get(names[0]) if names else None
    if whole is None or whole.opcode != "tuple":
        return None
    items = _operand_names(whole.operands)
    return named.get(items[element]) if 0 <= element < len(items) else None


def _through_copies(instruction: Instruction | None, named: dict[str, Instruction]) -> Instruction | None:
    """What ``instruction`` copies (through any chain of copies, looked up in ``named``), else itself."""
    seen = 0
    while instruction is not None and instruction.opcode == "copy" and seen < 16:
        instruction, seen = named.get(_operand_names(instruction.operands)[0]), seen + 1
    return instruction


def _constant(instruction: Instruction | None, named: dict[str, Instruction] | None = None) -> int | None:
    """An integer ``constant``'s value (through copies of it, looked up in ``named``), else None."""
    instruction = _through_copies(instruction, named or {})
    text = instruction.operands.strip() if instruction is not None and instruction.opcode == "constant" else ""
    return int(text) if text.lstrip("-").isdigit() else None


def _dims(shape: str) -> list[tuple[str, list[int]]]:
    return [(dtype, [int(d) for d in dims.split(",") if d]) for dtype, dims in _SHAPE.findall(shape)]


def _contracting(attributes: str, side: str) -> list[int]:
    text = re.search(rf"{side}_contracting_dims=\{{([\d,]*)\}}", attributes)
    if text is None:  # a library gemm keeps them in its backend config
        text = re.search(rf'"{side}_contracting_dimensions":\[([^\]]*)\]', attributes)
    return [int(d.strip('" ')) for d in text.group(1).split(",") if d.strip('" ')] if text else []


def _top_level_items(text: str) -> list[str]:
    """``text`` split at its commas outside brackets: ``f32[4,3]{1,0} %x, %y`` -> two items."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    return [*items, text[start:]]


def _operand_shapes(instruction: Instruction, shapes: dict[str, str]) -> list[tuple[str, list[int]]]:
    """The first array type of each operand: printed with it, or looked up by its name."""
    found = []
    for operand in _top_level_items(_without_marks(instruction.operands)):
        printed = _dims(operand)
        name = operand.strip().split(" ")[-1].lstrip("%")
        typed = printed or _dims(shapes.get(name, ""))
        if typed:
            found.append(typed[0])
    return found


def instruction_flops(instruction: Instruction, shapes: dict[str, str]) -> tuple[str, float]:
    """``(operand type, FLOPs)`` of a matrix product or a convolution, forward or backward (a
    multiply and an add are 2), ``("", 0)`` for anything else; ``shapes``: the types of the
    computation's values by name (an operand printed without its type)."""
    target = re.search(r'custom_call_target="([^"]*)"', instruction.attributes)
    library = target.group(1) if target and instruction.opcode == "custom-call" else ""
    if library == TRITON:
        return _pallas_flops(instruction, shapes)
    is_product = instruction.opcode == "dot" or "gemm" in library or "matmul" in library
    is_conv = instruction.opcode == "convolution" or "$conv" in library
    if not (is_product or is_conv):
        return "", 0.0
    operands, result = _operand_shapes(instruction, shapes), _dims(instruction.shape)
    if not operands or not result:
        return "", 0.0
    if is_product:
        lhs = operands[0][1]
        contracted = math.prod(lhs[d] for d in _contracting(instruction.attributes, "lhs") if d < len(lhs))
        return operands[0][0], 2.0 * math.prod(result[0][1]) * contracted
    # forward: out = result, kernel = operand 1; the filter's gradient: out = operand 1, kernel =
    # result; the input's gradient: out = operand 0, kernel = operand 1
    if "BackwardFilter" in library and len(operands) >= 2:
        out, kernel = operands[1][1], result[0][1]
    elif "BackwardInput" in library and len(operands) >= 2:
        out, kernel = operands[0][1], operands[1][1]
    elif len(operands) >= 2:
        out, kernel = result[0][1], operands[1][1]
    else:
        return "", 0.0
    labels = re.search(r"dim_labels=\w+_(\w+)->", instruction.attributes)
    out_features = kernel[labels.group(1).index("o")] if labels and "o" in labels.group(1) else kernel[-1]
    return operands[0][0], 2.0 * math.prod(out) * math.prod(kernel) / max(out_features, 1)


def _pallas_flops(instruction: Instruction, shapes: dict[str, str]) -> tuple[str, float]:
    """A :mod:`czjax.models.pallas_conv`, :mod:`czjax.models.pallas_trunk` or
    :mod:`czjax.models.pallas_head` kernel's (other Pallas kernels: none counted): nine taps'
    products over each cell, or the head's two products a board. The convolution's operands: the
    cells' inputs and the taps, ``(..., 9, in, out)``, its result a row of ``out`` a cell; the
    kernel gradient's: the cells' inputs, ``(..., cells, in)``, and cotangents, its result
    ``(..., 9, groups, in, out)``; the trunk's: the cells' inputs (or the boards), then each
    layer's taps ``(..., 9, in, ch)`` (the stem's ``in`` its 3 planes; then the norms' scales and
    biases, ``(..., ch)``), its result a row a cell (and beside it its programs' scratch rows), the
    type of its products in its name (:func:`czjax.models.pallas_trunk.kernel_name`)."""
    operands, result = _operand_shapes(instruction, shapes), _dims(instruction.shape)
    if len(operands) < 2 or not result or len(operands[1][1]) < 2:
        return "", 0.0
    if f'name = "{pallas_conv.KERNEL_NAME}"' in instruction.attributes:
        return operands[1][0], 2.0 * math.prod(result[0][1]) * math.prod(operands[1][1][-3:-1])
    if f'name = "{pallas_conv.GRADIENT_KERNEL_NAME}"' in instruction.attributes:
        return operands[0][0], 2.0 * math.prod(operands[0][1]) * 9 * result[0][1][-1]
    head = re.search(rf'name = "{pallas_head.KERNEL_NAME}_(\w+)"', instruction.attributes)
    if head and len(operands) >= 5:  # Dense_0's kernel (..., 64, 7, 128) and Dense_1's (..., 128, 128)
        dense_0, dense_1 = operands[1][1][-3:], operands[4][1][-2:]
        return head.group(1), 2.0 * math.prod(result[0][1][:-1]) * (math.prod(dense_0) + math.prod(dense_1))
    trunk = re.search(rf'name = "{pallas_trunk.KERNEL_NAME}_(\w+)"', instruction.attributes)
    if trunk:  # its products' type in its name: it rounds its float32 parameters itself
        channels = result[0][1][-1]
        taps = [dims[-2] for _, dims in operands[1:] if len(dims) >= 3 and dims[-3] == 9 and dims[-1] == channels]
        return trunk.group(1), 2.0 * math.prod(result[0][1]) * 9 * sum(taps)
    return "", 0.0


# The function whose conditionals skip chunks of rows that do not matter (czjax.row_skipping).
SKIPPED_CHUNKS = "over_valid_chunks"


class StackFrames:
    """The Python functions an instruction of the program was traced in: XLA's stack frame
    tables (``FileLocations``, ``FunctionNames``, ``StackFrames``) read from its text."""

    def __init__(self, text: str):
        tables: dict[str, dict[int, str]] = {}
        current = None
        for line in text.splitlines():
            if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
                current = tables.setdefault(line, {})
            elif current is not None and line[:1].isdigit():
                number, _, rest = line.partition(" ")
                current[int(number)] = rest
            elif not line.strip():
                current = None
        names = {i: n.strip('"') for i, n in tables.get("FunctionNames", {}).items()}
        self.function_of = {
            i: names.get(int(m.group(1)), "")
            for i, loc in tables.get("FileLocations", {}).items()
            if (m := re.search(r"function_name_id=(\d+)", loc))
        }
        self.frames = {
            i: (int(m.group(1)), int(m.group(2)))
            for i, frame in tables.get("StackFrames", {}).items()
            if (m := re.search(r"file_location_id=(\d+) parent_frame_id=(\d+)", frame))
        }

    def functions(self, frame: int) -> set[str]:
        """The functions along the stack of ``frame``, innermost first."""
        found: set[str] = set()
        seen: set[int] = set()
        while frame in self.frames and frame not in seen:
            seen.add(frame)
            location, parent = self.frames[frame]
            found.add(self.function_of.get(location, ""))
            frame = parent
        return found


@dataclasses.dataclass
class Loop:
    """A ``while`` (``trips``: XLA's known count, else None and ``assumed`` given by the program)
    or a ``conditional`` of the program, with the kernels of one step of it (a conditional's:
    all its branches') and the loops inside it. A conditional that skips a chunk of rows
    (:func:`czjax.row_skipping.over_valid_chunks`, known by the program's stack frames) counts
    its branches as equally likely; any other is a guard whose larger branch runs (a pair of
    plies skipped once every game has ended)."""

    kind: str
    name: str
    trips: int | None
    assumed: float | None = None
    kind_of_branch: str = "guard"  # a conditional's: "guard" (its larger branch runs) or "chunk"
    kernels: int = 0
    children: list[Loop] = dataclasses.field(default_factory=list)

    @property
    def steps(self) -> float:
        """A loop's steps a run: the known count, else the assumed one (a mean), else 1."""
        return self.trips if self.trips is not None else (self.assumed or 1)


@dataclasses.dataclass
class Totals:
    kernels: float = 0.0
    host_waits: float = 0.0
    flops: dict[str, float] = dataclasses.field(default_factory=dict)
    cycles: float = 0.0  # a TPU compiler's estimates, where it gives them
    library_calls: float = 0.0  # the kernels that are a library's (cuBLAS, cuDNN): custom calls
    convolution_calls: float = 0.0  # of those, cuDNN's convolutions
    bytes_moved: float = 0.0  # what the kernels read and write (:func:`memory_traffic`)
    element_ops: float = 0.0  # elementwise work inside fusions: an element of each op's result

    def add(self, other: Totals, times: float = 1.0) -> None:
        """``other`` ``times`` over added to these, field by field (FLOPs type by type)."""
        for field in dataclasses.fields(self):
            if field.name != "flops":
                setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name) * times)
        for dtype, value in other.flops.items():
            self.flops[dtype] = self.flops.get(dtype, 0.0) + value * times


class Program:
    """An optimised program's text read: :meth:`loops` (its tree) and :meth:`totals` (a run's
    kernels, host waits and FLOPs). ``assumed``: the trips of a loop XLA does not know the count
    of, ``(one that holds other loops or branches, one that holds none)``: a loop over plies, a
    search's descent (one number: both).
    On a TPU the loops' tests and branches run on the chip: no host waits."""

    def __init__(self, text: str, assumed: tuple[float, ...] = (), platform: str = "gpu"):
        self.waits_on_host = platform == "gpu"
        self._element_cache: dict[str, float] = {}
        self._parts_cache: dict[str, dict[int, float]] = {}
        self.computations, parameters, self.entry = parse_computations(text)
        self.shapes = {
            name: parameters[name] | {i.name: i.shape for i in instructions}
            for name, instructions in self.computations.items()
        }
        self.assumed = assumed
        self.frames = StackFrames(text)
        self.root = Loop("entry", self.entry, 1)
        self._totals = self._walk(self.entry, self.root)

    def _flops(self, instruction: Instruction, computation: str, seen: frozenset = frozenset()) -> dict[str, float]:
        """FLOPs by operand type of ``instruction`` (of ``computation``) and of what it calls (a
        fusion's body), each called computation once along a path."""
        dtype, flops = instruction_flops(instruction, self.shapes.get(computation, {}))
        found = {dtype: flops} if flops else {}
        for key in ("calls", "called_computations"):
            for callee in _called(instruction.attributes, key):
                if callee in seen:
                    continue
                for inner in self.computations.get(callee, []):
                    for d, v in self._flops(inner, callee, seen | {callee}).items():
                        found[d] = found.get(d, 0.0) + v
        return found

    def _partial_reads(self, instruction: Instruction) -> dict[int, float]:
        """:func:`partial_reads` of the computation a fusion calls (none for another kernel)."""
        callees = _called(instruction.attributes, "calls") if instruction.opcode == "fusion" else []
        if len(callees) != 1:
            return {}
        if callees[0] not in self._parts_cache:
            self._parts_cache[callees[0]] = partial_reads(self.computations.get(callees[0], []))
        return self._parts_cache[callees[0]]

    def _element_ops(self, name: str) -> float:
        """Elements computed by the operations of a fused computation (each op's result's)."""
        if name not in self._element_cache:
            self._element_cache[name] = sum(
                math.prod(dims)
                for i in self.computations.get(name, [])
                if i.opcode not in MOVES
                for _, dims in _dims(i.shape)[:1]
            )
        return self._element_cache[name]

    def _walk(self, name: str, node: Loop) -> Totals:
        """A run of the control computation ``name`` once, its loops added under ``node``."""
        totals = Totals()
        for instruction in self.computations.get(name, []):
            if instruction.opcode == "while":
                totals.add(*self._while(instruction, node, name))
            elif instruction.opcode == "conditional":
                totals.add(self._conditional(instruction, node))
            elif instruction.opcode == "call":
                for callee in _called(instruction.attributes, "to_apply"):
                    totals.add(self._walk(callee, node))
            elif instruction.opcode not in FREE:
                totals.kernels += 1
                totals.library_calls += instruction.opcode == "custom-call" and TRITON not in instruction.attributes
                totals.convolution_calls += instruction.opcode == "custom-call" and "$conv" in instruction.attributes
                parts = self._partial_reads(instruction)
                totals.bytes_moved += memory_traffic(instruction, self.shapes.get(name, {}), parts)
                totals.element_ops += sum(self._element_ops(c) for c in _called(instruction.attributes, "calls"))
                node.kernels += 1
                cycles = _CYCLES.search(instruction.attributes)
                totals.cycles += int(cycles.group(1)) if cycles else 0
                for dtype, value in self._flops(instruction, name).items():
                    totals.flops[dtype] = totals.flops.get(dtype, 0.0) + value
        return totals

    def _while(self, instruction: Instruction, parent: Loop, computation: str) -> tuple[Totals, float]:
        trip = _TRIP.search(instruction.attributes)
        known = int(trip.group(1)) if trip else None
        loop = Loop("while", instruction.name, known if trip else self._counted_trips(instruction, computation))
        parent.children.append(loop)
        step = Totals()
        for key in ("condition", "body"):
            for callee in _called(instruction.attributes, key):
                step.add(self._walk(callee, loop))
        if loop.trips is None and self.assumed:  # a loop over plies holds others; a descent none
            loop.assumed = self.assumed[0] if loop.children else self.assumed[-1]
        if known is None and self.waits_on_host:
            step.host_waits += 1  # the test's answer goes to the host every step
        return step, loop.steps

    def _counted_trips(self, instruction: Instruction, computation: str) -> int | None:
        """The trips of a ``while`` XLA did not annotate (a TPU's compiled scans) whose test is a
        counter below a constant, ``i < C``, the counter a loop element that starts at a constant
        and that each step adds one to: ``C`` minus the start. None for any other test."""
        (condition,) = _called(instruction.attributes, "condition") or [""]
        (body,) = _called(instruction.attributes, "body") or [""]
        test = self.computations.get(condition, [])[-1:]
        if not test or test[0].opcode != "compare" or "direction=LT" not in test[0].attributes:
            return None
        named = {i.name: i for i in self.computations[condition]}
        left, right = (named.get(name) for name in _operand_names(test[0].operands)[:2])
        if left is None or right is None or left.opcode != "get-tuple-element" or right.opcode != "constant":
            return None
        element, limit = _tuple_index(left), _constant(right)
        outer = {i.name: i for i in self.computations.get(computation, [])}
        start = _constant(_tuple_item(outer, _operand_names(instruction.operands), element), outer)
        steps = {i.name: i for i in self.computations.get(body, [])}
        result = self.computations.get(body, [])[-1:]
        step = _tuple_item(steps, [result[0].name] if result else [], element)
        step = _through_copies(step, steps)
        added = [_through_copies(steps.get(name), steps) for name in _operand_names(step.operands)] if step else []
        counts_up = (
            step is not None
            and step.opcode == "add"
            and sorted(_constant(a) or 0 for a in added) == [0, 1]
            and any(a is not None and a.opcode == "get-tuple-element" and _tuple_index(a) == element for a in added)
        )
        if start is None or limit is None or not counts_up:
            return None
        return max(limit - start, 0)

    def _conditional(self, instruction: Instruction, parent: Loop) -> Totals:
        loop = Loop("conditional", instruction.name, None)
        parent.children.append(loop)
        branches = _called(instruction.attributes, "branch_computations") or [
            *_called(instruction.attributes, "true_computation"),
            *_called(instruction.attributes, "false_computation"),
        ]
        costs = [self._walk(branch, loop) for branch in branches]
        frame = re.search(r"stack_frame_id=(\d+)", instruction.attributes)
        functions = self.frames.functions(int(frame.group(1))) if frame else set()
        if any(name.split(".")[0] == SKIPPED_CHUNKS for name in functions):
            # a chunk of rows skipped when none of them matters: each branch counts as likely
            loop.kind_of_branch = "chunk"
            taken = Totals()
            for cost in costs:
                taken.add(cost, 1.0 / len(costs))
        else:  # a guard (the games' next plies, skipped once every game has ended): it runs
            taken = max(costs, key=lambda t: (t.kernels, sum(t.flops.values())), default=Totals())
        taken.host_waits += self.waits_on_host
        return taken

    def totals(self) -> Totals:
        return self._totals

    def loops(self) -> list[dict]:
        """The loop tree as plain data: kind, known trips or the assumed ones, kernels a step."""

        def as_dict(loop: Loop) -> dict:
            found = {"kind": loop.kind, "kernels_per_step": loop.kernels}
            if loop.kind == "while":
                found["trips"] = loop.trips
                if loop.trips is None:
                    found["assumed_trips"] = loop.assumed
            else:
                found["branches"] = loop.kind_of_branch
            if loop.children:
                found["loops"] = [as_dict(child) for child in loop.children]
            return found

        return [as_dict(child) for child in self.root.children]


def read_program(text: str, assumed: tuple[float, ...] = (), platform: str = "gpu") -> Program:
    return Program(text, assumed, platform)


# TPU v5e's TensorCore clock, which turns the compiler's cycle estimates into seconds.
TPU_CLOCK_HZ = 1.5e9


# ---- the predicted time --------------------------------------------------------------------


# What a run's time is made of, each a count of the program (:func:`cost_terms`): its kernels
# of XLA's own (fusions, copies), the libraries' matrix products (cuBLAS) and convolutions
# (cuDNN: slow at small batches, each several kernels of its own), the host waits, the matrix
# FLOPs at float32, the bytes the kernels move and the elements their fused operations compute.
TERMS = ("kernel", "library_call", "convolution_call", "host_wait", "f32_flop", "byte", "element_op")
# Arithmetic in a type no measurement holds, against float32's as measured: JAX's default
# precision runs a float32 product on a GPU's tensor cores in TF32 (an H100's ~495 dense TFLOP/s,
# where true float32 has ~67), bfloat16 at twice that (~990): an uncalibrated guess, said so.
UNMEASURED_SPEEDUP = {"bf16": 2.0, "f16": 2.0}


def cost_terms(totals: Totals) -> dict[str, float]:
    """A run's counts by :data:`TERMS`; FLOPs of another type count at :data:`UNMEASURED_SPEEDUP`
    times float32's speed (:func:`calibrated` says whether any did)."""
    flops = sum(v / UNMEASURED_SPEEDUP.get(dtype, 1.0) for dtype, v in totals.flops.items())
    return {
        "kernel": totals.kernels - totals.library_calls,
        "library_call": totals.library_calls - totals.convolution_calls,
        "convolution_call": totals.convolution_calls,
        "host_wait": totals.host_waits,
        "f32_flop": flops,
        "byte": totals.bytes_moved,
        "element_op": totals.element_ops,
    }


def calibrated(totals: Totals) -> bool:
    """Whether the model was fitted on the arithmetic this program does (float32 and integers)."""
    return not any(v for dtype, v in totals.flops.items() if dtype in UNMEASURED_SPEEDUP)


@dataclasses.dataclass(frozen=True)
class CostModel:
    """A run's time on one GPU as the sum of its terms, each count times its seconds
    (``seconds``, by :data:`TERMS`), fitted on measured times (:func:`fit`)."""

    seconds: dict[str, float]

    def predict(self, totals: Totals) -> float:
        return sum(count * self.seconds.get(term, 0.0) for term, count in cost_terms(totals).items())


def fit(rows: list[tuple[Totals, float]]) -> CostModel:
    """The cost model whose predictions are nearest the measured seconds of ``rows`` (a run's
    totals, its time) in relative error: non-negative least squares of ``prediction / measured``
    against 1, so each term costs zero or more."""
    import numpy as np
    from scipy.optimize import nnls

    a = np.array([[cost_terms(totals)[term] / seconds for term in TERMS] for totals, seconds in rows])
    coef, _ = nnls(a, np.ones(len(rows)))
    return CostModel({term: float(c) for term, c in zip(TERMS, coef)})


CALIBRATION = DATA / "calibration.json"


def load_model(target: Target) -> CostModel | None:
    """The cost model fitted on an H100's times (czjax/data/targets/calibration.json), for every
    GPU (another GPU's clock and memory differ: a prediction for it is the H100's); None for a
    TPU or before a calibration."""
    if target.platform != "gpu" or not CALIBRATION.exists():
        return None
    return CostModel(json.loads(CALIBRATION.read_text())["seconds"])


# ---- the programs ------------------------------------------------------------------------------

# The pairs of plies of a batch's longest game: every loop over plies a game can run to the end
# of (42 plies); at a batch of hundreds of games or more, some game nearly always does.
LONGEST_GAME_PAIRS = 21


@dataclasses.dataclass(frozen=True)
class Built:
    """A program to compile: ``fn`` on ``args`` (``static_argnums`` among them), what a run
    plays (``games``), how many iterations a run holds (``per_run``: the figures are given per
    iteration too), and the trips of its loops XLA does not know the count of (``assumed``, as
    :class:`Program` takes them; ``assumed_why`` says where they come from)."""

    program: str
    fn: Callable
    args: tuple
    games: int
    assumed: tuple[float, ...]
    assumed_why: str
    static_argnums: tuple[int, ...] = ()
    per_run: int = 1
    precision: str = "default"


def rollout_program(player_spec: str, batch: int) -> Built:
    """Whole games between two copies of a player, as ``czjax bench rollout`` plays them."""
    from czjax import rollout
    from czjax.players.loading import load_agent

    agent = load_agent(player_spec)

    def run(key):
        side = rollout.Side(agent.player, agent.params)
        return rollout.play_games(key, side, side, batch)

    return Built(
        f"rollout {player_spec} x {batch}",
        run,
        (jax.random.key(0),),
        batch,
        (LONGEST_GAME_PAIRS,),
        "the ply loop: the longest game's pairs of plies",
    )


def search_program(algo: str, batch: int, sims: int, platform: str = "gpu") -> Built:
    """A search from ``batch`` positions with ``sims`` simulations over ``czjax bench search``'s
    network, its descent's tests measured (:func:`descent_tests`) at ``platform``'s levels a test."""
    from czjax.bench import search_bench
    from czjax.util import platforms

    params = search_bench.search_network_params()
    boards = jax.numpy.zeros((batch, 6, 7), jax.numpy.int8)
    choices = platforms.choices_for(platform)
    if sims + 1 <= choices.jump_max_nodes:
        assumed: tuple[float, ...] = ()
        why = "none: the descent jumps down its trees without a loop (jump_max_nodes)"
    else:
        tests = descent_tests(algo, batch, sims, choices.descend_levels)
        assumed = (tests,)
        why = (
            f"a descent's tests of its loop: {tests:.2f} a simulation at {choices.descend_levels} levels a test, "
            "measured on this machine from the bench's positions"
        )
    return Built(
        f"search {algo} {batch} x {sims}",
        search_bench.czjax_search(algo, sims),
        (params, boards, jax.random.key(0)),
        batch,
        assumed,
        why,
    )


def descent_tests(algo: str, batch: int, sims: int, levels: int) -> float:
    """Tests of a search's descent loop a simulation (each a host wait on a GPU), measured: the
    search of ``czjax bench search`` played on this machine from its ``batch`` mid-game positions,
    and at each simulation the batch's deepest walk (a vmapped loop runs until the last tree's
    walk ends) taken ``levels`` levels a test after the root's choice; the mean over the
    simulations. The walks are the same whatever the levels a test."""
    import math

    import numpy as np

    from czjax.bench import search_bench

    settings = search_bench.search_settings(algo, sims)
    boards = search_bench.boards_of(search_bench.midgame_moves(batch))
    params = search_bench.search_network_params()

    def depths(params, boards, key):
        return settings.run(search_bench.search_network_player, params, boards, key).tree.depth

    deepest = np.asarray(jax.jit(depths)(params, boards, jax.random.key(0)))[:, 1:].max(0)  # node i + 1: simulation i's
    return float(np.mean([1 + math.ceil((d - 1) / levels) for d in deepest]))


def protocol_program(spec: str, slots: int, platform: str) -> Built:
    """One step of AlphaZero.jl's protocol's stream of searches (one network call for ``slots``
    searches, :func:`czjax.search.azjl_stream.step`), for the player ``spec``, as
    ``czjax eval pons --protocol alphazero.jl`` runs it on ``platform``."""
    from czjax import models
    from czjax.evaluate import protocol
    from czjax.search import azjl_stream
    from czjax.search.base import CONNECT_FOUR
    from czjax.util import platforms

    agent = protocol.protocol_agent(protocol.ALPHAZERO_JL, spec)
    name = agent.model_name
    if not protocol.streams(agent) or name is None:
        raise ValueError(f"{spec}: the protocol's stream needs AlphaZero.jl's MCTS over a network")
    cost = models.model_options(name)[0].search_cost
    with platforms.building_for(platform):
        model = models.get_model(name, conv=protocol.ALPHAZERO_JL.network_conv(cost))
    player, search, rounds = models.model_player(model), agent.search, protocol.ALPHAZERO_JL.rounds(cost)
    roots = CONNECT_FOUR.encode(jax.numpy.zeros((slots, 6, 7), jax.numpy.int8))
    stream = jax.eval_shape(lambda r: azjl_stream.start(r, slots, search.sims), roots)

    def one_step(stream, roots, params, key):
        return azjl_stream.step(stream, roots, search, player, params, key, CONNECT_FOUR, rounds)

    return Built(
        f"protocol step {spec} x {slots}",
        one_step,
        (stream, roots, agent.params, jax.random.key(0)),
        slots,
        (4,),
        "a descent's tests and the game-ending rounds' walks: four (a tree of up to 600 simulations)",
    )


def train_program(config, platform: str, seeds: int = 1) -> Built:
    """One compiled chunk of ``config``'s iterations (``batches_per_chunk``), then its
    evaluation games, as ``czjax bench train`` times it (a solver evaluation left out); with
    ``seeds`` > 1, that chunk vmapped over the seeds as ``czjax scan`` compiles it."""
    from czjax.jobs.scan import AXIS
    from czjax.learn.settings import HParams
    from czjax.learn.trainer import make_trainer

    if config.solver_eval != "off":
        config = config.override({"solver_eval": "off"})
    steps = config.batches_per_chunk
    hparams = HParams.create()
    if seeds == 1:
        trainer = make_trainer(config, platform=platform)
        state = jax.eval_shape(lambda: trainer.init(0))

        def chunk(st, hp):
            return trainer.run_chunk(st, hp, steps)
    else:
        trainer = make_trainer(config, axis_name=AXIS, platform=platform, configurations=seeds)
        state = jax.eval_shape(lambda: jax.vmap(trainer.init)(jax.numpy.arange(seeds)))
        hparams = jax.tree.map(lambda x: jax.numpy.stack([x] * seeds), hparams)

        def chunk(st, hp):
            return jax.vmap(lambda s, h: trainer.run_chunk(s, h, steps), axis_name=AXIS)(st, hp)

    label = f"train {config.model} {config.algorithm} x {config.games_per_batch}" + (
        f" x {seeds} seeds" if seeds > 1 else ""
    )
    return Built(
        " ".join(
            [label]
            + [
                f"{name}={getattr(config, name)}"
                for name in ("control_flow", "precision")
                if getattr(config, name) not in ("auto", "default")
            ]
        ),
        chunk,
        (state, hparams),
        config.games_per_batch * steps * seeds,
        (LONGEST_GAME_PAIRS, 2),
        "the ply loop: the longest game's pairs of plies; a search's descent: two tests",
        per_run=steps,
        precision=config.precision,
    )


# ---- calibration on the GPU times the repository holds ------------------------------------------


@dataclasses.dataclass(frozen=True)
class Measured:
    """A GPU time the repository holds: its program, its seconds a run (a rollout's or a
    search's call, a training iteration), the file and row it comes from, and the commit it
    was measured at."""

    built: Built
    seconds: float
    source: str
    commit: str
    row: dict = dataclasses.field(default_factory=dict)  # the bench JSON's row


BENCH_COMMITS = {"bench-rollout.json": "cc7d890", "bench-search.json": "0fc36d2", "bench-train.json": "0fc36d2"}


def measured_rows(folder: Path, platform: str = "gpu") -> list[Measured]:
    """The czjax rows of ``czjax bench``'s JSON files in ``folder`` (rollout, search, train), each
    with the program it timed."""
    from czjax.bench import harness

    found = []
    for name, commit in BENCH_COMMITS.items():
        path = folder / name
        if not path.exists():
            continue
        for i, row in enumerate(json.loads(path.read_text())["rows"]):
            source = f"{path.as_posix()} row {i}"
            if row.get("impl", "czjax") != "czjax":
                continue
            if name == "bench-rollout.json":
                built, seconds = rollout_program(row["player"], row["batch"]), row["median_s"]
            elif name == "bench-search.json":
                built = search_program(row["algo"], row["batch"], row["sims"], platform)
                seconds = row["median_s"]
            else:
                settings = {k: row[k] for k in ("precision", "compaction", "conv", "norm", "unroll", "control_flow")}
                config = harness.bench_train_config(
                    row["model"], row["games_per_batch"], row["steps_per_run"], **settings
                )
                built, seconds = train_program(config, platform), row["iteration_s"]
            found.append(Measured(built, seconds, source, commit, row))
    return found


# ---- a program read for a target ---------------------------------------------------------------


def compiled_program(built: Built, target: Target) -> Program:
    """``built`` compiled for ``target`` and read."""
    text = compile_text(target, built.fn, *built.args, static_argnums=built.static_argnums)
    return read_program(text, built.assumed, target.platform)


def report(built: Built, target: Target, model: CostModel | None = None) -> dict:
    """``built`` compiled for ``target`` and read: the row ``czjax bench kernels`` prints (per
    run and per game; ``predicted_s`` per run from ``model``, default the fitted one)."""
    import time

    started = time.perf_counter()
    program = compiled_program(built, target)
    compile_s = time.perf_counter() - started
    totals = program.totals()
    per_iteration = built.per_run
    row = {
        "program": built.program,
        "target": target.name,
        "platform": target.platform,
        "games": built.games,
        "iterations": per_iteration,
        "kernels": totals.kernels,
        "host_waits": totals.host_waits,
        "flops": sum(totals.flops.values()),
        "flops_by_type": totals.flops,
        "kernels_per_game": totals.kernels / built.games,
        "terms": cost_terms(totals),
        "loops": program.loops(),
        "assumed": built.assumed_why,
        "precision": built.precision,
        "compile_s": compile_s,
    }
    if target.platform == "tpu":
        seconds = totals.cycles / TPU_CLOCK_HZ
        row.update(predicted_s=seconds, calibrated=False, prediction="the compiler's cycle estimates at 1.5 GHz")
    else:
        model = model or load_model(target)
        if model is None:
            return row
        seconds = model.predict(totals)
        row.update(predicted_s=seconds, calibrated=calibrated(totals), prediction="the fitted cost model")
    row["predicted_games_per_s"] = built.games / seconds if seconds else None
    return row


def format_loops(loops: list[dict], indent: str = "  ") -> list[str]:
    """The loop tree, one line a loop: its trips (known, or assumed) and kernels a step."""
    lines = []
    for loop in loops:
        if loop["kind"] == "while":
            trips = loop["trips"] if loop["trips"] is not None else f"{loop.get('assumed_trips'):g} assumed"
            lines.append(f"{indent}while x {trips}: {loop['kernels_per_step']} kernels a step")
        else:
            counted = "its branches as likely" if loop.get("branches") == "chunk" else "its larger branch"
            lines.append(
                f"{indent}conditional ({loop.get('branches', 'guard')}: {counted} counted): "
                f"{loop['kernels_per_step']} kernels in its branches"
            )
        lines += format_loops(loop.get("loops", []), indent + "  ")
    return lines


def format_row(row: dict) -> str:
    predicted = row.get("predicted_s")
    said = "" if row.get("calibrated", True) else " (uncalibrated)"
    speed = (
        f"predicted {predicted * 1e3:.3f} ms a run, {row['predicted_games_per_s']:,.0f} games/s{said}"
        if predicted is not None
        else "no cost model for this target"
    )
    lines = [
        f"{row['program']} on {row['target']}: {row['kernels']:,.0f} kernels a run "
        f"({row['kernels'] / row['iterations']:,.0f} an iteration, {row['kernels_per_game']:.2f} a game), "
        f"{row['host_waits']:,.0f} host waits, {row['flops'] / 1e9:,.2f} GFLOP; {speed}",
        *format_loops(row["loops"]),
    ]
    return "\n".join(lines)


def calibrate(measured: list[Measured], target: Target, log: Callable[[str], None]) -> dict:
    """Each measured row's program compiled for ``target`` at this checkout and read, then
    :func:`fitted_table` of them."""
    read = []
    for row in measured:
        read.append((row, totals_an_iteration(compiled_program(row.built, target).totals(), row.built)))
        log(f"  {row.built.program}: {read[-1][1].kernels:,.0f} kernels, {row.seconds * 1e3:.3f} ms measured")
    return fitted_table(read, target)


def totals_an_iteration(totals: Totals, built: Built) -> Totals:
    """A run's totals of ``built`` an iteration (a training chunk holds several)."""
    each = Totals()
    each.add(totals, 1.0 / built.per_run)
    return each


def fitted_table(read: list[tuple[Measured, Totals]], target: Target) -> dict:
    """The cost model fitted on the measured rows, each with its program's totals an iteration,
    and the table: each row's prediction, measurement and error, in the fit and with the row
    left out of it (the error a new program can expect)."""
    model = fit([(totals, row.seconds) for row, totals in read])
    table = []
    for i, (row, totals) in enumerate(read):
        others = fit([(t, r.seconds) for j, (r, t) in enumerate(read) if j != i])
        predicted = model.predict(totals)
        table.append(
            {
                "program": row.built.program,
                "source": row.source,
                "measured_at": row.commit,
                "measured_s": row.seconds,
                "predicted_s": predicted,
                "error": predicted / row.seconds - 1,
                "error_left_out": others.predict(totals) / row.seconds - 1,
                "terms": cost_terms(totals),
            }
        )
    return {"target": target.name, "seconds": model.seconds, "terms": list(TERMS), "rows": table}


def format_calibration(found: dict) -> str:
    lines = [
        f"cost model on {found['target']}: "
        + ", ".join(f"{term} {seconds:.3g} s" for term, seconds in found["seconds"].items()),
        f"{'program':48s} {'measured ms':>11s} {'predicted':>9s} {'error':>7s} {'left out':>8s}",
    ]
    for row in found["rows"]:
        lines.append(
            f"{row['program']:48s} {row['measured_s'] * 1e3:11.3f} {row['predicted_s'] * 1e3:9.3f} "
            f"{row['error']:+7.1%} {row['error_left_out']:+8.1%}"
        )
    return "\n".join(lines)
