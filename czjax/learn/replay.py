"""An on-device replay buffer of fixed shape for search-based training (AlphaZero's).

The buffer holds the learner's positions with their targets (``LossInputs``: legal moves,
move played, value target, policy target) in arrays of ``capacity`` rows. :func:`add` writes
a batch's valid positions at the cursor, wrapping round (the oldest are overwritten first);
:func:`sample` draws a fixed number of rows uniformly, with replacement, from those written so
far; :func:`averaged_targets` gives every row the mean targets of its board (position averaging).
Everything is a pure function of fixed shapes, so it runs inside the compiled training
chunk and is saved with the run's state.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
from jax import lax

from czjax import game, row_skipping
from czjax.learn.losses import LossInputs
from czjax.util.fields import setting
from czjax.util.pytree import pytree_dataclass


@dataclasses.dataclass(frozen=True)
class ReplaySettings:
    """Search-based training from an on-device replay buffer (:mod:`czjax.learn.replay`): each batch's
    positions are added to a circular buffer of ``capacity`` rows and the step trains on
    ``batch`` rows drawn from it uniformly. ``capacity`` 0 trains on each batch as it comes."""

    capacity: int = setting(
        0,
        "search-based training from an on-device replay buffer of this many positions (circular; "
        "default 0: train on each batch as it comes)",
        metavar="POSITIONS",
    )
    batch: int = setting(
        1024,
        "positions drawn uniformly from the replay buffer for each step (default 1024)",
        type="positive",
        metavar="POSITIONS",
    )
    steps: int = setting(
        1,
        "gradient steps per batch of games, each on a fresh draw from the replay buffer (default 1); "
        "a position is trained on about STEPS x POSITIONS / positions-per-batch times (metric replay_reuse)",
        type="positive",
        metavar="STEPS",
    )

    window_start: int = setting(
        0,
        "draw from the most recent POSITIONS only at first, a window that grows linearly to the whole "
        "buffer over --replay-window-games games (AlphaZero.jl's growing memory; default 0: the whole buffer)",
        type="count",
        metavar="POSITIONS",
    )
    window_games: int = setting(
        0,
        "games over which the drawing window grows from --replay-window-start to the capacity",
        type="count",
        metavar="GAMES",
    )

    average: bool = setting(
        False,
        "position averaging (AlphaZero.jl's use_position_averaging): a drawn position's value and policy "
        "targets are the means over every row of the buffer holding the same board",
    )

    def __post_init__(self):
        if self.capacity < 0 or self.batch < 1 or self.steps < 1:
            raise ValueError("replay capacity must be >= 0, replay batch >= 1 and replay steps >= 1")
        if self.window_start < 0 or self.window_games < 0 or bool(self.window_start) != bool(self.window_games):
            raise ValueError("replay window_start and window_games go together, both > 0 (or both 0: no window)")

    def window(self, games: jax.Array) -> jax.Array | None:
        """The drawing window (positions) after ``games`` games (float32), or None for the whole buffer."""
        if not self.window_start:
            return None
        grown = jnp.minimum(games / self.window_games, 1.0)
        return (self.window_start + grown * max(self.capacity - self.window_start, 0)).astype(jnp.int32)


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


def add(buffer: ReplayBuffer, boards: jax.Array, batch: LossInputs, limit: jax.Array | None = None) -> ReplayBuffer:
    """``buffer`` with the valid rows of ``boards (N, 6, 7)`` / ``batch`` written at its
    cursor, in order, wrapping round; rows that did not happen are not written. A batch of more
    valid rows than the capacity keeps its last ``capacity``; with ``limit`` (at most the
    capacity), only the first ``limit`` valid rows are written."""
    capacity = buffer.boards.shape[0]
    order, _ = row_skipping.valid_first(batch.valid)  # valid rows first, in their order
    count = batch.valid.sum().astype(jnp.int32)
    if limit is not None:
        count = jnp.clip(count, 0, limit)
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


def without_rows(buffer: ReplayBuffer) -> ReplayBuffer:
    """``buffer`` with none of its rows, its cursor and count of rows kept: what a portable
    checkpoint holds of it (:func:`czjax.learn.trainer.portable`), a few bytes where the rows
    are the bulk of a run's state."""
    return dataclasses.replace(
        buffer, boards=buffer.boards[:0], inputs=jax.tree.map(lambda rows: rows[:0], buffer.inputs)
    )


# Cells per key word of a board (base 3): 3^14 < 2^31, so a board is three int32 words.
_CELLS_PER_WORD = 14


def board_keys(boards: jax.Array) -> jax.Array:
    """``(N, 3)`` int32: each board ``(N, 6, 7)`` in base 3, 14 cells a word; equal boards have equal
    keys and different boards different ones."""
    digits = boards.reshape(boards.shape[0], 3, _CELLS_PER_WORD).astype(jnp.int32) + 1
    powers = 3 ** jnp.arange(_CELLS_PER_WORD, dtype=jnp.int32)
    return (digits * powers).sum(-1)


def averaged_targets(buffer: ReplayBuffer) -> LossInputs:
    """The buffer's rows with their value and policy targets replaced by the means over the
    written rows holding the same board (AlphaZero.jl's position averaging; its memory merges the
    samples of a position into one, weighted by their number, which a uniform draw of rows
    matches in expectation). Rows not written are left as they are.

    Equal boards are found by sorting the rows by :func:`board_keys`, then summing the targets
    over each run of equal keys. Unwritten rows take a key no board has (int32's largest in every
    word, where a board's words stay below 3^14), so they form a run of their own, and keep
    their values."""
    capacity = buffer.boards.shape[0]
    written = buffer.inputs.valid
    keys = jnp.where(written[:, None], board_keys(buffer.boards), jnp.iinfo(jnp.int32).max)
    *key_words, order = lax.sort((*keys.T, jnp.arange(capacity, dtype=jnp.int32)), num_keys=3)
    sorted_keys = jnp.stack(key_words, -1)
    starts = jnp.concatenate([jnp.ones((1,), bool), jnp.any(sorted_keys[1:] != sorted_keys[:-1], axis=-1)])
    run = jnp.cumsum(starts) - 1  # each sorted row's run of equal boards
    count = jax.ops.segment_sum(jnp.ones((capacity,), jnp.float32), run, num_segments=capacity)

    def run_mean(values):  # (capacity, ...) in buffer order -> each row's mean over its run
        total = jax.ops.segment_sum(values[order], run, num_segments=capacity)
        mean = total / jnp.maximum(count, 1.0).reshape((-1,) + (1,) * (values.ndim - 1))
        return jnp.zeros_like(values).at[order].set(mean[run])

    inputs = buffer.inputs
    policy = inputs.policy_targets
    assert policy is not None, "a replay buffer holds policy targets (replay.empty)"
    return dataclasses.replace(
        inputs,
        returns=jnp.where(written, run_mean(inputs.returns), inputs.returns),
        policy_targets=jnp.where(written[:, None], run_mean(policy), policy),
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
