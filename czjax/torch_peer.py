"""The PyTorch project's training iteration, for ``czjax bench train --peer torch``.

A same-machine, same-run baseline for czjax's speed figures. It does what the PyTorch project's
loop does, in the same way:
- a batch of self-play games against a frozen copy, half with each side starting;
- on every ply, one forward pass per model over the live games where that model is to move
  (Python loops over plies, NumPy boards, ``torch.multinomial`` sampling);
- then Monte-Carlo returns, REINFORCE (with baseline and value loss when the model has a
  value head) plus the entropy bonus, summed, and one ``torch.optim.AdamW`` step.

The models are the PyTorch project's layers with its module names (so czjax's weights load
with :func:`czjax.torch_io.to_state_dict`). Imported only by the benchmark; needs PyTorch.
"""

from __future__ import annotations

import statistics
import time

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
    nn = torch.nn

    def stack(layers):  # "layers.i" numbering as in the PyTorch project
        return nn.Sequential(nn.Flatten(), *layers)

    class Peer(nn.Module):
        def __init__(self):
            super().__init__()
            self.kind = name
            if name == "mlp":
                self.layers = stack([nn.Linear(42, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 7)])
            elif name == "mlp3":
                hidden = []
                for i in range(7):
                    hidden += [nn.Linear(42 if i == 0 else 256, 256, bias=False), nn.LayerNorm(256), nn.ReLU()]
                self.layers = stack(hidden + [nn.Linear(256, 8)])
            else:
                conv = lambda c_in: nn.Conv2d(c_in, 64, 3, padding=1, bias=False)  # noqa: E731
                self.feature_extractor = nn.Sequential(conv(3), nn.GroupNorm(16, 64), nn.ReLU())
                for i in (1, 2, 3):
                    setattr(self, f"resblock{i}", nn.Sequential(conv(64), nn.GroupNorm(16, 64), nn.ReLU(), conv(64), nn.GroupNorm(16, 64)))
                self.downsample = nn.Conv2d(64, 64, (6, 1), bias=False)
                self.fc_layers = nn.Sequential(nn.Linear(448, 128, bias=False), nn.LayerNorm(128), nn.ReLU(),
                                               nn.Linear(128, 128, bias=False), nn.LayerNorm(128), nn.ReLU(), nn.Linear(128, 7))
                self.value_head = (nn.Sequential(nn.Linear(448, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1), nn.Tanh())
                                   if name == "cnn-mk4-value" else None)

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


def _fours(mine: np.ndarray) -> np.ndarray:
    """``(k,)``: four in a row among ``mine (k, 6, 7)``."""
    m = mine
    return (
        (m[:, :, :-3] & m[:, :, 1:-2] & m[:, :, 2:-1] & m[:, :, 3:]).any((1, 2))
        | (m[:, :-3] & m[:, 1:-2] & m[:, 2:-1] & m[:, 3:]).any((1, 2))
        | (m[:, :-3, :-3] & m[:, 1:-2, 1:-2] & m[:, 2:-1, 2:-1] & m[:, 3:, 3:]).any((1, 2))
        | (m[:, :-3, 3:] & m[:, 1:-2, 2:-1] & m[:, 2:-1, 1:-2] & m[:, 3:, :-3]).any((1, 2))
    )


def iteration(model, opponent, optimizer, games: int, rng: np.random.Generator, entropy_bonus=0.05, value_weight=0.5, gamma=0.9) -> int:
    """One training iteration; returns the number of learner positions trained on."""
    torch = _torch()
    boards = np.zeros((games, ROWS, COLS), np.int8)  # canonical: +1 = side to move
    done = np.zeros(games, bool)
    outcome = np.zeros(games, np.float32)  # for the learner
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
                logits, _ = net(torch.from_numpy(boards[idx]))
            legal = torch.from_numpy(boards[idx, 0, :] == 0)
            probs = torch.softmax(logits.masked_fill(~legal, float("-inf")), dim=-1)
            cols = torch.multinomial(probs, 1)[:, 0].numpy()
            if net is model:
                for g, c in zip(idx, cols):
                    history[g].append((boards[g].copy(), int(c)))
            rows = (boards[idx] != 0).argmax(1)  # first filled row per column (6 if empty)
            filled = (boards[idx] != 0).any(1)
            drop = np.where(filled, rows, ROWS)[np.arange(idx.size), cols] - 1
            boards[idx, drop, cols] = 1
            won = _fours(boards[idx] == 1)
            full = (boards[idx] != 0).all((1, 2))
            outcome[idx[won]] = np.where(net is model, 1.0, -1.0)
            done[idx[won | full]] = True
            boards[idx] = -boards[idx]
    xs, acts, returns = [], [], []
    for g in range(games):
        k = len(history[g])
        for i, (b, a) in enumerate(history[g]):
            xs.append(b)
            acts.append(a)
            returns.append(outcome[g] * gamma ** (k - 1 - i))
    x = torch.from_numpy(np.stack(xs))
    actions = torch.tensor(acts)
    g_t = torch.tensor(returns, dtype=torch.float32)
    logits, values = model(x)
    logits = logits + (x[:, 0, :] != 0).float() * -1e9
    log_p = torch.log_softmax(logits, dim=-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    taken = log_p.gather(1, actions[:, None])[:, 0]
    if values is None:
        loss = -(g_t * taken).sum() - entropy_bonus * entropy.sum()
    else:
        weight = torch.where(g_t.abs() == 1.0, 2.0, 1.0)
        loss = -((g_t - values).detach() * taken).sum() + value_weight * (weight * (values - g_t) ** 2).sum() - entropy_bonus * entropy.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return len(acts)


def bench_train(model_name: str, games_per_batch: int, runs: int, steps: int, threads: int = 2) -> dict:
    """Median seconds per iteration over ``runs`` runs of ``steps`` iterations (after a warm-up one)."""
    torch = _torch()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, opponent = build_model(model_name), build_model(model_name)
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
        "torch": torch.__version__,
    }
