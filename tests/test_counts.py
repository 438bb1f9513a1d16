"""Wide counts (czjax.util.counts) against Python's integers, and their checkpoints: a run's
totals are exact past 2**31 and 2**32 without JAX's 64-bit types, and a checkpoint written when
they were int32 scalars still loads."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax.util import checkpoint, counts
from czjax.util.counts import WideCount

# around the edges of the words, and ordinary values
VALUES = [0, 1, 7, 2**31 - 2, 2**31 - 1, 2**31, 2**32 - 3, 2**32 - 1, 2**32, 2**32 + 5, 2**40 + 12345, 2**63 - 1]


def test_of_and_reading_back_are_exact():
    for value in VALUES:
        count = WideCount.of(value)
        assert count.high.dtype == count.low.dtype == np.uint32
        assert int(count) == value and float(count) == float(value) and int(np.asarray(count)) == value
    stacked = WideCount.of(np.asarray(VALUES[:-1], np.int64))
    assert np.asarray(stacked).tolist() == VALUES[:-1] and [int(stacked[i]) for i in range(3)] == VALUES[:3]
    # an int32 count that wrapped past 2**31 once (an older checkpoint's) is its unsigned value
    assert int(WideCount.of(np.int32(-(2**31) + 8))) == 2**31 + 8
    with pytest.raises(ValueError, match="not negative"):
        WideCount.of(np.int64(-1))
    with pytest.raises(TypeError, match="integer"):
        WideCount.of(1.5)


def test_add_carries_into_the_high_word():
    add = jax.jit(lambda c, n: c.add(n))
    for value, n in itertools.product(VALUES[:-1], [0, 1, 8, 2**31 - 1, 2**32 - 1]):
        assert int(add(WideCount.of(value), jnp.asarray(n, jnp.uint32))) == value + n, (value, n)
        assert int(WideCount.of(value).add(n)) == value + n  # a Python int, as the trainer adds its batch size
    # an int32 array of several counts, vmapped
    stacked = jax.vmap(lambda c, n: c.add(n))(WideCount.of(np.asarray([2**32 - 1, 5])), jnp.asarray([3, 4], jnp.int32))
    assert np.asarray(stacked).tolist() == [2**32 + 2, 9]


@pytest.mark.parametrize("m", [1, 2, 3, 7, 50, 65536, 65537, 100_003, 2**20 + 7, 2**31 - 1])
def test_mod_is_pythons(m):
    rng = np.random.default_rng(m)
    values = VALUES[:-1] + [int(x) for x in rng.integers(0, 2**62, 20)]
    got = jax.jit(lambda c: c.mod(m))(WideCount.of(np.asarray(values, np.int64)))
    assert got.dtype == jnp.int32
    assert np.asarray(got).tolist() == [v % m for v in values]


def test_mod_refuses_a_modulus_out_of_range():
    for m in (0, 2**31):
        with pytest.raises(ValueError, match="modulus"):
            WideCount.of(5).mod(m)


def test_total_is_the_exact_sum():
    rng = np.random.default_rng(0)
    for size in (0, 1, 5, counts.GROUP, counts.GROUP + 3, 3 * counts.GROUP + 1):
        values = rng.integers(2**31 - 1000, 2**31, size).astype(np.int32)  # big enough to overflow int32 sums
        assert int(jax.jit(counts.total)(values)) == int(values.astype(np.int64).sum()), size
    assert int(counts.total(jnp.full((4, 3), 2**32 - 1, jnp.uint32))) == 12 * (2**32 - 1)


def test_a_wide_count_round_trips_through_a_checkpoint_and_an_int32_one_is_widened(tmp_path):
    """A state holding wide counts saves and loads; the same state stored with int32 scalars (a
    checkpoint of czjax from before the counts were wide, its games wrapped past 2**31) loads as the wide count."""
    from czjax.util.pytree import pytree_dataclass

    @pytree_dataclass(frozen=True)
    class State:
        key: jax.Array
        step: WideCount
        games: WideCount
        other: jax.Array

    template = State(key=jax.random.key(0), step=WideCount.zeros(), games=WideCount.zeros(), other=jnp.zeros(3))
    state = State(
        key=jax.random.key(3), step=WideCount.of(2**31 + 1), games=WideCount.of(2**33 + 5), other=jnp.arange(3.0)
    )
    checkpoint.save(tmp_path / "new.msgpack", state, {"model": "m"}, {})
    loaded, _ = checkpoint.load(tmp_path / "new.msgpack", template, "m")
    assert int(loaded.step) == 2**31 + 1 and int(loaded.games) == 2**33 + 5
    _, raw = checkpoint.read_meta(tmp_path / "new.msgpack")
    assert checkpoint.stored_count(raw["games"]) == 2**33 + 5

    old = {"key": np.asarray(jax.random.key_data(state.key)), "step": np.int32(12), "other": np.arange(3.0)}
    old["games"] = np.asarray(2**31 + 96, np.int64).astype(np.int32)  # wrapped: negative as int32
    checkpoint._write(tmp_path / "old.msgpack", {"config": {"model": "m"}, "hparams": {}, "extra": {}}, old)
    loaded, _ = checkpoint.load(tmp_path / "old.msgpack", template, "m")
    assert int(loaded.step) == 12 and int(loaded.games) == 2**31 + 96
    assert loaded.step.low.dtype == np.uint32
    _, raw = checkpoint.read_meta(tmp_path / "old.msgpack")
    assert checkpoint.stored_count(raw["step"]) == 12
