"""Distillation, as the PyTorch project's ``distill.py``: a teacher (any player, a search
included) labels positions and a student network learns its move distribution and value, so
that a strong searched player becomes a small fast network.

1. :func:`teacher_positions`: the teacher plays itself (sampled at a temperature, so the games
   differ); every position that happened is kept.
2. :func:`label`: the teacher's policy target on each position (a search's visit counts or
   improved policy; a network's softmax) and its value (a search's root value, a value head),
   computed again in fixed-size batches.
3. :func:`train_student`: AdamW on cross-entropy to the targets plus ``value_weight`` times
   the squared error to the teacher's value, in minibatches; one compiled ``lax.scan`` per
   epoch over a seeded shuffle.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
import optax

from czjax import game, models
from czjax.evaluate.positions import accuracy, load_positions
from czjax.jobs import folders
from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import make_trainer
from czjax.players import mask_for_sampling, masked_log_probs
from czjax.players.agent import Agent, in_batches, policy, self_play
from czjax.players.loading import load_agent
from czjax.util import checkpoint
from czjax.util.progress import Pace, Progress, eta_text


def teacher_positions(teacher: Agent, num_games: int, seed: int = 0, temperature: float = 1.0, log=None) -> np.ndarray:
    """int8 boards ``(N, 6, 7)`` of every position in ``num_games`` games of the teacher against
    itself, each move sampled from its logits at ``temperature`` (:func:`czjax.players.agent.self_play`);
    ``log``: progress lines."""
    traj = self_play(teacher, num_games, jax.random.key(seed), temperature, Progress(log, "teacher's games", num_games))
    return np.asarray(game.unpack(traj.positions))[np.asarray(traj.valid)]


@functools.partial(jax.jit, static_argnames="player")
def _label(player, params, boards, key):
    out = player(params, boards, key)
    legal = game.legal_mask(boards)
    if out.policy_target is None:
        target = jax.nn.softmax(mask_for_sampling(legal, out.logits.astype(jnp.float32)), axis=-1)
    else:
        target = jnp.where(legal, out.policy_target.astype(jnp.float32), 0.0)
        target = target / jnp.maximum(target.sum(-1, keepdims=True), 1e-30)
    value = jnp.full(boards.shape[:1], jnp.nan) if out.value is None else out.value.astype(jnp.float32)
    return target, value


def label(teacher: Agent, boards, batch_size: int = 1024, seed: int = 0, log=None) -> tuple[np.ndarray, np.ndarray]:
    """``(targets (N, 7), values (N,))``: the teacher's policy target and value on ``boards``
    (values NaN for a teacher without one), in padded batches of ``batch_size``; ``log``:
    progress lines."""
    empty = (np.zeros((0, game.COLS), np.float32), np.zeros((0,), np.float32))
    labelled = in_batches(
        lambda chunk, i: _label(teacher.player, teacher.params, chunk, jax.random.key(seed * 100003 + i)),
        boards,
        batch_size,
        empty,
        Progress(log, "positions labelled", len(boards)),
    )
    return cast("tuple[np.ndarray, np.ndarray]", labelled)  # as many arrays as _label returns: two


def student_loss(model, params, boards, targets, values, value_weight):
    """Mean cross-entropy to ``targets`` plus ``value_weight`` times the mean squared error to
    ``values`` (skipped where NaN, or for a student without a value head)."""
    logits, predicted = models.apply_model(model, params, boards)
    log_p = masked_log_probs(game.legal_mask(boards), logits)
    loss = -(targets * log_p).sum(-1).mean()
    if predicted is not None:
        known = ~jnp.isnan(values)
        loss = loss + value_weight * jnp.where(known, (predicted - jnp.where(known, values, 0.0)) ** 2, 0.0).mean()
    return loss


def make_epoch(model, optimizer: optax.GradientTransformation, batch_size: int, value_weight: float) -> Callable:
    """``epoch(params, opt_state, data, key) -> (params, opt_state, mean loss)``: one pass over
    ``data = (boards, targets, values)`` in a seeded shuffle, minibatches under ``lax.scan``
    (the last partial minibatch is dropped)."""

    @jax.jit
    def epoch(params, opt_state, data, key):
        n = data[0].shape[0]
        steps = n // batch_size
        order = jax.random.permutation(key, n)[: steps * batch_size].reshape(steps, batch_size)

        def step(carry, idx):
            params, opt_state = carry
            batch = jax.tree.map(lambda x: x[idx], data)
            loss, grads = jax.value_and_grad(lambda p: student_loss(model, p, *batch, value_weight))(params)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), loss

        (params, opt_state), losses = jax.lax.scan(step, (params, opt_state), order)
        return params, opt_state, losses.mean()

    return epoch


@dataclasses.dataclass(frozen=True)
class Distillation:
    """How a student is distilled: the teacher plays ``games`` games against itself at
    ``temperature`` (from ``seed``); a fresh student (PyTorch's initialisation) learns its labels
    for ``epochs`` epochs in minibatches of ``batch_size`` with AdamW at ``learning_rate`` (weight
    decay 0.01, as PyTorch's), the value's squared error weighted by ``value_weight``;
    ``overwrite`` replaces a student already in the output folder."""

    games: int = 2000
    epochs: int = 10
    batch_size: int = 256
    learning_rate: float = 1e-3
    value_weight: float = 1.0
    temperature: float = 1.0
    seed: int = 0
    overwrite: bool = False


def train_student(model_name: str, boards, targets, values, settings: Distillation = Distillation(), log=None):
    """``(params, losses per epoch)`` of a fresh ``model_name`` (PyTorch's initialisation)
    trained on the labelled positions as ``settings`` say."""
    epochs, batch_size = settings.epochs, settings.batch_size
    if len(boards) < batch_size:
        raise ValueError(
            f"{len(boards)} labelled positions are fewer than one minibatch of {batch_size}: play more games"
        )
    model = models.get_model(model_name)
    init_key, key = jax.random.split(jax.random.key(settings.seed))
    params = models.init_params(model, init_key)
    optimizer = optax.adamw(settings.learning_rate, weight_decay=0.01)
    opt_state = optimizer.init(params)
    data = (jnp.asarray(boards, jnp.int8), jnp.asarray(targets, jnp.float32), jnp.asarray(values, jnp.float32))
    epoch = make_epoch(model, optimizer, batch_size, settings.value_weight)
    losses = []
    pace, last = Pace(), time.perf_counter()  # the first epoch compiles: the pace leaves it out once a second is done
    for e in range(epochs):
        key, epoch_key = jax.random.split(key)
        params, opt_state, loss = epoch(params, opt_state, data, epoch_key)
        losses.append(float(loss))
        now = time.perf_counter()
        pace, last = pace.add(1, now - last), now
        if log:
            left = pace.time_left(epochs - e - 1)
            log(f"epoch {e + 1}/{epochs}: loss {losses[-1]:.4f}" + (f" ({eta_text(left)})" if e + 1 < epochs else ""))
    return params, losses


def distill(teacher: Agent, model_name: str, out_dir, log=print, **settings) -> dict:
    """The whole job: positions, labels, a student trained on 90% of them, checked on the
    other 10% (how often its greedy move is the teacher's favourite) and on the solver-labelled
    positions; the student is written to ``out_dir/checkpoint.msgpack`` (a player for every
    command). ``settings``: the fields of :class:`Distillation`. Returns the report."""
    spec = Distillation(**settings)
    out_dir, seed, games = Path(out_dir), spec.seed, spec.games
    config = TrainConfig(model=model_name)  # one-line error for an unknown model
    folders.check_out_dir(out_dir)  # before the teacher plays: a bad --out costs nothing
    folders.guard_fresh(out_dir, [checkpoint.FILENAME], spec.overwrite)
    log(f"the teacher {teacher.name} plays {games:,} games against itself at temperature {spec.temperature:g}")
    boards = teacher_positions(teacher, games, seed, spec.temperature, log)
    log(f"labelling {len(boards):,} positions")
    targets, values = label(teacher, boards, seed=seed, log=log)
    held, train = held_out_split(len(boards), seed)
    params, losses = train_student(model_name, boards[train], targets[train], values[train], spec, log)
    path = out_dir / checkpoint.FILENAME
    about = {"seed": seed, "distilled_from": teacher.name, "games": games, "positions": int(len(boards))}
    save_student(path, config, params, seed, about)
    return {
        "teacher": teacher.name,
        "student": str(path),
        "model": model_name,
        "games": games,
        "positions": int(len(boards)),
        "epochs": spec.epochs,
        "losses": losses,
        **check_student(str(path), boards[held], targets[held]),
    }


def held_out_split(num_positions: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(held, train)``: the indices of a seeded shuffle of the positions, its first tenth held
    out and the rest trained on."""
    order = np.random.default_rng(seed).permutation(num_positions)
    return order[: num_positions // 10], order[num_positions // 10 :]


def save_student(path, config, params, seed: int, about: dict) -> None:
    """The student's checkpoint at ``path``: a fresh TrainState of ``config`` (from ``seed``) with
    ``params`` as its parameters and its opponent's, default hyperparameters, and ``about`` as
    the run's description."""

    state = make_trainer(config).init(seed)
    state = state.replace(params=params, opponent_params=params)
    checkpoint.save(path, state, config.to_dict(), HParams.create().to_dict(), about)


def check_student(path: str, held_boards: np.ndarray, held_targets: np.ndarray) -> dict:
    """The student's scores: ``held_out_agreement`` (how often its greedy move on the held-out
    positions is the teacher's favourite; None when none are held out) and
    ``student_accuracy`` (on the solver-labelled positions, without the per-ply breakdown)."""

    student = load_agent(path)
    _, _, greedy = policy(student, held_boards)
    return {
        "held_out_agreement": float((greedy == held_targets.argmax(1)).mean()) if len(held_boards) else None,
        "student_accuracy": {k: v for k, v in accuracy(student, load_positions()).items() if k != "by_ply"},
    }


def format_report(report: dict) -> str:
    acc, losses = report["student_accuracy"], report["losses"]
    return "\n".join(
        [
            f"{report['student']}: {report['model']} distilled from {report['teacher']} on "
            f"{report['positions']:,} positions of {report['games']:,} games, {report['epochs']} epochs "
            f"(loss {losses[0]:.4f} -> {losses[-1]:.4f})",
            f"held-out positions: its greedy move is the teacher's favourite on {report['held_out_agreement']:.3f}",
            f"solver-labelled positions: greedy move optimal {acc['greedy_optimal']:.3f}, "
            f"keeps the outcome {acc['greedy_keeps_outcome']:.3f}",
        ]
    )
