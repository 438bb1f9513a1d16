"""A2C, PPO, mirror augmentation and opponent pools, against NumPy references and scripts."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, losses, players, rollout
from czjax.train import HParams, PoolState, TrainConfig, league_ready, make_trainer, opponent_weights, update_pool, update_win_rate
from tests.reference import replay

GAMMA = 0.9


def random_prefix_masks(rng, t, b):
    """Valid masks that are prefixes along T, lengths 0..T (both ends included)."""
    lengths = rng.integers(0, t + 1, size=b)
    lengths[:2] = (0, t)
    return np.arange(t)[:, None] < lengths[None, :], lengths


def test_a2c_targets_match_numpy():
    rng = np.random.default_rng(0)
    t, b = 21, 40
    valid, lengths = random_prefix_masks(rng, t, b)
    values = rng.uniform(-1, 1, (t, b)).astype(np.float32)
    outcome = rng.integers(-1, 2, size=b).astype(np.int8)  # wins, draws and losses
    got = np.asarray(losses.a2c_targets(jnp.asarray(values), jnp.asarray(valid), jnp.asarray(outcome), GAMMA))
    want = np.zeros((t, b), np.float32)
    for g in range(b):
        for k in range(lengths[g]):
            # the last own move gets the sparse reward and nothing after it; earlier ones bootstrap
            want[k, g] = outcome[g] if k == lengths[g] - 1 else GAMMA * values[k + 1, g]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def numpy_log_softmax(logits, legal):
    masked = logits + np.where(legal, 0.0, -1e9)
    masked = masked - masked.max(-1, keepdims=True)
    return masked - np.log(np.exp(masked).sum(-1, keepdims=True))


def test_ppo_objective_matches_numpy():
    rng = np.random.default_rng(1)
    n, clip, beta, vw = 64, 0.2, 0.05, 1.5
    legal = rng.random((n, 7)) < 0.8
    legal[np.arange(n), rng.integers(0, 7, n)] = True
    legal[0] = True
    logits = rng.normal(size=(n, 7)).astype(np.float32)
    old_log_probs = numpy_log_softmax(rng.normal(size=(n, 7)), legal).astype(np.float32)
    actions = np.array([rng.choice(np.flatnonzero(row)) for row in legal])
    returns = rng.choice([-1.0, 1.0, 0.0, 0.81, -0.9], size=n).astype(np.float32)  # terminal |G| = 1 included
    values = rng.uniform(-1, 1, n).astype(np.float32)
    advantages = (returns - rng.uniform(-1, 1, n)).astype(np.float32)
    valid = rng.random(n) < 0.85
    batch = losses.LossInputs(
        legal=jnp.asarray(legal), actions=jnp.asarray(actions), returns=jnp.asarray(returns), valid=jnp.asarray(valid),
        old_log_probs=jnp.asarray(old_log_probs), advantages=jnp.asarray(advantages),
    )
    loss, sums = losses.ppo_sums(jnp.asarray(logits), jnp.asarray(values), batch, clip, beta, vw)

    log_p = numpy_log_softmax(logits.astype(np.float64), legal)
    ratio = np.exp(log_p[np.arange(n), actions] - old_log_probs[np.arange(n), actions])
    surrogate = np.minimum(ratio * advantages, np.clip(ratio, 1 - clip, 1 + clip) * advantages)
    entropy = -(np.exp(log_p) * log_p).sum(-1)
    weight = np.where(np.abs(returns) == 1, 2.0, 1.0)
    value_loss = (weight * (values - returns) ** 2)[valid].sum()
    want = -surrogate[valid].sum() + vw * value_loss - beta * entropy[valid].sum()
    kl = (np.exp(old_log_probs) * (old_log_probs - log_p)).sum(-1)[valid].sum()
    assert float(loss) == pytest.approx(want, rel=1e-4)
    assert float(sums["kl"]) == pytest.approx(kl, rel=1e-4)
    assert float(sums["clipped"]) == ((np.abs(ratio - 1) > clip) & valid).sum()
    # at the starting policy every ratio is 1: the surrogate is the advantage and KL is 0
    start = batch.replace(old_log_probs=jnp.asarray(log_p, jnp.float32))
    loss0, sums0 = losses.ppo_sums(jnp.asarray(logits), jnp.asarray(values), start, clip, 0.0, 0.0)
    assert float(loss0) == pytest.approx(-advantages[valid].sum(), rel=1e-4)
    assert abs(float(sums0["kl"])) < 1e-4


@pytest.fixture(scope="module")
def ppo_games():
    config = TrainConfig(model="mlp3", games_per_batch=8, opponent="random-punisher", algorithm="ppo", eval_games=2)
    trainer = make_trainer(config)
    state = trainer.init(0)
    traj, results = rollout.play_games(jax.random.key(4), trainer.learner, state.params, players.random_punisher, None, 8)
    return config, state, traj, results


def ppo_update(config, state, traj, results, lr, **changes):
    trainer = make_trainer(dataclasses.replace(config, **changes))
    hp = HParams.create(learning_rate=lr, entropy_bonus=0.05, value_weight=1.5, discount=GAMMA)
    return jax.device_get(trainer.update(state.params, state.opt_state, traj, results.outcome, hp))


def same_update(a, b):
    """Whether two ``(params, opt_state, metrics)`` updates have exactly the same parameters and
    optimizer state."""
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a[:2]), jax.tree.leaves(b[:2])))


def test_ppo_kl_early_stop(ppo_games):
    """The first epoch measures KL 0 and never stops; epoch 1 measures a KL above 0. As in the
    PyTorch project, the epoch whose KL exceeds the target still takes its step, then PPO stops:
    target 0 gives exactly two epochs. ``ppo_kl_stop="before-step"`` skips that step: one epoch."""
    config, state, traj, results = ppo_games
    no_stop = dict(target_kl=1e9)
    one = ppo_update(config, state, traj, results, 1e-3, ppo_epochs=1, **no_stop)
    two = ppo_update(config, state, traj, results, 1e-3, ppo_epochs=2, **no_stop)
    full = ppo_update(config, state, traj, results, 1e-3, **no_stop)
    assert full[2]["ppo_epochs"] == 4 and two[2]["ppo_epochs"] == 2 and not same_update(two, full)
    stopped = ppo_update(config, state, traj, results, 1e-3, target_kl=0.0)  # any change exceeds KL 0
    assert stopped[2]["ppo_epochs"] == 2 and same_update(stopped, two)
    assert stopped[2]["ppo_kl"] == two[2]["ppo_kl"] > 0.0  # epoch 1's KL, after one step
    before = ppo_update(config, state, traj, results, 1e-3, target_kl=0.0, ppo_kl_stop="before-step")
    assert before[2]["ppo_epochs"] == 1 and same_update(before, one)
    assert before[2]["ppo_kl"] == stopped[2]["ppo_kl"]  # the same measurement stopped it
    # the loss metrics are the starting policy's in every case
    assert stopped[2]["loss"] == pytest.approx(full[2]["loss"]) == pytest.approx(before[2]["loss"])
    with pytest.raises(ValueError, match="ppo_kl_stop"):
        dataclasses.replace(config, ppo_kl_stop="never")


def test_ppo_kl_stop_in_a_vmapped_scan(ppo_games):
    """In a scan, configurations that stop at different epochs each get their own update: the
    epochs run while any configuration still steps, and a stopped one takes no further step."""
    config, state, traj, results = ppo_games
    config = dataclasses.replace(config, target_kl=1e-6)
    trainer = make_trainer(config, axis_name="config")
    # lr 0 never moves the policy (KL 0: all 4 epochs); lr 1e-3 stops after epoch 1's step
    hps = [HParams.create(learning_rate=lr, entropy_bonus=0.05, value_weight=1.5, discount=GAMMA) for lr in (1e-3, 0.0)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *hps)
    vmapped = jax.vmap(trainer.update, in_axes=(None, None, None, None, 0), axis_name="config")
    got = jax.device_get(vmapped(state.params, state.opt_state, traj, results.outcome, stacked))
    for i, lr in enumerate((1e-3, 0.0)):
        alone = ppo_update(config, state, traj, results, lr, target_kl=1e-6)
        params, opt_state, metrics = jax.tree.map(lambda x: x[i], got)
        assert metrics["ppo_epochs"] == alone[2]["ppo_epochs"] == (2 if lr else 4)
        assert int(opt_state[0].count) == int(alone[1][0].count) == (2 if lr else 4)  # Adam's steps
        assert metrics["ppo_kl"] == pytest.approx(alone[2]["ppo_kl"], rel=1e-4, abs=1e-9)
        # batched and alone sum in different orders: all but 0.1% of the entries agree to 1% of
        # a step (an entry whose gradient is float noise may step either way)
        differences = np.concatenate([np.abs(a - b).ravel() for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(alone[0]))])
        assert (differences > 0.01 * lr).mean() <= 1e-3 and differences.max() <= 2 * 2 * lr
        if not lr:  # and lr 0 left the parameters exactly as they were
            assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(state.params)))


def test_mirror_is_the_mirrored_game():
    moves = [3, 3, 4, 2, 0, 6, 6, 5, 1]  # a hand-built game, columns 0-based
    mirrored_moves = [6 - c for c in moves]
    boards = np.stack([np.array(replay(moves[:t]).canonical(), np.int8) for t in range(len(moves))])
    mirror_boards = np.stack([np.array(replay(mirrored_moves[:t]).canonical(), np.int8) for t in range(len(moves))])
    legal = boards[:, 0, :] == 0
    batch = losses.LossInputs(
        legal=jnp.asarray(legal), actions=jnp.asarray(moves, jnp.int32), returns=jnp.linspace(-1, 1, len(moves)),
        valid=jnp.asarray(np.arange(len(moves)) < 7),
    )
    out_boards, out = losses.mirror(jnp.asarray(boards), batch)
    n = len(moves)
    np.testing.assert_array_equal(np.asarray(out_boards[:n]), boards)
    np.testing.assert_array_equal(np.asarray(out_boards[n:]), mirror_boards)
    np.testing.assert_array_equal(np.asarray(out.actions[n:]), mirrored_moves)
    np.testing.assert_array_equal(np.asarray(out.legal[n:]), mirror_boards[:, 0, :] == 0)
    np.testing.assert_array_equal(np.asarray(out.returns[n:]), np.asarray(batch.returns))
    np.testing.assert_array_equal(np.asarray(out.valid[n:]), np.asarray(batch.valid))
    # the rules agree: the mirrored move is legal exactly when the move is
    assert all(game.legal_mask(jnp.asarray(mirror_boards))[np.arange(n), mirrored_moves])


def test_mirror_doubles_the_training_positions():
    config = TrainConfig(model="mlp3", games_per_batch=4, opponent="random-punisher", algorithm="a2c", mirror=True, eval_games=2)
    trainer = make_trainer(config)
    state = trainer.init(0)
    plain = make_trainer(dataclasses.replace(config, mirror=False))
    hp = HParams.create(learning_rate=1e-3, value_weight=1.5)
    _, with_mirror = trainer.train_step(state, hp, jax.random.key(1))
    _, without = plain.train_step(state, hp, jax.random.key(1))  # same key: the same games
    assert float(with_mirror["positions"]) == 2 * float(without["positions"])


# --------------------------------------------------------------------------------------------
# Opponent pools and leagues


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
        member_params=(None, None), win_rate=jnp.full((members + slots,), 0.5), league_params={"w": jnp.zeros((slots, 3))},
        league_active=jnp.zeros((slots,), bool), league_next=jnp.zeros((), jnp.int32),
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
    from czjax import loop

    config = TrainConfig(
        model="mlp", games_per_batch=8, opponent="pool", pool=("random", "random-punisher", str(model_checkpoints["mlp"])),
        league=True, league_slots=2, eval_games=2, batches_per_chunk=4,
    )
    hp = HParams.create(learning_rate=1e-3, value_weight=0.0)
    loop.run(config, hp, tmp_path / "a", seed=0, batches=4, log=lambda m: None)
    resumed = loop.run(config, hp, tmp_path / "a", seed=0, batches=8, resume=True, log=lambda m: None)
    straight = loop.run(config, hp, tmp_path / "b", seed=0, batches=8, log=lambda m: None)
    assert loop.deterministic(resumed["last"]) == loop.deterministic(straight["last"])
    assert "pool_min_win_rate" in straight["last"] and "league_size" in straight["last"]
    with pytest.raises(ValueError, match="needs a list of pool members"):
        TrainConfig(opponent="pool")
    with pytest.raises(ValueError, match="value head"):
        TrainConfig(model="mlp", algorithm="ppo")
