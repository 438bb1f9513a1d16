"""The update table: one entry per learning algorithm, all of one signature.

An update turns a batch of games into new parameters, inside the compiled training step:

1. :func:`learner_batch`: the learner's (player A's) positions of the trajectory, a static half
   of the plies, with Monte-Carlo returns (and their mirror images if configured);
2. the algorithm's ``targets``: what its loss needs beyond that (A2C's TD targets, PPO's
   starting log-probabilities and advantages), from one forward pass without gradient;
3. the algorithm's ``step``: one AdamW step, or PPO's epochs.

A new algorithm is a new :class:`Algorithm` in :data:`ALGORITHMS`; its loss terms go into
:mod:`czjax.learn.losses`. Gradients are taken only on the positions that happened
(:func:`sparse_value_and_grad`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax

from czjax import game, models, rollout, row_skipping
from czjax.learn.losses import (
    LossInputs,
    a2c_targets,
    discounted_returns,
    imitation_sums,
    metrics_from_sums,
    mirror,
    policy_gradient_sums,
    ppo_sums,
)
from czjax.players import masked_log_probs
from czjax.util import devices
from czjax.util.fields import setting

PPO_KL_STOPS = ("after-step", "before-step")


class UpdateContext(NamedTuple):
    """What every update needs that is fixed for a trainer (static under ``jit``)."""

    model: Any
    optimizer: optax.GradientTransformation
    games: int  # per batch
    mirror: bool
    baseline: bool  # REINFORCE with baseline (the model has a value head and it is wanted)
    num_chunks: int  # of the learner's positions, for the gradient (row_skipping.loss_chunks)
    axis_name: str | None  # the vmapped configuration axis of a scan
    devices: int = 1  # the games and the learner's positions split across this many devices
    both_sides: bool = False  # both players' positions (self-play with the learner's parameters on both sides)
    static: bool = False  # no lax.cond (TrainConfig.control_flow "static"): PPO's epochs after the KL stop run, masked
    settings: Any = None  # the algorithm's own settings (Algorithm.settings: PPOSettings for ppo), or None


def make_optimizer(weight_decay: float) -> optax.GradientTransformation:
    """AdamW without its learning rate, which :func:`apply_step` applies as a traced value:
    ``p <- p - lr * (adam(g) + weight_decay * p)``, as ``torch.optim.AdamW`` does."""
    return optax.chain(optax.scale_by_adam(), optax.add_decayed_weights(weight_decay))


def apply_step(ctx: UpdateContext, params, opt_state, grads, hp):
    with jax.named_scope("optimizer"):
        updates, opt_state = ctx.optimizer.update(grads, opt_state, params)
        return jax.tree.map(lambda p, u: p - hp.learning_rate * u, params, updates), opt_state


def sparse_value_and_grad(
    chunk_loss: Callable, params, boards, batch: LossInputs, num_chunks: int = row_skipping.LOSS_CHUNKS, axis_name=None
):
    """Gradient and summed statistics of a loss that is a sum over positions, computed only
    where positions are valid.

    About half of the learner's static half of the plies did not happen (games end early).
    The valid positions are taken in ``num_chunks`` static chunks and empty chunks skipped
    (:func:`czjax.row_skipping.over_valid_chunks`). The result equals the gradient over the whole
    batch up to float summation order. ``num_chunks=1`` is the plain gradient over the whole
    batch (the loss masks invalid positions itself).
    """
    grad_fn = jax.named_scope("gradient")(jax.value_and_grad(chunk_loss, has_aux=True))
    if num_chunks == 1:
        (_, sums), grads = grad_fn(params, boards, batch)
        return grads, sums

    def chunk_grads(index, chunk):
        (_, sums), grads = grad_fn(params, *chunk)
        return grads, sums

    return row_skipping.over_valid_chunks(
        chunk_grads, (boards, batch), batch.valid, num_chunks, axis_name, accumulate=True
    )


def learner_batch(ctx: UpdateContext, traj: rollout.Trajectory, outcome, discount, value_mix=0.0):
    """``(boards, LossInputs)`` of the learner's positions (player A's static half of the plies,
    flattened ply-major; with ``ctx.both_sides`` player B's half after it, its outcome negated),
    with Monte-Carlo returns; mirrored too if configured. When the trajectory holds the players'
    values (a search's root value), ``value_mix`` of it is mixed into the returns: ``(1 - m) G +
    m Q`` (AlphaZero's variant of the value target)."""
    if ctx.both_sides:
        mine = jax.tree.map(
            lambda a, b: jnp.concatenate([a, b], axis=1),
            rollout.player_plies(traj, ctx.games, player=0),
            rollout.player_plies(traj, ctx.games, player=1),
        )
        outcome = jnp.concatenate([outcome, -outcome])  # (2n,): each side's result
    else:
        mine = rollout.player_plies(traj, ctx.games, player=0)  # (21, n)
    returns = discounted_returns(outcome, mine.valid, discount)
    if mine.values is not None:
        returns = returns + value_mix * (jnp.where(mine.valid, mine.values, 0.0) - returns)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
    positions = jax.tree.map(flat, mine.positions)
    boards = game.unpack(positions)
    batch = LossInputs(
        legal=game.position_legal_mask(positions),
        actions=flat(mine.actions).astype(jnp.int32),
        returns=flat(returns),
        valid=flat(mine.valid),
        policy_targets=None if mine.policy_targets is None else flat(mine.policy_targets),
    )
    boards, batch = mirror(boards, batch) if ctx.mirror else (boards, batch)
    return jax.tree.map(lambda x: devices.split(x, ctx.devices), (boards, batch))


# --- Targets: what each algorithm's loss needs beyond the Monte-Carlo returns ---------------


def monte_carlo_targets(ctx, params, boards, batch, outcome, hp):
    """REINFORCE (with or without baseline) uses the returns as they are."""
    return batch


def starting_policy(ctx, params, boards):
    """``(logits, values)`` of the starting parameters on every position, without gradient."""
    return lax.stop_gradient(models.apply_model(ctx.model, params, boards))


def td_returns(ctx, values, batch, outcome, discount):
    """One-step TD targets ``r + gamma * V(next own position)`` (:func:`a2c_targets`) for the
    learner's positions, each copy of the batch (the mirror half too) with its own values."""
    shape = (2 if ctx.mirror else 1, rollout.PLIES // 2, ctx.games)
    targets = jax.vmap(a2c_targets, in_axes=(0, 0, None, None))(
        values.reshape(shape), batch.valid.reshape(shape), outcome, discount
    )
    return targets.reshape(-1)


def td_targets(ctx, params, boards, batch, outcome, hp):
    """A2C: the TD targets in place of the returns."""
    _, values = starting_policy(ctx, params, boards)
    return batch.replace(returns=td_returns(ctx, values, batch, outcome, hp.discount))


def ppo_targets(ctx, params, boards, batch, outcome, hp):
    """PPO: the starting policy's log-probabilities and the advantage ``G - V``; with
    ``ppo.bootstrap`` the TD target ``y`` takes the place of ``G`` (value target and advantage
    ``y - V``), as the PyTorch project's example 5 runs it (``bootstrap_value=True``)."""
    logits, values = starting_policy(ctx, params, boards)
    if ctx.settings.bootstrap:
        batch = batch.replace(returns=td_returns(ctx, values, batch, outcome, hp.discount))
    return batch.replace(old_log_probs=masked_log_probs(batch.legal, logits), advantages=batch.returns - values)


def search_policy_targets(ctx, params, boards, batch, outcome, hp):
    """AlphaZero: the search's policy as it played (recorded in the trajectory)."""
    return batch


def played_move_targets(ctx, params, boards, batch, outcome, hp):
    """Hard targets: the move the search played, as the PyTorch project's ``alpha.py``."""
    return batch.replace(policy_targets=jax.nn.one_hot(batch.actions, game.COLS, dtype=jnp.float32))


# --- Steps ------------------------------------------------------------------------------------


def gradient_step(ctx: UpdateContext, params, opt_state, boards, batch: LossInputs, hp):
    """One AdamW step on the policy-gradient loss (with the value loss and a baseline when the
    model has a value head; A2C's targets make it A2C)."""

    def chunk_loss(params, chunk_boards, chunk_batch):
        logits, values = models.apply_model(ctx.model, params, chunk_boards)
        return policy_gradient_sums(
            logits, values if ctx.baseline else None, chunk_batch, hp.entropy_bonus, hp.value_weight
        )

    return _one_step(ctx, chunk_loss, params, opt_state, boards, batch, hp)


def imitation_step(ctx: UpdateContext, params, opt_state, boards, batch: LossInputs, hp):
    """One AdamW step towards the search's targets and the outcome (:func:`imitation_sums`)."""

    def chunk_loss(params, chunk_boards, chunk_batch):
        logits, values = models.apply_model(ctx.model, params, chunk_boards)
        return imitation_sums(logits, values, chunk_batch, hp.entropy_bonus, hp.value_weight)

    return _one_step(ctx, chunk_loss, params, opt_state, boards, batch, hp)


def _one_step(ctx: UpdateContext, chunk_loss, params, opt_state, boards, batch: LossInputs, hp):
    grads, sums = sparse_value_and_grad(chunk_loss, params, boards, batch, ctx.num_chunks, axis_name=ctx.axis_name)
    params, opt_state = apply_step(ctx, params, opt_state, grads, hp)
    return params, opt_state, metrics_from_sums(sums)


@dataclasses.dataclass(frozen=True)
class PPOSettings:
    """PPO's settings (``TrainConfig``'s group ``ppo``: ``--ppo-clip`` and the like)."""

    clip: float = setting(0.2, "PPO's clip range of the probability ratio (default 0.2)")
    epochs: int = setting(
        4, "full-batch epochs per batch of games, stopped early by the KL (default 4)", type="positive"
    )
    target_kl: float = setting(
        0.01, "no further epoch once the mean KL from the starting policy exceeds this (default 0.01)"
    )
    kl_stop: str = setting(
        "after-step",
        "after-step (default, as the PyTorch project): the epoch whose KL exceeds --target-kl still "
        "takes its step, then PPO stops; before-step: it stops without that step",
        choices=PPO_KL_STOPS,
    )
    bootstrap: bool = setting(
        False,
        "PPO with A2C's one-step TD target in place of the Monte-Carlo return, as the PyTorch project's "
        "example 5 (bootstrap_value=True; the ex5-ppo preset's default)",
    )

    def __post_init__(self):
        if not self.epochs >= 1 or not self.clip > 0 or not self.target_kl >= 0:
            raise ValueError("ppo epochs must be >= 1, clip > 0 and target_kl >= 0")
        if self.kl_stop not in PPO_KL_STOPS:
            raise ValueError(f"unknown ppo kl_stop {self.kl_stop!r}; choose one of {', '.join(PPO_KL_STOPS)}")


def ppo_step(ctx: UpdateContext, params, opt_state, boards, batch: LossInputs, hp):
    """Up to ``ppo.epochs`` full-batch steps. Each epoch's forward pass gives the gradient and
    the mean KL from the starting policy to the epoch's starting parameters. Once that KL
    exceeds ``ppo.target_kl`` no more steps are taken and the remaining epochs are skipped.
    ``ppo.kl_stop="after-step"`` (the PyTorch project's order: forward, step, then check) still
    takes the step of the epoch whose KL exceeded the target; ``"before-step"`` does not, so it
    stops one step earlier."""
    ppo: PPOSettings = ctx.settings
    step_then_stop = ppo.kl_stop == "after-step"

    def chunk_loss(params, chunk_boards, chunk_batch):
        logits, values = models.apply_model(ctx.model, params, chunk_boards)
        return ppo_sums(logits, values, chunk_batch, ppo.clip, hp.entropy_bonus, hp.value_weight)

    def epoch(carry, index):
        params, opt_state, stopped = carry

        def run(_):
            grads, sums = sparse_value_and_grad(
                chunk_loss, params, boards, batch, ctx.num_chunks, axis_name=ctx.axis_name
            )
            kl = sums["kl"] / jnp.maximum(sums["positions"], 1.0)
            # The first epoch starts at the starting policy, whose KL is 0 (PyTorch reuses the
            # starting forward pass; here it is 0 up to rounding): it never stops.
            exceeded = (index > 0) & (kl > ppo.target_kl)
            # A configuration that has stopped runs here only in a vmapped scan whose other
            # configurations go on: it takes no step.
            take = ~stopped if step_then_stop else ~stopped & ~exceeded
            new_params, new_opt_state = apply_step(ctx, params, opt_state, grads, hp)
            keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(take, a, b), new, old)  # noqa: E731
            return (keep(new_params, params), keep(new_opt_state, opt_state), stopped | exceeded), (
                sums,
                kl,
                ~stopped,
                take,
            )

        def skip(_):
            zeros = jax.eval_shape(run, None)[1]
            return (params, opt_state, stopped), jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), zeros)

        if ctx.static:  # a stopped configuration's step is masked out by ``take`` already
            return run(None)
        return lax.cond(row_skipping.all_configurations(stopped, ctx.axis_name), skip, run, None)

    (params, opt_state, _), (sums, kls, evaluated, stepped) = lax.scan(
        epoch, (params, opt_state, jnp.zeros((), bool)), jnp.arange(ppo.epochs)
    )
    last = evaluated.sum() - 1  # the last epoch whose forward pass ran (epoch 0 always does)
    metrics = metrics_from_sums(jax.tree.map(lambda x: x[0], sums))  # loss terms at the starting policy
    metrics.update(
        ppo_epochs=stepped.sum().astype(jnp.float32),  # steps taken
        ppo_kl=kls[last],
        ppo_clip_fraction=sums["clipped"][last] / jnp.maximum(sums["positions"][last], 1.0),
    )
    return params, opt_state, metrics


