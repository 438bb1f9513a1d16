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

from czjax import compaction, game, models, players, rollout
from czjax.losses import LossInputs, a2c_targets, discounted_returns, metrics_from_sums, mirror, policy_gradient_sums, ppo_sums
from czjax.players import masked_log_probs

OPPONENTS = ("self", "random-punisher", "random", "pool")
ALGORITHMS = ("reinforce", "a2c", "ppo")
PPO_KL_STOPS = ("after-step", "before-step")


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


# What a stored config that predates a setting did (see TrainConfig.from_dict).
SETTINGS_BEFORE_THEY_EXISTED = {"init": "flax", "ppo_kl_stop": "before-step"}


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
    algorithm: str = "reinforce"  # "reinforce" (with baseline when the model has a value head), "a2c" or "ppo"
    ppo_clip: float = 0.2
    ppo_epochs: int = 4  # full-batch epochs per batch of games, stopped early by target_kl
    target_kl: float = 0.01  # PPO: no further epoch once the mean KL from the starting policy exceeds this
    ppo_kl_stop: str = "after-step"  # "after-step": the epoch whose KL exceeds target_kl still steps (PyTorch); "before-step": it does not
    mirror: bool = False  # add every position flipped left-right to the batch
    # opponent="pool": a fixed list of players (built-in names or checkpoint files), chosen on
    # device per batch with weights clip(1 - EMA win rate, 0.05, 1); league=True adds a frozen
    # copy of the learner whenever its EMA win rate against every member exceeds the threshold.
    pool: tuple = ()
    pool_ema: float = 0.1  # EMA step per batch played against a member
    league: bool = False
    league_slots: int = 8  # at most this many learner copies; then the oldest is replaced
    league_threshold: float = 0.6
    init: str = "torch"  # fresh parameters: "torch" (PyTorch's defaults, as the PyTorch project) or "flax" (models.INITS)

    def __post_init__(self):
        models.get_model(self.model)  # one-line error for an unknown model
        models.check_init(self.init)
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
        if self.algorithm != "reinforce" and not models.has_value_head(models.get_model(self.model)):
            raise ValueError(f"{self.algorithm} needs a model with a value head (cnn-mk4-value or mlp3), not {self.model}")
        if not self.ppo_epochs >= 1 or not self.ppo_clip > 0 or not self.target_kl >= 0:
            raise ValueError("ppo_epochs must be >= 1, ppo_clip > 0 and target_kl >= 0")
        if self.ppo_kl_stop not in PPO_KL_STOPS:
            raise ValueError(f"unknown ppo_kl_stop {self.ppo_kl_stop!r}; choose one of {', '.join(PPO_KL_STOPS)}")
        object.__setattr__(self, "pool", tuple(self.pool))  # a list when read back from JSON
        if (self.opponent == "pool") != bool(self.pool):
            raise ValueError("opponent 'pool' needs a list of pool members (--pool), and a pool needs opponent 'pool'")
        if self.league and self.opponent != "pool":
            raise ValueError("a league grows an opponent pool: use it with opponent 'pool'")
        if not 0 < self.pool_ema <= 1 or self.league_slots < 1 or not 0 <= self.league_threshold <= 1:
            raise ValueError("pool_ema must be in (0, 1], league_slots >= 1 and league_threshold in [0, 1]")
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
        """JSON-ready (the pool as a list, as it reads back)."""
        return dict(dataclasses.asdict(self), pool=list(self.pool))

    @classmethod
    def from_dict(cls, stored: dict) -> "TrainConfig":
        """The config stored in a run.json, scan.json or checkpoint. A setting added since an
        old run was written reads as what that run did: ``init`` as ``"flax"`` (Flax's
        defaults) and ``ppo_kl_stop`` as ``"before-step"``, so an old run resumes as it began."""
        return cls(**{**SETTINGS_BEFORE_THEY_EXISTED, **stored})


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
    promotions: chex.Array  # checkpoint promotions (self-play) or league additions (pool)
    pool: Any = None  # PoolState with opponent="pool"


