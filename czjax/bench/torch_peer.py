"""The PyTorch project's training iteration and self-play loop: the baseline of ``czjax bench
train --peer torch`` (speed) and of ``experiments/same_start.py`` (learning curves from the same
initial weights).

It does what the PyTorch project's loop does, in the same way:
- a batch of self-play games against a frozen copy, half with each side starting;
- on every ply, one forward pass per model over the live games where that model is to move
  (Python loops over plies, NumPy boards, ``torch.multinomial`` sampling);
- then Monte-Carlo returns, REINFORCE (with baseline and value loss when the model has a
  value head) plus the entropy bonus, summed, and one ``torch.optim.AdamW`` step.

The models are the PyTorch project's layers with its module names (so czjax's weights load
with :func:`czjax.interop.torch_layout.to_state_dict`). :func:`self_play` is the project's ``self_play_loop``
(example 3): promotion of the frozen copy every 100 batches when the learner's score over the
last 20 batches, a draw counting half as in the project, exceeds 52%. Needs PyTorch; imports no
JAX (the caller evaluates against RandomPunisher, e.g. with czjax after importing the weights).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

ROWS, COLS = 6, 7


def _torch():
    try:
        import torch
    except ImportError:
        raise ValueError("the PyTorch peer needs PyTorch: pip install torch==2.13.0 (CPU build)") from None
    return torch


def build_model(name: str):
    """``SimpleMLPModel``, ``Connect4MLP3`` or ``Connect4CNN_Mk4`` returning ``(logits, value or None)``."""
    torch = _torch()
    nn: Any = torch.nn  # torch is imported on call: nn is a value here, Any lets Peer subclass nn.Module

    class Peer(nn.Module):
        def __init__(self):
            super().__init__()
            self.kind = name
            if name == "mlp":
                layers = _mlp_layers(nn)
            elif name == "mlp3":
                layers = _mlp3_layers(nn)
            else:
                layers = _cnn_mk4_layers(nn, value_head=name == "cnn-mk4-value")
            for attribute, module in layers.items():  # in the PyTorch project's order: its state_dict's
                setattr(self, attribute, module)

        def forward(self, boards):
            if self.kind == "mlp":
                return self.layers(boards.float()), None
            if self.kind == "mlp3":
                out = self.layers(boards.float())
                return out[:, :7], torch.tanh(out[:, 7])
            x = torch.stack([boards == 1, boards == -1, boards == 0], dim=1).float()
            x = self.feature_extractor(x)
            for block in (self.resblock1, self.resblock2, self.resblock3):
                x = torch.relu(x + block(x))
            features = self.downsample(x).view(-1, 448)
            value = self.value_head(features)[:, 0] if self.value_head is not None else None
            return self.fc_layers(features), value

    return Peer()


def _stack(nn, layers):
    """``layers`` after a flatten, numbered ``layers.i`` as in the PyTorch project."""
    return nn.Sequential(nn.Flatten(), *layers)


def _mlp_layers(nn) -> dict[str, Any]:
    """``SimpleMLPModel``'s modules (made in this order: it decides their initial weights)."""
    return {"layers": _stack(nn, [nn.Linear(42, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 7)])}


def _mlp3_layers(nn) -> dict[str, Any]:
    """``Connect4MLP3``'s modules: seven hidden layers, then 7 logits and a value."""
    hidden = []
    for i in range(7):
        hidden += [nn.Linear(42 if i == 0 else 256, 256, bias=False), nn.LayerNorm(256), nn.ReLU()]
    return {"layers": _stack(nn, hidden + [nn.Linear(256, 8)])}


def _cnn_mk4_layers(nn, value_head: bool) -> dict[str, Any]:
    """``Connect4CNN_Mk4``'s modules by attribute name, in the order they are made and registered;
    ``value_head`` None unless asked for."""
    conv = lambda c_in: nn.Conv2d(c_in, 64, 3, padding=1, bias=False)  # noqa: E731
    layers = {"feature_extractor": nn.Sequential(conv(3), nn.GroupNorm(16, 64), nn.ReLU())}
    for i in (1, 2, 3):
        layers[f"resblock{i}"] = nn.Sequential(
            conv(64), nn.GroupNorm(16, 64), nn.ReLU(), conv(64), nn.GroupNorm(16, 64)
        )
    layers["downsample"] = nn.Conv2d(64, 64, (6, 1), bias=False)
    layers["fc_layers"] = nn.Sequential(
        nn.Linear(448, 128, bias=False),
        nn.LayerNorm(128),
        nn.ReLU(),
        nn.Linear(128, 128, bias=False),
        nn.LayerNorm(128),
        nn.ReLU(),
        nn.Linear(128, 7),
    )
    layers["value_head"] = (
        nn.Sequential(nn.Linear(448, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1), nn.Tanh())
        if value_head
        else None
    )
    return layers


