"""The compiled training iteration: play a batch of games, compute returns, one AdamW step.

``make_trainer(config)`` returns jitted functions in the PureJaxRL style:

- ``init(seed) -> TrainState``
- ``train_step(state, hparams, key) -> (state, metrics)``: one batch of games against the
  opponent and one update, as one compiled function.
- ``run_chunk(state, hparams, num_steps) -> (state, metrics)``: ``num_steps`` iterations under
  ``lax.scan`` and then evaluation games against RandomPunisher, all on the device; the host
  sees one set of metrics per chunk.

Everything users scan (learning rate, entropy bonus, value weight, discount, temperature) lives
in :class:`HParams` as traced arrays, so ``jax.vmap`` over hyperparameters and keys runs a
whole scan as one program. The model, batch size and opponent kind are static (``TrainConfig``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax
from jax import lax

from czjax import game, models, players, rollout
from czjax.losses import LossInputs, discounted_returns, metrics_from_sums, policy_gradient_sums

OPPONENTS = ("self", "random-punisher", "random")


@chex.dataclass(frozen=True)
class HParams:
    """Traced hyperparameters (float32 scalars, or arrays with a leading scan axis)."""

    learning_rate: chex.Array
    entropy_bonus: chex.Array
    value_weight: chex.Array
    discount: chex.Array
    temperature: chex.Array

    @classmethod
    def create(cls, learning_rate=1e-4, entropy_bonus=0.05, value_weight=0.5, discount=0.9, temperature=1.0) -> "HParams":
        values = dict(learning_rate=learning_rate, entropy_bonus=entropy_bonus, value_weight=value_weight, discount=discount, temperature=temperature)
        for name, value in values.items():
            if not math.isfinite(float(value)) or float(value) < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if not 0 <= float(discount) <= 1:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        return cls(**{k: jnp.asarray(v, jnp.float32) for k, v in values.items()})

    def to_dict(self) -> dict:
        return {k: float(f"{float(v):.7g}") for k, v in dataclasses.asdict(self).items()}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Static settings: what is compiled. Hyperparameters that can be scanned are in HParams."""

    model: str = "mlp"
    games_per_batch: int = 50
    opponent: str = "self"  # "self" (frozen checkpoint copy), "random-punisher" or "random"
    baseline: bool = True  # REINFORCE with baseline when the model has a value head
    weight_decay: float = 0.01  # AdamW, as torch.optim.AdamW's default
    promote_every_games: int = 5000  # self-play: check for promotion every 100 batches of 50
    promote_window_games: int = 1000  # ... on the win rate over the last 1000 games
    promote_threshold: float = 0.52
    eval_games: int = 100  # against RandomPunisher after every chunk
    batches_per_chunk: int = 20  # iterations per compiled chunk = logging interval

    def __post_init__(self):
        models.get_model(self.model)  # one-line error for an unknown model
        if self.opponent not in OPPONENTS:
            raise ValueError(f"unknown opponent {self.opponent!r}; choose one of {', '.join(OPPONENTS)}")
        for name in ("games_per_batch", "eval_games"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name} must be at least 2 (half of the games with each side first), got {getattr(self, name)}")
        for name in ("promote_every_games", "promote_window_games", "batches_per_chunk"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def promote_every(self) -> int:
        """Batches between promotion checks."""
        return max(1, round(self.promote_every_games / self.games_per_batch))

    @property
    def window_batches(self) -> int:
        return max(1, math.ceil(self.promote_window_games / self.games_per_batch))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@chex.dataclass(frozen=True)
class TrainState:
    params: Any
    opt_state: Any
    opponent_params: Any  # the frozen checkpoint copy (self-play); unused otherwise
    key: chex.Array
    step: chex.Array  # batches done
    games: chex.Array  # games played in training
    window_wins: chex.Array  # learner wins in each of the last window_batches batches
    window_games: chex.Array
    promotions: chex.Array


class Trainer(NamedTuple):
    config: TrainConfig
    model: Any
    init: Callable
    train_step: Callable
    update: Callable  # (params, opt_state, trajectory, outcome, hparams) -> (params, opt_state, metrics)
    run_chunk: Callable
    learner: Callable  # the model as a player


LOSS_CHUNKS = 8


def sparse_value_and_grad(chunk_loss: Callable, params, boards, batch: LossInputs, num_chunks: int = LOSS_CHUNKS, axis_name=None):
    """Gradient and summed statistics of a loss that is a sum over positions, computed only
    where positions are valid.

    About half of the learner's static half of the plies did not happen (games end early).
    The valid positions are moved to the front (a stable sort), the batch is cut into
    ``num_chunks`` static chunks, and chunks without a valid position are skipped with
    ``lax.cond``. The result equals the gradient over the whole batch up to float summation
    order. In a vmapped scan (``axis_name``) a chunk is skipped when it is empty for every
    configuration.
    """
    n = batch.valid.shape[0]
    size = -(-n // num_chunks)
    order = jnp.argsort(~batch.valid, stable=True)
    pad = size * num_chunks - n

    def arrange(x):
        x = jnp.take(x, order, axis=0)
        x = jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1))
        return x.reshape((num_chunks, size) + x.shape[1:])

    chunks = jax.tree.map(arrange, (boards, batch))
    grad_fn = jax.value_and_grad(chunk_loss, has_aux=True)
    zero_grads = jax.tree.map(jnp.zeros_like, params)
    _, zero_sums = jax.eval_shape(chunk_loss, params, *jax.tree.map(lambda x: x[0], chunks))
    zero_sums = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), zero_sums)

    def body(acc, chunk):
        chunk_boards, chunk_batch = chunk

        def compute(_):
            (_, sums), grads = grad_fn(params, chunk_boards, chunk_batch)
            return grads, sums

        empty = rollout.all_configurations(~chunk_batch.valid.any(), axis_name)
        grads, sums = lax.cond(empty, lambda _: (zero_grads, zero_sums), compute, None)
        return jax.tree.map(jnp.add, acc, (grads, sums)), None

    (grads, sums), _ = lax.scan(body, (zero_grads, zero_sums), chunks)
    return grads, sums


