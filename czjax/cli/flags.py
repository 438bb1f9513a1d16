"""Flags and argument types shared by the commands, each declared once."""

from __future__ import annotations

import argparse

# JAX's integers are 32-bit unless x64 is enabled: a count or seed beyond this does not fit.
INT32_MAX = 2**31 - 1


def int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    if value > INT32_MAX:
        raise argparse.ArgumentTypeError(
            f"{value} does not fit in a 32-bit integer: expected {what} up to {INT32_MAX:,}"
        )
    return value


def positive_int(text: str) -> int:
    return int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    return int_at_least(text, 0, "an integer >= 0")


seed = non_negative_int


def port(text: str) -> int:
    value = non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def game_batch(text: str) -> int:
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("a batch needs at least 2 games (half with each side first)")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


# Flags that change what is compiled (TrainConfig, nested settings as "group.name"); with
# --resume they come from the run folder instead.
SETTING_FLAGS = {
    "model": "model",
    "init": "init",
    "games_per_batch": "games_per_batch",
    "opponent": "opponent",
    "algorithm": "algorithm",
    "search": "search",
    "mirror": "mirror",
    "batches_per_chunk": "batches_per_chunk",
    "eval_games": "eval_games",
    "ppo_epochs": "ppo.epochs",
    "ppo_clip": "ppo.clip",
    "target_kl": "ppo.target_kl",
    "ppo_kl_stop": "ppo.kl_stop",
    "ppo_bootstrap": "ppo.bootstrap",
    "pool": "pool.members",
    "league": "pool.league",
    "precision": "precision",
    "compaction": "compaction",
    "conv": "conv",
    "sample_plies": "sample_plies",
    "unroll": "unroll",
    "norm": "norm",
    "replay_capacity": "replay.capacity",
    "replay_batch": "replay.batch",
    "replay_steps": "replay.steps",
    "openings": "openings",
    "both_sides": "both_sides",
    "solver_eval": "solver_eval",
    "control_flow": "control_flow",
}


def hparam_flags() -> tuple[str, ...]:
    from czjax.learn.train import hparam_names

    return hparam_names()


HPARAM_ALIASES = {"learning_rate": ("--lr",), "discount": ("--gamma",)}
HPARAM_HELP = {
    "temperature": "sampling temperature of the learner (default: the preset's)",
    "value_mix": "search-based training: the weight m of the search's root value in the value target, "
    "(1 - m) * return + m * Q (default 0: the return alone)",
}


