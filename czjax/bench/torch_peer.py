"""The PyTorch project's training iteration and training loops: the baseline of ``czjax bench
train --peer torch`` (speed) and of ``experiments/same_start.py`` (learning curves from the same
initial weights).

It does what the PyTorch project's loops do, in the same way:
- a batch of games against the opponent (a frozen copy, or :class:`RandomPunisher`), half with
  each side starting;
- on every ply, one forward pass per player over the live games where it is to move (Python
  loops over plies, NumPy boards, ``torch.multinomial`` sampling);
- then the project's ``update_policy`` (:func:`update`), its losses summed over positions plus
  the entropy bonus, with ``torch.optim.AdamW`` and no gradient clipping: REINFORCE with
  Monte-Carlo returns (with baseline and value loss when the model has a value head); A2C with
  sparse rewards and one-step TD targets ``r + gamma V(next own position)``; or PPO (clipped
  ratio, several epochs, the KL early stop after the step that exceeds the target).

The models are the PyTorch project's layers with its module names (so czjax's weights load
with :func:`czjax.models.torch_layout.to_state_dict`). :class:`RandomPunisher` is the project's
(wins now, else blocks, else uniform; the first such column from the left, where czjax draws
among ties). The loops:

- :func:`self_play` is the project's ``self_play_loop`` (examples 1-3): REINFORCE against a
  frozen copy, promoted every 100 batches when the learner's score over the last 20 batches, a
  draw counting half as in the project, exceeds 52%;
- :func:`train_against` is its ``train_against_opponents`` with one opponent (examples 4 and 5:
  A2C or PPO against RandomPunisher, AdamW without weight decay as the project sets it there).

Needs PyTorch; imports no JAX (the caller evaluates against RandomPunisher, e.g. with czjax
after importing the weights).
"""

from __future__ import annotations

import dataclasses
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


def _drop_rows(boards: np.ndarray) -> np.ndarray:
    """``(k, 7)``: the row a piece dropped into each column lands on, -1 for a full column (row
    0 is the top: a column's empty cells are its top ones)."""
    return (boards == 0).sum(1) - 1


def winning_columns(boards: np.ndarray) -> np.ndarray:
    """``bool (k, 7)``: the columns where the side to move (+1) of ``boards (k, 6, 7)`` completes
    four in a row by dropping a piece."""
    k = boards.shape[0]
    rows = _drop_rows(boards)
    legal = rows >= 0
    trials = np.repeat(boards[:, None], COLS, axis=1)  # (k, 7, 6, 7): one copy per column tried
    games, cols = np.arange(k)[:, None], np.arange(COLS)[None, :]
    trials[games, cols, np.maximum(rows, 0), cols] = np.where(legal, 1, trials[games, cols, np.maximum(rows, 0), cols])
    return _fours(trials.reshape(-1, ROWS, COLS) == 1).reshape(k, COLS) & legal


# The PyTorch project's RandomPunisher returns log(one_hot + 1e-12) for a forced column: this on
# the others (about -27.6, a 1e-12 chance each under softmax), 0 on the forced one.
PUNISHER_OTHER_LOGIT = float(np.log(np.float32(1e-12)))


def random_punisher_logits(boards: np.ndarray) -> np.ndarray:
    """The PyTorch project's ``RandomPunisher`` (``find_best_move``) on ``boards (k, 6, 7)``:
    ``float32 (k, 7)`` logits. It looks for a column that wins now, then for one where the
    opponent would win next (a block), each scanned from column 0, and forces the first it finds;
    with neither, all logits are 0 (uniform over the legal columns once the sampler masks them).
    czjax's ``players.random_punisher`` spreads ties (two wins, two threats) uniformly instead."""
    wins, threats = winning_columns(boards), winning_columns(-boards)
    forced = np.where(wins.any(1), wins.argmax(1), np.where(threats.any(1), threats.argmax(1), -1))
    logits = np.zeros(boards.shape[:1] + (COLS,), np.float32)
    some = np.flatnonzero(forced >= 0)
    logits[some] = PUNISHER_OTHER_LOGIT
    logits[some, forced[some]] = 0.0
    return logits


class RandomPunisher:
    """The PyTorch project's ``RandomPunisher`` as a player of :func:`play_batch`: ``boards`` (a
    tensor) to ``(logits, None)`` (:func:`random_punisher_logits`). It has no weights."""

    def __call__(self, boards):
        torch = _torch()
        logits = random_punisher_logits(boards.cpu().numpy())
        return torch.from_numpy(logits).to(boards.device), None


