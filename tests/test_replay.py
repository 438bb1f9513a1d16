"""czjax.learn.replay against a plain-Python circular buffer."""

import collections

import jax
import jax.numpy as jnp
import numpy as np

from czjax.learn import replay
from czjax.learn.losses import LossInputs


def batch_of(rng, n, p_valid):
    boards = rng.integers(-1, 2, size=(n, 6, 7)).astype(np.int8)
    targets = rng.random((n, 7)).astype(np.float32)
    inputs = LossInputs(
        legal=jnp.asarray(rng.random((n, 7)) < 0.8),
        actions=jnp.asarray(rng.integers(0, 7, n), jnp.int32),
        returns=jnp.asarray(rng.normal(size=n), jnp.float32),
        valid=jnp.asarray(rng.random(n) < p_valid),
        policy_targets=jnp.asarray(targets / targets.sum(-1, keepdims=True)),
    )
    return jnp.asarray(boards), inputs


def rows_of(boards, inputs):
    """The valid rows as tuples, in order."""
    valid = np.asarray(inputs.valid)
    return [
        (
            np.asarray(boards)[i].tobytes(),
            int(inputs.actions[i]),
            float(inputs.returns[i]),
            np.asarray(inputs.legal)[i].tobytes(),
            np.asarray(inputs.policy_targets)[i].tobytes(),
        )
        for i in np.flatnonzero(valid)
    ]


def test_the_buffer_is_a_circular_list_of_the_valid_rows():
    rng = np.random.default_rng(0)
    capacity = 13
    add = jax.jit(replay.add)
    buffer = replay.empty(capacity)
    slots = [None] * capacity  # the reference: a plain circular buffer of rows
    cursor = filled = 0
    for n, p_valid in [
        (5, 1.0),
        (9, 0.5),
        (0 + 7, 0.0),
        (11, 0.7),
        (40, 0.9),
        (6, 1.0),
    ]:  # wraps; one batch over capacity
        boards, inputs = batch_of(rng, n, p_valid)
        new = rows_of(boards, inputs)[-capacity:]
        cursor_before = (cursor + len(rows_of(boards, inputs)) - len(new)) % capacity
        for i, row in enumerate(new):
            slots[(cursor_before + i) % capacity] = row
        cursor = (cursor + len(rows_of(boards, inputs))) % capacity
        filled = min(capacity, filled + len(rows_of(boards, inputs)))
        buffer = add(buffer, boards, inputs)
        assert int(buffer.cursor) == cursor and int(buffer.filled) == filled
        got = rows_of(buffer.boards, buffer.inputs)
        want = [row for row in slots if row is not None]
        assert sorted(got) == sorted(want) and len(got) == filled


def test_sampling_draws_written_rows_uniformly():
    rng = np.random.default_rng(1)
    boards, inputs = batch_of(rng, 10, 1.0)
    empty = replay.empty(64)
    _, nothing = replay.sample(empty, jax.random.key(0), 8)
    assert not np.asarray(nothing.valid).any()  # an empty buffer gives nothing to train on
    buffer = replay.add(empty, boards, inputs)
    drawn_boards, drawn = jax.jit(replay.sample, static_argnums=2)(buffer, jax.random.key(1), 5000)
    written = {row[0]: row for row in rows_of(boards, inputs)}
    drawn_rows = rows_of(drawn_boards, drawn)
    assert len(drawn_rows) == 5000 and all(
        written[row[0]] == row for row in drawn_rows
    )  # whole rows, only written ones
    counts = collections.Counter(row[0] for row in drawn_rows)
    assert set(counts) == set(written) and max(abs(c - 500) for c in counts.values()) < 4.5 * np.sqrt(
        500 * 0.9
    )  # uniform


def test_a_window_draws_the_most_recent_rows_only():
    """Rows written in order 0..29 into a 16-row buffer (it wraps): a window of 5 draws exactly
    the last five written (25..29), uniformly; a window larger than the rows written draws them all."""
    capacity = 16
    rng = np.random.default_rng(2)
    buffer = replay.empty(capacity)
    boards, inputs = batch_of(rng, 30, 1.0)
    for start in range(0, 30, 10):  # three batches, so the cursor wraps
        part = jax.tree.map(lambda x: x[start : start + 10], (boards, inputs))
        buffer = replay.add(buffer, *part)
    order = {np.asarray(boards)[i].tobytes(): i for i in range(30)}
    draw = jax.jit(replay.sample, static_argnums=2)
    drawn_boards, _ = draw(buffer, jax.random.key(3), 4000, jnp.int32(5))
    counts = collections.Counter(order[b.tobytes()] for b in np.asarray(drawn_boards))
    assert set(counts) == {25, 26, 27, 28, 29}
    assert max(abs(c - 800) for c in counts.values()) < 4.5 * np.sqrt(800 * 0.8)
    drawn_boards, _ = draw(buffer, jax.random.key(4), 4000, jnp.int32(1000))
    assert {order[b.tobytes()] for b in np.asarray(drawn_boards)} == set(range(14, 30))
