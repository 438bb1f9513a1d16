"""The compiled training iteration: play a batch of games, then the algorithm's update.

``make_trainer(config)`` returns jitted functions in the PureJaxRL style:

- ``init(seed, params=None) -> TrainState``
- ``train_step(state, hparams, key) -> (state, metrics)``: one batch of games against the
  opponent, the update (:mod:`czjax.learn.algorithms`), and promotion or the pool's bookkeeping, as
  one compiled function.
- ``run_chunk(state, hparams, num_batches, bench=None) -> (state, metrics)``: ``num_batches``
  iterations under ``lax.scan`` and then evaluation games against RandomPunisher, all on the
  device; the host sees one set of metrics per chunk. With ``solver_eval`` on, ``bench`` is the
  solver benchmark (``trainer.solver_bench``), an argument of the program rather than constants
  compiled into it.

Everything users scan (learning rate, entropy bonus, value weight, discount, temperature) lives
in :class:`HParams` as traced arrays, so ``jax.vmap`` over hyperparameters and keys runs a
whole scan as one program. What is compiled (model, batch size, opponent, algorithm and their
settings) is :class:`TrainConfig`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import chex
import jax
import jax.numpy as jnp
from jax import lax

from czjax import compaction, models, players, rollout, search
from czjax.learn import algorithms, replay, solver_metrics
from czjax.learn.algorithms import PPO_KL_STOPS as PPO_KL_STOPS  # re-exported: their home before
from czjax.learn.algorithms import PPOSettings as PPOSettings
from czjax.learn.algorithms import setting
from czjax.learn.pool import init_pool, load_member, play_against_pool, update_pool
from czjax.minimax import Minimax
from czjax.players import Player
from czjax.util import counts, devices, precision
from czjax.util.counts import WideCount
from czjax.util.pytree import pytree_dataclass

# self: a frozen copy of the learner, promoted when it is beaten; current: the learner itself
# (AlphaZero's self-play: both sides play with the current parameters)
OPPONENTS = ("self", "current", "random-punisher", "random", "pool")
SOLVER_EVALS = ("off", "network", "search")
# How the training iteration handles work that may be skipped (TrainConfig.control_flow): "cond"
# skips it with data-dependent branches (finished pairs of plies, idle chunks of the compaction,
# PPO's epochs after the KL stop); "static" does it under masks instead, a program without
# lax.cond, whose predicates a GPU sends to the host at every step (the small-batch latency).
# "auto" is measured per backend: on the CPU cond; a GPU is unmeasured (cond until measured:
# czjax bench train --control-flow cond static).
CONTROL_FLOWS = ("auto", "cond", "static")
BACKEND_CONTROL_FLOW = {"cpu": "cond"}  # what TrainConfig.solver_eval scores: nothing, the network's move, the search's


@pytree_dataclass(frozen=True)
class HParams:
    """Traced hyperparameters (float32 scalars, or arrays with a leading scan axis). The fields
    and their defaults are the one list of scannable names: the CLI's flags and the scans'
    grids derive from them (:func:`hparam_names`)."""

    learning_rate: chex.Array = setting(1e-4, "AdamW's learning rate (default: the preset's)")
    entropy_bonus: chex.Array = setting(0.05, "weight of the entropy bonus in the loss (default: the preset's)")
    value_weight: chex.Array = setting(0.5, "weight of the value loss (default: the preset's)")
    discount: chex.Array = setting(0.9, "discount of the returns, gamma (default: the preset's)")
    temperature: chex.Array = setting(1.0, "sampling temperature of the learner (default: the preset's)")
    value_mix: chex.Array = setting(
        0.0,
        "search-based training: the weight m of the search's root value in the value target, "
        "(1 - m) * return + m * Q (default 0: the return alone)",
    )

    @classmethod
    def create(cls, **values) -> HParams:
        unknown = sorted(set(values) - set(hparam_names()))
        if unknown:
            raise ValueError(f"unknown hyperparameter {unknown[0]!r}; choose from {', '.join(hparam_names())}")
        values = {f.name: values.get(f.name, f.default) for f in dataclasses.fields(cls)}
        for name, value in values.items():
            if not math.isfinite(float(value)) or float(value) < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        for name in ("discount", "value_mix"):
            if not 0 <= float(values[name]) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {values[name]}")
        return cls(**{k: jnp.asarray(v, jnp.float32) for k, v in values.items()})

    def to_dict(self) -> dict:
        return {k: float(f"{float(v):.7g}") for k, v in dataclasses.asdict(self).items()}


def hparam_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(HParams))


# --- Static settings ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PromotionSettings:
    """Self-play: the frozen copy is replaced by the learner when, at a check every
    ``every_games`` games, its score over the last ``window_games`` exceeds ``threshold``. The
    score counts a draw as half a win, as the PyTorch project's ``self_play_loop`` does
    (``draws_count_half=False``: wins only, what czjax did before)."""

    every_games: int = setting(
        5000, "self-play: check whether to promote the learner every this many games (default 5000)", type="positive"
    )
    window_games: int = setting(
        1000, "self-play: the learner's score over the last this many games decides (default 1000)", type="positive"
    )
    threshold: float = setting(0.52, "self-play: promote when that score exceeds this (default 0.52)")
    draws_count_half: bool = setting(True, "self-play: a draw counts as half a win in that score (default: on)")

    def __post_init__(self):
        if self.every_games <= 0 or self.window_games <= 0:
            raise ValueError("promotion every_games and window_games must be positive")


@dataclasses.dataclass(frozen=True)
class PoolSettings:
    """opponent="pool": a fixed list of players (built-in names or checkpoint files), chosen on
    device per batch with weights ``clip(1 - EMA win rate, 0.05, 1)``; ``league=True`` adds a
    frozen copy of the learner whenever its EMA win rate against every member exceeds the
    threshold (:mod:`czjax.learn.pool`)."""

    members: tuple = setting(
        (),
        "opponents for --opponent pool: random, random-punisher, checkpoint files; each batch draws one, "
        "favouring those the learner beats least",
        metavar="PLAYER",
    )
    ema: float = setting(0.1, "the step of the win rates' moving average per batch against a member (default 0.1)")
    league: bool = setting(False, "add a frozen copy of the learner to the pool whenever it beats every member")
    league_slots: int = setting(
        8, "a league keeps at most this many learner copies, then replaces the oldest (default 8)", type="positive"
    )
    league_threshold: float = setting(
        0.6, "a league adds a copy when the learner's win rate against every member exceeds this (default 0.6)"
    )

    def __post_init__(self):
        object.__setattr__(self, "members", tuple(self.members))  # a list when read back from JSON
        if not 0 < self.ema <= 1 or self.league_slots < 1 or not 0 <= self.league_threshold <= 1:
            raise ValueError("pool ema must be in (0, 1], league_slots >= 1 and league_threshold in [0, 1]")


@dataclasses.dataclass(frozen=True)
class ReplaySettings:
    """Search-based training from an on-device replay buffer (:mod:`czjax.learn.replay`): each batch's
    positions are added to a circular buffer of ``capacity`` rows and the step trains on
    ``batch`` rows drawn from it uniformly. ``capacity`` 0 trains on each batch as it comes."""

    capacity: int = setting(
        0,
        "search-based training from an on-device replay buffer of this many positions (circular; "
        "default 0: train on each batch as it comes)",
        metavar="POSITIONS",
    )
    batch: int = setting(
        1024,
        "positions drawn uniformly from the replay buffer for each step (default 1024)",
        type="positive",
        metavar="POSITIONS",
    )
    steps: int = setting(
        1,
        "gradient steps per batch of games, each on a fresh draw from the replay buffer (default 1); "
        "a position is trained on about STEPS x POSITIONS / positions-per-batch times (metric replay_reuse)",
        type="positive",
        metavar="STEPS",
    )

    window_start: int = setting(
        0,
        "draw from the most recent POSITIONS only at first, a window that grows linearly to the whole "
        "buffer over --replay-window-games games (AlphaZero.jl's growing memory; default 0: the whole buffer)",
        type="count",
        metavar="POSITIONS",
    )
    window_games: int = setting(
        0,
        "games over which the drawing window grows from --replay-window-start to the capacity",
        type="count",
        metavar="GAMES",
    )

    def __post_init__(self):
        if self.capacity < 0 or self.batch < 1 or self.steps < 1:
            raise ValueError("replay capacity must be >= 0, replay batch >= 1 and replay steps >= 1")
        if self.window_start < 0 or self.window_games < 0 or bool(self.window_start) != bool(self.window_games):
            raise ValueError("replay window_start and window_games go together, both > 0 (or both 0: no window)")

    def window(self, games: jax.Array) -> jax.Array | None:
        """The drawing window (positions) after ``games`` games (float32), or None for the whole buffer."""
        if not self.window_start:
            return None
        grown = jnp.minimum(games / self.window_games, 1.0)
        return (self.window_start + grown * max(self.capacity - self.window_start, 0)).astype(jnp.int32)


# Flat names of settings that are now nested (configs stored before the nesting use them).
FLAT_SETTINGS = {
    "ppo_clip": ("ppo", "clip"),
    "ppo_epochs": ("ppo", "epochs"),
    "target_kl": ("ppo", "target_kl"),
    "ppo_kl_stop": ("ppo", "kl_stop"),
    "promote_every_games": ("promotion", "every_games"),
    "promote_window_games": ("promotion", "window_games"),
    "promote_threshold": ("promotion", "threshold"),
    "pool": ("pool", "members"),
    "pool_ema": ("pool", "ema"),
    "league": ("pool", "league"),
    "league_slots": ("pool", "league_slots"),
    "league_threshold": ("pool", "league_threshold"),
    "promote_draws_count_half": ("promotion", "draws_count_half"),
    "ppo_bootstrap": ("ppo", "bootstrap"),
}
# What a stored config that predates a setting did (see TrainConfig.from_dict).
SETTINGS_BEFORE_THEY_EXISTED = {
    "init": "flax",
    "ppo_kl_stop": "before-step",
    "promote_draws_count_half": False,
    "ppo_bootstrap": False,
}
NESTED = {"promotion": PromotionSettings, "pool": PoolSettings, "replay": ReplaySettings}


def setting_groups() -> dict[str, type]:
    """Every group of settings by its name: each algorithm's own (``"ppo"``:
    :func:`czjax.learn.algorithms.settings_classes`), then the nested groups (NESTED)."""
    return {**algorithms.settings_classes(), **NESTED}


def complete_algorithm_settings(given) -> tuple:
    """``(name, settings)`` of every algorithm of the table that has settings, in the table's
    order: those ``given`` (pairs or a dict), the defaults for the rest."""
    given, classes = dict(given), algorithms.settings_classes()
    for name, value in given.items():
        if name not in classes:
            raise ValueError(f"{name!r} is no algorithm with settings; those are: {', '.join(classes)}")
        if not isinstance(value, classes[name]):
            raise ValueError(f"the settings of {name} are a {classes[name].__name__}, not {value!r}")
    return tuple((name, given[name] if name in given else cls()) for name, cls in classes.items())


_C = TypeVar("_C")


def _accepting_groups_by_name(cls: type[_C]) -> type[_C]:
    """``TrainConfig(ppo=PPOSettings(...))``: an algorithm's settings given by its name, as when
    they were a field of their own; they join ``algorithm_settings``."""
    generated = cls.__init__

    @functools.wraps(generated)
    def __init__(self, *args, **kwargs):
        named = {name: kwargs.pop(name) for name in algorithms.settings_classes() if name in kwargs}
        if named:
            kwargs["algorithm_settings"] = (*tuple(kwargs.get("algorithm_settings", ())), *named.items())
        generated(self, *args, **kwargs)

    klass: Any = cls
    klass.__init__ = __init__
    return cls


def setting_fields() -> dict[str, dataclasses.Field]:
    """Every static setting by the name :meth:`TrainConfig.override` takes (``"model"``,
    ``"ppo.clip"``, ``"promotion.every_games"``), in the order of the fields: the one list the
    command line's flags are built from."""
    found: dict[str, dataclasses.Field] = {}
    for field in dataclasses.fields(TrainConfig):
        if field.name == "algorithm_settings":
            groups = algorithms.settings_classes()
        elif field.name in NESTED:
            groups = {field.name: NESTED[field.name]}
        else:
            found[field.name] = field
            continue
        for group, cls in groups.items():
            found.update({f"{group}.{f.name}": f for f in dataclasses.fields(cls)})
    return found