def play_batch(model, opponent, games: int) -> dict:
    """A batch of games against ``opponent`` (a frozen copy, or :class:`RandomPunisher`), as the
    PyTorch project plays them: half (rounded up) with the learner first, sampling at temperature
    1 on every ply (the opponent too: the project's ``OPPONENT_TEMPERATURE`` is 1).

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
            drop = _drop_rows(boards[idx])[np.arange(idx.size), cols]
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


def sparse_rewards(outcome: float, moves: int) -> np.ndarray:
    """``outcome`` on a player's last move, 0 on the others (the PyTorch project's
    ``compute_rewards`` with ``BOOTSTRAP_VALUE``: A2C, and PPO as example 5 runs it)."""
    rewards = np.zeros(moves, np.float32)
    rewards[-1] = outcome
    return rewards


ALGORITHMS = ("reinforce", "a2c", "ppo")


@dataclasses.dataclass(frozen=True)
class PPO:
    """PPO's settings, as the PyTorch project's ``set_params`` has them in example 5."""

    clip: float = 0.2  # PPO_CLIP_EPSILON
    epochs: int = 4  # PPO_EPOCHS
    target_kl: float | None = 0.01  # PPO_TARGET_KL; None: never stop early
    bootstrap: bool = True  # BOOTSTRAP_VALUE: one-step TD targets; False: Monte-Carlo returns


def learner_tensors(batch: dict, gamma: float, bootstrap: bool, device) -> dict:
    """The learner's positions of a batch from :func:`play_batch`, game by game in move order
    (as the project orders them: its ``roll`` reads the next position of the same game), as
    tensors: ``states (N, 6, 7)`` int8, ``actions (N,)``, ``rewards (N,)`` (sparse when
    ``bootstrap``, else Monte-Carlo returns) and ``done (N,)`` (each game's last learner move)."""
    torch = _torch()
    states, actions, rewards, done = [], [], [], []
    for g, moves in enumerate(batch["history"]):
        outcome = float(batch["outcome"][g])
        rewards.append(
            sparse_rewards(outcome, len(moves)) if bootstrap else discounted_returns(outcome, len(moves), gamma)
        )
        done.append(np.arange(len(moves)) == len(moves) - 1)
        for board, column in moves:
            states.append(board)
            actions.append(column)
    return {
        "states": torch.from_numpy(np.stack(states)).to(device),
        "actions": torch.tensor(actions, device=device),
        "rewards": torch.from_numpy(np.concatenate(rewards)).to(device),
        "done": torch.from_numpy(np.concatenate(done)).to(device),
    }


def policy_outputs(model, states, actions) -> tuple:
    """``(log_p (N, 7), log_p_taken (N,), entropy (N,), values (N,) or None)`` with gradient;
    illegal columns get -1e9 added before the log-softmax (the project's finite mask)."""
    torch = _torch()
    logits, values = model(states)
    log_p = torch.log_softmax(logits + (states[:, 0, :] != 0).float() * -1e9, dim=-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    return log_p, log_p.gather(1, actions[:, None])[:, 0], entropy, values


def value_targets(values, rewards, done, gamma: float, bootstrap: bool):
    """The project's ``v_target``. Bootstrapped: ``r + gamma * V(next own position)`` where the
    next position is the next in the batch (``torch.roll``), 0 after a game's last move, the
    values detached. Otherwise (or without a value head) the rewards, Monte-Carlo returns."""
    torch = _torch()
    if not bootstrap or values is None:
        return rewards
    next_values = torch.roll(values.detach(), shifts=-1).masked_fill(done, 0.0)
    return rewards + gamma * next_values


def terminal_weight(rewards):
    """The value loss's weight: 2 where the reward is +-1 (a decided game's last move, or its
    Monte-Carlo return there), else 1."""
    torch = _torch()
    return torch.where(rewards.abs() == 1.0, 2.0, 1.0)


def policy_gradient_loss(log_p_taken, entropy, values, targets, weight, entropy_bonus: float, value_weight: float):
    """REINFORCE (``values is None``: the targets weigh the log-probabilities), REINFORCE with
    baseline or A2C (advantage ``targets - V`` detached, value loss ``sum(w (V - targets)^2)``),
    minus the entropy bonus; sums over positions. ``(loss, policy_loss, value_loss, advantage)``."""
    torch = _torch()
    if values is None:
        advantage, value_loss = targets, torch.zeros((), device=targets.device)
    else:
        advantage = (targets - values).detach()
        value_loss = (weight * (values - targets) ** 2).sum()
    policy_loss = -(advantage * log_p_taken).sum()
    loss = policy_loss + value_weight * value_loss - entropy_bonus * entropy.sum()
    return loss, policy_loss, value_loss, advantage


def ppo_loss(
    log_p_taken,
    entropy,
    values,
    old_log_p_taken,
    advantage,
    targets,
    weight,
    clip: float,
    entropy_bonus: float,
    value_weight: float,
):
    """PPO's clipped objective ``-sum(min(rho A, clip(rho, 1 - eps, 1 + eps) A))``, ``rho`` the
    ratio of the taken move's probability to the starting policy's, plus the value loss towards
    the fixed ``targets`` and minus the entropy bonus. ``(loss, policy_loss, value_loss,
    clipped)``, ``clipped`` the number of positions whose ratio was clipped."""
    torch = _torch()
    ratio = torch.exp(log_p_taken - old_log_p_taken)
    clipped_ratio = torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    policy_loss = -torch.min(ratio * advantage, clipped_ratio * advantage).sum()
    value_loss = (weight * (values - targets) ** 2).sum()
    loss = policy_loss + value_weight * value_loss - entropy_bonus * entropy.sum()
    return loss, policy_loss, value_loss, int((ratio != clipped_ratio).sum())


def _step(optimizer, loss) -> None:
    """One optimizer step on ``loss`` (the project clips no gradient: ``GRAD_NORM_CLIPPING`` is None)."""
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def ppo_epochs(model, optimizer, tensors: dict, first: tuple, targets, weight, ppo: PPO, entropy_bonus, value_weight):
    """The project's PPO epochs. The advantage ``targets - V`` and the starting log-probabilities
    come from the starting forward pass ``first`` (:func:`policy_outputs`), which also serves
    epoch 0. Each epoch: forward (after epoch 0), loss, one AdamW step, then the mean KL from the
    starting policy to the policy of that epoch's forward pass; above ``ppo.target_kl`` no
    further epoch, so the epoch that exceeds it still takes its step. Returns the loss terms
    at the starting policy (czjax reports those), the steps taken, the last epoch's KL and
    clipped fraction, and the advantage."""
    torch = _torch()
    old_log_p, old_log_p_taken = first[0].detach(), first[1].detach()
    advantage = (targets - first[3]).detach()
    n = targets.shape[0]
    outputs, start = first, None
    for epoch in range(ppo.epochs):
        if epoch > 0:
            outputs = policy_outputs(model, tensors["states"], tensors["actions"])
        log_p, log_p_taken, entropy, values = outputs
        loss, policy_loss, value_loss, clipped = ppo_loss(
            log_p_taken,
            entropy,
            values,
            old_log_p_taken,
            advantage,
            targets,
            weight,
            ppo.clip,
            entropy_bonus,
            value_weight,
        )
        if start is None:
            start = (loss.item(), policy_loss.item(), value_loss.item())
        _step(optimizer, loss)
        with torch.no_grad():
            kl = float((old_log_p.exp() * (old_log_p - log_p)).sum(1).mean())
        if ppo.target_kl is not None and kl > ppo.target_kl:
            break
    assert start is not None, "PPO runs at least one epoch"
    return {
        "loss": start[0],
        "policy_loss": start[1],
        "value_loss": start[2],
        "ppo_epochs": float(epoch + 1),
        "ppo_kl": kl,
        "ppo_clip_fraction": clipped / n,
        "advantage": advantage,
    }


def update(
    model,
    optimizer,
    batch: dict,
    entropy_bonus=0.05,
    value_weight=0.5,
    gamma=0.9,
    algorithm: str = "reinforce",
    ppo: PPO | None = None,
) -> dict:
    """The PyTorch project's ``update_policy`` on a batch from :func:`play_batch`, summed
    losses. ``reinforce``: Monte-Carlo returns, with baseline when the model has a value head
    (examples 1-3); ``a2c``: sparse rewards and one-step TD targets (example 4); ``ppo``: ``ppo``'s
    epochs (example 5: TD targets too). One AdamW step, PPO up to ``ppo.epochs``. Returns
    per-position metrics as czjax reports them (weighted value loss, population std; the std of
    the value targets as ``returns_std``; PPO's loss terms at the starting policy)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; the PyTorch peer runs {', '.join(ALGORITHMS)}")
    ppo = ppo or PPO()
    bootstrap = algorithm == "a2c" or (algorithm == "ppo" and ppo.bootstrap)
    device = next(model.parameters()).device
    tensors = learner_tensors(batch, gamma, bootstrap, device)
    first = policy_outputs(model, tensors["states"], tensors["actions"])
    _, log_p_taken, entropy, values = first
    if values is None and algorithm != "reinforce":
        raise ValueError(f"{algorithm} needs a model with a value head")
    targets = value_targets(values, tensors["rewards"], tensors["done"], gamma, bootstrap)
    weight = terminal_weight(tensors["rewards"])
    n = targets.shape[0]
    if algorithm == "ppo":
        metrics = ppo_epochs(model, optimizer, tensors, first, targets, weight, ppo, entropy_bonus, value_weight)
        advantage = metrics.pop("advantage")
    else:
        loss, policy_loss, value_loss, advantage = policy_gradient_loss(
            log_p_taken, entropy, values, targets, weight, entropy_bonus, value_weight
        )
        _step(optimizer, loss)
        metrics = {"loss": loss.item(), "policy_loss": policy_loss.item(), "value_loss": value_loss.item()}
    for key in ("loss", "policy_loss", "value_loss"):
        metrics[key] /= n
    return metrics | {
        "positions": n,
        "entropy": entropy.mean().item(),
        "returns_std": targets.std(unbiased=False).item(),
        "advantage_std": advantage.std(unbiased=False).item(),
    }


def train_iteration(
    model,
    opponent,
    optimizer,
    games: int,
    entropy_bonus=0.05,
    value_weight=0.5,
    gamma=0.9,
    algorithm: str = "reinforce",
    ppo: PPO | None = None,
) -> dict:
    """One training iteration (a batch of games, one update); per-batch metrics. ``score`` is
    the PyTorch project's win rate (a draw counts half), which its promotion rule reads;
    ``win_rate`` counts wins only, as czjax's does."""
    batch = play_batch(model, opponent, games)
    metrics = update(model, optimizer, batch, entropy_bonus, value_weight, gamma, algorithm, ppo)
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
PPO_MEANS = ("ppo_epochs", "ppo_kl", "ppo_clip_fraction")  # in the rows of PPO runs, as czjax's


def _logged_rows(
    train_batch: Callable[[int], tuple[dict, int]],
    model,
    batches: int,
    games: int,
    log_every: int,
    evaluate: Callable | None,
    on_batch: Callable[[dict], None] | None,
    on_row: Callable[[dict], None] | None,
) -> list[dict]:
    """Run ``train_batch(step) -> (metrics, promotions so far)`` for ``batches`` batches; every
    ``log_every`` batches (and at the last) a row of means over those batches, with
    ``evaluate(model) -> dict`` merged in when given."""
    recent: list[dict] = []
    rows = []
    positions = 0
    start = time.perf_counter()
    for step in range(1, batches + 1):
        metrics, promotions = train_batch(step)
        metrics.update(batch=step, games=step * games)
        if on_batch:
            on_batch(metrics)
        recent.append(metrics)
        positions += metrics["positions"]
        if step % log_every == 0 or step == batches:
            keys = ROW_MEANS + tuple(k for k in PPO_MEANS if k in metrics)
            row = {key: statistics.fmean(m[key] for m in recent) for key in keys}
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
    scores: list[float] = []
    promotions = 0

    def train_batch(step: int) -> tuple[dict, int]:
        nonlocal scores, promotions
        metrics = train_iteration(model, opponent, optimizer, games, entropy_bonus, value_weight, gamma)
        scores = (scores + [metrics["score"]])[-window:]
        if step % promote_every == 0 and len(scores) == window and statistics.fmean(scores) > threshold:
            opponent.load_state_dict(model.state_dict())
            promotions += 1
        return metrics, promotions

    return _logged_rows(train_batch, model, batches, games, log_every, evaluate, on_batch, on_row)


def train_against(
    model,
    opponent,
    optimizer,
    batches: int,
    games: int,
    algorithm: str = "a2c",
    entropy_bonus=0.05,
    value_weight=1.5,
    gamma=0.9,
    ppo: PPO | None = None,
    log_every: int = 20,
    evaluate: Callable | None = None,
    on_batch: Callable[[dict], None] | None = None,
    on_row: Callable[[dict], None] | None = None,
) -> list[dict]:
    """The PyTorch project's ``train_against_opponents`` with one fixed ``opponent`` (examples 4
    and 5: :class:`RandomPunisher`, A2C or PPO) for ``batches`` batches: no promotion, the
    learner updated after every batch with ``algorithm`` (:func:`update`). Rows as
    :func:`self_play`'s (promotions always 0), plus PPO's ``ppo_epochs``, ``ppo_kl`` and
    ``ppo_clip_fraction``. The project's optimizer here is ``AdamW(lr, weight_decay=0)``
    (:data:`AGAINST_OPPONENTS_WEIGHT_DECAY`), which the caller builds."""

    def train_batch(step: int) -> tuple[dict, int]:
        metrics = train_iteration(model, opponent, optimizer, games, entropy_bonus, value_weight, gamma, algorithm, ppo)
        return metrics, 0

    return _logged_rows(train_batch, model, batches, games, log_every, evaluate, on_batch, on_row)


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
    torch = _torch()
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