@chex.dataclass(frozen=True)
class PoolState:
    """Opponent pool: fixed members first, then the league's learner copies (slots)."""

    member_params: Any  # tuple, one entry per fixed member (None for a built-in player)
    win_rate: chex.Array  # (members + slots,) EMA of the learner's win rate against each
    league_params: Any  # learner copies stacked on a leading slot axis (None without a league)
    league_active: chex.Array  # (slots,) bool
    league_next: chex.Array  # the slot the next copy goes to

    def available(self) -> chex.Array:
        """``(members + slots,)`` bool: the fixed members, then the league slots in use."""
        num_members = self.win_rate.shape[-1] - self.league_active.shape[-1]
        return jnp.concatenate([jnp.ones((num_members,), bool), self.league_active])


def opponent_weights(win_rate: jax.Array, available: jax.Array) -> jax.Array:
    """Sampling weights of the pool members: ``clip(1 - win rate, 0.05, 1)``, 0 if unavailable."""
    return jnp.where(available, jnp.clip(1.0 - win_rate, 0.05, 1.0), 0.0)


def update_win_rate(win_rate: jax.Array, chosen, batch_win_rate, ema) -> jax.Array:
    """EMA update of the win rate against the member just played."""
    return win_rate.at[chosen].set((1.0 - ema) * win_rate[chosen] + ema * batch_win_rate)


def league_ready(win_rate: jax.Array, available: jax.Array, threshold) -> jax.Array:
    """Whether the learner beats every available member by more than ``threshold``."""
    return jnp.all(jnp.where(available, win_rate > threshold, True))


def update_pool(pool: PoolState, params, chosen, batch_win_rate, num_members: int, ema: float, threshold: float):
    """After a batch against member ``chosen``: the EMA of the win rate against it, and with a
    league, a copy of the learner's ``params`` in the next slot (the oldest once all are used)
    when it beats every available member by more than ``threshold``; the copy starts at win
    rate 0.5. Returns ``(pool, added)``."""
    win_rate = update_win_rate(pool.win_rate, chosen, batch_win_rate, ema)
    slots = pool.league_active.shape[0]
    if not slots:
        return pool.replace(win_rate=win_rate), jnp.zeros((), bool)
    add = league_ready(win_rate, pool.available(), threshold)
    slot = pool.league_next
    league_params = jax.tree.map(lambda stack, p: jnp.where(add, stack.at[slot].set(p), stack), pool.league_params, params)
    pool = pool.replace(
        win_rate=jnp.where(add, win_rate.at[num_members + slot].set(0.5), win_rate),
        league_params=league_params,
        league_active=jnp.where(add, pool.league_active.at[slot].set(True), pool.league_active),
        league_next=jnp.where(add, (slot + 1) % slots, slot),
    )
    return pool, add


class Trainer(NamedTuple):
    config: TrainConfig
    model: Any
    init: Callable
    train_step: Callable
    update: Callable  # (params, opt_state, trajectory, outcome, hparams) -> (params, opt_state, metrics)
    run_chunk: Callable
    learner: Callable  # the model as a player


def sparse_value_and_grad(chunk_loss: Callable, params, boards, batch: LossInputs, num_chunks: int = compaction.LOSS_CHUNKS, axis_name=None):
    """Gradient and summed statistics of a loss that is a sum over positions, computed only
    where positions are valid.

    About half of the learner's static half of the plies did not happen (games end early).
    The valid positions are taken in ``num_chunks`` static chunks and empty chunks skipped
    (:func:`czjax.compaction.over_valid_chunks`). The result equals the gradient over the whole
    batch up to float summation order. ``num_chunks=1`` is the plain gradient over the whole
    batch (the loss masks invalid positions itself).
    """
    grad_fn = jax.value_and_grad(chunk_loss, has_aux=True)
    if num_chunks == 1:
        (_, sums), grads = grad_fn(params, boards, batch)
        return grads, sums

    def chunk_grads(index, chunk):
        (_, sums), grads = grad_fn(params, *chunk)
        return grads, sums

    return compaction.over_valid_chunks(chunk_grads, (boards, batch), batch.valid, num_chunks, axis_name, accumulate=True)


