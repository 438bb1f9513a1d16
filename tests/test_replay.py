"""czjax.learn.replay against a plain-Python circular buffer."""

import collections

import jax
import jax.numpy as jnp
import numpy as np

from czjax.learn import replay
from czjax.learn.losses import LossInputs

# The buffer's functions as compiled programs: run eagerly, a first run compiles each of their
# operations for each shape, which costs more than compiling each function once
add = jax.jit(replay.add)
averaged_targets = jax.jit(replay.averaged_targets)
board_keys = jax.jit(replay.board_keys)


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
    boards, inputs = jax.device_get((boards, inputs))  # NumPy's indexing, not a device op per row
    return [
        (
            np.asarray(boards)[i].tobytes(),
            int(inputs.actions[i]),
            float(inputs.returns[i]),
            np.asarray(inputs.legal)[i].tobytes(),
            np.asarray(inputs.policy_targets)[i].tobytes(),
        )
        for i in np.flatnonzero(inputs.valid)
    ]


def test_the_buffer_is_a_circular_list_of_the_valid_rows():
    rng = np.random.default_rng(0)
    capacity = 13
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


def test_a_limit_writes_the_first_valid_rows_only_and_rows_can_be_left_out():
    """``add`` with a limit (a rebuild stopping at the rows a buffer held) against the plain
    buffer given the first ``limit`` valid rows; ``without_rows`` keeps the count and cursor."""
    rng = np.random.default_rng(5)
    capacity, buffer, written, total = 16, replay.empty(16), [], 0
    for n, limit in [(10, 3), (12, 0), (9, 20), (30, 16)]:  # the last wraps round
        boards, inputs = batch_of(rng, n, 0.7)
        kept = rows_of(boards, inputs)[:limit]
        buffer = add(buffer, boards, inputs, jnp.int32(limit))
        written, total = (written + kept)[-capacity:], total + len(kept)
        assert int(buffer.filled) == len(written) and int(buffer.cursor) == total % capacity
        assert sorted(rows_of(buffer.boards, buffer.inputs)) == sorted(written)
    small = replay.without_rows(buffer)
    assert small.boards.shape == (0, 6, 7) and all(x.shape[0] == 0 for x in jax.tree.leaves(small.inputs))
    assert int(small.filled) == int(buffer.filled) and int(small.cursor) == int(buffer.cursor)


def test_sampling_draws_written_rows_uniformly():
    rng = np.random.default_rng(1)
    boards, inputs = batch_of(rng, 10, 1.0)
    empty = replay.empty(64)
    _, nothing = replay.sample(empty, jax.random.key(0), 8)
    assert not np.asarray(nothing.valid).any()  # an empty buffer gives nothing to train on
    buffer = add(empty, boards, inputs)
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
        buffer = add(buffer, *part)
    order = {np.asarray(boards)[i].tobytes(): i for i in range(30)}
    draw = jax.jit(replay.sample, static_argnums=2)
    drawn_boards, _ = draw(buffer, jax.random.key(3), 4000, jnp.int32(5))
    counts = collections.Counter(order[b.tobytes()] for b in np.asarray(drawn_boards))
    assert set(counts) == {25, 26, 27, 28, 29}
    assert max(abs(c - 800) for c in counts.values()) < 4.5 * np.sqrt(800 * 0.8)
    drawn_boards, _ = draw(buffer, jax.random.key(4), 4000, jnp.int32(1000))
    assert {order[b.tobytes()] for b in np.asarray(drawn_boards)} == set(range(14, 30))


def test_position_averaging_is_the_mean_over_equal_boards():
    """averaged_targets against a plain-Python grouping of the written rows by board: each written
    row's value and policy targets become the means over the rows with its board (boards drawn
    from a few, so most repeat; the buffer wrapped, so some rows were overwritten); its other
    fields, and rows not written, stay as they were. board_keys tells every pair of boards apart."""
    rng = np.random.default_rng(7)
    few = rng.integers(-1, 2, size=(6, 6, 7)).astype(np.int8)
    buffer = replay.empty(40)
    for _ in range(3):  # 3 x ~20 valid rows into 40: wraps round
        boards, inputs = batch_of(rng, 30, 0.7)
        boards = jnp.asarray(few[rng.integers(0, len(few), 30)])
        buffer = add(buffer, boards, inputs)
    buffer = add(replay.empty(45), buffer.boards, buffer.inputs)  # 5 rows never written
    averaged = jax.device_get(averaged_targets(buffer))

    boards = np.asarray(buffer.boards)
    written = np.asarray(buffer.inputs.valid)
    groups = collections.defaultdict(list)
    for i in np.flatnonzero(written):
        groups[boards[i].tobytes()].append(i)
    assert len(groups) > 1 and max(len(g) for g in groups.values()) > 3
    for rows in groups.values():
        for i in rows:
            np.testing.assert_allclose(
                float(averaged.returns[i]), np.mean(np.asarray(buffer.inputs.returns)[rows]), rtol=1e-5, atol=1e-6
            )
            np.testing.assert_allclose(
                np.asarray(averaged.policy_targets[i]),
                np.asarray(buffer.inputs.policy_targets)[rows].mean(0),
                rtol=1e-5,
                atol=1e-6,
            )
    unwritten = ~written
    assert unwritten.sum() == 5
    np.testing.assert_array_equal(np.asarray(averaged.returns)[unwritten], np.asarray(buffer.inputs.returns)[unwritten])
    for field in ("legal", "actions", "valid"):
        np.testing.assert_array_equal(np.asarray(getattr(averaged, field)), np.asarray(getattr(buffer.inputs, field)))

    many = rng.integers(-1, 2, size=(500, 6, 7)).astype(np.int8)
    many[1] = many[0]
    many[2, 5, 6] = -many[0, 5, 6] if many[0, 5, 6] else 1  # differs from board 0 in its last cell only
    many[2, :5] = many[0, :5]
    many[2, 5, :6] = many[0, 5, :6]
    keys = np.asarray(board_keys(jnp.asarray(many)))
    same_board = (many[:, None] == many[None]).all((2, 3))
    same_key = (keys[:, None] == keys[None]).all(-1)
    np.testing.assert_array_equal(same_key, same_board)
    assert same_key[0, 1] and not same_key[0, 2]
