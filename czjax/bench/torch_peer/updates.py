"""The PyTorch project's ``update_policy`` (:func:`update`): the learner's positions of a batch
as tensors, returns or sparse rewards and TD targets, the losses summed over positions with the
entropy bonus, and ``torch.optim.AdamW`` steps without gradient clipping: REINFORCE (with
baseline when the model has a value head), A2C, and PPO's clipped epochs with the KL stop.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from czjax.bench.torch_peer.base import import_torch


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


@dataclasses.dataclass(frozen=True)
class Update:
    """How :func:`update` trains, as the PyTorch project's ``set_params`` says it: the
    algorithm (one of :data:`ALGORITHMS`), the entropy bonus, the value loss's weight, the
    discount, and PPO's settings (read only by ``ppo``). The defaults are examples 1-3's."""

    algorithm: str = "reinforce"
    entropy_bonus: float = 0.05  # ENTROPY_BONUS
    value_weight: float = 0.5  # VALUE_LOSS_WEIGHT
    gamma: float = 0.9  # DISCOUNT
    ppo: PPO = PPO()


SELF_PLAY = Update()  # examples 1-3: REINFORCE (with baseline when the model has a value head)
AGAINST_OPPONENTS = Update(algorithm="a2c", value_weight=1.5)  # example 4


def learner_tensors(batch: dict, gamma: float, bootstrap: bool, device) -> dict:
    """The learner's positions of a batch from :func:`play_batch`, game by game in move order
    (as the project orders them: its ``roll`` reads the next position of the same game), as
    tensors: ``states (N, 6, 7)`` int8, ``actions (N,)``, ``rewards (N,)`` (sparse when
    ``bootstrap``, else Monte-Carlo returns) and ``done (N,)`` (each game's last learner move)."""
    torch = import_torch()
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
    torch = import_torch()
    logits, values = model(states)
    log_p = torch.log_softmax(logits + (states[:, 0, :] != 0).float() * -1e9, dim=-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    return log_p, log_p.gather(1, actions[:, None])[:, 0], entropy, values


def value_targets(values, rewards, done, gamma: float, bootstrap: bool):
    """The project's ``v_target``. Bootstrapped: ``r + gamma * V(next own position)`` where the
    next position is the next in the batch (``torch.roll``), 0 after a game's last move, the
    values detached. Otherwise (or without a value head) the rewards, Monte-Carlo returns."""
    torch = import_torch()
    if not bootstrap or values is None:
        return rewards
    next_values = torch.roll(values.detach(), shifts=-1).masked_fill(done, 0.0)
    return rewards + gamma * next_values


def terminal_weight(rewards):
    """The value loss's weight: 2 where the reward is +-1 (a decided game's last move, or its
    Monte-Carlo return there), else 1."""
    torch = import_torch()
    return torch.where(rewards.abs() == 1.0, 2.0, 1.0)


def policy_gradient_loss(log_p_taken, entropy, values, targets, weight, entropy_bonus: float, value_weight: float):
    """REINFORCE (``values is None``: the targets weigh the log-probabilities), REINFORCE with
    baseline or A2C (advantage ``targets - V`` detached, value loss ``sum(w (V - targets)^2)``),
    minus the entropy bonus; sums over positions. ``(loss, policy_loss, value_loss, advantage)``."""
    torch = import_torch()
    if values is None:
        advantage, value_loss = targets, torch.zeros((), device=targets.device)
    else:
        advantage = (targets - values).detach()
        value_loss = (weight * (values - targets) ** 2).sum()
    policy_loss = -(advantage * log_p_taken).sum()
    loss = policy_loss + value_weight * value_loss - entropy_bonus * entropy.sum()
    return loss, policy_loss, value_loss, advantage


def ppo_loss(outputs: tuple, old_log_p_taken, advantage, targets, weight, settings: Update):
    """PPO's clipped objective ``-sum(min(rho A, clip(rho, 1 - eps, 1 + eps) A))``, ``rho`` the
    ratio of the taken move's probability to the starting policy's, plus the value loss towards
    the fixed ``targets`` and minus the entropy bonus; ``outputs`` are the current policy's
    (:func:`policy_outputs`), ``eps`` and the weights ``settings``'. ``(loss, policy_loss,
    value_loss, clipped)``, ``clipped`` the number of positions whose ratio was clipped."""
    torch = import_torch()
    _, log_p_taken, entropy, values = outputs
    clip, entropy_bonus, value_weight = settings.ppo.clip, settings.entropy_bonus, settings.value_weight
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


def ppo_epochs(model, optimizer, tensors: dict, first: tuple, targets, weight, settings: Update):
    """The project's PPO epochs. The advantage ``targets - V`` and the starting log-probabilities
    come from the starting forward pass ``first`` (:func:`policy_outputs`), which also serves
    epoch 0. Each epoch: forward (after epoch 0), loss, one AdamW step, then the mean KL from the
    starting policy to the policy of that epoch's forward pass; above ``ppo.target_kl`` no
    further epoch, so the epoch that exceeds it still takes its step. Returns the loss terms
    at the starting policy (czjax reports those), the steps taken, the last epoch's KL and
    clipped fraction, and the advantage."""
    torch = import_torch()
    ppo = settings.ppo
    old_log_p, old_log_p_taken = first[0].detach(), first[1].detach()
    advantage = (targets - first[3]).detach()
    n = targets.shape[0]
    outputs, start = first, None
    for epoch in range(ppo.epochs):
        if epoch > 0:
            outputs = policy_outputs(model, tensors["states"], tensors["actions"])
        terms = ppo_loss(outputs, old_log_p_taken, advantage, targets, weight, settings)
        loss, policy_loss, value_loss, clipped = terms
        if start is None:
            start = (loss.item(), policy_loss.item(), value_loss.item())
        _step(optimizer, loss)
        with torch.no_grad():
            kl = float((old_log_p.exp() * (old_log_p - outputs[0])).sum(1).mean())
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


def update(model, optimizer, batch: dict, settings: Update = SELF_PLAY) -> dict:
    """The PyTorch project's ``update_policy`` on a batch from :func:`play_batch`, summed
    losses, as ``settings`` say. ``reinforce``: Monte-Carlo returns, with baseline when the model
    has a value head (examples 1-3); ``a2c``: sparse rewards and one-step TD targets (example 4);
    ``ppo``: PPO's epochs (example 5: TD targets too). One AdamW step, PPO up to ``ppo.epochs``. Returns
    per-position metrics as czjax reports them (weighted value loss, population std; the std of
    the value targets as ``returns_std``; PPO's loss terms at the starting policy)."""
    algorithm, gamma = settings.algorithm, settings.gamma
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; the PyTorch peer runs {', '.join(ALGORITHMS)}")
    bootstrap = algorithm == "a2c" or (algorithm == "ppo" and settings.ppo.bootstrap)
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
        metrics = ppo_epochs(model, optimizer, tensors, first, targets, weight, settings)
        advantage = metrics.pop("advantage")
    else:
        loss, policy_loss, value_loss, advantage = policy_gradient_loss(
            log_p_taken, entropy, values, targets, weight, settings.entropy_bonus, settings.value_weight
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
