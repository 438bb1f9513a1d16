"""The compiled training iteration: play a batch of games, then the algorithm's update.

``make_trainer(config)`` returns jitted functions in the PureJaxRL style:

- ``init(seed, params=None) -> TrainState``
- ``train_step(state, hparams, key) -> (state, metrics)``: one batch of games against the
  opponent, the update (:mod:`czjax.learn.algorithms`), and promotion or the pool's bookkeeping, as
  one compiled function.
- ``run_chunk(state, hparams, num_batches, bench=None) -> (state, metrics)``: ``num_batches``
  iterations under ``lax.scan`` and then evaluation games against RandomPunisher, all on the
  device; the host sees one set of metrics per chunk. With ``solver_eval`` on, ``bench`` is the
  solver benchmark (``trainer.solver_bench``), an argument of the program rather than constants
  compiled into it.
- ``refill(state, hparams, key, rows) -> state``: a batch of games played as training plays them,
  their positions written into the replay buffer up to ``rows`` rows, nothing else changed: how a
  run resumed from a portable checkpoint (:func:`portable`, the state without the buffer's rows)
  rebuilds its buffer (:func:`czjax.jobs.loop.rebuild_replay`).

What is compiled (model, batch size, opponent, algorithm and their settings) is the
:class:`~czjax.learn.settings.TrainConfig`; what is traced, the
:class:`~czjax.learn.settings.HParams` (:mod:`czjax.learn.settings`). How it is compiled is chosen
for the platform the program is built for (``make_trainer(config, platform=...)``, default this
machine's): the set-up resolves the config's "auto" choices from that platform's row of
:mod:`czjax.util.platforms` and passes the platform to what it builds, so one config on one
platform is one program on any machine.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from czjax import models, players, rollout, row_skipping, search
from czjax.learn import algorithms, replay, solver_metrics
from czjax.learn.pool import init_pool, load_member, play_against_pool, update_pool
from czjax.learn.settings import HParams, TrainConfig, eval_opponent_settings
from czjax.models.networks import for_platform
from czjax.players import Player
from czjax.players.searched import search_player
from czjax.util import compiling, counts, devices, platforms, precision
from czjax.util.counts import WideCount
from czjax.util.pytree import pytree_dataclass
from czjax.util.specs import PlayerSpec


@pytree_dataclass(frozen=True)
class TrainState:
    params: Any
    opt_state: Any
    opponent_params: Any  # the frozen checkpoint copy (self-play); unused otherwise
    key: chex.Array
    # The run's totals, exact past 2**31 without 64-bit types (czjax.util.counts): int(state.games)
    step: WideCount  # batches done
    games: WideCount  # games played in training
    # The learner's score in each of the last window_batches batches, and the most it could
    # score: in half-points (a win 2, a draw 1, a batch of n games 2n) when draws count half,
    # else in wins and games.
    window_wins: chex.Array
    window_games: chex.Array
    promotions: chex.Array  # checkpoint promotions (self-play) or league additions (pool)
    pool: Any = None  # PoolState with opponent="pool"
    replay: Any = None  # czjax.learn.replay.ReplayBuffer with a replay capacity


class Trainer(NamedTuple):
    config: TrainConfig
    model: Any
    init: Callable  # (seed, params=None) -> TrainState
    train_step: Callable  # (state, hparams, key) -> (state, metrics)
    update: Callable  # (params, opt_state, trajectory, outcome, hparams) -> (params, opt_state, metrics)
    run_chunk: Callable  # (state, hparams, num_batches, bench=None) -> (state, metrics)
    learner: Callable  # the model as a player
    refill: Callable  # (state, hparams, key, rows) -> state: a batch of games into the replay buffer, up to rows
    platform: str  # the platform the functions are built for (czjax.util.platforms)
    # run_chunk's bench: czjax.learn.solver_metrics.SolverBenchmark when config.solver_eval is on, else None
    solver_bench: Any = None


class Setup(NamedTuple):
    """What the compiled functions of one config close over (all static)."""

    config: TrainConfig
    model: Any
    learner: Callable  # the model as a player: trained, evaluated against RandomPunisher
    actor: Callable  # what plays the learner's (and a self-play opponent's) moves: the learner, or a search over it
    ctx: algorithms.UpdateContext
    algorithm: algorithms.Algorithm
    members: list  # (player, params) per fixed pool member
    slots: int  # league slots
    axis_name: str | None
    devices: int  # a batch's games split across this many devices
    rollout_chunks: (
        int | None
    )  # how a batch's rollout splits a player's boards: None the FLOP rule, 1 every board (czjax.row_skipping)
    eval_chunks: int | None  # the same for the evaluation games
    solver_bench: Any  # czjax.learn.solver_metrics.SolverBenchmark when config.solver_eval is on, else None
    eval_opponent: Player  # the evaluation games' opponent (config.eval_opponent)
    platform: str  # the platform the programs are built for (czjax.util.platforms)


def build_model(config: TrainConfig, platform: str | None = None) -> nn.Module:
    """The network ``config`` describes, as it computes on ``platform`` (None: this machine's):
    activation dtype from ``precision``, ``conv`` and ``norm``, "auto" the platform's choice."""
    model = models.get_model(config.model, precision.activation_dtype(config.precision), config.conv, config.norm)
    return for_platform(model, platforms.checked(platform))


def build_search(config: TrainConfig) -> search.Search | None:
    """The search ``config.search`` names (``NAME[:OPTIONS]``), which plays the learner's moves;
    None without one."""
    return search.search_of(config.search) if config.search else None


@functools.cache
def eval_opponent(spec: PlayerSpec | str) -> Player:
    """The evaluation games' opponent (``TrainConfig.eval_opponent``): a built-in player or
    ``minimax[:OPTIONS]``; one-line ``ValueError`` otherwise
    (:func:`czjax.learn.settings.eval_opponent_settings`)."""
    opponent = eval_opponent_settings(spec)
    return players.BUILTIN_PLAYERS[opponent] if isinstance(opponent, str) else opponent.player()


def static_control_flow(config: TrainConfig, platform: str) -> bool:
    """Whether the iteration built for ``platform`` has no data-dependent branch: no ``lax.cond``,
    every board evaluated, every position in the gradient (``config.control_flow``; "auto": the
    platform's ``static_models``)."""
    if config.control_flow == "auto":
        return config.model in platforms.choices_for(platform).static_models
    return config.control_flow == "static"


def gradient_chunks(config: TrainConfig, learner, shapes, platform: str, configurations: int = 1) -> int:
    """Chunks the on-policy gradient cuts the learner's batch into (1: the plain gradient), by
    :func:`czjax.row_skipping.loss_chunks` over the learner's positions: a static half of the plies
    of every game (mirrored, both sides), and of every configuration in the program where the
    platform counts them (``loss_counts_configurations``)."""
    if not row_skipping.in_gradient(config.compaction):
        return 1
    positions = (
        (rollout.PLIES // 2) * config.games_per_batch * (2 if config.mirror else 1) * (2 if config.both_sides else 1)
    )
    if platforms.choices_for(platform).loss_counts_configurations:
        positions *= configurations
    return row_skipping.loss_chunks(row_skipping.flops_per_board(learner, shapes), positions, platform)


def make_setup(
    config: TrainConfig,
    axis_name: str | None,
    num_devices: int = 1,
    platform: str | None = None,
    configurations: int = 1,
) -> Setup:
    """What ``config`` describes, built for ``platform`` (None: this machine's): the network and its
    player, the search over it, the pool's members, the solver benchmark, and how the work is split.
    ``configurations``: how many run vmapped in one program (a scan's), which the gradient's chunking
    counts where the platform says so (``loss_counts_configurations``)."""
    platform = platforms.checked(platform)
    model = build_model(config, platform)
    learner = models.model_player(model)
    static = static_control_flow(config, platform)
    shapes = jax.eval_shape(lambda: models.init_params(model, jax.random.key(0)))
    searcher = build_search(config)
    actor = learner if searcher is None else search_player(searcher, learner)

    def rollout_chunks(games, player):  # None: the FLOP rule (czjax.row_skipping.rollout_chunks); 1: every board
        compacted = row_skipping.in_rollout(config.compaction, games - games // 2, player, shapes, platform)
        return None if compacted and not static else 1

    ctx = algorithms.UpdateContext(
        model=model,
        optimizer=algorithms.make_optimizer(config.weight_decay),
        games=config.games_per_batch,
        mirror=config.mirror,
        both_sides=config.both_sides,
        baseline=config.baseline and models.has_value_head(model),
        num_chunks=gradient_chunks(config, learner, shapes, platform, configurations) if not static else 1,
        axis_name=axis_name,
        devices=num_devices,
        static=static,
        settings=config.settings_of(config.algorithm),
    )
    return Setup(
        config=config,
        model=model,
        learner=learner,
        actor=actor,
        ctx=ctx,
        algorithm=algorithms.get_algorithm(config.algorithm),
        members=[load_member(member) for member in config.pool.members],
        slots=config.pool.league_slots if config.pool.league else 0,
        axis_name=axis_name,
        devices=num_devices,
        rollout_chunks=rollout_chunks(config.games_per_batch, actor),
        eval_chunks=rollout_chunks(config.eval_games, learner),
        solver_bench=solver_metrics.load() if config.solver_eval != "off" else None,
        eval_opponent=eval_opponent(config.eval_opponent),
        platform=platform,
    )


def init_state(setup: Setup, seed: int, params=None) -> TrainState:
    """A fresh state: parameters drawn with ``config.init``, or ``params`` (a run started from
    given weights) for the learner and the frozen opponent alike; a fresh optimizer state either
    way. The rest of the run's randomness comes from ``seed`` in both cases."""
    key = jax.random.key(seed)
    init_key, key = jax.random.split(key)
    if params is None:
        params = models.init_params(setup.model, init_key, setup.config.init)
    window = jnp.zeros((setup.config.window_batches,), jnp.int32)
    return TrainState(
        params=params,
        opt_state=setup.ctx.optimizer.init(params),
        opponent_params=params,
        key=key,
        step=WideCount.zeros(),
        games=WideCount.zeros(),
        window_wins=window,
        window_games=window,
        promotions=jnp.zeros((), jnp.int32),
        pool=init_pool(setup.members, setup.slots, params) if setup.config.opponent == "pool" else None,
        replay=replay.empty(setup.config.replay.capacity) if setup.config.replay.capacity else None,
    )


def play_batch(setup: Setup, state: TrainState, hp: HParams, key):
    """A batch of games of the learner (player A) against the configured opponent; returns
    ``(trajectory, results, chosen pool member or None)``."""
    config, n = setup.config, setup.config.games_per_batch
    if config.opponent == "pool":
        return play_against_pool(
            key,
            state.pool,
            setup.members,
            rollout.Side(setup.learner, state.params, hp.temperature),
            n,
            axis_name=setup.axis_name,
            devices=setup.devices,
            chunks=setup.rollout_chunks,
            platform=setup.platform,
        )
    self_play = config.opponent in ("self", "current")
    opponent = setup.actor if self_play else players.BUILTIN_PLAYERS[config.opponent]
    opponent_params = {"self": state.opponent_params, "current": state.params}.get(config.opponent)
    traj, results = rollout.play_games(
        key,
        rollout.Side(setup.actor, state.params, hp.temperature),
        rollout.Side(opponent, opponent_params, hp.temperature if self_play else 1.0),
        n,
        axis_name=setup.axis_name,
        devices=setup.devices,
        record_targets=setup.algorithm.records_policy_targets,
        chunks=setup.rollout_chunks,
        sample_plies=config.sample_plies,
        unroll=config.unroll,
        openings=config.openings,
        skip_finished=False if setup.ctx.static else None,
        platform=setup.platform,
    )
    return traj, results, None


def record_batch(setup: Setup, state: TrainState, params, opt_state, results, chosen):
    """The state after a batch: new parameters, counters, the win-rate window, promotion of the
    frozen copy (self-play) or the pool's bookkeeping; returns ``(state, metrics)``."""
    config, n = setup.config, setup.config.games_per_batch
    wins = (results.outcome == 1).sum().astype(jnp.int32)
    slot = state.step.mod(config.window_batches)
    draws = (results.outcome == 0).sum().astype(jnp.int32)
    half = config.promotion.draws_count_half
    window_wins = state.window_wins.at[slot].set(2 * wins + draws if half else wins)
    window_games = state.window_games.at[slot].set(2 * n if half else n)
    step = state.step.add(1)
    pool, metrics, promote, league_added = state.pool, {}, jnp.zeros((), bool), jnp.zeros((), bool)
    if config.opponent == "self":
        window_rate = window_wins.sum() / jnp.maximum(window_games.sum(), 1)
        promote = (step.mod(config.promote_every) == 0) & (window_rate > config.promotion.threshold)
    elif config.opponent == "pool":
        pool, league_added = update_pool(
            state.pool, params, chosen, wins / n, len(setup.members), config.pool.ema, config.pool.league_threshold
        )
        metrics = {
            "pool_min_win_rate": jnp.min(jnp.where(pool.available(), pool.win_rate, jnp.inf)),
            "league_size": pool.league_active.sum().astype(jnp.float32),
        }
    new_state = dataclasses.replace(
        state,
        params=params,
        opt_state=opt_state,
        opponent_params=jax.tree.map(lambda new, old: jnp.where(promote, new, old), params, state.opponent_params),
        step=step,
        games=state.games.add(n),
        window_wins=jnp.where(promote, 0, window_wins),
        window_games=jnp.where(promote, 0, window_games),
        promotions=state.promotions + (promote | league_added).astype(jnp.int32),
        pool=pool,
    )
    metrics.update(win_rate=wins / n, draw_rate=(results.outcome == 0).mean(), game_length=results.length.mean())
    return new_state, metrics


def train_step(setup: Setup, state: TrainState, hp: HParams, key) -> tuple[TrainState, dict]:
    """One batch of games and the learner's update, as one compiled function."""
    # the named scopes are the phases that `czjax bench train --profile` reports (czjax.bench.profiling)
    with jax.named_scope("selfplay"):
        traj, results, chosen = play_batch(setup, state, hp, key)
    hp = scheduled(setup.config, hp, games_float(state.games))
    with jax.named_scope("update"):
        if setup.config.replay.capacity:
            params, opt_state, metrics, buffer = replay_update(
                setup, state, traj, results.outcome, hp, jax.random.fold_in(key, 1)
            )
            state = dataclasses.replace(state, replay=buffer)
        else:
            params, opt_state, metrics = algorithms.update(
                setup.ctx, setup.algorithm, state.params, state.opt_state, traj, results.outcome, hp
            )
    with jax.named_scope("bookkeeping"):
        state, batch_metrics = record_batch(setup, state, params, opt_state, results, chosen)
    return state, {**metrics, **batch_metrics}


def games_float(count) -> jax.Array:
    """A wide count of games as float32 (for schedules: exact to 2**24, close beyond)."""
    return count.high.astype(jnp.float32) * 4294967296.0 + count.low.astype(jnp.float32)


def scheduled(config: TrainConfig, hp: HParams, games: jax.Array) -> HParams:
    """``hp`` with the learning rate of ``config``'s schedule after ``games`` games: constant, or
    ``lr * (f + (1 - f) (1 + cos(pi t)) / 2)`` with ``t = min(games / lr_decay_games, 1)``."""
    if not config.lr_decay_games:
        return hp
    t = jnp.minimum(games / config.lr_decay_games, 1.0)
    factor = config.lr_final + (1.0 - config.lr_final) * 0.5 * (1.0 + jnp.cos(jnp.pi * t))
    return dataclasses.replace(hp, learning_rate=hp.learning_rate * factor)


def portable(state: TrainState) -> TrainState:
    """``state`` without its replay buffer's rows (their count and cursor kept): everything else a
    run continues from, a few times the network's size where the buffer is most of the state
    (a 2M-position buffer: about 170 MB), small enough to move to another machine."""
    return state if state.replay is None else dataclasses.replace(state, replay=replay.without_rows(state.replay))


def refill_batch(setup: Setup, state: TrainState, hp: HParams, key, rows) -> TrainState:
    """One batch of games played as :func:`train_step` plays them, their positions and targets
    written into the replay buffer until it holds ``rows`` rows (the first of them, in order); no
    gradient step, and the batch, game and promotion counts and the state's key are left as they
    are, so training after a rebuild follows the schedule it would have followed."""
    traj, results, _ = play_batch(setup, state, hp, key)
    hp = scheduled(setup.config, hp, games_float(state.games))
    boards, batch = algorithms.training_batch(setup.ctx, setup.algorithm, state.params, traj, results.outcome, hp)
    return dataclasses.replace(state, replay=replay.add(state.replay, boards, batch, rows - state.replay.filled))


def replay_update(setup: Setup, state: TrainState, traj, outcome, hp, key):
    """The batch's positions into the replay buffer, then ``replay.steps`` steps, each on a
    fresh uniform draw from it: ``(params, opt_state, metrics, buffer)``. ``replay_reuse`` is
    how many times a position is trained on, on average, while the buffer is full: rows drawn
    per batch of games over the positions it adds.

    A draw from the buffer is all valid positions: the gradient's compaction would skip nothing
    and only cost its partition and per-chunk branches, which on a GPU each wait for the device.
    There (``replay_plain_gradient``, :mod:`czjax.util.platforms`) the steps take the plain
    gradient over the draw; elsewhere the chunked one (the same gradient up to float summation
    order, so the CPU's results stay as recorded)."""
    ctx, config = setup.ctx, setup.config
    with jax.named_scope("targets"):
        boards, batch = algorithms.training_batch(ctx, setup.algorithm, state.params, traj, outcome, hp)
    buffer = replay.add(state.replay, boards, batch)
    window = config.replay.window(games_float(state.games))
    # drawn from a view whose targets are averaged per position; the buffer keeps its own rows
    source = dataclasses.replace(buffer, inputs=replay.averaged_targets(buffer)) if config.replay.average else buffer

    step_ctx = ctx._replace(num_chunks=1) if platforms.choices_for(setup.platform).replay_plain_gradient else ctx

    def one_step(carry, step_key):
        params, opt_state = carry
        drawn = jax.tree.map(
            lambda x: devices.split(x, ctx.devices), replay.sample(source, step_key, config.replay.batch, window)
        )
        params, opt_state, metrics = setup.algorithm.step(step_ctx, params, opt_state, *drawn, hp)
        return (params, opt_state), metrics

    keys = jax.random.split(key, config.replay.steps) if config.replay.steps > 1 else key[None]
    (params, opt_state), metrics = lax.scan(one_step, (state.params, state.opt_state), keys)
    metrics = jax.tree.map(lambda x: x.mean(0), metrics)
    metrics["replay_filled"] = buffer.filled.astype(jnp.float32) / config.replay.capacity
    added = jnp.maximum(batch.valid.sum(), 1).astype(jnp.float32)
    metrics["replay_reuse"] = config.replay.steps * config.replay.batch / added
    return params, opt_state, metrics, buffer


def run_chunk(
    setup: Setup, state: TrainState, hp: HParams, num_batches: int, bench: solver_metrics.SolverBenchmark | None = None
) -> tuple[TrainState, dict]:
    """``num_batches`` iterations under ``lax.scan``, then evaluation games against
    RandomPunisher; one set of metrics for the chunk. ``bench``: the solver benchmark to score
    (``setup.solver_bench``, given as an argument so that its arrays are inputs of the compiled
    chunk, not constants), required when ``solver_eval`` is on."""
    if (setup.solver_bench is None) != (bench is None):
        raise ValueError(
            "run_chunk's bench is the trainer's solver_bench: "
            + ("pass it when solver_eval is on" if bench is None else "None when solver_eval is off")
        )

    def body(state, _):
        key, step_key = jax.random.split(state.key)
        state, metrics = train_step(setup, dataclasses.replace(state, key=key), hp, step_key)
        return state, {**metrics, "finite": all_finite((metrics.get("loss"), state.params, state.opt_state))}

    state, per_batch = lax.scan(body, state, None, length=num_batches)
    finite = per_batch.pop("finite")
    key, eval_key = jax.random.split(state.key)
    state = dataclasses.replace(state, key=key)
    with jax.named_scope("evaluation"):
        _, evaluation = rollout.play_games(
            eval_key,
            rollout.Side(setup.learner, state.params, hp.temperature),
            rollout.Side(setup.eval_opponent),
            setup.config.eval_games,
            axis_name=setup.axis_name,
            devices=setup.devices,
            chunks=setup.eval_chunks,
            skip_finished=False if setup.ctx.static else None,
            platform=setup.platform,
        )
    metrics = {k: v.mean() for k, v in per_batch.items() if k != "positions"}
    metrics.update(
        # the per-batch counts are whole numbers (float32 sums of masks, exact); their total is wide
        positions=counts.total(jnp.round(per_batch["positions"]).astype(jnp.int32)),
        eval_win_rate=(evaluation.outcome == 1).mean(),
        eval_draw_rate=(evaluation.outcome == 0).mean(),
        batches=state.step,
        games=state.games,
        promotions=state.promotions,
        # the first batch of the chunk (0-based) whose loss, gradient or parameters were not
        # finite, -1 for none: the host stops the run there (czjax.jobs.loop.check_finite)
        first_nonfinite=jnp.where(finite.all(), -1, jnp.argmin(finite)),
    )
    if bench is not None:
        with jax.named_scope("solver_eval"):
            scored = setup.learner if setup.config.solver_eval == "network" else setup.actor
            metrics.update(solver_metrics.metrics(scored, state.params, bench, jax.random.fold_in(eval_key, 1)))
    return state, metrics


def all_finite(tree) -> jax.Array:
    """Whether every number in ``tree`` is finite (a non-finite gradient shows in the parameters
    and the optimizer's moments it updates)."""
    return jnp.all(jnp.stack([jnp.isfinite(leaf).all() for leaf in jax.tree.leaves(tree)]))


def make_trainer(
    config: TrainConfig,
    axis_name: str | None = None,
    num_devices: int = 1,
    platform: str | None = None,
    configurations: int = 1,
) -> Trainer:
    """The compiled functions for ``config``, built for ``platform`` ("cpu", "gpu", "tpu"; None:
    this machine's, :mod:`czjax.util.platforms`), cached: the same config and platform give the
    same jitted functions, so runs and tests with one config compile once. ``axis_name`` names
    the vmapped configuration axis when the functions run inside a scan (:mod:`czjax.jobs.scan`);
    ``num_devices`` splits each batch's games across that many devices (:mod:`czjax.util.devices`);
    ``configurations``: how many run vmapped in one program (:func:`make_setup`)."""
    return _trainer(config, axis_name, num_devices, platforms.checked(platform), configurations)


@functools.cache
def _trainer(
    config: TrainConfig, axis_name: str | None, num_devices: int, platform: str, configurations: int
) -> Trainer:
    setup = make_setup(config, axis_name, num_devices, platform, configurations)

    def update(params, opt_state, traj, outcome, hp):
        return algorithms.update(setup.ctx, setup.algorithm, params, opt_state, traj, outcome, hp)

    def jit(fn, **kwargs):  # traced as the platform's program, compiled with its options
        options = dict(convolutions=models.convolves(setup.model), platform=platform, **kwargs)
        return compiling.jit(built_for(platform, fn), **options)

    return Trainer(
        config=config,
        model=setup.model,
        init=functools.partial(init_state, setup),
        train_step=jit(functools.partial(train_step, setup)),
        update=jit(update),
        run_chunk=jit(functools.partial(run_chunk, setup), static_argnums=2),
        learner=setup.learner,
        refill=jit(functools.partial(refill_batch, setup)),
        platform=platform,
        solver_bench=setup.solver_bench,
    )


def built_for(platform: str, fn: Callable) -> Callable:
    """``fn`` traced inside :func:`czjax.util.platforms.building_for` ``platform``: what it calls
    that reads the platform by default (a search's descent) builds that platform's program."""

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        with platforms.building_for(platform):
            return fn(*args, **kwargs)

    named = fn.func if isinstance(fn, functools.partial) else fn
    traced.__name__ = traced.__qualname__ = named.__name__  # the program's name, as jax.jit gives it
    return traced