def make_optimizer(weight_decay: float) -> optax.GradientTransformation:
    """AdamW without its learning rate, which ``train_step`` applies as a traced value:
    ``p <- p - lr * (adam(g) + weight_decay * p)``, as ``torch.optim.AdamW`` does."""
    return optax.chain(optax.scale_by_adam(), optax.add_decayed_weights(weight_decay))


@functools.lru_cache(maxsize=None)
def make_trainer(config: TrainConfig, axis_name: str | None = None) -> Trainer:
    """The compiled functions for ``config`` (cached: the same config gives the same jitted
    functions, so runs and tests with one config compile once). ``axis_name`` names the
    vmapped configuration axis when the functions run inside a scan (:mod:`czjax.scan`)."""
    model = models.get_model(config.model)
    use_baseline = config.baseline and models.has_value_head(model)
    learner = models.model_player(model)
    optimizer = make_optimizer(config.weight_decay)
    n = config.games_per_batch
    self_play = config.opponent == "self"
    opponent = learner if self_play else players.BUILTIN_PLAYERS[config.opponent]

    def init(seed: int) -> TrainState:
        key = jax.random.key(seed)
        init_key, key = jax.random.split(key)
        params = models.init_params(model, init_key)
        window = jnp.zeros((config.window_batches,), jnp.int32)
        return TrainState(
            params=params,
            opt_state=optimizer.init(params),
            opponent_params=params,
            key=key,
            step=jnp.zeros((), jnp.int32),
            games=jnp.zeros((), jnp.int32),
            window_wins=window,
            window_games=window,
            promotions=jnp.zeros((), jnp.int32),
        )

    def loss_inputs(traj: rollout.Trajectory, outcome, discount):
        mine = rollout.player_plies(traj, n, player=0)  # the learner is player A: (21, n)
        returns = discounted_returns(outcome, mine.valid, discount)
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        positions = jax.tree.map(flat, mine.positions)
        boards = game.unpack(positions)
        batch = LossInputs(
            legal=game.position_legal_mask(positions),
            actions=flat(mine.actions).astype(jnp.int32),
            returns=flat(returns),
            valid=flat(mine.valid),
        )
        return boards, batch

    def update(params, opt_state, traj: rollout.Trajectory, outcome, hp: HParams):
        """One AdamW step on the learner's (player A's) positions of a batch of games:
        ``(params, opt_state, per-position metrics)``."""
        boards, batch = loss_inputs(traj, outcome, hp.discount)

        def chunk_loss(params, chunk_boards, chunk_batch):
            logits, values = models.apply_model(model, params, chunk_boards)
            return policy_gradient_sums(logits, values if use_baseline else None, chunk_batch, hp.entropy_bonus, hp.value_weight)

        grads, sums = sparse_value_and_grad(chunk_loss, params, boards, batch, axis_name=axis_name)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = jax.tree.map(lambda p, u: p - hp.learning_rate * u, params, updates)
        return params, opt_state, metrics_from_sums(sums)

    def train_step(state: TrainState, hp: HParams, key) -> tuple[TrainState, dict]:
        opp_params = state.opponent_params if self_play else None
        opp_temperature = hp.temperature if self_play else 1.0
        traj, results = rollout.play_games(
            key, learner, state.params, opponent, opp_params, n, hp.temperature, opp_temperature, axis_name=axis_name
        )
        params, opt_state, metrics = update(state.params, state.opt_state, traj, results.outcome, hp)

        wins = (results.outcome == 1).sum().astype(jnp.int32)
        slot = state.step % config.window_batches
        window_wins = state.window_wins.at[slot].set(wins)
        window_games = state.window_games.at[slot].set(n)
        step = state.step + 1
        if self_play:
            window_rate = window_wins.sum() / jnp.maximum(window_games.sum(), 1)
            promote = (step % config.promote_every == 0) & (window_rate > config.promote_threshold)
        else:
            promote = jnp.zeros((), bool)
        opponent_params = jax.tree.map(lambda new, old: jnp.where(promote, new, old), params, state.opponent_params)
        new_state = state.replace(
            params=params,
            opt_state=opt_state,
            opponent_params=opponent_params,
            step=step,
            games=state.games + n,
            window_wins=jnp.where(promote, 0, window_wins),
            window_games=jnp.where(promote, 0, window_games),
            promotions=state.promotions + promote.astype(jnp.int32),
        )
        metrics = dict(
            metrics,
            win_rate=wins / n,
            draw_rate=(results.outcome == 0).mean(),
            game_length=results.length.mean(),
        )
        return new_state, metrics

    def run_chunk(state: TrainState, hp: HParams, num_steps: int) -> tuple[TrainState, dict]:
        def body(state, _):
            key, step_key = jax.random.split(state.key)
            return train_step(state.replace(key=key), hp, step_key)

        state, per_step = lax.scan(body, state, None, length=num_steps)
        key, eval_key = jax.random.split(state.key)
        state = state.replace(key=key)
        _, evaluation = rollout.play_games(
            eval_key, learner, state.params, players.random_punisher, None, config.eval_games, hp.temperature, 1.0, axis_name=axis_name
        )
        metrics = {k: v.mean() for k, v in per_step.items() if k != "positions"}
        metrics.update(
            positions=per_step["positions"].sum(),
            eval_win_rate=(evaluation.outcome == 1).mean(),
            eval_draw_rate=(evaluation.outcome == 0).mean(),
            batches=state.step,
            games=state.games,
            promotions=state.promotions,
        )
        return state, metrics

    return Trainer(
        config=config,
        model=model,
        init=init,
        train_step=jax.jit(train_step),
        update=jax.jit(update),
        run_chunk=jax.jit(run_chunk, static_argnums=2),
        learner=learner,
    )
