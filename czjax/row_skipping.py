"""Skipping work on rows that do not matter, with static shapes: one helper and one cost estimate.

Two places in the compiled core run a model over rows of which only some matter: the rollout
(games that have ended still occupy their rows) and the update (about half of the learner's
static half of the plies did not happen). Both use :func:`over_valid_chunks`: the valid rows
are moved to the front by a stable partition, cut into a static number of chunks, and a chunk
without a valid row is skipped with ``lax.cond``. Whether that pays depends on how expensive
the model is, which :func:`flops_per_board` counts from the program itself (its matrix
products and convolutions), so the decision is the same on every backend.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jax_core

from czjax import game
from czjax.util import platforms


def all_configurations(predicate: jax.Array, axis_name: str | tuple[str, ...] | None) -> jax.Array:
    """``predicate`` for every configuration of a vmapped scan (``axis_name``, or every axis of
    a tuple of names), else itself.

    Under ``vmap`` a ``lax.cond`` on a batched predicate becomes a select that runs both
    branches; reduced over the named axis with a collective, the predicate is unbatched and
    the cond stays a real branch (skipped when it holds for all configurations).
    """
    if axis_name is None:
        return predicate
    return lax.psum((~predicate).astype(jnp.int32), axis_name) == 0


def valid_first(valid: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(order, destination)`` of the stable partition that moves the True entries of ``valid
    (n,)`` to the front: ``x[order]`` has them first, both groups in their original order, and
    entry ``i`` lands at ``destination[i]`` (so ``y[destination]`` undoes it). ``order`` equals
    ``argsort(~valid, stable=True)``; a cumulative sum and one scatter are 5-10x faster than
    XLA's CPU sort."""
    flags = valid.astype(jnp.int32)
    n = flags.shape[0]
    destination = jnp.where(valid, jnp.cumsum(flags) - 1, flags.sum() + jnp.cumsum(1 - flags) - 1)
    order = jnp.zeros((n,), jnp.int32).at[destination].set(jnp.arange(n, dtype=jnp.int32), unique_indices=True)
    return order, destination


def over_valid_chunks(
    fn: Callable,
    rows,
    valid: jax.Array,
    num_chunks: int,
    axis_name: str | tuple[str, ...] | None = None,
    accumulate: bool = False,
):
    """``fn(chunk_index, chunk_rows)`` over the rows of ``rows`` (a pytree of ``(n, ...)``
    arrays) whose ``valid`` is set, in ``num_chunks`` static chunks of ``ceil(n / num_chunks)``
    rows, valid rows first; a chunk without a valid row is skipped and gives zeros.

    ``accumulate=False``: returns ``(outputs, destination)``, ``fn``'s outputs stacked on a
    chunk axis; ``out.reshape(-1, ...)[destination]`` puts row results back in the original
    order (rows that were not valid then hold zeros or, within a chunk that ran, whatever
    ``fn`` gave for the padding). ``accumulate=True``: returns the sum of ``fn``'s outputs over
    the chunks, accumulated in chunk order. Under a vmapped scan (``axis_name``) a chunk is
    skipped only when it is empty for every configuration.
    """
    n = valid.shape[0]
    size = -(-n // num_chunks)
    pad = size * num_chunks - n

    def arrange(x):
        x = jnp.take(x, order, axis=0)
        x = jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1))
        return x.reshape((num_chunks, size) + x.shape[1:])

    with jax.named_scope("compaction"):
        order, destination = valid_first(valid)
        chunks = jax.tree.map(arrange, rows)
    num_valid = valid.sum()
    out_shape = jax.eval_shape(fn, jnp.int32(0), jax.tree.map(lambda x: x[0], chunks))
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)

    def body(acc, indexed):
        index, chunk = indexed
        empty = all_configurations(index * size >= num_valid, axis_name)
        out = lax.cond(empty, lambda _: zeros, lambda c: fn(index, c), chunk)
        if accumulate:
            return jax.tree.map(jnp.add, acc, out), None
        return acc, out

    acc, outs = lax.scan(body, zeros if accumulate else None, (jnp.arange(num_chunks, dtype=jnp.int32), chunks))
    return acc if accumulate else (outs, destination)


# --- What a model costs, and when skipping pays ---------------------------------------------


def _eqn_flops(eqn) -> float:
    """FLOPs of one matrix product or convolution (multiply and add counted as 2)."""
    out = eqn.outvars[0].aval.shape
    if eqn.primitive.name == "dot_general":
        (lhs_contract, _), _ = eqn.params["dimension_numbers"]
        lhs = eqn.invars[0].aval.shape
        return 2.0 * math.prod(out) * math.prod(lhs[d] for d in lhs_contract)
    if eqn.primitive.name == "conv_general_dilated":
        rhs = eqn.invars[1].aval.shape
        out_features = rhs[eqn.params["dimension_numbers"].rhs_spec[0]]
        return 2.0 * math.prod(out) * math.prod(rhs) / out_features
    return 0.0


