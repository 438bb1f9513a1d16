"""Returns, A2C targets and losses (REINFORCE, with baseline, PPO) against hand-worked games and NumPy references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import players, rollout
from czjax.learn import losses
from czjax.learn.losses import LossInputs, discounted_returns, policy_gradient_loss

GAMMA = 0.9


def test_returns_of_hand_worked_games():
    # Game 0: 7 plies won by the player who started: its moves are plies 0, 2, 4, 6.
    # Game 1: 8 plies lost by the player who started (the other side's 4th move wins): plies 0, 2, 4, 6.
    # Game 2: a 42-ply draw: 21 moves each, all returns 0.
    valid = np.zeros((21, 3), bool)
    valid[:4, 0] = True
    valid[:4, 1] = True
    valid[:, 2] = True
    outcome = jnp.array([1, -1, 0])
    g = np.asarray(discounted_returns(outcome, jnp.asarray(valid), GAMMA))
    np.testing.assert_allclose(g[:4, 0], [GAMMA**3, GAMMA**2, GAMMA, 1.0], rtol=1e-6)
    np.testing.assert_allclose(g[:4, 1], [-(GAMMA**3), -(GAMMA**2), -GAMMA, -1.0], rtol=1e-6)
    assert (g[4:, :2] == 0).all() and (g[:, 2] == 0).all()
    assert g[3, 0] == 1.0  # the winning move gets exactly gamma**0: |G| = 1 marks terminal positions


def test_player_plies_are_the_players_own_moves():
    traj, results = rollout.play_games(
        jax.random.key(3), rollout.Side(players.random_player), rollout.Side(players.random_punisher), 21
    )
    for player in (0, 1):
        mine = rollout.player_plies(traj, 21, player)
        assert mine.actions.shape == (21, 21)
        assert (np.asarray(mine.player)[np.asarray(mine.valid)] == player).all()
        # every ply of that player is in its half: counts agree
        assert np.asarray(mine.valid).sum() == (np.asarray(traj.player)[np.asarray(traj.valid)] == player).sum()


def numpy_reference(logits, values, legal, actions, returns, valid, beta, alpha):
    """The blog's update in NumPy (float64): loss and its gradients w.r.t. logits and values."""
    z = logits.astype(np.float64) + np.where(legal, 0.0, -1e9)
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    p = np.exp(logp)
    ent = -(p * logp).sum(1)
    m = valid.astype(np.float64)
    onehot = np.eye(7)[actions]
    logp_a = (logp * onehot).sum(1)
    if values is None:
        adv = returns
        value_loss, dv = 0.0, None
    else:
        adv = returns - values
        w = np.where(np.abs(returns) == 1.0, 2.0, 1.0)
        value_loss = (m * w * (values - returns) ** 2).sum()
        dv = alpha * 2 * m * w * (values - returns)
    loss = -(m * adv * logp_a).sum() + alpha * value_loss - beta * (m * ent).sum()
    dz = -(m * adv)[:, None] * (onehot - p) + beta * m[:, None] * p * (logp + ent[:, None])
    return loss, dz, dv


def random_batch(seed, n=300):
    rng = np.random.default_rng(seed)
    legal = rng.random((n, 7)) < 0.7
    legal[np.arange(n), rng.integers(0, 7, n)] = True
    legal[:20] = [True, False, False, True, False, False, False]  # full columns
    actions = np.array([rng.choice(np.flatnonzero(row)) for row in legal])
    k = rng.integers(0, 6, n)
    returns = (rng.choice([-1, 0, 1], n) * GAMMA**k).astype(np.float32)
    valid = rng.random(n) < 0.8
    logits = (rng.normal(size=(n, 7)) * 2).astype(np.float32)
    values = np.tanh(rng.normal(size=n)).astype(np.float32)
    return logits, values, legal, actions, returns, valid


@pytest.mark.parametrize("with_baseline", [False, True])
def test_loss_and_gradients_match_numpy(with_baseline):
    logits, values, legal, actions, returns, valid = random_batch(1)
    beta, alpha = 0.05, 0.5
    batch = LossInputs(
        legal=jnp.asarray(legal), actions=jnp.asarray(actions), returns=jnp.asarray(returns), valid=jnp.asarray(valid)
    )

    def loss_fn(lo, v):
        return policy_gradient_loss(lo, v if with_baseline else None, batch, beta, alpha)[0]

    loss, (dz, dv) = jax.jit(jax.value_and_grad(loss_fn, argnums=(0, 1)))(jnp.asarray(logits), jnp.asarray(values))
    ref_loss, ref_dz, ref_dv = numpy_reference(
        logits, values if with_baseline else None, legal, actions, returns, valid, beta, alpha
    )
    np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(dz), ref_dz, rtol=1e-4, atol=1e-5)
    if with_baseline:
        np.testing.assert_allclose(np.asarray(dv), ref_dv, rtol=1e-5, atol=1e-6)
    else:
        assert not np.asarray(dv).any()  # no value head used: no value gradient