def _fours(mine: np.ndarray) -> np.ndarray:
    """``(k,)``: four in a row among ``mine (k, 6, 7)``."""
    m = mine
    return (
        (m[:, :, :-3] & m[:, :, 1:-2] & m[:, :, 2:-1] & m[:, :, 3:]).any((1, 2))
        | (m[:, :-3] & m[:, 1:-2] & m[:, 2:-1] & m[:, 3:]).any((1, 2))
        | (m[:, :-3, :-3] & m[:, 1:-2, 1:-2] & m[:, 2:-1, 2:-1] & m[:, 3:, 3:]).any((1, 2))
        | (m[:, :-3, 3:] & m[:, 1:-2, 2:-1] & m[:, 2:-1, 1:-2] & m[:, 3:, :-3]).any((1, 2))
    )


def play_batch(model, opponent, games: int) -> dict:
    """A batch of self-play games against the frozen ``opponent``, as the PyTorch project plays
    them: half (rounded up) with the learner first, sampling at temperature 1 on every ply.

    Returns ``history``: per game, the learner's ``(board, column)`` moves in order (boards
    canonical, the learner to move); ``outcome (games,)`` for the learner (+1, 0, -1); and
    ``length (games,)`` in plies."""
    torch = _torch()
    device = next(model.parameters()).device  # the project moves boards to the model's device per ply
    boards = np.zeros((games, ROWS, COLS), np.int8)  # canonical: +1 = side to move
    done = np.zeros(games, bool)
    outcome = np.zeros(games, np.float32)  # for the learner
    length = np.zeros(games, np.int32)
    learner_first = np.arange(games) < games - games // 2
    history: list[list[tuple[np.ndarray, int]]] = [[] for _ in range(games)]
    for ply in range(ROWS * COLS):
        if done.all():
            break
        learner_moves = (ply % 2 == 0) == learner_first
        for net, mask in ((model, ~done & learner_moves), (opponent, ~done & ~learner_moves)):
            idx = np.flatnonzero(mask)
            if idx.size == 0:
                continue
            with torch.no_grad():
                logits, _ = net(torch.from_numpy(boards[idx]).to(device))
            legal = torch.from_numpy(boards[idx, 0, :] == 0).to(device)
            probs = torch.softmax(logits.masked_fill(~legal, float("-inf")), dim=-1)
            cols = torch.multinomial(probs, 1)[:, 0].cpu().numpy()
            if net is model:
                for g, c in zip(idx, cols):
                    history[g].append((boards[g].copy(), int(c)))
            rows = (boards[idx] != 0).argmax(1)  # first filled row per column (6 if empty)
            filled = (boards[idx] != 0).any(1)
            drop = np.where(filled, rows, ROWS)[np.arange(idx.size), cols] - 1
            boards[idx, drop, cols] = 1
            length[idx] += 1
            won = _fours(boards[idx] == 1)
            full = (boards[idx] != 0).all((1, 2))
            outcome[idx[won]] = np.where(net is model, 1.0, -1.0)
            done[idx[won | full]] = True
            boards[idx] = -boards[idx]
    return {"history": history, "outcome": outcome, "length": length}


def discounted_returns(outcome: float, moves: int, gamma: float) -> np.ndarray:
    """``outcome * gamma**k`` for each of a player's ``moves``, ``k`` its own moves still to come
    (the PyTorch project's ``compute_rewards`` without bootstrapping)."""
    return (outcome * gamma ** np.arange(moves - 1, -1, -1, dtype=np.float64)).astype(np.float32)


