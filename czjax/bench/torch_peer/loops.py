"""The PyTorch project's training loops: one iteration (a batch of games, one update), its
``self_play_loop`` (:func:`self_play`) and ``train_against_opponents`` (:func:`train_against`)
with rows of means as czjax logs them, its optimizers' weight decays, and the timed iteration of
``czjax bench train`` (:func:`bench_train`).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from czjax.bench.torch_peer.base import import_torch
from czjax.bench.torch_peer.games import play_batch
from czjax.bench.torch_peer.models import build_model
from czjax.bench.torch_peer.updates import AGAINST_OPPONENTS, SELF_PLAY, Update, update


class Learner(NamedTuple):
    """The learner's side of the loops: its model, the opponent it plays (a frozen copy, or
    :class:`RandomPunisher`) and its optimizer."""

    model: Any
    opponent: Any
    optimizer: Any


@dataclasses.dataclass(frozen=True)
class Promotion:
    """The project's promotion rule in ``self_play_loop``: every ``every`` batches, the learner
    is copied into the opponent when its score over the last ``window`` batches exceeds
    ``threshold`` (the blog's 100, 20 and 52%)."""

    every: int = 100
    window: int = 20
    threshold: float = 0.52


@dataclasses.dataclass(frozen=True)
class Logging:
    """What the loops report: a row of means every ``every`` batches (and at the last), with
    ``evaluate(model) -> dict`` merged in when given; ``on_batch`` and ``on_row`` see each
    batch's metrics and each row as they come."""

    every: int = 20
    evaluate: Callable | None = None
    on_batch: Callable[[dict], None] | None = None
    on_row: Callable[[dict], None] | None = None


BLOG_PROMOTION = Promotion()
ROWS_OF_20 = Logging()


def train_iteration(learner: Learner, games: int, settings: Update = SELF_PLAY) -> dict:
    """One training iteration (a batch of games, one update); per-batch metrics. ``score`` is
    the PyTorch project's win rate (a draw counts half), which its promotion rule reads;
    ``win_rate`` counts wins only, as czjax's does."""
    batch = play_batch(learner.model, learner.opponent, games)
    metrics = update(learner.model, learner.optimizer, batch, settings)
    outcome = batch["outcome"]
    metrics.update(
        win_rate=float((outcome == 1).mean()),
        draw_rate=float((outcome == 0).mean()),
        score=float((outcome == 1).mean() + 0.5 * (outcome == 0).mean()),
        game_length=float(batch["length"].mean()),
    )
    return metrics


def iteration(model, opponent, optimizer, games: int, rng: np.random.Generator | None = None) -> int:
    """One training iteration with examples 1-3's settings; returns the number of learner
    positions trained on (the benchmark's unit). ``rng`` is unused: sampling draws from
    PyTorch's generator."""
    return train_iteration(Learner(model, opponent, optimizer), games)["positions"]


ROW_MEANS = (
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "returns_std",
    "advantage_std",
    "win_rate",
    "draw_rate",
    "score",
    "game_length",
)
PPO_MEANS = ("ppo_epochs", "ppo_kl", "ppo_clip_fraction")  # in the rows of PPO runs, as czjax's


def _logged_rows(train_batch: Callable[[int], tuple[dict, int]], model, batches: int, games: int, log: Logging):
    """Run ``train_batch(step) -> (metrics, promotions so far)`` for ``batches`` batches, with
    rows of means as ``log`` says."""
    recent: list[dict] = []
    rows = []
    positions = 0
    start = time.perf_counter()
    for step in range(1, batches + 1):
        metrics, promotions = train_batch(step)
        metrics.update(batch=step, games=step * games)
        if log.on_batch:
            log.on_batch(metrics)
        recent.append(metrics)
        positions += metrics["positions"]
        if step % log.every == 0 or step == batches:
            keys = ROW_MEANS + tuple(k for k in PPO_MEANS if k in metrics)
            row = {key: statistics.fmean(m[key] for m in recent) for key in keys}
            row.update(positions=positions, batches=step, games=step * games, promotions=promotions)
            if log.evaluate is not None:
                row.update(log.evaluate(model))
            row["elapsed_s"] = time.perf_counter() - start
            row["games_per_s"] = step * games / row["elapsed_s"]
            rows.append(row)
            if log.on_row:
                log.on_row(row)
            recent, positions = [], 0
    return rows


def self_play(
    learner: Learner,
    batches: int,
    games: int,
    settings: Update = SELF_PLAY,
    promotion: Promotion = BLOG_PROMOTION,
    log: Logging = ROWS_OF_20,
) -> list[dict]:
    """The PyTorch project's ``self_play_loop`` for ``batches`` batches: train against the frozen
    opponent, promoted as ``promotion`` says (the learner's score counts a draw half). Rows of
    means as ``log`` says (czjax's metric names, plus ``score``; the project plays 100 games
    against RandomPunisher in its ``evaluate``). Returns the rows."""
    scores: list[float] = []
    promotions = 0

    def train_batch(step: int) -> tuple[dict, int]:
        nonlocal scores, promotions
        metrics = train_iteration(learner, games, settings)
        scores = (scores + [metrics["score"]])[-promotion.window :]
        if (
            step % promotion.every == 0
            and len(scores) == promotion.window
            and statistics.fmean(scores) > promotion.threshold
        ):
            learner.opponent.load_state_dict(learner.model.state_dict())
            promotions += 1
        return metrics, promotions

    return _logged_rows(train_batch, learner.model, batches, games, log)


def train_against(
    learner: Learner, batches: int, games: int, settings: Update = AGAINST_OPPONENTS, log: Logging = ROWS_OF_20
) -> list[dict]:
    """The PyTorch project's ``train_against_opponents`` with one fixed opponent (examples 4
    and 5: :class:`RandomPunisher`, A2C or PPO) for ``batches`` batches: no promotion, the
    learner updated after every batch as ``settings`` say (:func:`update`). Rows as
    :func:`self_play`'s (promotions always 0), plus PPO's ``ppo_epochs``, ``ppo_kl`` and
    ``ppo_clip_fraction``. The project's optimizer here is ``AdamW(lr, weight_decay=0)``
    (:data:`AGAINST_OPPONENTS_WEIGHT_DECAY`), which the caller builds."""

    def train_batch(step: int) -> tuple[dict, int]:
        return train_iteration(learner, games, settings), 0

    return _logged_rows(train_batch, learner.model, batches, games, log)


# The PyTorch project's optimizers: ``self_play_loop`` makes ``AdamW(lr)`` (PyTorch's default
# weight decay, 0.01); ``train_against_opponents`` makes ``AdamW(lr, weight_decay=WEIGHT_DECAY)``,
# whose ``set_params`` default (examples 4 and 5 leave it) is 0.
SELF_PLAY_WEIGHT_DECAY = 0.01
AGAINST_OPPONENTS_WEIGHT_DECAY = 0.0


def bench_train(
    model_name: str, games_per_batch: int, runs: int, steps: int, threads: int = 2, device: str | None = None
) -> dict:
    """Median seconds per iteration over ``runs`` runs of ``steps`` iterations (after a warm-up
    one), on ``device`` (default: CUDA when PyTorch sees a GPU, else the CPU with ``threads``)."""
    torch = import_torch()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, opponent = build_model(model_name).to(device), build_model(model_name).to(device)
    opponent.load_state_dict(model.state_dict())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=SELF_PLAY_WEIGHT_DECAY)
    rng = np.random.default_rng(0)
    iteration(model, opponent, optimizer, games_per_batch, rng)  # warm-up
    times, positions = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(steps):
            positions += iteration(model, opponent, optimizer, games_per_batch, rng)
        times.append((time.perf_counter() - start) / steps)
    per_iteration = statistics.median(times)
    return {
        "games_per_s": games_per_batch / per_iteration,
        "positions_per_s": positions / (runs * steps) / per_iteration,
        "iteration_s": per_iteration,
        "threads": threads,
        "device": device,
        "torch": torch.__version__,
    }
