"""Solver metrics on the device: a network's (or a search's) move on solver-labelled positions,
as one compiled call, for training runs to log as they go.

:func:`load` reads the benchmark once on the host: Pascal Pons' six sets with every column's
exact score (6,000 positions) and the 1,000 public positions (:mod:`czjax.evaluate.solver`), as
NumPy arrays. :func:`metrics` plays the player's move on all of them in one batch and returns
flat scalars: ``pons_<set>_error`` (% of moves that do not keep the game-theoretic outcome,
AlphaZero.jl's measure; sets named ``L1R1``...), ``pons_mean_error``, ``public_optimal`` and
``public_keeps`` (fractions of moves that are optimal / keep the outcome). It is a pure
function of fixed shapes, so it runs inside a training chunk, vmapped over a scan too.

The benchmark is a pytree whose arrays are its leaves (its group names and sizes are static):
a training chunk takes it as an argument, so the arrays are inputs of the compiled program,
not constants that XLA would fold at every compile (about a second, with
``slow_operation_alarm`` lines on stderr).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np

from czjax.evaluate.pons import load_pons_moves
from czjax.evaluate.positions import good_columns, load_positions
from czjax.players import Player, mask_for_sampling


@dataclasses.dataclass(frozen=True)
class SolverBenchmark:
    """The positions and their solver labels (the pytree's leaves: NumPy arrays as loaded,
    device arrays or tracers when passed to a compiled function), and what is static about
    them: the groups' names and sizes."""

    boards: np.ndarray  # int8 (N, 6, 7)
    keeps: np.ndarray  # bool (N, 7): the column keeps the game-theoretic outcome
    optimal: np.ndarray  # bool (N, 7): the column is optimal
    group: np.ndarray  # int32 (N,): index into ``names``
    names: tuple = ()  # metric prefixes of the groups: "pons_L1R1", ..., "public"
    sizes: tuple = ()  # positions per group


jax.tree_util.register_dataclass(
    SolverBenchmark, data_fields=["boards", "keeps", "optimal", "group"], meta_fields=["names", "sizes"]
)


def short_name(pons_set: str) -> str:
    return "pons_" + pons_set.removeprefix("Test_").replace("_", "")


@functools.lru_cache(maxsize=1)
def load() -> SolverBenchmark:
    """The shipped benchmark (cached): Pons' sets in AlphaZero.jl's order, then the public file."""
    parts = [(short_name(name), data["boards"], data["scores"]) for name, data in load_pons_moves().items()]
    public = load_positions()
    parts.append(("public", public["boards"], public["scores"]))
    boards = np.concatenate([b for _, b, _ in parts])
    optimal, keeps, _ = good_columns(np.concatenate([s for _, _, s in parts]))
    group = np.concatenate([np.full(len(b), i, np.int32) for i, (_, b, _) in enumerate(parts)])
    # NumPy arrays (host memory), cached: a device array made inside one trace would leak its
    # tracer into the next. A training chunk takes them as an argument; a function that closes
    # over them compiles them in as constants.
    return SolverBenchmark(
        boards=boards.astype(np.int8),
        keeps=keeps,
        optimal=optimal,
        group=group,
        names=tuple(name for name, _, _ in parts),
        sizes=tuple(len(b) for _, b, _ in parts),
    )


def metrics(player: Player, params, bench: SolverBenchmark, key=None) -> dict[str, jax.Array]:
    """The player's most likely legal column on every benchmark position (a search's move for
    a search player), scored; see the module docstring."""
    key = jax.random.key(0) if key is None else key
    boards, keeps, optimal = jnp.asarray(bench.boards), jnp.asarray(bench.keeps), jnp.asarray(bench.optimal)
    logits = player(params, boards, key).logits.astype(jnp.float32)
    move = jnp.argmax(mask_for_sampling(boards[:, 0, :] == 0, logits), axis=-1)
    rows = jnp.arange(move.shape[0])
    kept = keeps[rows, move].astype(jnp.float32)
    best = optimal[rows, move].astype(jnp.float32)
    groups = len(bench.names)
    count = jnp.asarray(bench.sizes, jnp.float32)  # positions per group, static
    kept_rate = jax.ops.segment_sum(kept, jnp.asarray(bench.group), groups) / count
    best_rate = jax.ops.segment_sum(best, jnp.asarray(bench.group), groups) / count
    out = {}
    for i, name in enumerate(bench.names):
        if name == "public":
            out["public_optimal"], out["public_keeps"] = best_rate[i], kept_rate[i]
        else:
            out[f"{name}_error"] = 100.0 * (1.0 - kept_rate[i])
    pons = [out[f"{n}_error"] for n in bench.names if n != "public"]
    out["pons_mean_error"] = cast(jax.Array, sum(pons)) / len(pons)  # a sum of arrays, never the empty sum 0
    return out
