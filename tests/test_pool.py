"""Opponent pools and the league: weights, the win-rate average, learner copies, a pool run that resumes."""

import jax.numpy as jnp
import numpy as np
import pytest

from czjax.jobs import loop
from czjax.learn.pool import PoolSettings, PoolState, league_ready, opponent_weights, update_pool, update_win_rate
from czjax.learn.settings import HParams, TrainConfig


def test_opponent_weights_and_win_rate_ema():
    win_rate = jnp.array([0.0, 0.5, 0.97, 1.0, 0.3])
    available = jnp.array([True, True, True, True, False])
    np.testing.assert_allclose(opponent_weights(win_rate, available), [1.0, 0.5, 0.05, 0.05, 0.0], atol=1e-6)
    rates = jnp.full((3,), 0.5)
    for batch_rate in (1.0, 1.0, 0.0):
        rates = update_win_rate(rates, 1, batch_rate, 0.1)
    expected = ((0.5 * 0.9 + 0.1) * 0.9 + 0.1) * 0.9
    np.testing.assert_allclose(rates, [0.5, expected, 0.5], atol=1e-6)


def test_league_adds_the_learner_when_it_beats_every_member():
    members, slots, ema, threshold = 2, 2, 0.5, 0.6
    pool = PoolState(
        member_params=(None, None),
        win_rate=jnp.full((members + slots,), 0.5),
        league_params={"w": jnp.zeros((slots, 3))},
        league_active=jnp.zeros((slots,), bool),
        league_next=jnp.zeros((), jnp.int32),
    )
    params = lambda v: {"w": jnp.full((3,), float(v))}  # noqa: E731
    script = [  # (member played, batch win rate, learner params id, a copy joins after it)
        (0, 1.0, 1, False),  # member 0: 0.75; member 1 still 0.5
        (1, 0.6, 2, False),  # member 1: 0.55, not above 0.6
        (1, 1.0, 3, True),  # member 1: 0.775; both above 0.6: copy 3 joins slot 0 at 0.5
        (0, 0.0, 4, False),  # member 0: 0.375 (and slot 0 is at 0.5)
        (2, 1.0, 5, False),  # slot 0: 0.75, member 0 still 0.375
        (0, 1.0, 6, True),  # member 0: 0.6875: everyone above 0.6 -> copy 6 joins slot 1
        (3, 0.6, 7, False),  # slot 1: 0.55
        (3, 1.0, 8, True),  # slot 1: 0.775 -> copy 8 replaces the oldest copy (slot 0)
    ]
    added_ids = []
    for chosen, rate, pid, expect_add in script:
        pool, added = update_pool(pool, params(pid), chosen, rate, members, ema, threshold)
        assert bool(added) == expect_add, (chosen, rate, pool.win_rate)
        if added:
            added_ids.append(pid)
    assert added_ids == [3, 6, 8]
    np.testing.assert_array_equal(pool.league_params["w"][:, 0], [8.0, 6.0])
    assert pool.league_active.tolist() == [True, True] and int(pool.league_next) == 1
    np.testing.assert_allclose(pool.win_rate, [0.6875, 0.775, 0.5, 0.775], atol=1e-6)
    assert league_ready(jnp.array([0.7, 0.1]), jnp.array([True, False]), 0.6)


def test_pool_training_draws_opponents_and_resumes(model_checkpoints, tmp_path):

    config = TrainConfig(
        model="mlp",
        games_per_batch=8,
        opponent="pool",
        eval_games=2,
        batches_per_chunk=4,
        pool=PoolSettings(
            members=("random", "random-punisher", str(model_checkpoints["mlp"])), league=True, league_slots=2
        ),
    )
    hp = HParams.create(learning_rate=1e-3, value_weight=0.0)
    loop.run_training(config, hp, tmp_path / "a", seed=0, batches=4, log=lambda m: None)
    resumed = loop.run_training(config, hp, tmp_path / "a", seed=0, batches=8, resume=True, log=lambda m: None)
    straight = loop.run_training(config, hp, tmp_path / "b", seed=0, batches=8, log=lambda m: None)
    assert loop.deterministic(resumed["last"]) == loop.deterministic(straight["last"])
    assert "pool_min_win_rate" in straight["last"] and "league_size" in straight["last"]
    with pytest.raises(ValueError, match="needs a list of pool members"):
        TrainConfig(opponent="pool")
    with pytest.raises(ValueError, match="value head"):
        TrainConfig(model="mlp", algorithm="ppo")