def _pool_member(spec: str):
    """``(player, params)`` of a pool member: a built-in player's name or a checkpoint file."""
    if spec in players.BUILTIN_PLAYERS:
        return players.BUILTIN_PLAYERS[spec], None
    from czjax.agents import load_agent

    agent = load_agent(spec)
    return agent.player, agent.params


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
    pool_mode = config.opponent == "pool"
    opponent = learner if self_play or pool_mode else players.BUILTIN_PLAYERS[config.opponent]
    members = [_pool_member(spec) for spec in config.pool]  # (player, params) per fixed member
    num_members, slots = len(members), (config.league_slots if config.league else 0)
    positions = (rollout.PLIES // 2) * n * (2 if config.mirror else 1)  # the learner's batch
    num_chunks = compaction.loss_chunks(compaction.flops_per_board(learner, jax.eval_shape(lambda: models.init_params(model, jax.random.key(0)))), positions)

    def init(seed: int, params=None) -> TrainState:
        """A fresh state: parameters drawn with ``config.init``, or ``params`` (a run started
        from given weights) for the learner and the frozen opponent alike; a fresh optimizer
        state either way. The rest of the run's randomness comes from ``seed`` in both cases."""
        key = jax.random.key(seed)
        init_key, key = jax.random.split(key)
        if params is None:
            params = models.init_params(model, init_key, config.init)
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
            pool=init_pool(params) if pool_mode else None,
        )

    def init_pool(params) -> PoolState:
        return PoolState(
            member_params=tuple(member_params for _, member_params in members),
            win_rate=jnp.full((num_members + slots,), 0.5, jnp.float32),  # uninformed
            league_params=jax.tree.map(lambda x: jnp.zeros((slots,) + x.shape, x.dtype), params) if slots else None,
            league_active=jnp.zeros((slots,), bool),
            league_next=jnp.zeros((), jnp.int32),
        )

    def play_pool(pool: PoolState, params, hp: HParams, key):
        """One batch against a member drawn by weight; returns ``(traj, results, chosen)``."""
        choice_key, key = jax.random.split(key)
        weights = opponent_weights(pool.win_rate, pool.available())
        chosen = jax.random.categorical(choice_key, jnp.log(weights))

        def against(player, member_params):
            return rollout.play_games(key, learner, params, player, member_params, n, hp.temperature, 1.0, axis_name=axis_name)

        branches = [lambda pool, k=k: against(members[k][0], pool.member_params[k]) for k in range(num_members)]
        if slots:  # one branch for every league slot: same player, the slot's parameters
            branches.append(lambda pool: against(learner, jax.tree.map(lambda x: x[chosen - num_members], pool.league_params)))
        traj, results = lax.switch(jnp.minimum(chosen, len(branches) - 1), branches, pool)
        return traj, results, chosen

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

    def apply_step(params, opt_state, grads, hp: HParams):
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return jax.tree.map(lambda p, u: p - hp.learning_rate * u, params, updates), opt_state

    def batch_inputs(params, traj: rollout.Trajectory, outcome, hp: HParams):
        """The learner's positions (mirrored too if configured) with the algorithm's targets."""
        boards, batch = loss_inputs(traj, outcome, hp.discount)
        if config.mirror:
            boards, batch = mirror(boards, batch)
        if config.algorithm == "reinforce":
            return boards, batch
        # A2C and PPO need the starting policy's values (and PPO its log-probabilities) on
        # every position, without gradient: one forward pass over the batch.
        logits, values = lax.stop_gradient(models.apply_model(model, params, boards))
        if config.algorithm == "a2c":
            copies = 2 if config.mirror else 1  # the mirror half has its own values and targets
            shape = (copies, rollout.PLIES // 2, n)
            targets = jax.vmap(a2c_targets, in_axes=(0, 0, None, None))(
                values.reshape(shape), batch.valid.reshape(shape), outcome, hp.discount
            )
            return boards, batch.replace(returns=targets.reshape(-1))
        return boards, batch.replace(old_log_probs=masked_log_probs(batch.legal, logits), advantages=batch.returns - values)

    def update(params, opt_state, traj: rollout.Trajectory, outcome, hp: HParams):
        """The update on the learner's (player A's) positions of a batch of games: one AdamW
        step, or PPO's epochs. Returns ``(params, opt_state, per-position metrics)``."""
        boards, batch = batch_inputs(params, traj, outcome, hp)
        if config.algorithm == "ppo":
            return ppo_update(params, opt_state, boards, batch, hp)

        def chunk_loss(params, chunk_boards, chunk_batch):
            logits, values = models.apply_model(model, params, chunk_boards)
            return policy_gradient_sums(logits, values if use_baseline else None, chunk_batch, hp.entropy_bonus, hp.value_weight)

        grads, sums = sparse_value_and_grad(chunk_loss, params, boards, batch, num_chunks, axis_name=axis_name)
        params, opt_state = apply_step(params, opt_state, grads, hp)
        return params, opt_state, metrics_from_sums(sums)

    def ppo_update(params, opt_state, boards, batch: LossInputs, hp: HParams):
        """Up to ``ppo_epochs`` full-batch steps. Each epoch's forward pass gives the gradient
        and the mean KL from the starting policy to the epoch's starting parameters. Once that
        KL exceeds ``target_kl`` no more steps are taken and the remaining epochs are skipped.
        ``ppo_kl_stop="after-step"`` (the PyTorch project's order: forward, step, then check)
        still takes the step of the epoch whose KL exceeded the target; ``"before-step"`` does
        not, so it stops one step earlier."""
        step_then_stop = config.ppo_kl_stop == "after-step"

        def chunk_loss(params, chunk_boards, chunk_batch):
            logits, values = models.apply_model(model, params, chunk_boards)
            return ppo_sums(logits, values, chunk_batch, config.ppo_clip, hp.entropy_bonus, hp.value_weight)

        def epoch(carry, index):
            params, opt_state, stopped = carry

            def run(_):
                grads, sums = sparse_value_and_grad(chunk_loss, params, boards, batch, num_chunks, axis_name=axis_name)
                kl = sums["kl"] / jnp.maximum(sums["positions"], 1.0)
                # The first epoch starts at the starting policy, whose KL is 0 (PyTorch reuses the
                # starting forward pass; here it is 0 up to rounding): it never stops.
                exceeded = (index > 0) & (kl > config.target_kl)
                # A configuration that has stopped runs here only in a vmapped scan whose other
                # configurations go on: it takes no step.
                take = ~stopped if step_then_stop else ~stopped & ~exceeded
                new_params, new_opt_state = apply_step(params, opt_state, grads, hp)
                keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(take, a, b), new, old)  # noqa: E731
                return (keep(new_params, params), keep(new_opt_state, opt_state), stopped | exceeded), (sums, kl, ~stopped, take)

            def skip(_):
                zeros = jax.eval_shape(run, None)[1]
                return (params, opt_state, stopped), jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), zeros)

            return lax.cond(compaction.all_configurations(stopped, axis_name), skip, run, None)

        (params, opt_state, _), (sums, kls, evaluated, stepped) = lax.scan(
            epoch, (params, opt_state, jnp.zeros((), bool)), jnp.arange(config.ppo_epochs)
        )
        last = evaluated.sum() - 1  # the last epoch whose forward pass ran (epoch 0 always does)
        metrics = metrics_from_sums(jax.tree.map(lambda x: x[0], sums))  # loss terms at the starting policy
        metrics.update(
            ppo_epochs=stepped.sum().astype(jnp.float32),  # steps taken
            ppo_kl=kls[last],
            ppo_clip_fraction=sums["clipped"][last] / jnp.maximum(sums["positions"][last], 1.0),
        )
        return params, opt_state, metrics

    def train_step(state: TrainState, hp: HParams, key) -> tuple[TrainState, dict]:
        if pool_mode:
            traj, results, chosen = play_pool(state.pool, state.params, hp, key)
        else:
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
        pool, pool_metrics, league_added = state.pool, {}, jnp.zeros((), bool)
        if self_play:
            window_rate = window_wins.sum() / jnp.maximum(window_games.sum(), 1)
            promote = (step % config.promote_every == 0) & (window_rate > config.promote_threshold)
        elif pool_mode:
            pool, league_added = update_pool(state.pool, params, chosen, wins / n, num_members, config.pool_ema, config.league_threshold)
            pool_metrics = {
                "pool_min_win_rate": jnp.min(jnp.where(pool.available(), pool.win_rate, jnp.inf)),
                "league_size": pool.league_active.sum().astype(jnp.float32),
            }
            promote = jnp.zeros((), bool)
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
            promotions=state.promotions + (promote | league_added).astype(jnp.int32),
            pool=pool,
        )
        metrics = dict(
            metrics,
            **pool_metrics,
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
