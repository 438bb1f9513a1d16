"""Policy-gradient losses as masked sums over a batch of positions (docs/DESIGN.md, the blog posts).

Conventions:
- Returns are Monte Carlo, per game and per player: ``G = outcome * gamma**k`` where ``k``
  counts the player's own moves still to come after this one (its last move gets
  ``gamma**0``), and ``outcome`` is +1 win, 0 draw, -1 loss for that player.
- Losses are sums over positions (PyTorch's ``reduction='sum'``); the metrics are per position.
- REINFORCE: ``-sum(G * log p(a)) - entropy_bonus * sum(H)``.
- REINFORCE with baseline: advantage ``stop_gradient(G - v)`` in place of ``G``, plus
  ``value_weight * sum(w * (v - G)**2)`` with ``w = 2`` where ``|G| = 1`` (terminal positions
  of won or lost games), else 1.
- A model without a value head always trains with plain REINFORCE.
- A2C: one-step TD targets ``y = r + gamma * V(next own position)`` with the sparse reward
  (the outcome on the player's last move, where nothing is bootstrapped), used in place of
  ``G`` in REINFORCE with baseline (:func:`a2c_targets`).
- PPO: ``-sum(min(rho * A, clip(rho, 1 - eps, 1 + eps) * A))`` with ``rho = p(a) / p_old(a)``
  and ``A = G - V_old``, plus the value and entropy terms above (:func:`ppo_sums`); the KL
  divergence from the starting policy is summed alongside for the early stop.
- Mirror augmentation (:func:`mirror`) adds every position flipped left-right.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from czjax.players import masked_log_probs
from czjax.util.pytree import pytree_dataclass


def discounted_returns(outcome: jax.Array, valid: jax.Array, gamma) -> jax.Array:
    """Returns ``(T, B)`` for one player's own moves.

    ``outcome (B,)`` is the game's result for that player; ``valid (T, B)`` marks the player's
    moves, which must be a prefix along ``T`` (as the rollout's static halves are). Zero where
    not valid.
    """
    num_moves = valid.sum(0)
    moves_after = num_moves[None, :] - 1 - jnp.arange(valid.shape[0])[:, None]
    powers = jnp.asarray(gamma, jnp.float32) ** jnp.maximum(moves_after, 0).astype(jnp.float32)
    return jnp.where(valid, outcome[None, :].astype(jnp.float32) * powers, 0.0)


@pytree_dataclass(frozen=True)
class LossInputs:
    """Flat positions of the learner: ``legal (N, 7)``, ``actions (N,)``, ``returns (N,)``,
    ``valid (N,)`` (positions that did not happen are masked out of every sum)."""

    legal: chex.Array
    actions: chex.Array
    returns: chex.Array
    valid: chex.Array
    old_log_probs: chex.Array | None = None  # PPO: (N, 7) log-probabilities of the starting policy
    advantages: chex.Array | None = None  # PPO: (N,) G - V_old
    policy_targets: chex.Array | None = None  # search-based training: (N, 7) the distribution to learn


def a2c_targets(values: jax.Array, valid: jax.Array, outcome: jax.Array, gamma) -> jax.Array:
    """One-step TD targets ``(T, B)`` for one player's own moves.

    ``values (T, B)``: the value of each of the player's positions (from its view);
    ``valid (T, B)``: its moves, a prefix along ``T``; ``outcome (B,)``: the game's result for
    it. The reward is sparse: ``outcome`` on its last move, where the target stops (nothing
    follows a terminal move); earlier moves get ``gamma * V(next own position)``. Zero where not
    valid. Values are used as given: callers pass them without gradient.
    """
    is_last = valid & ~jnp.concatenate([valid[1:], jnp.zeros_like(valid[:1])], axis=0)
    next_values = jnp.concatenate([values[1:], jnp.zeros_like(values[:1])], axis=0)
    bootstrapped = jnp.asarray(gamma, jnp.float32) * next_values
    targets = jnp.where(is_last, outcome[None, :].astype(jnp.float32), bootstrapped)
    return jnp.where(valid, targets, 0.0)


def mirror(boards: jax.Array, batch: LossInputs) -> tuple[jax.Array, LossInputs]:
    """The batch followed by its left-right mirror: boards ``(N, 6, 7)`` -> ``(2N, 6, 7)``,
    columns ``a -> 6 - a``; returns, validity and advantages unchanged."""
    flip_cols = lambda x: x[..., ::-1]  # noqa: E731
    cat = lambda a, b: None if a is None else jnp.concatenate([a, b])  # noqa: E731
    return jnp.concatenate([boards, flip_cols(boards)]), LossInputs(
        legal=cat(batch.legal, flip_cols(batch.legal)),
        actions=cat(batch.actions, (boards.shape[-1] - 1 - batch.actions).astype(batch.actions.dtype)),
        returns=cat(batch.returns, batch.returns),
        valid=cat(batch.valid, batch.valid),
        old_log_probs=cat(batch.old_log_probs, None if batch.old_log_probs is None else flip_cols(batch.old_log_probs)),
        advantages=cat(batch.advantages, batch.advantages),
        policy_targets=cat(
            batch.policy_targets, None if batch.policy_targets is None else flip_cols(batch.policy_targets)
        ),
    )


def _value_loss(mask, values, returns):
    """``sum(w (v - G)^2)`` with ``w = 2`` where ``|G| = 1`` (terminal positions of decided games)."""
    weight = jnp.where(jnp.abs(returns) == 1.0, 2.0, 1.0)
    return (mask * weight * (values - returns) ** 2).sum()


def _loss_and_sums(mask, policy_loss, value_loss, entropy, returns, advantage, entropy_bonus, value_weight):
    """The total loss and the additive statistics that every policy-gradient loss reports."""
    entropy_sum = (mask * entropy).sum()
    loss = policy_loss + value_weight * value_loss - entropy_bonus * entropy_sum
    advantage = jax.lax.stop_gradient(advantage)
    return loss, {
        "loss": loss,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy_sum,
        "positions": mask.sum(),
        "returns": (mask * returns).sum(),
        "returns_sq": (mask * returns**2).sum(),
        "advantage": (mask * advantage).sum(),
        "advantage_sq": (mask * advantage**2).sum(),
    }


def ppo_sums(logits, values, batch: LossInputs, clip, entropy_bonus, value_weight):
    """PPO's clipped objective with value and entropy terms: ``(loss, sums)``, ``sums`` as in
    :func:`policy_gradient_sums` plus ``kl`` (the summed KL divergence from the starting policy
    ``batch.old_log_probs`` to the current one) and ``clipped`` (positions whose ratio was
    clipped)."""
    mask = batch.valid.astype(jnp.float32)
    log_p = masked_log_probs(batch.legal, logits)
    entropy = -(jnp.exp(log_p) * log_p).sum(-1)
    take = lambda lp: jnp.take_along_axis(lp, batch.actions[:, None].astype(jnp.int32), axis=-1)[:, 0]  # noqa: E731
    old_log_probs, advantage = batch.old_log_probs, batch.advantages
    assert old_log_probs is not None and advantage is not None, "PPO's targets (algorithms.ppo_targets) give these"
    ratio = jnp.exp(take(log_p) - take(old_log_probs))
    clipped_ratio = jnp.clip(ratio, 1.0 - clip, 1.0 + clip)
    surrogate = jnp.minimum(ratio * advantage, clipped_ratio * advantage)
    policy_loss = -(mask * surrogate).sum()
    value_loss = _value_loss(mask, values, batch.returns)
    loss, sums = _loss_and_sums(
        mask, policy_loss, value_loss, entropy, batch.returns, advantage, entropy_bonus, value_weight
    )
    p_old = jnp.exp(old_log_probs)
    kl = (p_old * (old_log_probs - log_p)).sum(-1)
    sums["kl"] = jax.lax.stop_gradient((mask * kl).sum())
    sums["clipped"] = jax.lax.stop_gradient((mask * (ratio != clipped_ratio)).sum())
    return loss, sums


def policy_gradient_sums(logits, values, batch: LossInputs, entropy_bonus, value_weight):
    """REINFORCE (``values is None``) or REINFORCE with baseline: ``(loss, sums)``.

    ``sums`` holds additive statistics (so chunks of a batch can be combined exactly):
    the loss terms, the number of positions, and first and second moments of returns and
    advantages.
    """
    mask = batch.valid.astype(jnp.float32)
    log_p = masked_log_probs(batch.legal, logits)
    entropy = -(jnp.exp(log_p) * log_p).sum(-1)
    log_p_taken = jnp.take_along_axis(log_p, batch.actions[:, None].astype(jnp.int32), axis=-1)[:, 0]
    returns = batch.returns
    if values is None:
        advantage = returns
        value_loss = jnp.zeros((), jnp.float32)
    else:
        advantage = jax.lax.stop_gradient(returns - values)
        value_loss = _value_loss(mask, values, returns)
    policy_loss = -(mask * advantage * log_p_taken).sum()
    loss, sums = _loss_and_sums(mask, policy_loss, value_loss, entropy, returns, advantage, entropy_bonus, value_weight)
    return loss, sums


def imitation_sums(logits, values, batch: LossInputs, entropy_bonus, value_weight):
    """Search-based training (AlphaZero, Connect-Zero's alpha mode): cross-entropy from
    ``batch.policy_targets`` to the policy, ``value_weight`` times the squared error of the
    value to the return, minus the entropy bonus: ``(loss, sums)``. ``sums`` as in
    :func:`policy_gradient_sums` (the advantage being ``G - v``), plus ``target_entropy`` (the
    targets' entropy) and ``disagree`` (positions where the target's favourite column is not the
    network's)."""
    mask = batch.valid.astype(jnp.float32)
    log_p = masked_log_probs(batch.legal, logits)
    entropy = -(jnp.exp(log_p) * log_p).sum(-1)
    targets = batch.policy_targets
    assert targets is not None, "search-based training records the search's policy targets"
    policy_loss = -(mask * (targets * log_p).sum(-1)).sum()
    value_loss = (mask * (values - batch.returns) ** 2).sum()
    loss, sums = _loss_and_sums(
        mask, policy_loss, value_loss, entropy, batch.returns, batch.returns - values, entropy_bonus, value_weight
    )
    target_entropy = -(targets * jnp.log(jnp.where(targets > 0, targets, 1.0))).sum(-1)
    sums["target_entropy"] = (mask * target_entropy).sum()
    sums["disagree"] = jax.lax.stop_gradient((mask * (jnp.argmax(targets, -1) != jnp.argmax(log_p, -1))).sum())
    return loss, sums


def metrics_from_sums(sums: dict) -> dict:
    """Per-position metrics (they do not change with the batch size) from additive sums."""
    n = jnp.maximum(sums["positions"], 1.0)

    def std(key):
        mean = sums[key] / n
        return jnp.sqrt(jnp.maximum(sums[key + "_sq"] / n - mean**2, 0.0))

    searched = {k: sums[k] / n for k in ("target_entropy", "disagree") if k in sums}  # search-based training
    return searched | {
        "loss": sums["loss"] / n,
        "policy_loss": sums["policy_loss"] / n,
        "value_loss": sums["value_loss"] / n,
        "entropy": sums["entropy"] / n,
        "returns_std": std("returns"),
        "advantage_std": std("advantage"),
        "positions": sums["positions"],
    }


def policy_gradient_loss(logits, values, batch: LossInputs, entropy_bonus, value_weight):
    """``(loss, per-position metrics)``; see :func:`policy_gradient_sums`."""
    loss, sums = policy_gradient_sums(logits, values, batch, entropy_bonus, value_weight)
    return loss, metrics_from_sums(sums)
