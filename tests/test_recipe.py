"""The recipe's knobs that the ablations of docs/strength.md turn: the learning-rate schedule,
the growing replay window and the Gumbel search's prior temperature, each against its formula."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game
from czjax.learn.replay import ReplaySettings
from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import scheduled
from czjax.players.loading import load_agent
from czjax.search.gumbel import Gumbel


def test_cosine_learning_rate_schedule():
    config = TrainConfig(lr_decay_games=1000, lr_final=0.2)
    hp = HParams.create(learning_rate=1e-3)
    for games, expect in [
        (0, 1e-3),
        (500, 1e-3 * 0.6),
        (1000, 2e-4),
        (5000, 2e-4),
        (250, 1e-3 * (0.2 + 0.8 * (1 + math.cos(math.pi / 4)) / 2)),
    ]:
        assert float(scheduled(config, hp, jnp.float32(games)).learning_rate) == pytest.approx(expect, rel=1e-5)
    assert scheduled(TrainConfig(), hp, jnp.float32(10**6)) is hp  # no schedule: unchanged
    with pytest.raises(ValueError, match="lr_final"):
        TrainConfig(lr_decay_games=10, lr_final=1.5)


def test_replay_window_grows_linearly_to_the_capacity():
    settings = ReplaySettings(capacity=10_000, window_start=1_000, window_games=900)
    assert [int(settings.window(jnp.float32(g))) for g in (0, 450, 900, 10**6)] == [1_000, 5_500, 10_000, 10_000]
    assert ReplaySettings(capacity=10).window(jnp.float32(5)) is None
    with pytest.raises(ValueError, match="go together"):
        ReplaySettings(capacity=10, window_start=5)


def test_prior_temperature_divides_the_logits_at_every_node():
    """Gumbel over the shipped network with temperature T equals Gumbel over a network whose
    logits are already divided by T (the same search, the same noise)."""
    agent = load_agent("czjax@3")
    boards = jnp.asarray(np.stack([game.from_moves(m) for m in ("", "44", "4455", "123")]))
    T = 1.7

    def divided(params, b, key):
        out = agent.player(params, b, key)
        return out.replace(logits=out.logits / T) if hasattr(out, "replace") else type(out)(out.logits / T, out.value)

    def searched(search, player):  # compiled: an eager search dispatches every op and cond alone
        return jax.jit(lambda params: search.run(player, params, boards, jax.random.key(0)))(agent.params)

    hot = searched(Gumbel(sims=16, considered=4, prior_temperature=T), agent.player)
    plain = searched(Gumbel(sims=16, considered=4), divided)
    np.testing.assert_array_equal(np.asarray(hot.visits), np.asarray(plain.visits))
    np.testing.assert_allclose(np.asarray(hot.policy), np.asarray(plain.policy), rtol=1e-6, atol=1e-7)
    cold = searched(Gumbel(sims=16, considered=4), agent.player)
    assert not np.allclose(np.asarray(cold.policy), np.asarray(hot.policy))
    with pytest.raises(ValueError, match="prior_temperature"):
        load_agent("gumbel:prior_temperature=0:czjax@3")


def test_evaluation_opponent_by_name():
    """--eval-opponent: the built-in players, or AlphaZero.jl's minimax as the yardstick."""
    from czjax import players
    from czjax.learn.trainer import eval_opponent
    from czjax.players import minimax

    assert eval_opponent("random-punisher") is players.random_punisher
    assert eval_opponent("minimax:depth=3,ties=random") is minimax.Minimax(3, "random").player()
    with pytest.raises(ValueError, match="unknown evaluation opponent"):
        TrainConfig(eval_opponent="alphabeta")
    with pytest.raises(ValueError, match="depth must be 1 to 8"):
        TrainConfig(eval_opponent="minimax:depth=9")


def test_playout_cap_randomization_trains_on_full_searches_only():
    """full_fraction 1: the full search, trained on; 0: the fast search's move and policy, not
    trained on (its policy target is zeros, so it adds no policy loss); in between, a whole call
    is one or the other."""
    from czjax.players.searched import search_player

    agent = load_agent("czjax@3")
    boards = jnp.asarray(np.stack([game.from_moves(m) for m in ("", "44", "4455", "123")]))
    key = jax.random.key(0)
    base = dict(considered=4, move="policy", rescale=False)
    inner = jax.random.split(key)[1]  # the key the capped search hands to the search it runs

    def compiled(search):  # an eager search dispatches every op and cond alone: compile it once
        return jax.jit(lambda params, k: search.run(agent.player, params, boards, k))

    full = compiled(Gumbel(sims=16, **base))(agent.params, inner)
    fast = compiled(Gumbel(sims=4, **base))(agent.params, inner)
    for fraction, expect, trained in ((1.0, full, True), (0.0, fast, False)):
        # as the trainer sees it: the policy target is the search's policy where trained on, else zeros
        pcr = Gumbel(sims=16, fast_sims=4, full_fraction=fraction, **base)
        played = jax.jit(search_player(pcr, agent.player))(agent.params, boards, key)
        np.testing.assert_allclose(np.asarray(played.policy_target), np.asarray(expect.policy) * trained, atol=1e-6)
    half = compiled(Gumbel(sims=16, fast_sims=4, full_fraction=0.5, **base))
    calls = [half(agent.params, jax.random.key(k)) for k in range(40)]
    shares = [bool(out.trained[0]) for out in calls]
    assert all(np.asarray(out.trained).all() == np.asarray(out.trained).any() for out in calls)  # a whole call
    assert 8 <= sum(shares) <= 32  # about half, as drawn
    with pytest.raises(ValueError, match="fast_sims must be below sims"):
        load_agent("gumbel:sims=8,fast_sims=8:czjax@3")
