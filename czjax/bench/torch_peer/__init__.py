"""The PyTorch project's training iteration and training loops: the baseline of ``czjax bench
train --peer torch`` (speed) and of ``experiments/same-start/same_start.py`` (learning curves from the same
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

The modules, by what they mirror: ``models`` (the project's networks), ``games`` (its rules,
``RandomPunisher`` and a batch of games), ``updates`` (``update_policy``: targets, losses,
optimizer steps) and ``loops`` (an iteration, the two training loops, the timed benchmark);
``base`` imports PyTorch when a function needs it. The names below are the ones the benchmarks
and experiments call.
"""

from __future__ import annotations

from czjax.bench.torch_peer.games import RandomPunisher, play_batch, random_punisher_logits
from czjax.bench.torch_peer.loops import (
    AGAINST_OPPONENTS_WEIGHT_DECAY,
    PPO_MEANS,
    ROW_MEANS,
    SELF_PLAY_WEIGHT_DECAY,
    Learner,
    Logging,
    Promotion,
    bench_train,
    iteration,
    self_play,
    train_against,
    train_iteration,
)
from czjax.bench.torch_peer.models import build_model
from czjax.bench.torch_peer.updates import AGAINST_OPPONENTS, ALGORITHMS, PPO, SELF_PLAY, Update, update

__all__ = [
    "AGAINST_OPPONENTS",
    "AGAINST_OPPONENTS_WEIGHT_DECAY",
    "ALGORITHMS",
    "PPO",
    "PPO_MEANS",
    "ROW_MEANS",
    "SELF_PLAY_WEIGHT_DECAY",
    "Learner",
    "Logging",
    "Promotion",
    "RandomPunisher",
    "SELF_PLAY",
    "Update",
    "bench_train",
    "build_model",
    "iteration",
    "play_batch",
    "random_punisher_logits",
    "self_play",
    "train_against",
    "train_iteration",
    "update",
]