def add_sink_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tensorboard",
        default=None,
        metavar="DIR",
        help="also log every metrics.jsonl row to TensorBoard event files in DIR (a scan: a subfolder per "
        "configuration); needs pip install 'czjax[tensorboard]'",
    )
    parser.add_argument(
        "--wandb",
        default=None,
        metavar="PROJECT",
        help="also log every metrics.jsonl row to a Weights & Biases run in PROJECT (a scan: one run, a series "
        "per configuration; WANDB_MODE=offline keeps it local); needs pip install 'czjax[wandb]'",
    )


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """The static settings (SETTING_FLAGS) that override a preset, for train and scan."""
    from czjax.compaction import COMPACTION_MODES
    from czjax.learn.algorithms import ALGORITHMS
    from czjax.learn.train import OPPONENTS, PPO_KL_STOPS
    from czjax.models import CONV_METHODS, INITS, MODELS, NORM_METHODS
    from czjax.util.precision import PRECISIONS

    parser.add_argument(
        "--model",
        default=None,
        help=f"the network: {', '.join(MODELS)}, or resnet[:blocks=B,channels=C] (default 5 x 64) (default: the "
        "preset's)",
    )
    parser.add_argument("--games-per-batch", type=game_batch, default=None, help="games per batch (one update each)")
    parser.add_argument(
        "--opponent",
        default=None,
        help=f"{', '.join(OPPONENTS)}: self is a frozen copy of the learner, promoted at 52%%; current is the "
        "learner itself (AlphaZero's self-play); pool needs --pool",
    )
    parser.add_argument(
        "--algorithm",
        default=None,
        choices=list(ALGORITHMS),
        help="; ".join(f"{name}: {a.description}" for name, a in ALGORITHMS.items()),
    )
    parser.add_argument(
        "--search",
        default=None,
        metavar="SEARCH[:OPTIONS]",
        help="the search that plays the games of alpha and alphazero, e.g. mcts:sims=32,noise=0.25 or "
        "rollout:width=4,depth=4 (searches and options as in a player spec: czjax eval accuracy --help)",
    )
    parser.add_argument("--mirror", action="store_true", default=None, help="add every position flipped left-right")
    parser.add_argument(
        "--pool",
        nargs="+",
        default=None,
        metavar="PLAYER",
        help="opponents for --opponent pool: random, random-punisher, checkpoint files; each batch draws one, "
        "favouring those the learner beats least",
    )
    parser.add_argument(
        "--league",
        action="store_true",
        default=None,
        help="add a frozen copy of the learner to the pool whenever it beats every member",
    )
    parser.add_argument("--ppo-epochs", type=positive_int, default=None)
    parser.add_argument("--target-kl", type=non_negative_float, default=None)
    parser.add_argument("--ppo-clip", type=non_negative_float, default=None)
    parser.add_argument(
        "--ppo-bootstrap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="PPO with A2C's one-step TD target in place of the Monte-Carlo return, as the PyTorch project's "
        "example 5 (bootstrap_value=True; the ex5-ppo preset's default)",
    )
    parser.add_argument(
        "--ppo-kl-stop",
        default=None,
        choices=list(PPO_KL_STOPS),
        help="after-step (default, as the PyTorch project): the epoch whose KL exceeds --target-kl still "
        "takes its step, then PPO stops; before-step: it stops without that step",
    )
    parser.add_argument(
        "--batches-per-chunk",
        "--eval-every",
        dest="batches_per_chunk",
        type=positive_int,
        default=None,
        metavar="BATCHES",
        help="batches per compiled chunk: log, evaluate against RandomPunisher, and check the clock this often",
    )
    parser.add_argument(
        "--eval-games", type=game_batch, default=None, help="games against RandomPunisher per evaluation (default 100)"
    )
    parser.add_argument(
        "--precision",
        default=None,
        metavar="|".join(PRECISIONS),
        help="float32 matrix products: default (the backend's: TF32-class on an NVIDIA GPU, exact on a CPU), "
        "highest (full float32), bf16 (bfloat16 products) or mixed (bfloat16 activations and products, "
        "float32 parameters and optimizer state)",
    )
    parser.add_argument(
        "--replay-capacity",
        type=non_negative_int,
        default=None,
        metavar="POSITIONS",
        help="search-based training from an on-device replay buffer of this many positions (circular; "
        "default 0: train on each batch as it comes)",
    )
    parser.add_argument(
        "--replay-batch",
        type=positive_int,
        default=None,
        metavar="POSITIONS",
        help="positions drawn uniformly from the replay buffer for each step (default 1024)",
    )
    parser.add_argument(
        "--replay-steps",
        type=positive_int,
        default=None,
        metavar="STEPS",
        help="gradient steps per batch of games, each on a fresh draw from the replay buffer (default 1); "
        "a position is trained on about STEPS x POSITIONS / positions-per-batch times (metric replay_reuse)",
    )
    parser.add_argument(
        "--openings",
        type=non_negative_int,
        default=None,
        metavar="PLIES",
        help="start each game from a position drawn uniformly from every distinct position 0..PLIES plies deep "
        "(at most 6; default 0: the empty board)",
    )
    parser.add_argument(
        "--control-flow",
        choices=("auto", "cond", "static"),
        default=None,
        help="cond: skip finished pairs of plies, idle chunks and PPO's stopped epochs with lax.cond; static: compute "
        "them under masks, a program with no data-dependent branch (a GPU's host round trip per step at small "
        "batches); the same results; auto: by backend (default)",
    )
    parser.add_argument(
        "--solver-eval",
        choices=("off", "network", "search"),
        default=None,
        help="after every chunk, score the network's (or the training search's) move on Pons' six sets and the "
        "public solver positions, on the device: metrics pons_*_error (%%, AlphaZero.jl's measure), "
        "public_optimal, public_keeps (default: network for the search-based presets, else off)",
    )
    parser.add_argument(
        "--both-sides",
        action="store_true",
        default=None,
        help="with --opponent current and a search-based algorithm: train on both players' positions",
    )
    parser.add_argument(
        "--sample-plies",
        type=non_negative_int,
        default=None,
        metavar="PLIES",
        help="sample moves at the temperature on the game's first PLIES plies only, then play the most likely "
        "(the most visited, for a search): AlphaZero's schedule (default: sample throughout)",
    )
    parser.add_argument(
        "--unroll",
        type=positive_int,
        default=None,
        metavar="PAIRS",
        help="pairs of plies per step of the rollout's compiled loop (default 1): fewer loop steps, which "
        "each wait on the host on a GPU, for a larger program; the same games",
    )
    parser.add_argument(
        "--norm",
        default=None,
        metavar="|".join(NORM_METHODS),
        help="Mk4's GroupNorm layers: flax (nn.GroupNorm), grouped (normalised in the grouped shape) or auto "
        "(the default: chosen per backend by measurement)",
    )
    parser.add_argument(
        "--conv",
        default=None,
        metavar="|".join(CONV_METHODS),
        help="Mk4's 3x3 convolutions: im2col (patches and one matmul), xla (lax.conv: cuDNN on a GPU) or "
        "auto (the default: chosen per backend by measurement, im2col on a CPU)",
    )
    parser.add_argument(
        "--compaction",
        default=None,
        metavar="|".join(COMPACTION_MODES),
        help="skip finished games in the rollout and invalid positions in the gradient when the model is "
        "expensive enough: on (both), loss (the gradient only), off (neither), auto (the default: on, "
        "except that on a GPU rollouts of fewer than 4,096 games evaluate every board, as measured)",
    )
    parser.add_argument(
        "--init",
        default=None,
        metavar="|".join(INITS),
        help="fresh parameters: torch (PyTorch's default initialisation, as the PyTorch project; the default) "
        "or flax (Flax's LeCun-normal kernels and zero biases, czjax's before)",
    )


TEMPERATURE_HELP = (
    "the opponent's sampling temperature; 0 plays its most likely column, 1 samples its policy "
    "(default: 0 for a checkpoint, 1 for the built-in random and random-punisher)"
)


def player_help() -> str:
    from czjax.search import search_options

    return (
        "a checkpoint (run folder or .msgpack file), random, random-punisher, czjax (the model shipped with czjax), "
        "or a "
        "search over one: "
        "SEARCH[:OPTIONS]:PLAYER, e.g. mcts:sims=64:runs/ex3 or rollout:width=4,depth=4:runs/ex3; "
        f"searches and their options (defaults): {search_options()}"
    )


def add_player_arg(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    if default is None:
        parser.add_argument("player", metavar="PLAYER", help=player_help())
    else:
        parser.add_argument(
            "player", metavar="PLAYER", nargs="?", default=default, help=f"{player_help()} (default: {default})"
        )