@_accepting_groups_by_name
@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Static settings: what is compiled. Hyperparameters that can be scanned are in HParams."""

    model: str = setting(
        "mlp",
        f"the network: {', '.join(models.MODELS)}, or resnet[:blocks=B,channels=C] (default 5 x 64) "
        "(default: the preset's)",
    )
    init: str = setting(
        "torch",
        "fresh parameters: torch (PyTorch's default initialisation, as the PyTorch project; the default) "
        "or flax (Flax's LeCun-normal kernels and zero biases, czjax's before)",
        metavar="|".join(models.INITS),
    )
    games_per_batch: int = setting(50, "games per batch (one update each)", type="games")
    opponent: str = setting(
        "self",
        f"{', '.join(OPPONENTS)}: self is a frozen copy of the learner, promoted at 52%; current is the "
        "learner itself (AlphaZero's self-play); pool needs --pool",
    )
    algorithm: str = setting(
        "reinforce",
        "; ".join(f"{name}: {a.description}" for name, a in algorithms.ALGORITHMS.items()),
        choices=tuple(algorithms.ALGORITHMS),
    )
    search: str = setting(
        "",
        "the search that plays the games of alpha and alphazero, e.g. mcts:sims=32,noise=0.25 or "
        "rollout:width=4,depth=4 (searches and options as in a player spec: czjax eval accuracy --help)",
        metavar="SEARCH[:OPTIONS]",
    )
    baseline: bool = setting(True, "REINFORCE with baseline when the model has a value head (--no-baseline: plain)")
    weight_decay: float = setting(0.01, "AdamW's decoupled weight decay (default 0.01, torch.optim.AdamW's)")
    mirror: bool = setting(False, "add every position flipped left-right")
    eval_games: int = setting(
        100, "games against the evaluation opponent (--eval-opponent) per evaluation (default 100)", type="games"
    )
    eval_opponent: str = setting(
        "random-punisher",
        "the opponent of the evaluation games after every chunk (metric eval_win_rate): random-punisher "
        "(default), random, or minimax:depth=N[,ties=random], AlphaZero.jl's baseline (7 ** N heuristic "
        "evaluations a move: depth 3 is cheap, depth 5 costs about as much as a 16k-simulation search)",
        metavar="PLAYER",
    )
    batches_per_chunk: int = setting(
        20,
        "batches per compiled chunk: log, evaluate against RandomPunisher, and check the clock this often",
        type="positive",
        metavar="BATCHES",
    )
    precision: str = setting(
        "default",
        "float32 matrix products: default (the backend's: TF32-class on an NVIDIA GPU, exact on a CPU), "
        "highest (full float32), bf16 (bfloat16 products) or mixed (bfloat16 activations and products, "
        "float32 parameters and optimizer state)",
        metavar="|".join(precision.PRECISIONS),
    )
    unroll: int = setting(
        1,
        "pairs of plies per step of the rollout's compiled loop (default 1): fewer loop steps, which "
        "each wait on the host on a GPU, for a larger program; the same games",
        type="positive",
        metavar="PAIRS",
    )
    sample_plies: int | None = setting(
        None,
        "sample moves at the temperature on the game's first PLIES plies only, then play the most likely "
        "(the most visited, for a search): AlphaZero's schedule (default: sample throughout)",
        type="count",
        metavar="PLIES",
    )
    openings: int = setting(
        0,
        "start each game from a position drawn uniformly from every distinct position 0..PLIES plies deep "
        "(at most 6; default 0: the empty board)",
        metavar="PLIES",
    )
    both_sides: bool = setting(
        False, "with --opponent current and a search-based algorithm: train on both players' positions"
    )
    control_flow: str = setting(
        "auto",
        "cond: skip finished pairs of plies, idle chunks and PPO's stopped epochs with lax.cond; static: compute "
        "them under masks, a program with no data-dependent branch (a GPU's host round trip per step at small "
        "batches); the same results; auto: by backend (default)",
        choices=CONTROL_FLOWS,
    )
    solver_eval: str = setting(
        "off",
        "after every chunk, score the network's (or the training search's) move on Pons' six sets and the "
        "public solver positions, on the device: metrics pons_*_error (%, AlphaZero.jl's measure), "
        "public_optimal, public_keeps (default: network for the search-based presets, else off)",
        choices=SOLVER_EVALS,
    )
    conv: str = setting(
        "auto",
        "Mk4's 3x3 convolutions: im2col (patches and one matmul), xla (lax.conv: cuDNN on a GPU) or "
        "auto (the default: chosen per backend by measurement, im2col on a CPU)",
        metavar="|".join(models.CONV_METHODS),
    )
    norm: str = setting(
        "auto",
        "Mk4's GroupNorm layers: flax (nn.GroupNorm), grouped (normalised in the grouped shape) or auto "
        "(the default: chosen per backend by measurement)",
        metavar="|".join(models.NORM_METHODS),
    )
    compaction: str = setting(
        "auto",
        "skip finished games in the rollout and invalid positions in the gradient when the model is "
        "expensive enough: on (both), loss (the gradient only), off (neither), auto (the default: on, "
        "except that on a GPU rollouts of fewer than 4,096 games evaluate every board, as measured)",
        metavar="|".join(compaction.COMPACTION_MODES),
    )
    # Each algorithm's own settings (czjax.learn.algorithms: Algorithm.settings), every algorithm of
    # the table that has some: (name, settings) pairs, completed with the defaults. A group is named
    # after its algorithm: config.ppo, TrainConfig(ppo=...), override({"ppo.clip": ...}), "ppo" in to_dict.
    algorithm_settings: tuple = ()
    promotion: PromotionSettings = PromotionSettings()
    pool: PoolSettings = PoolSettings()
    replay: ReplaySettings = ReplaySettings()
    lr_decay_games: int = setting(
        0,
        "decay the learning rate along a half cosine over this many games, to --lr-final times it, then "
        "hold it there (default 0: constant)",
        type="count",
        metavar="GAMES",
    )
    lr_final: float = setting(0.1, "the learning rate's final fraction under --lr-decay-games (default 0.1)")

    def __post_init__(self):
        object.__setattr__(self, "algorithm_settings", complete_algorithm_settings(self.algorithm_settings))
        model = self.build_model()  # one-line errors for an unknown model, conv or norm
        models.check_init(self.init)
        precision.check(self.precision)
        compaction.check_mode(self.compaction)
        algorithm = algorithms.get_algorithm(self.algorithm)
        if algorithm.needs_value_head and not models.has_value_head(model):
            raise ValueError(
                f"{self.algorithm} needs a model with a value head (cnn-mk4-value or mlp3), not {self.model}"
            )
        if algorithm.needs_search and not self.search:
            raise ValueError(
                f"{self.algorithm} trains on a search's moves: give a search, e.g. --search mcts:sims=32,noise=0.25"
            )
        if self.search and not algorithm.needs_search:
            raise ValueError(
                "a search plays the games of search-based algorithms only "
                f"({', '.join(a for a, v in algorithms.ALGORITHMS.items() if v.needs_search)}), not {self.algorithm}"
            )
        if self.replay.capacity and not algorithm.needs_search:
            raise ValueError(
                f"a replay buffer serves search-based training (alpha, alphazero); {self.algorithm} learns on-policy"
            )
        if self.search:
            self.searcher()  # one-line error for a bad search
            if self.opponent == "pool":
                raise ValueError("search-based training plays self-play or a built-in opponent, not a pool")
        if self.opponent not in OPPONENTS:
            raise ValueError(f"unknown opponent {self.opponent!r}; choose one of {', '.join(OPPONENTS)}")
        if (self.opponent == "pool") != bool(self.pool.members):
            raise ValueError("opponent 'pool' needs a list of pool members (--pool), and a pool needs opponent 'pool'")
        if self.pool.league and self.opponent != "pool":
            raise ValueError("a league grows an opponent pool: use it with opponent 'pool'")
        for name in ("games_per_batch", "eval_games"):
            if getattr(self, name) < 2:
                raise ValueError(
                    f"{name} must be at least 2 (half of the games with each side first), got {getattr(self, name)}"
                )
        eval_opponent(self.eval_opponent)  # one-line error for an unknown opponent
        if self.unroll < 1:
            raise ValueError(f"unroll must be >= 1, got {self.unroll}")
        if not 0 <= self.lr_final <= 1 or self.lr_decay_games < 0:
            raise ValueError("lr_final must be in [0, 1] and lr_decay_games >= 0")
        if self.control_flow not in CONTROL_FLOWS:
            raise ValueError(f"unknown control_flow {self.control_flow!r}; choose one of {', '.join(CONTROL_FLOWS)}")
        if self.solver_eval not in SOLVER_EVALS:
            raise ValueError(f"unknown solver_eval {self.solver_eval!r}; choose one of {', '.join(SOLVER_EVALS)}")
        if self.solver_eval == "search" and not self.search:
            raise ValueError("solver_eval 'search' scores the training search's moves: give a search (--search)")
        if not 0 <= self.openings <= 6:
            raise ValueError(f"openings must be between 0 and 6 plies, got {self.openings}")
        if self.both_sides and (self.opponent != "current" or not algorithm.needs_search):
            raise ValueError(
                "both_sides trains on the opponent's positions too: "
                "it needs opponent 'current' and a search-based algorithm"
            )
        if self.sample_plies is not None and self.sample_plies < 0:
            raise ValueError(f"sample_plies must be >= 0, got {self.sample_plies}")
        if self.batches_per_chunk <= 0:
            raise ValueError(f"batches_per_chunk must be positive, got {self.batches_per_chunk}")

    def build_model(self):
        """The model as this config computes it (activation dtype from ``precision``, ``conv``, ``norm``)."""
        return models.get_model(self.model, precision.activation_dtype(self.precision), self.conv, self.norm)

    @property
    def static(self) -> bool:
        """Whether the compiled iteration has no data-dependent branch (``control_flow``)."""
        flow = (
            BACKEND_CONTROL_FLOW.get(jax.default_backend(), "cond")
            if self.control_flow == "auto"
            else self.control_flow
        )
        return flow == "static"

    def searcher(self):
        """The search (czjax.search) named by ``search`` (``NAME`` or ``NAME:OPTIONS``), or None."""
        if not self.search:
            return None
        name, _, options = self.search.partition(":")
        return search.make_search(name, options)

    @property
    def promote_every(self) -> int:
        """Batches between promotion checks."""
        return max(1, round(self.promotion.every_games / self.games_per_batch))

    @property
    def window_batches(self) -> int:
        return max(1, math.ceil(self.promotion.window_games / self.games_per_batch))

    def settings_of(self, group: str) -> Any:
        """A group of settings by its name: an algorithm's own (``"ppo"``; None for an algorithm
        without settings) or a nested group (``"pool"``)."""
        return getattr(self, group) if group in NESTED else dict(self.algorithm_settings).get(group)

    if not TYPE_CHECKING:

        def __getattr__(self, name):
            """``config.ppo``: an algorithm's settings, read as the field they once were."""
            groups = dict(self.__dict__.get("algorithm_settings", ()))
            if name in groups:
                return groups[name]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def to_dict(self) -> dict:
        """JSON-ready: nested settings as objects, each algorithm's settings under its name (as
        ``"ppo"`` always was), the pool's members as a list."""
        stored: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "algorithm_settings":
                stored.update({name: dataclasses.asdict(settings) for name, settings in value})
            else:
                stored[field.name] = dataclasses.asdict(value) if field.name in NESTED else value
        return json_ready(stored)

    def override(self, settings: dict) -> TrainConfig:
        """A copy with ``settings`` changed; a nested one is named ``"ppo.clip"``,
        ``"pool.ema"`` and the like."""
        top = {k: v for k, v in settings.items() if "." not in k}
        classes = setting_groups()
        unknown = sorted(k for k in settings if "." in k and k.split(".", 1)[0] not in classes)
        if unknown:
            raise ValueError(f"unknown setting {unknown[0]!r}; groups: {', '.join(classes)}")
        own = dict(self.algorithm_settings)
        for group in classes:
            nested = {k.split(".", 1)[1]: v for k, v in settings.items() if k.startswith(group + ".")}
            if nested and group in NESTED:
                top[group] = dataclasses.replace(getattr(self, group), **nested)
            elif nested:
                own[group] = dataclasses.replace(own[group] if group in own else classes[group](), **nested)
        return dataclasses.replace(self, **top, algorithm_settings=tuple(own.items()))

    @classmethod
    def from_dict(cls, stored: dict) -> TrainConfig:
        """The config stored in a run.json, scan.json or checkpoint. A setting added since an
        old run was written reads as what that run did (``init`` as ``"flax"``, Flax's
        defaults; ``ppo_kl_stop`` as ``"before-step"``), and flat names of settings that are now
        nested are moved into their group, so an old run resumes as it began."""
        classes = setting_groups()
        if not any(isinstance(stored.get(group), dict) for group in classes):  # before the settings were nested
            stored = {**SETTINGS_BEFORE_THEY_EXISTED, **stored}
        groups = {group: dict(stored[group]) for group in classes if isinstance(stored.get(group), dict)}
        for flat_name, (group, name) in FLAT_SETTINGS.items():
            if flat_name in stored and not isinstance(stored[flat_name], dict):
                groups.setdefault(group, {})[name] = stored[flat_name]
        top = {k: v for k, v in stored.items() if k not in FLAT_SETTINGS and k not in classes}
        nested = {group: NESTED[group](**values) for group, values in groups.items() if group in NESTED}
        own = tuple((group, classes[group](**values)) for group, values in groups.items() if group not in NESTED)
        return cls(**top, **nested, algorithm_settings=own)