@dataclasses.dataclass(frozen=True, kw_only=True)
class Algorithm:
    """An entry of :data:`ALGORITHMS`, given by keyword: what its flag's help says, what it needs
    of the network and of the games, and its update (``targets`` then ``step``)."""

    description: str
    needs_value_head: bool
    targets: Callable  # (ctx, params, boards, batch, outcome, hparams) -> batch
    step: Callable  # (ctx, params, opt_state, boards, batch, hparams) -> (params, opt_state, metrics)
    needs_search: bool = False  # trains on the moves of a search (TrainConfig.search) that plays the games
    records_policy_targets: bool = (
        False  # the rollout keeps the players' policy targets and values (search-based training)
    )
    # The algorithm's own settings: a frozen dataclass declared with :func:`setting`, a group of
    # TrainConfig named after the algorithm (``--NAME-FIELD`` flags, ``"NAME.field"`` overrides,
    # ``{"NAME": {...}}`` in a stored config); the step reads it as ``ctx.settings``.
    settings: type | None = None


ALGORITHMS: dict[str, Algorithm] = {
    "reinforce": Algorithm(
        description="REINFORCE, with baseline when the model has a value head",
        needs_value_head=False,
        targets=monte_carlo_targets,
        step=gradient_step,
    ),
    "a2c": Algorithm(
        description="A2C: one-step TD targets from the value head",
        needs_value_head=True,
        targets=td_targets,
        step=gradient_step,
    ),
    "ppo": Algorithm(
        description="PPO: clipped ratio objective, several epochs, KL stop",
        needs_value_head=True,
        targets=ppo_targets,
        step=ppo_step,
        settings=PPOSettings,
    ),
    "alphazero": Algorithm(
        description="AlphaZero: --search plays; cross-entropy to its policy (visit counts, or Gumbel's improved "
        "policy) and value MSE to the return",
        needs_value_head=True,
        targets=search_policy_targets,
        step=imitation_step,
        needs_search=True,
        records_policy_targets=True,
    ),
    "alphazero-hard": Algorithm(
        description="AlphaZero with hard targets, Connect-Zero's alpha mode (alpha before): --search plays; "
        "cross-entropy to the move it played and value MSE to the return",
        needs_value_head=True,
        targets=played_move_targets,
        step=imitation_step,
        needs_search=True,
        records_policy_targets=True,
    ),
}


def settings_classes() -> dict[str, type]:
    """The settings class of every algorithm that has settings, by the algorithm's name."""
    return {name: a.settings for name, a in ALGORITHMS.items() if a.settings is not None}


def get_algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {', '.join(ALGORITHMS)}") from None


def update(ctx: UpdateContext, algorithm: Algorithm, params, opt_state, traj: rollout.Trajectory, outcome, hp):
    """The learner's update on a batch of games: ``(params, opt_state, per-position metrics)``."""
    with jax.named_scope("targets"):
        boards, batch = training_batch(ctx, algorithm, params, traj, outcome, hp)
    return algorithm.step(ctx, params, opt_state, boards, batch, hp)


def training_batch(ctx: UpdateContext, algorithm: Algorithm, params, traj: rollout.Trajectory, outcome, hp):
    """``(boards, LossInputs)``: the learner's positions of a batch of games with ``algorithm``'s targets."""
    boards, batch = learner_batch(ctx, traj, outcome, hp.discount, hp.value_mix)
    return boards, algorithm.targets(ctx, params, boards, batch, outcome, hp)