def update(model, optimizer, batch: dict, entropy_bonus=0.05, value_weight=0.5, gamma=0.9) -> dict:
    """The PyTorch project's ``update_policy`` (REINFORCE, with baseline when the model has a
    value head) on a batch from :func:`play_batch`: one AdamW step on summed losses. Returns
    per-position metrics as czjax reports them (weighted value loss, population std)."""
    torch = _torch()
    xs, acts, returns = [], [], []
    for g, moves in enumerate(batch["history"]):
        returns.append(discounted_returns(float(batch["outcome"][g]), len(moves), gamma))
        for b, a in moves:
            xs.append(b)
            acts.append(a)
    device = next(model.parameters()).device
    x = torch.from_numpy(np.stack(xs)).to(device)
    actions = torch.tensor(acts, device=device)
    g_t = torch.from_numpy(np.concatenate(returns)).to(device)
    logits, values = model(x)
    logits = logits + (x[:, 0, :] != 0).float() * -1e9
    log_p = torch.log_softmax(logits, dim=-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    taken = log_p.gather(1, actions[:, None])[:, 0]
    if values is None:
        advantage = g_t
        value_loss = torch.zeros((), device=device)
    else:
        advantage = (g_t - values).detach()
        weight = torch.where(g_t.abs() == 1.0, 2.0, 1.0)  # terminal positions of decided games
        value_loss = (weight * (values - g_t) ** 2).sum()
    policy_loss = -(advantage * taken).sum()
    loss = policy_loss + value_weight * value_loss - entropy_bonus * entropy.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    n = len(acts)
    return {
        "positions": n,
        "loss": loss.item() / n,
        "policy_loss": policy_loss.item() / n,
        "value_loss": value_loss.item() / n,
        "entropy": entropy.mean().item(),
        "returns_std": g_t.std(unbiased=False).item(),
        "advantage_std": advantage.std(unbiased=False).item(),
    }


def train_iteration(model, opponent, optimizer, games: int, entropy_bonus=0.05, value_weight=0.5, gamma=0.9) -> dict:
    """One training iteration (a batch of games, one update); per-batch metrics. ``score`` is
    the PyTorch project's win rate (a draw counts half), which its promotion rule reads;
    ``win_rate`` counts wins only, as czjax's does."""
    batch = play_batch(model, opponent, games)
    metrics = update(model, optimizer, batch, entropy_bonus, value_weight, gamma)
    outcome = batch["outcome"]
    metrics.update(
        win_rate=float((outcome == 1).mean()),
        draw_rate=float((outcome == 0).mean()),
        score=float((outcome == 1).mean() + 0.5 * (outcome == 0).mean()),
        game_length=float(batch["length"].mean()),
    )
    return metrics


def iteration(
    model,
    opponent,
    optimizer,
    games: int,
    rng: np.random.Generator | None = None,
    entropy_bonus=0.05,
    value_weight=0.5,
    gamma=0.9,
) -> int:
    """One training iteration; returns the number of learner positions trained on (the
    benchmark's unit). ``rng`` is unused: sampling draws from PyTorch's generator."""
    return train_iteration(model, opponent, optimizer, games, entropy_bonus, value_weight, gamma)["positions"]


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


def self_play(
    model,
    opponent,
    optimizer,
    batches: int,
    games: int,
    entropy_bonus=0.05,
    value_weight=0.5,
    gamma=0.9,
    promote_every: int = 100,
    window: int = 20,
    threshold: float = 0.52,
    log_every: int = 20,
    evaluate: Callable | None = None,
    on_batch: Callable[[dict], None] | None = None,
    on_row: Callable[[dict], None] | None = None,
) -> list[dict]:
    """The PyTorch project's ``self_play_loop`` for ``batches`` batches: train against the frozen
    ``opponent``; every ``promote_every`` batches, copy the learner into it when its score
    (wins + draws / 2) over the last ``window`` batches exceeds ``threshold`` (the blog's 100,
    20 and 52%). Every ``log_every`` batches a row of means over those batches (czjax's
    metric names, plus ``score``), with ``evaluate(model) -> dict`` merged in when given (the
    project plays 100 games against RandomPunisher there). Returns the rows; ``on_batch`` and
    ``on_row`` see each batch's metrics and each row as they come."""
    recent: list[dict] = []
    scores: list[float] = []
    rows = []
    promotions, positions = 0, 0
    start = time.perf_counter()
    for step in range(1, batches + 1):
        metrics = train_iteration(model, opponent, optimizer, games, entropy_bonus, value_weight, gamma)
        metrics.update(batch=step, games=step * games)
        if on_batch:
            on_batch(metrics)
        recent.append(metrics)
        scores = (scores + [metrics["score"]])[-window:]
        positions += metrics["positions"]
        if step % promote_every == 0 and len(scores) == window and statistics.fmean(scores) > threshold:
            opponent.load_state_dict(model.state_dict())
            promotions += 1
        if step % log_every == 0 or step == batches:
            row = {key: statistics.fmean(m[key] for m in recent) for key in ROW_MEANS}
            row.update(positions=positions, batches=step, games=step * games, promotions=promotions)
            if evaluate is not None:
                row.update(evaluate(model))
            row["elapsed_s"] = time.perf_counter() - start
            row["games_per_s"] = step * games / row["elapsed_s"]
            rows.append(row)
            if on_row:
                on_row(row)
            recent, positions = [], 0
    return rows


def bench_train(
    model_name: str, games_per_batch: int, runs: int, steps: int, threads: int = 2, device: str | None = None
) -> dict:
    """Median seconds per iteration over ``runs`` runs of ``steps`` iterations (after a warm-up
    one), on ``device`` (default: CUDA when PyTorch sees a GPU, else the CPU with ``threads``)."""
    torch = _torch()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, opponent = build_model(model_name).to(device), build_model(model_name).to(device)
    opponent.load_state_dict(model.state_dict())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
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