def json_ready(value):
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    return list(value) if isinstance(value, tuple) else value


# --- State and the compiled functions -------------------------------------------------------------


@pytree_dataclass(frozen=True)
class TrainState:
    params: Any
    opt_state: Any
    opponent_params: Any  # the frozen checkpoint copy (self-play); unused otherwise
    key: chex.Array
    # The run's totals, exact past 2**31 without 64-bit types (czjax.util.counts): int(state.games)
    step: WideCount  # batches done
    games: WideCount  # games played in training
    # The learner's score in each of the last window_batches batches, and the most it could
    # score: in half-points (a win 2, a draw 1, a batch of n games 2n) when draws count half,
    # else in wins and games.
    window_wins: chex.Array
    window_games: chex.Array
    promotions: chex.Array  # checkpoint promotions (self-play) or league additions (pool)
    pool: Any = None  # PoolState with opponent="pool"
    replay: Any = None  # czjax.learn.replay.ReplayBuffer with a replay capacity


class Trainer(NamedTuple):
    config: TrainConfig
    model: Any
    init: Callable  # (seed, params=None) -> TrainState
    train_step: Callable  # (state, hparams, key) -> (state, metrics)
    update: Callable  # (params, opt_state, trajectory, outcome, hparams) -> (params, opt_state, metrics)
    run_chunk: Callable  # (state, hparams, num_batches, bench=None) -> (state, metrics)
    learner: Callable  # the model as a player
    # run_chunk's bench: czjax.learn.solver_metrics.SolverBenchmark when config.solver_eval is on, else None
    solver_bench: Any = None