def _jaxpr_flops(jaxpr) -> float:
    """Matrix-product and convolution FLOPs of a jaxpr, inner jaxprs included (a scan's body
    times its length, the most expensive branch of a cond, a Pallas kernel's estimate of itself)."""
    total = 0.0
    for eqn in jaxpr.eqns:
        total += _eqn_flops(eqn)
        estimate = eqn.params.get("cost_estimate") if eqn.primitive.name == "pallas_call" else None
        if estimate is not None:  # a Pallas kernel's own count (its body is one block's program)
            total += estimate.flops
            continue
        inner = []
        for value in eqn.params.values():
            values = value if isinstance(value, (tuple, list)) else (value,)
            costs = [
                _jaxpr_flops(getattr(v, "jaxpr", v))
                for v in values
                if isinstance(v, (jax_core.Jaxpr, jax_core.ClosedJaxpr))
            ]
            if costs:
                inner.append(max(costs))
        total += sum(inner) * eqn.params.get("length", 1)
    return total


def flops_per_board(player: Callable, params) -> float:
    """The matrix-product and convolution FLOPs of one call of ``player`` on one board, counted
    from its traced program (nothing is compiled, so every backend gives the same count; the
    elementwise work, small beside them, is left out). Cached per player and parameter shapes."""
    leaves, treedef = jax.tree.flatten(params)
    return _flops_per_board(player, treedef, tuple((tuple(x.shape), str(x.dtype)) for x in leaves))


@functools.cache
def _flops_per_board(player, treedef, shapes) -> float:
    params = jax.tree.unflatten(treedef, [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in shapes])
    return _jaxpr_flops(jax.make_jaxpr(player)(params, game.new_boards(1), jax.random.key(0)).jaxpr)


# Evaluating only the games still running pays when the model is expensive: with Mk4 (19
# MFLOP a board) a 50-game rollout is 1.3x faster and a 512-game one 1.9x; with the 28-kFLOP
# MLP the compaction costs more than the forward passes it skips.
ROLLOUT_MIN_FLOPS = 2e5
ROLLOUT_CHUNKS = 4
# Below this many forward-pass FLOPs for the learner's whole batch the update takes the plain
# gradient over every position: the compaction and per-chunk branches cost more than the
# computation they skip: on a CPU the MLP's 50-game update is faster without them, its 4,096-game
# one and Mk4's faster with them (``czjax bench train --compaction`` compares them).
LOSS_MIN_FLOPS = platforms.Choices().loss_min_flops  # a platform's own: czjax.util.platforms
LOSS_CHUNKS = 8


# --compaction: "on" applies the FLOP rules above in the rollout and in the gradient; "loss" in
# the gradient only (the rollout evaluates every board); "off" nowhere (the plain gradient over
# every position, whose memory grows with the batch: Mk4 at 4,096 games asks for 50 GB);
# "auto", the default, is "on" except where a platform's measurement says otherwise: the fewest
# FLOPs of a player call (its boards times the player's FLOPs a board) at which the rollout's
# compaction pays (``rollout_min_flops`` in czjax.util.platforms). On XLA's CPU a skipped chunk
# saves its work at any size (floor: rollout_chunks' own). On a GPU each skipped-chunk
# conditional and chunk-loop step waits for the device (its predicate travels to the host), twice
# per ply: on one H100, Mk4 self-play at 50 games (25 boards per call) ran 2.2x faster without it,
# at 4,096 games (2,048) 1.12x faster with it.
COMPACTION_MODES = ("auto", "on", "loss", "off")


def check_mode(mode: str) -> None:
    if mode not in COMPACTION_MODES:
        raise ValueError(f"unknown compaction {mode!r}; choose one of {', '.join(COMPACTION_MODES)}")


def in_rollout(mode: str, boards_per_call: int, player: Callable, params, platform: str | None = None) -> bool:
    """Whether rollouts with ``boards_per_call`` boards per call of ``player`` (over ``params``:
    arrays or their shapes) evaluate only the games still running (then by the FLOP rule,
    :func:`rollout_chunks`), in a program built for ``platform`` (None: the platform being built
    for, :func:`czjax.util.platforms.target`). The player's FLOPs are counted only where the
    platform's threshold asks for them."""
    check_mode(mode)
    if mode == "auto":
        least = platforms.choices_for(platform).rollout_min_flops
        return least <= 0 or boards_per_call * flops_per_board(player, params) >= least
    return mode == "on"


def in_gradient(mode: str) -> bool:
    """Whether the gradient skips invalid positions (by the FLOP rule, :func:`loss_chunks`)."""
    check_mode(mode)
    return mode != "off"


def rollout_chunks(flops: float, boards_per_call: int) -> int:
    """Chunks for a player's evaluation in the rollout: :data:`ROLLOUT_CHUNKS` for an expensive
    player on enough boards, else 1 (evaluate every board)."""
    return ROLLOUT_CHUNKS if flops >= ROLLOUT_MIN_FLOPS and boards_per_call >= 2 * ROLLOUT_CHUNKS else 1


def loss_chunks(flops: float, positions: int, platform: str | None = None) -> int:
    """Chunks the learner's batch of ``positions`` is cut into for the gradient in a program
    built for ``platform`` (None: the platform being built for): 1 is the plain gradient over
    every position, below the platform's ``loss_min_flops``; where the platform asks it
    (``loss_chunk_min``) each chunk holds that much, the chunks a power of two."""
    choices = platforms.choices_for(platform)
    chunks = flops * positions / choices.loss_min_flops
    if chunks < 1:
        return 1
    if not choices.loss_chunk_min:
        return LOSS_CHUNKS
    return min(LOSS_CHUNKS, 2 ** int(math.log2(chunks)))
