"""The PyTorch project's three models, written for the tests from their published description
(same module names, so their state dicts have the PyTorch project's keys), and its updates
written in PyTorch: the blog's REINFORCE-with-baseline loss, A2C's loss, and PPO's epochs with
the KL stop. Nothing here is shared with czjax."""

import torch
from torch import nn


class SimpleMLPModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(), nn.Linear(42, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 7)
        )

    def forward(self, boards):
        return self.layers(boards.float()), None


class Connect4MLP3(nn.Module):
    def __init__(self):
        super().__init__()
        layers = [nn.Flatten()]
        width = 42
        for _ in range(7):
            layers += [nn.Linear(width, 256, bias=False), nn.LayerNorm(256), nn.ReLU()]
            width = 256
        layers.append(nn.Linear(256, 8))
        self.layers = nn.Sequential(*layers)

    def forward(self, boards):
        out = self.layers(boards.float())
        return out[:, :7], torch.tanh(out[:, 7])


def _conv(cin, cout):
    return nn.Conv2d(cin, cout, 3, padding=1, bias=False)


class Connect4CNN_Mk4(nn.Module):
    def __init__(self, value_head=True):
        super().__init__()
        self.feature_extractor = nn.Sequential(_conv(3, 64), nn.GroupNorm(16, 64), nn.ReLU())
        for i in (1, 2, 3):
            setattr(
                self,
                f"resblock{i}",
                nn.Sequential(_conv(64, 64), nn.GroupNorm(16, 64), nn.ReLU(), _conv(64, 64), nn.GroupNorm(16, 64)),
            )
        self.downsample = nn.Conv2d(64, 64, (6, 1), bias=False)
        self.fc_layers = nn.Sequential(
            nn.Linear(448, 128, bias=False),
            nn.LayerNorm(128),
            nn.ReLU(),
            nn.Linear(128, 128, bias=False),
            nn.LayerNorm(128),
            nn.ReLU(),
            nn.Linear(128, 7),
        )
        self.value_head = (
            nn.Sequential(nn.Linear(448, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1), nn.Tanh())
            if value_head
            else None
        )

    def forward(self, boards):
        x = torch.stack([boards == 1, boards == -1, boards == 0], dim=1).float()  # (B, 3, 6, 7): own, opponent, empty
        x = self.feature_extractor(x)
        for block in (self.resblock1, self.resblock2, self.resblock3):
            x = torch.relu(x + block(x))
        features = self.downsample(x).view(-1, 448)  # (B, 64, 1, 7) -> channel * 7 + column
        logits = self.fc_layers(features)
        return logits, (self.value_head(features)[:, 0] if self.value_head is not None else None)


TORCH_MODELS = {
    "mlp": SimpleMLPModel,
    "mlp3": Connect4MLP3,
    "cnn-mk4": lambda: Connect4CNN_Mk4(value_head=False),
    "cnn-mk4-value": lambda: Connect4CNN_Mk4(value_head=True),
}


def rwb_loss(model, boards, legal, actions, returns, entropy_bonus, value_weight):
    """The blog's REINFORCE with baseline, summed over positions: -(G - V) log pi(a) with the
    advantage detached, + value_weight * w (V - G)^2 (w = 2 where |G| = 1), - beta * H."""
    logits, values = model(boards)
    logits = logits + (~legal).float() * -1e9
    log_p = torch.log_softmax(logits, dim=-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    log_p_taken = log_p.gather(1, actions[:, None])[:, 0]
    if values is None:
        return -(returns * log_p_taken).sum() - entropy_bonus * entropy.sum()
    advantage = (returns - values).detach()
    weight = torch.where(returns.abs() == 1.0, 2.0, 1.0)
    value_loss = (weight * (values - returns) ** 2).sum()
    return -(advantage * log_p_taken).sum() + value_weight * value_loss - entropy_bonus * entropy.sum()


def _policy(model, boards, legal, actions):
    """Masked log-probabilities ``(B, 7)``, those of the moves played, entropies and values."""
    logits, values = model(boards)
    log_p = torch.log_softmax(logits + (~legal).float() * -1e9, dim=-1)
    entropy = -(log_p.exp() * log_p).sum(-1)
    return log_p, log_p.gather(1, actions[:, None])[:, 0], entropy, values


def _value_weight(rewards):
    """2 where the reward (sparse, or Monte Carlo) is +-1, else 1."""
    return torch.where(rewards.abs() == 1.0, 2.0, 1.0)


def a2c_loss(model, boards, legal, actions, rewards, done, gamma, entropy_bonus, value_weight):
    """The PyTorch project's A2C, summed over positions. The batch is the player's positions
    game by game; ``rewards`` are sparse (the outcome on each game's last move, else 0) and
    ``done`` marks each game's last move. V_next is the value of the next position in the
    batch (``roll`` by -1), 0 where done; target ``r + gamma * V_next``; advantage
    ``target - V``, detached and not normalised; value loss weighted 2 where the reward is +-1."""
    _, log_p_taken, entropy, values = _policy(model, boards, legal, actions)
    v_next = torch.roll(values.detach(), shifts=-1)
    v_next[done] = 0.0
    v_target = rewards + gamma * v_next
    advantage = (v_target - values).detach()
    value_loss = (_value_weight(rewards) * (values - v_target) ** 2).sum()
    return -(advantage * log_p_taken).sum() + value_weight * value_loss - entropy_bonus * entropy.sum()


def ppo_update(model, optimizer, boards, legal, actions, returns, clip, epochs, target_kl, entropy_bonus, value_weight):
    """The PyTorch project's PPO with Monte Carlo returns (its ``BOOTSTRAP_VALUE`` off):
    advantage ``G - V`` and value target ``G`` from the starting forward pass. Each epoch:
    forward (the first epoch reuses the starting forward pass), clipped loss, backward,
    optimizer step, and only then the mean KL from the starting policy *of that epoch's
    forward pass*: above ``target_kl`` (None: never) it breaks. So the epoch whose KL first
    exceeds the target still takes its step.

    Returns ``(losses, kls, steps)``: each epoch's loss before its step and its KL.
    """
    log_p, log_p_taken, entropy, values = _policy(model, boards, legal, actions)
    old_log_p, old_log_p_taken = log_p.detach(), log_p_taken.detach()
    advantage = (returns - values).detach()
    weight = _value_weight(returns)
    losses, kls = [], []
    for epoch in range(epochs):
        if epoch > 0:
            log_p, log_p_taken, entropy, values = _policy(model, boards, legal, actions)
        ratio = torch.exp(log_p_taken - old_log_p_taken)
        surrogate = torch.min(ratio * advantage, torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * advantage)
        loss = (
            -surrogate.sum() + value_weight * (weight * (values - returns) ** 2).sum() - entropy_bonus * entropy.sum()
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            kl = (old_log_p.exp() * (old_log_p - log_p)).sum(1).mean()
        losses.append(loss.item())
        kls.append(kl.item())
        if target_kl is not None and kl > target_kl:
            break
    return losses, kls, len(losses)
