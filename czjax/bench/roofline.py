"""The network's FLOP/s against the machine's roof: the network FLOPs a benchmark's row counts
from what was played (:func:`network_flops`), the roof (a plain matrix product timed in the same
process at each arithmetic the backend offers, :func:`measure_roofs`), and a row's fraction of
the roof of its precision (:func:`with_roof`).
"""

from __future__ import annotations

import statistics

import jax
import jax.numpy as jnp

from czjax.bench.timing import compile_warm, timed_call
from czjax.util import precision


def network_fields(forward_per_board: float, flops_per_call: float, call_s: float) -> dict:
    """A row's network FLOPs: per board (``forward_flops_per_board``), per call of its compiled
    program (``network_flops_per_call``) and per second of the call's time
    (``network_flops_per_s``)."""
    return {
        "forward_flops_per_board": forward_per_board,
        "network_flops_per_call": flops_per_call,
        "network_flops_per_s": flops_per_call / call_s,
    }


def format_fraction(row: dict) -> str:
    """A row's roof fraction as the tables print it, ``-`` where it has none."""
    fraction = row.get("roof_fraction")
    return f"{fraction:7.1%}" if fraction is not None else f"{'-':>7s}"


# The backward pass of a layer is two products as large as its forward one (the gradients of its
# weights and of its input), the usual convention. The first layer's input gradient is never
# computed, so this overstates a learner position's forward and backward by that one product:
# mlp 10.8 of 84.1 kFLOP, mlp3 0.9%, cnn-mk4 0.3%.
BACKWARD_OVER_FORWARD = 2.0


def network_flops(
    forward_per_board: float, positions_played: float, learner_positions: float, acting_per_board: float | None = None
) -> float:
    """Matrix-product and convolution FLOPs of one self-play training iteration's network passes,
    counted from what was played: per position played in the rollout, the evaluations of the
    player that moved (``acting_per_board``: one forward pass of the mover's copy of the network,
    the default, or a search's root and simulations) and, in the update, a forward and a
    backward pass (:data:`BACKWARD_OVER_FORWARD`) per learner position trained on. But for the
    convention's first layer, a lower bound on the work the program does: it also evaluates
    finished games' boards (every board of a batch each ply, or the rest of a chunk of running
    ones, czjax.row_skipping) and, with the plain gradient, the learner's positions that did not
    happen; the chunk's evaluation games are left out."""
    acting = forward_per_board if acting_per_board is None else acting_per_board
    return acting * positions_played + forward_per_board * (1.0 + BACKWARD_OVER_FORWARD) * learner_positions


# The roof's product: its size, and the timed calls it is the median of
ROOF_SIZE = 2048
ROOF_RUNS = 5


def matmul_roof(size: int = ROOF_SIZE, runs: int = ROOF_RUNS, dtype: str = "float32") -> float:
    """FLOP/s of one plain ``(size, size) @ (size, size)`` matrix product on the default device:
    ``2 size^3`` FLOPs over the median of ``runs`` timed calls of the compiled product, after a
    warm-up call. The arithmetic roof that the network's FLOP/s are a fraction of."""
    a = jax.random.normal(jax.random.key(0), (size, size), dtype)
    b = jax.random.normal(jax.random.key(1), (size, size), dtype)
    compiled, _ = compile_warm(jnp.matmul, lambda i: (a, b))
    times = [timed_call(compiled, (a, b))[0] for _ in range(runs)]
    return 2.0 * size**3 / statistics.median(times)


# The arithmetic of a product at each --precision (czjax.util.precision), per backend: XLA's
# default runs float32 products through TF32 tensor cores on an NVIDIA GPU, exactly on a CPU.
# Backends not listed: as a CPU.
ARITHMETIC = {
    "cpu": {"default": "float32", "highest": "float32", "bf16": "bfloat16", "mixed": "bfloat16"},
    "gpu": {"default": "tf32", "highest": "float32", "bf16": "bfloat16", "mixed": "bfloat16"},
}


# How each arithmetic's roof is timed: the product's dtype and the --precision it is compiled at
ROOF_PRODUCTS = {"float32": ("float32", "highest"), "tf32": ("float32", "default"), "bfloat16": ("bfloat16", "default")}


# The roofs measured in every benchmark's process, per backend (any other: float32's), beside the
# one of each precision a benchmark runs at; a CPU's bfloat16 product is slow to time and is
# measured only for a run at that precision.
BACKEND_ROOFS = {"gpu": ("float32", "tf32", "bfloat16")}


def roof_of(precision_name: str, backend: str | None = None) -> str:
    """The name of the roof (:data:`ROOF_PRODUCTS`) a program at ``precision_name`` runs under."""
    precision.check(precision_name)
    backend = backend or jax.default_backend()
    return ARITHMETIC.get(backend, ARITHMETIC["cpu"])[precision_name]


def measure_roofs(size: int = ROOF_SIZE, precisions: tuple[str, ...] = ("default",)) -> dict:
    """The roof table of this process and device, the JSON document's fields: ``roof_size`` and
    ``roofs``, ``{name: {flops_per_s, dtype, precision}}`` for each roof the backend offers
    (:data:`BACKEND_ROOFS`) and the roof of each of ``precisions`` (:func:`roof_of`), each
    :func:`matmul_roof` of its dtype at its precision."""
    backend = jax.default_backend()
    names = dict.fromkeys([*BACKEND_ROOFS.get(backend, ("float32",)), *(roof_of(p, backend) for p in precisions)])
    roofs = {}
    for name in names:
        dtype, at = ROOF_PRODUCTS[name]
        with precision.matmul(at):
            roofs[name] = {"flops_per_s": matmul_roof(size, dtype=dtype), "dtype": dtype, "precision": at}
    return {"roof_size": size, "roofs": roofs}


def format_roofs(table: dict) -> str:
    """Two lines for a table's head: the roofs, and what a row's network figures count."""
    size = table["roof_size"]
    rates = ", ".join(f"{name} {roof['flops_per_s'] / 1e9:,.1f}" for name, roof in table["roofs"].items())
    return (
        f"roofs: a {size}x{size} matrix product, GFLOP/s: {rates} (median of {ROOF_RUNS} runs after a warm-up, "
        "this process, this device)\n"
        "net GFLOP/s: the network's matrix-product and convolution FLOPs per second, counted from the boards it "
        "evaluated (docs/benchmarks.md); of roof: that over the roof of the row's precision"
    )


def with_roof(row: dict, table: dict) -> dict:
    """``row`` with the roof of its ``precision`` from ``table`` (:func:`measure_roofs`) and its
    network FLOP/s as a fraction of it (None where no network played)."""
    name = roof_of(row["precision"])
    row["roof"] = name
    row["roof_flops_per_s"] = table["roofs"][name]["flops_per_s"]
    flops = row["network_flops_per_s"]
    row["roof_fraction"] = flops / row["roof_flops_per_s"] if flops > 0 else None
    return row