class Setup(NamedTuple):
    """What the compiled functions of one config close over (all static)."""

    config: TrainConfig
    model: Any
    learner: Callable  # the model as a player: trained, evaluated against RandomPunisher
    actor: Callable  # what plays the learner's (and a self-play opponent's) moves: the learner, or a search over it
    ctx: algorithms.UpdateContext
    algorithm: algorithms.Algorithm
    members: list  # (player, params) per fixed pool member
    slots: int  # league slots
    axis_name: str | None
    devices: int  # a batch's games split across this many devices
    rollout_chunks: (
        int | None
    )  # how a batch's rollout splits a player's boards: None the FLOP rule, 1 every board (czjax.compaction)
    eval_chunks: int | None  # the same for the evaluation games
    solver_bench: Any  # czjax.learn.solver_metrics.SolverBenchmark when config.solver_eval is on, else None


def make_setup(config: TrainConfig, axis_name: str | None, num_devices: int = 1) -> Setup:
    model = config.build_model()
    learner = models.model_player(model)
    positions = (
        (rollout.PLIES // 2) * config.games_per_batch * (2 if config.mirror else 1) * (2 if config.both_sides else 1)
    )  # the learner's batch
    static = config.static  # no lax.cond: every board evaluated, every position in the gradient
    compact_gradient = compaction.in_gradient(config.compaction) and not static

    def rollout_chunks(games):  # None: the FLOP rule (czjax.compaction.rollout_chunks); 1: every board
        return None if compaction.in_rollout(config.compaction, games - games // 2) and not static else 1

    shapes = jax.eval_shape(lambda: models.init_params(model, jax.random.key(0)))
    ctx = algorithms.UpdateContext(
        model=model,
        optimizer=algorithms.make_optimizer(config.weight_decay),
        games=config.games_per_batch,
        mirror=config.mirror,
        both_sides=config.both_sides,
        baseline=config.baseline and models.has_value_head(model),
        num_chunks=compaction.loss_chunks(compaction.flops_per_board(learner, shapes), positions)
        if compact_gradient
        else 1,
        axis_name=axis_name,
        devices=num_devices,
        static=static,
        settings=config.settings_of(config.algorithm),
    )
    members = [load_member(spec) for spec in config.pool.members]
    slots = config.pool.league_slots if config.pool.league else 0
    searcher = config.searcher()
    actor = learner if searcher is None else search.search_player(searcher, learner)
    bench = solver_metrics.load() if config.solver_eval != "off" else None
    return Setup(
        config,
        model,
        learner,
        actor,
        ctx,
        algorithms.get_algorithm(config.algorithm),
        members,
        slots,
        axis_name,
        num_devices,
        rollout_chunks(config.games_per_batch),
        rollout_chunks(config.eval_games),
        bench,
    )


def init_state(setup: Setup, seed: int, params=None) -> TrainState:
    """A fresh state: parameters drawn with ``config.init``, or ``params`` (a run started from
    given weights) for the learner and the frozen opponent alike; a fresh optimizer state either
    way. The rest of the run's randomness comes from ``seed`` in both cases."""
    key = jax.random.key(seed)
    init_key, key = jax.random.split(key)
    if params is None:
        params = models.init_params(setup.model, init_key, setup.config.init)
    window = jnp.zeros((setup.config.window_batches,), jnp.int32)
    return TrainState(
        params=params,
        opt_state=setup.ctx.optimizer.init(params),
        opponent_params=params,
        key=key,
        step=WideCount.zeros(),
        games=WideCount.zeros(),
        window_wins=window,
        window_games=window,
        promotions=jnp.zeros((), jnp.int32),
        pool=init_pool(setup.members, setup.slots, params) if setup.config.opponent == "pool" else None,
        replay=replay.empty(setup.config.replay.capacity) if setup.config.replay.capacity else None,
    )


def play_batch(setup: Setup, state: TrainState, hp: HParams, key):
    """A batch of games of the learner (player A) against the configured opponent; returns
    ``(trajectory, results, chosen pool member or None)``."""
    config, n = setup.config, setup.config.games_per_batch
    if config.opponent == "pool":
        return play_against_pool(
            key,
            state.pool,
            setup.members,
            setup.learner,
            state.params,
            n,
            hp.temperature,
            setup.axis_name,
            setup.devices,
            setup.rollout_chunks,
        )
    self_play = config.opponent in ("self", "current")
    opponent = setup.actor if self_play else players.BUILTIN_PLAYERS[config.opponent]
    opponent_params = {"self": state.opponent_params, "current": state.params}.get(config.opponent)
    traj, results = rollout.play_games(
        key,
        setup.actor,
        state.params,
        opponent,
        opponent_params,
        n,
        hp.temperature,
        hp.temperature if self_play else 1.0,
        axis_name=setup.axis_name,
        devices=setup.devices,
        record_targets=setup.algorithm.records_policy_targets,
        chunks=setup.rollout_chunks,
        sample_plies=config.sample_plies,
        unroll=config.unroll,
        openings=config.openings,
        skip_finished=not setup.ctx.static,
    )
    return traj, results, None


def record_batch(setup: Setup, state: TrainState, params, opt_state, results, chosen):
    """The state after a batch: new parameters, counters, the win-rate window, promotion of the
    frozen copy (self-play) or the pool's bookkeeping; returns ``(state, metrics)``."""
    config, n = setup.config, setup.config.games_per_batch
    wins = (results.outcome == 1).sum().astype(jnp.int32)
    slot = state.step.mod(config.window_batches)
    draws = (results.outcome == 0).sum().astype(jnp.int32)
    half = config.promotion.draws_count_half
    window_wins = state.window_wins.at[slot].set(2 * wins + draws if half else wins)
    window_games = state.window_games.at[slot].set(2 * n if half else n)
    step = state.step.add(1)
    pool, metrics, promote, league_added = state.pool, {}, jnp.zeros((), bool), jnp.zeros((), bool)
    if config.opponent == "self":
        window_rate = window_wins.sum() / jnp.maximum(window_games.sum(), 1)
        promote = (step.mod(config.promote_every) == 0) & (window_rate > config.promotion.threshold)
    elif config.opponent == "pool":
        pool, league_added = update_pool(
            state.pool, params, chosen, wins / n, len(setup.members), config.pool.ema, config.pool.league_threshold
        )
        metrics = {
            "pool_min_win_rate": jnp.min(jnp.where(pool.available(), pool.win_rate, jnp.inf)),
            "league_size": pool.league_active.sum().astype(jnp.float32),
        }
    new_state = dataclasses.replace(
        state,
        params=params,
        opt_state=opt_state,
        opponent_params=jax.tree.map(lambda new, old: jnp.where(promote, new, old), params, state.opponent_params),
        step=step,
        games=state.games.add(n),
        window_wins=jnp.where(promote, 0, window_wins),
        window_games=jnp.where(promote, 0, window_games),
        promotions=state.promotions + (promote | league_added).astype(jnp.int32),
        pool=pool,
    )
    metrics.update(win_rate=wins / n, draw_rate=(results.outcome == 0).mean(), game_length=results.length.mean())
    return new_state, metrics


def train_step(setup: Setup, state: TrainState, hp: HParams, key) -> tuple[TrainState, dict]:
    """One batch of games and the learner's update, as one compiled function."""
    # the named scopes are the phases that `czjax bench train --profile` reports (czjax.bench.profiling)
    with jax.named_scope("selfplay"):
        traj, results, chosen = play_batch(setup, state, hp, key)
    hp = scheduled(setup.config, hp, games_float(state.games))
    with jax.named_scope("update"):
        if setup.config.replay.capacity:
            params, opt_state, metrics, buffer = replay_update(
                setup, state, traj, results.outcome, hp, jax.random.fold_in(key, 1)
            )
            state = dataclasses.replace(state, replay=buffer)
        else:
            params, opt_state, metrics = algorithms.update(
                setup.ctx, setup.algorithm, state.params, state.opt_state, traj, results.outcome, hp
            )
    with jax.named_scope("bookkeeping"):
        state, batch_metrics = record_batch(setup, state, params, opt_state, results, chosen)
    return state, {**metrics, **batch_metrics}


def games_float(count) -> jax.Array:
    """A wide count of games as float32 (for schedules: exact to 2**24, close beyond)."""
    return count.high.astype(jnp.float32) * 4294967296.0 + count.low.astype(jnp.float32)


def scheduled(config: TrainConfig, hp: HParams, games: jax.Array) -> HParams:
    """``hp`` with the learning rate of ``config``'s schedule after ``games`` games: constant, or
    ``lr * (f + (1 - f) (1 + cos(pi t)) / 2)`` with ``t = min(games / lr_decay_games, 1)``."""
    if not config.lr_decay_games:
        return hp
    t = jnp.minimum(games / config.lr_decay_games, 1.0)
    factor = config.lr_final + (1.0 - config.lr_final) * 0.5 * (1.0 + jnp.cos(jnp.pi * t))
    return dataclasses.replace(hp, learning_rate=hp.learning_rate * factor)


def replay_update(setup: Setup, state: TrainState, traj, outcome, hp, key):
    """The batch's positions into the replay buffer, then ``replay.steps`` steps, each on a
    fresh uniform draw from it: ``(params, opt_state, metrics, buffer)``. ``replay_reuse`` is
    how many times a position is trained on, on average, while the buffer is full: rows drawn
    per batch of games over the positions it adds."""
    ctx, config = setup.ctx, setup.config
    with jax.named_scope("targets"):
        boards, batch = algorithms.training_batch(ctx, setup.algorithm, state.params, traj, outcome, hp)
    buffer = replay.add(state.replay, boards, batch)
    window = config.replay.window(games_float(state.games))

    def one_step(carry, step_key):
        params, opt_state = carry
        drawn = jax.tree.map(
            lambda x: devices.split(x, ctx.devices), replay.sample(buffer, step_key, config.replay.batch, window)
        )
        params, opt_state, metrics = setup.algorithm.step(ctx, params, opt_state, *drawn, hp)
        return (params, opt_state), metrics

    keys = jax.random.split(key, config.replay.steps) if config.replay.steps > 1 else key[None]
    (params, opt_state), metrics = lax.scan(one_step, (state.params, state.opt_state), keys)
    metrics = jax.tree.map(lambda x: x.mean(0), metrics)
    metrics["replay_filled"] = buffer.filled.astype(jnp.float32) / config.replay.capacity
    added = jnp.maximum(batch.valid.sum(), 1).astype(jnp.float32)
    metrics["replay_reuse"] = config.replay.steps * config.replay.batch / added
    return params, opt_state, metrics, buffer


def run_chunk(
    setup: Setup, state: TrainState, hp: HParams, num_batches: int, bench: solver_metrics.SolverBenchmark | None = None
) -> tuple[TrainState, dict]:
    """``num_batches`` iterations under ``lax.scan``, then evaluation games against
    RandomPunisher; one set of metrics for the chunk. ``bench``: the solver benchmark to score
    (``setup.solver_bench``, given as an argument so that its arrays are inputs of the compiled
    chunk, not constants), required when ``solver_eval`` is on."""
    if (setup.solver_bench is None) != (bench is None):
        raise ValueError(
            "run_chunk's bench is the trainer's solver_bench: "
            + ("pass it when solver_eval is on" if bench is None else "None when solver_eval is off")
        )

    def body(state, _):
        key, step_key = jax.random.split(state.key)
        return train_step(setup, dataclasses.replace(state, key=key), hp, step_key)

    state, per_batch = lax.scan(body, state, None, length=num_batches)
    key, eval_key = jax.random.split(state.key)
    state = dataclasses.replace(state, key=key)
    with jax.named_scope("evaluation"):
        _, evaluation = rollout.play_games(
            eval_key,
            setup.learner,
            state.params,
            eval_opponent(setup.config.eval_opponent),
            None,
            setup.config.eval_games,
            hp.temperature,
            1.0,
            axis_name=setup.axis_name,
            devices=setup.devices,
            chunks=setup.eval_chunks,
            skip_finished=not setup.ctx.static,
        )
    metrics = {k: v.mean() for k, v in per_batch.items() if k != "positions"}
    metrics.update(
        # the per-batch counts are whole numbers (float32 sums of masks, exact); their total is wide
        positions=counts.total(jnp.round(per_batch["positions"]).astype(jnp.int32)),
        eval_win_rate=(evaluation.outcome == 1).mean(),
        eval_draw_rate=(evaluation.outcome == 0).mean(),
        batches=state.step,
        games=state.games,
        promotions=state.promotions,
    )
    if bench is not None:
        with jax.named_scope("solver_eval"):
            scored = setup.learner if setup.config.solver_eval == "network" else setup.actor
            metrics.update(solver_metrics.metrics(scored, state.params, bench, jax.random.fold_in(eval_key, 1)))
    return state, metrics


@functools.cache
def eval_opponent(spec: str) -> Player:
    """The evaluation games' opponent: a built-in player or ``minimax[:OPTIONS]``; one-line
    ``ValueError`` otherwise."""
    name, sep, options = spec.partition(":")
    if name == "minimax":
        return search.make_settings("minimax", Minimax, options).player()
    if spec in players.BUILTIN_PLAYERS:
        return players.BUILTIN_PLAYERS[spec]
    raise ValueError(
        f"unknown evaluation opponent {spec!r}; choose {', '.join(players.BUILTIN_PLAYERS)} or minimax:depth=N"
    )


@functools.cache
def make_trainer(config: TrainConfig, axis_name: str | None = None, num_devices: int = 1) -> Trainer:
    """The compiled functions for ``config`` (cached: the same config gives the same jitted
    functions, so runs and tests with one config compile once). ``axis_name`` names the
    vmapped configuration axis when the functions run inside a scan (:mod:`czjax.run.scan`);
    ``num_devices`` splits each batch's games across that many devices (:mod:`czjax.util.devices`)."""
    setup = make_setup(config, axis_name, num_devices)

    def update(params, opt_state, traj, outcome, hp):
        return algorithms.update(setup.ctx, setup.algorithm, params, opt_state, traj, outcome, hp)

    return Trainer(
        config=config,
        model=setup.model,
        init=functools.partial(init_state, setup),
        train_step=jax.jit(functools.partial(train_step, setup)),
        update=jax.jit(update),
        run_chunk=jax.jit(functools.partial(run_chunk, setup), static_argnums=2),
        learner=setup.learner,
        solver_bench=setup.solver_bench,
    )
