"""An on-device replay buffer of fixed shape for search-based training (AlphaZero's).

The buffer holds the learner's positions with their targets (``LossInputs``: legal moves,
move played, value target, policy target) in arrays of ``capacity`` rows. :func:`add` writes
a batch's valid positions at the cursor, wrapping round (the oldest are overwritten first);
:func:`sample` draws a fixed number of rows uniformly, with replacement, from those written so
far. Everything is a pure function of fixed shapes, so it runs inside the compiled training
chunk and is saved with the run's state.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from czjax import compaction, game
from czjax.learn.losses import LossInputs
from czjax.util.pytree import pytree_dataclass


@pytree_dataclass(frozen=True)
class ReplayBuffer:
    boards: chex.Array  # int8 (capacity, 6, 7), the learner's canonical boards
    inputs: LossInputs  # (capacity, ...) rows; ``valid`` marks the rows written
    cursor: chex.Array  # int32: the next row to write
    filled: chex.Array  # int32: rows written so far, at most capacity


def empty(capacity: int) -> ReplayBuffer:
    """An empty buffer of ``capacity`` rows."""
    return ReplayBuffer(
        boards=jnp.zeros((capacity, game.ROWS, game.COLS), jnp.int8),
        inputs=LossInputs(
            legal=jnp.zeros((capacity, game.COLS), bool),
            actions=jnp.zeros((capacity,), jnp.int32),
            returns=jnp.zeros((capacity,), jnp.float32),
            valid=jnp.zeros((capacity,), bool),
            policy_targets=jnp.zeros((capacity, game.COLS), jnp.float32),
        ),
        cursor=jnp.zeros((), jnp.int32),
        filled=jnp.zeros((), jnp.int32),
    )


def add(buffer: ReplayBuffer, boards: jax.Array, batch: LossInputs) -> ReplayBuffer:
    """``buffer`` with the valid rows of ``boards (N, 6, 7)`` / ``batch`` written at its
    cursor, in order, wrapping round; rows that did not happen are not written. A batch of more
    valid rows than the capacity keeps its last ``capacity``."""
    capacity = buffer.boards.shape[0]
    order, _ = compaction.valid_first(batch.valid)  # valid rows first, in their order
    count = batch.valid.sum().astype(jnp.int32)
    rank = jnp.arange(order.shape[0], dtype=jnp.int32)
    keep = (rank < count) & (rank >= count - capacity)
    slots = jnp.where(keep, (buffer.cursor + rank) % capacity, capacity)  # capacity: dropped

    def write(old, new):
        return old.at[slots].set(jnp.take(new.astype(old.dtype), order, axis=0), mode="drop")

    return ReplayBuffer(
        boards=write(buffer.boards, boards),
        inputs=jax.tree.map(write, buffer.inputs, batch),
        cursor=(buffer.cursor + count) % capacity,
        filled=jnp.minimum(buffer.filled + count, capacity),
    )


def sample(
    buffer: ReplayBuffer, key: jax.Array, size: int, window: jax.Array | None = None
) -> tuple[jax.Array, LossInputs]:
    """``size`` rows drawn uniformly with replacement from the rows written (``window``: from the
    ``window`` most recent of them): ``(boards, LossInputs)``; all invalid while the buffer is empty."""
    if window is None:
        index = jax.random.randint(key, (size,), 0, jnp.maximum(buffer.filled, 1))
    else:
        capacity = buffer.boards.shape[0]
        recent = jax.random.randint(key, (size,), 0, jnp.clip(window, 1, jnp.maximum(buffer.filled, 1)))
        index = (buffer.cursor - 1 - recent) % capacity
    take = lambda x: jnp.take(x, index, axis=0)  # noqa: E731
    inputs = jax.tree.map(take, buffer.inputs)
    return take(buffer.boards), inputs.replace(valid=inputs.valid & (buffer.filled > 0))