def test_loss_metrics_are_per_position_and_finite():
    logits, values, legal, actions, returns, valid = random_batch(2)
    batch = LossInputs(
        legal=jnp.asarray(legal), actions=jnp.asarray(actions), returns=jnp.asarray(returns), valid=jnp.asarray(valid)
    )
    loss, m = jax.jit(lambda lo, v: policy_gradient_loss(lo, v, batch, 0.05, 0.5))(
        jnp.asarray(logits), jnp.asarray(values)
    )
    n = valid.sum()
    assert int(m["positions"]) == n
    np.testing.assert_allclose(float(m["returns_std"]), returns[valid].std(), rtol=1e-5)
    np.testing.assert_allclose(float(m["advantage_std"]), (returns - values)[valid].std(), rtol=1e-5)
    assert np.isfinite([float(v) for v in m.values()]).all()
    np.testing.assert_allclose(float(m["loss"]) * n, float(loss), rtol=1e-5)


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
    got = np.asarray(
        jax.jit(losses.a2c_targets, static_argnums=3)(
            jnp.asarray(values), jnp.asarray(valid), jnp.asarray(outcome), GAMMA
        )
    )
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
        legal=jnp.asarray(legal),
        actions=jnp.asarray(actions),
        returns=jnp.asarray(returns),
        valid=jnp.asarray(valid),
        old_log_probs=jnp.asarray(old_log_probs),
        advantages=jnp.asarray(advantages),
    )
    loss, sums = jax.jit(lambda lo, v: losses.ppo_sums(lo, v, batch, clip, beta, vw))(
        jnp.asarray(logits), jnp.asarray(values)
    )

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


def test_imitation_loss_matches_numpy():
    """Search-based training: cross-entropy to given targets, plain squared value error, the
    entropy bonus; the targets' entropy and where their favourite is not the network's."""
    rng = np.random.default_rng(2)
    n, beta, vw = 48, 0.05, 1.5
    legal = rng.random((n, 7)) < 0.8
    legal[np.arange(n), rng.integers(0, 7, n)] = True
    logits = rng.normal(size=(n, 7)).astype(np.float32)
    raw = np.where(legal, rng.random((n, 7)), 0.0)
    raw[: n // 2] = np.where(
        raw[: n // 2] == raw[: n // 2].max(1, keepdims=True), 1.0, 0.0
    )  # half one-hot (hard targets)
    targets = (raw / raw.sum(1, keepdims=True)).astype(np.float32)
    returns = rng.choice([-1.0, 1.0, 0.0], size=n).astype(np.float32)
    values = rng.uniform(-1, 1, n).astype(np.float32)
    valid = rng.random(n) < 0.85
    batch = losses.LossInputs(
        legal=jnp.asarray(legal),
        actions=jnp.zeros(n, jnp.int32),
        returns=jnp.asarray(returns),
        valid=jnp.asarray(valid),
        policy_targets=jnp.asarray(targets),
    )
    loss, sums = jax.jit(lambda lo, v: losses.imitation_sums(lo, v, batch, beta, vw))(
        jnp.asarray(logits), jnp.asarray(values)
    )
    log_p = numpy_log_softmax(logits.astype(np.float64), legal)
    entropy = -(np.exp(log_p) * log_p).sum(-1)
    want = (
        -(targets * np.where(legal, log_p, 0.0)).sum(-1)[valid].sum()
        + vw * ((values - returns) ** 2)[valid].sum()
        - beta * entropy[valid].sum()
    )
    assert float(loss) == pytest.approx(want, rel=1e-4)
    t = targets.astype(np.float64)
    target_entropy = -(t * np.log(np.where(t > 0, t, 1.0))).sum(-1)
    assert float(sums["target_entropy"]) == pytest.approx(target_entropy[valid].sum(), rel=1e-4)
    assert float(sums["disagree"]) == (valid & (targets.argmax(1) != np.where(legal, logits, -np.inf).argmax(1))).sum()
    metrics = losses.metrics_from_sums(sums)
    assert float(metrics["target_entropy"]) == pytest.approx(target_entropy[valid].mean(), rel=1e-4)


def test_mirror_flips_policy_targets():
    targets = jnp.asarray(np.eye(7, dtype=np.float32)[[0, 2, 6]])
    batch = losses.LossInputs(
        legal=jnp.ones((3, 7), bool),
        actions=jnp.asarray([0, 2, 6]),
        returns=jnp.zeros(3),
        valid=jnp.ones(3, bool),
        policy_targets=targets,
    )
    _, out = losses.mirror(jnp.zeros((3, 6, 7), jnp.int8), batch)
    np.testing.assert_array_equal(np.asarray(out.policy_targets[3:]).argmax(1), [6, 4, 0])
