"""Policy-gradient losses as masked sums over a batch of positions (DESIGN.md, the blog posts).

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
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from czjax.players import masked_log_probs


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


@chex.dataclass(frozen=True)
class LossInputs:
    """Flat positions of the learner: ``legal (N, 7)``, ``actions (N,)``, ``returns (N,)``,
    ``valid (N,)`` (positions that did not happen are masked out of every sum)."""

    legal: chex.Array
    actions: chex.Array
    returns: chex.Array
    valid: chex.Array


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
        weight = jnp.where(jnp.abs(returns) == 1.0, 2.0, 1.0)
        value_loss = (mask * weight * (values - returns) ** 2).sum()
    policy_loss = -(mask * advantage * log_p_taken).sum()
    entropy_sum = (mask * entropy).sum()
    loss = policy_loss + value_weight * value_loss - entropy_bonus * entropy_sum
    sums = {
        "loss": loss,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy_sum,
        "positions": mask.sum(),
        "returns": (mask * returns).sum(),
        "returns_sq": (mask * returns**2).sum(),
        "advantage": jax.lax.stop_gradient((mask * advantage).sum()),
        "advantage_sq": jax.lax.stop_gradient((mask * advantage**2).sum()),
    }
    return loss, sums


def metrics_from_sums(sums: dict) -> dict:
    """Per-position metrics (they do not change with the batch size) from additive sums."""
    n = jnp.maximum(sums["positions"], 1.0)

    def std(key):
        mean = sums[key] / n
        return jnp.sqrt(jnp.maximum(sums[key + "_sq"] / n - mean**2, 0.0))

    return {
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
