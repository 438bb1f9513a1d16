"""Named training settings: the blog's examples and a quick default."""

from __future__ import annotations

import dataclasses

from czjax.learn.algorithms import PPOSettings
from czjax.learn.replay import ReplaySettings
from czjax.learn.settings import PromotionSettings, TrainConfig
from czjax.util.specs import PlayerSpec

# The blog's examples play and measure against the PyTorch project's RandomPunisher, whose ties
# go to the leftmost column; czjax's random-punisher spreads them, and a learner trained against
# the project's exploits its ties (docs/results/same-start/ex4/diagnosis.md).
PROJECT_PUNISHER = "random-punisher-leftmost"


@dataclasses.dataclass(frozen=True)
class Preset:
    description: str
    config: TrainConfig
    hparams: dict
    batches: int  # default length of a run; --batches / --time-budget override it


PRESETS: dict[str, Preset] = {
    "default": Preset(
        "quick start: SimpleMLP, REINFORCE + entropy bonus against RandomPunisher, 256 games per batch",
        TrainConfig(model="mlp", games_per_batch=256, opponent="random-punisher", batches_per_chunk=25),
        dict(learning_rate=1e-3, entropy_bonus=0.05, value_weight=0.0, discount=0.9),
        batches=1500,
    ),
    "ex1-collapse": Preset(
        "example 1: REINFORCE, no entropy bonus, SimpleMLP, lr 1e-3, self-play against a checkpoint copy (collapses)",
        TrainConfig(
            model="mlp",
            games_per_batch=50,
            opponent="self",
            promotion=PromotionSettings(every_games=5000),
            eval_opponent=PlayerSpec(PROJECT_PUNISHER),
        ),
        dict(learning_rate=1e-3, entropy_bonus=0.0, value_weight=0.0, discount=0.9),
        batches=4000,
    ),
    "ex2-entropy": Preset(
        "example 2: example 1 plus entropy bonus 0.05, checkpoint check every 400 batches (no collapse)",
        TrainConfig(
            model="mlp",
            games_per_batch=50,
            opponent="self",
            promotion=PromotionSettings(every_games=20000),
            eval_opponent=PlayerSpec(PROJECT_PUNISHER),
        ),
        dict(learning_rate=1e-3, entropy_bonus=0.05, value_weight=0.0, discount=0.9),
        batches=4000,
    ),
    "ex3-rwb": Preset(
        "example 3: REINFORCE with baseline, Mk4 CNN with value head, lr 1e-4, entropy 0.05, value weight 0.5, "
        "self-play",
        TrainConfig(
            model="cnn-mk4-value",
            games_per_batch=50,
            opponent="self",
            promotion=PromotionSettings(every_games=5000),
            eval_opponent=PlayerSpec(PROJECT_PUNISHER),
        ),
        dict(learning_rate=1e-4, entropy_bonus=0.05, value_weight=0.5, discount=0.9),
        batches=32000,  # the blog's 1.6M games
    ),
    "ex4-a2c": Preset(
        "example 4: A2C (one-step TD with the value head), Mk4 CNN with value head against RandomPunisher, lr 1e-4, "
        "entropy 0.05, value weight 1.5, no weight decay",
        # weight_decay 0: the project's train_against_opponents passes its set_params default, 0
        # (self-play's AdamW keeps torch's 0.01)
        TrainConfig(
            model="cnn-mk4-value",
            games_per_batch=50,
            opponent=PROJECT_PUNISHER,
            algorithm="a2c",
            weight_decay=0.0,
            eval_opponent=PlayerSpec(PROJECT_PUNISHER),
        ),
        dict(learning_rate=1e-4, entropy_bonus=0.05, value_weight=1.5, discount=0.9),
        batches=20000,
    ),
    "ex5-ppo": Preset(
        "example 5: PPO (clip 0.2, 4 epochs, target KL 0.01, one-step TD targets as bootstrap_value=True), Mk4 CNN "
        "with value head against RandomPunisher, lr 1e-4, entropy 0.05, value weight 1.5, no weight decay",
        TrainConfig(
            model="cnn-mk4-value",
            games_per_batch=50,
            opponent=PROJECT_PUNISHER,
            algorithm="ppo",
            weight_decay=0.0,  # as example 4's
            eval_opponent=PlayerSpec(PROJECT_PUNISHER),
            algorithm_settings=(("ppo", PPOSettings(clip=0.2, epochs=4, target_kl=0.01, bootstrap=True)),),
        ),
        dict(learning_rate=1e-4, entropy_bonus=0.05, value_weight=1.5, discount=0.9),
        batches=20000,
    ),
    "alpha-mini": Preset(
        "Connect-Zero's train_alpha_mini: the rollout improver (width 4, depth 4) plays both sides with the current "
        "MLP3; cross-entropy to its move and value MSE to the outcome (weight 1.5), mirrored, 100 games per batch, "
        "lr 1e-4",
        TrainConfig(
            model="mlp3",
            games_per_batch=100,
            opponent="current",
            algorithm="alphazero-hard",
            search=PlayerSpec.parse("playouts:width=4,depth=4"),
            mirror=True,
            batches_per_chunk=10,
        ),
        dict(learning_rate=1e-4, entropy_bonus=0.0, value_weight=1.5, discount=1.0),
        batches=2000,
    ),
    "alphazero": Preset(
        "AlphaZero-style: PUCT with 32 simulations and root noise plays both sides with the current MLP3; "
        "cross-entropy to its visit counts and value MSE to the outcome, mirrored, 100 games per batch, lr 1e-3",
        TrainConfig(
            model="mlp3",
            games_per_batch=100,
            opponent="current",
            algorithm="alphazero",
            search=PlayerSpec.parse("mcts:sims=32,noise=0.25"),
            mirror=True,
            batches_per_chunk=10,
            solver_eval="network",
        ),
        dict(learning_rate=1e-3, entropy_bonus=0.0, value_weight=1.0, discount=1.0),
        batches=2000,
    ),
    "gumbel-az": Preset(
        "Gumbel AlphaZero (AlphaZero.jl issue #217's recipe at CPU scale): Gumbel search with 16 simulations and 4 "
        "considered columns over the current MLP3 plays both sides, its move drawn from the improved policy, Q not "
        "rescaled, the prior at temperature 1.5; games start from a random position 0-2 plies deep; both sides' "
        "positions, mirrored, into a 50k replay buffer, 16 steps of 512 per batch of 128 games; cross-entropy to the "
        "improved policy and value MSE to the outcome, lr 1e-3",
        TrainConfig(
            model="mlp3",
            games_per_batch=128,
            opponent="current",
            algorithm="alphazero",
            # prior_temperature 1.5: the ablations' clearest gain (docs/strength.md)
            search=PlayerSpec.parse("gumbel:sims=16,considered=4,move=policy,rescale=0,prior_temperature=1.5"),
            mirror=True,
            openings=2,
            both_sides=True,
            replay=ReplaySettings(capacity=50_000, batch=512, steps=16),
            batches_per_chunk=10,
            solver_eval="network",
        ),
        dict(learning_rate=1e-3, entropy_bonus=0.0, value_weight=1.0, discount=1.0),
        batches=2000,
    ),
    "gumbel-az-gpu": Preset(
        "the gumbel-az recipe at GPU scale (a starting point, not yet run on a GPU): a 5 x 64 ResNet, 2,048 games "
        "per batch, Gumbel with 32 simulations and 4 considered columns (AlphaZero.jl issue #217's), a 2M-position "
        "replay buffer, 16 steps of 8,192 per batch (each position trained on about once)",
        TrainConfig(
            model="resnet",
            games_per_batch=2048,
            opponent="current",
            algorithm="alphazero",
            search=PlayerSpec.parse("gumbel:sims=32,considered=4,move=policy,rescale=0"),
            mirror=True,
            openings=2,
            both_sides=True,
            replay=ReplaySettings(capacity=2_000_000, batch=8192, steps=16),
            batches_per_chunk=5,
            solver_eval="network",
            eval_games=1000,
        ),
        dict(learning_rate=1e-3, entropy_bonus=0.0, value_weight=1.0, discount=1.0),
        batches=1000,
    ),
}


def get_preset(name: str) -> Preset:
    """A preset by name.

    Args:
        name: one of :data:`PRESETS` (``default``, ``ex1-collapse`` ... ``ex5-ppo``,
            ``gumbel-az``, ...).

    Returns:
        The :class:`Preset`: its ``description``, ``config`` (a TrainConfig), ``hparams`` (a
        dict for ``HParams.create``) and ``batches`` (its length).

    Raises:
        ValueError: one line naming the presets, for an unknown name.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None
