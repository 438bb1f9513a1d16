"""The settings of training: what is compiled (:class:`TrainConfig` and its groups) and what is
traced (:class:`HParams`: everything users scan, so ``jax.vmap`` over hyperparameters and keys
runs a whole scan as one program).

Every field is declared with :func:`czjax.util.fields.setting` (its default and help): the
command line's flags, the names :meth:`TrainConfig.override` takes (``"ppo.clip"``) and the stored
form (``run.json``: :meth:`TrainConfig.to_dict` / :meth:`TrainConfig.from_dict`) follow from the
dataclasses. Each algorithm's own settings (``Algorithm.settings`` in
:data:`czjax.learn.algorithms.ALGORITHMS`) are a group named after it; a config stores the groups
it was given and reads the others as their defaults (:meth:`TrainConfig.settings_of`).

A config is data: it checks its fields against the tables they name (networks, searches,
built-in players, minimax's options) and builds nothing; the trainer's set-up
(:func:`czjax.learn.trainer.make_setup`) makes the network, the search and the opponents, and
resolves the "auto" settings for the platform it builds for (:mod:`czjax.util.platforms`), so a
config means the same on any machine. The players it names (``search``, ``eval_opponent``, the
pool's members) are :class:`~czjax.util.specs.PlayerSpec` values, parsed once from the text they
are given as and stored as that text. Configs stored by earlier versions are read as today's by
:mod:`czjax.learn.migration`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import chex
import jax.numpy as jnp

# What the settings are checked against, never built from here: the tables of networks, searches
# and built-in players, and minimax's settings (czjax.learn.trainer builds them).
from czjax import models, players, row_skipping, search
from czjax.learn import algorithms, migration
from czjax.learn.pool import PoolSettings
from czjax.learn.replay import ReplaySettings
from czjax.players import minimax
from czjax.util import precision
from czjax.util.fields import setting
from czjax.util.pytree import pytree_dataclass
from czjax.util.specs import PlayerSpec

# self: a frozen copy of the learner, promoted when it is beaten; current: the learner itself
# (AlphaZero's self-play: both sides play with the current parameters)
OPPONENTS = ("self", "current", "random-punisher", "random-punisher-leftmost", "random", "pool")
# What TrainConfig.solver_eval scores: nothing, the network's move, the search's
SOLVER_EVALS = ("off", "network", "search")
# How the training iteration handles work that may be skipped (TrainConfig.control_flow): "cond"
# skips it with data-dependent branches (finished pairs of plies, idle chunks of the compaction,
# PPO's epochs after the KL stop); "static" does it under masks instead, a program without
# lax.cond, whose predicates a GPU sends to the host at every step (the small-batch latency).
# "auto" is measured per platform and network (czjax bench train --control-flow cond static), the
# trainer's set-up reads it (``static_models`` in czjax.util.platforms): on the CPU cond; on one
# H100 static for the SimpleMLP (1.26x at 50 games, 1.49x at 4,096) and cond for Mk4 (static 1.07x
# at 50 games but 0.68x at 4,096, where it evaluates every finished board). Networks not measured
# on a GPU keep cond.
CONTROL_FLOWS = ("auto", "cond", "static")


@pytree_dataclass(frozen=True)
class HParams:
    """Traced hyperparameters (float32 scalars, or arrays with a leading scan axis). The fields
    and their defaults are the one list of scannable names: the CLI's flags and the scans'
    grids derive from them (:func:`hparam_names`). Build with :meth:`create`.

    Attributes:
        learning_rate: AdamW's learning rate.
        entropy_bonus: the entropy bonus's weight in the loss.
        value_weight: the value loss's weight.
        discount: gamma, the returns' discount.
        temperature: the learner's sampling temperature.
        value_mix: search-based training: the search's root value's weight m in the value
            target ``(1 - m) * return + m * Q``.
    """

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


NESTED = {"promotion": PromotionSettings, "pool": PoolSettings, "replay": ReplaySettings}


def setting_groups() -> dict[str, type]:
    """Every group of settings by its name: each algorithm's own (``"ppo"``:
    :func:`czjax.learn.algorithms.settings_classes`), then the nested groups (NESTED)."""
    return {**algorithms.settings_classes(), **NESTED}


def checked_algorithm_settings(given) -> tuple:
    """``(name, settings)`` pairs of the algorithms' settings ``given`` (pairs or a dict), checked
    against the table: each names an algorithm with settings and is of its settings class."""
    given, classes = dict(given), algorithms.settings_classes()
    for name, value in given.items():
        if name not in classes:
            raise ValueError(f"{name!r} is no algorithm with settings; those are: {', '.join(classes)}")
        if not isinstance(value, classes[name]):
            raise ValueError(f"the settings of {name} are a {classes[name].__name__}, not {value!r}")
    return tuple(given.items())


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


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Static settings: what is compiled. Hyperparameters that can be scanned are in HParams.

    Every field is declared with :func:`czjax.util.fields.setting` (its default and help, shown
    by ``czjax train --help`` under the flag ``--FIELD``); the nested groups (``promotion``,
    ``pool``, ``replay``) have flags ``--GROUP-FIELD``, and each algorithm's own settings are
    given as ``algorithm_settings={"ppo": PPOSettings(...)}`` and read with :meth:`settings_of`. Change a
    config with :meth:`override` (``{"games_per_batch": 256, "replay.steps": 16}``); store and
    read it with :meth:`to_dict` / :meth:`from_dict`.
    """

    model: str = setting(
        "mlp",
        f"the network: {models.model_names()} (default: the preset's)",
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
        "learner itself (AlphaZero's self-play); random-punisher-leftmost is the PyTorch project's RandomPunisher "
        "(ties to the leftmost column; random-punisher spreads them); pool needs --pool",
    )
    algorithm: str = setting(
        "reinforce",
        "; ".join(f"{name}: {a.description}" for name, a in algorithms.ALGORITHMS.items()),
        choices=tuple(algorithms.ALGORITHMS),
    )
    search: PlayerSpec | None = setting(
        None,
        "the search that plays the games of alphazero and alphazero-hard, e.g. mcts:sims=32,noise=0.25 or "
        "playouts:width=4,depth=4 (searches and options as in a player spec: czjax eval accuracy --help)",
        metavar="SEARCH[:OPTIONS]",
    )
    baseline: bool = setting(True, "REINFORCE with baseline when the model has a value head (--no-baseline: plain)")
    weight_decay: float = setting(0.01, "AdamW's decoupled weight decay (default 0.01, torch.optim.AdamW's)")
    mirror: bool = setting(False, "add every position flipped left-right")
    eval_games: int = setting(
        100, "games against the evaluation opponent (--eval-opponent) per evaluation (default 100)", type="games"
    )
    eval_opponent: PlayerSpec = setting(
        PlayerSpec("random-punisher"),
        "the opponent of the evaluation games after every chunk (metric eval_win_rate): random-punisher "
        "(default; the blog's presets: random-punisher-leftmost, the PyTorch project's), random, or "
        "minimax:depth=N[,ties=random], AlphaZero.jl's baseline (7 ** N heuristic "
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
        "highest (full float32), bf16 (bfloat16 products) or mixed (every product on bfloat16 operands, "
        "accumulated in float32; parameters, gradients, optimizer state, activations, normalisation and "
        "losses float32)",
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
        "batches); the same results; auto: by backend and network, as measured (default)",
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
        "the 3x3 convolutions (Mk4's, the ResNet's): im2col (patches and one matmul), xla (lax.conv: cuDNN on a GPU), "
        "canonical (lax.conv with a hand-written gradient in XLA's canonical layout), winograd (Winograd's "
        "F(2x2, 3x3): half the multiplications, other rounding), pallas (one Triton kernel a convolution "
        "that writes no patches, and a network's residual blocks one kernel where it is evaluated: for a "
        "GPU, not yet measured there; interpreted, slowly, on a CPU; none on a TPU) or auto (the default: "
        "chosen per backend by measurement, canonical on a CPU, im2col elsewhere)",
        metavar="|".join(models.CONV_METHODS),
    )
    norm: str = setting(
        "auto",
        "Mk4's GroupNorm layers: flax (nn.GroupNorm), grouped (from per-channel sums, with a hand-written "
        "gradient) or auto (the default: chosen per backend by measurement, grouped on a CPU, flax elsewhere)",
        metavar="|".join(models.NORM_METHODS),
    )
    compaction: str = setting(
        "auto",
        "skip finished games in the rollout and invalid positions in the gradient when the model is "
        "expensive enough: on (both), loss (the gradient only), off (neither), auto (the default: on, "
        "except that on a GPU rollouts of fewer than 4,096 games evaluate every board, as measured)",
        metavar="|".join(row_skipping.COMPACTION_MODES),
    )
    # Each algorithm's own settings (czjax.learn.algorithms: Algorithm.settings): the (name, settings)
    # pairs given, the others read as their defaults (settings_of). A group is named after its
    # algorithm: settings_of("ppo"), override({"ppo.clip": ...}), "ppo" in to_dict.
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
        # The specs given as text (flags, a stored config) parsed once; then checks only: the config
        # describes, and the trainer's set-up builds what it describes (czjax.learn.trainer.make_setup);
        # a name is looked up in its table, never made.
        object.__setattr__(self, "algorithm", migration.current_value("algorithm", self.algorithm, warn=True))
        object.__setattr__(self, "search", spec_or_none(self.search))
        object.__setattr__(self, "eval_opponent", as_spec(self.eval_opponent))
        object.__setattr__(self, "algorithm_settings", checked_algorithm_settings(self.algorithm_settings))
        precision.check(self.precision)
        network, _ = models.model_options(self.model, self.conv, self.norm)  # an unknown model, option, conv, norm
        models.check_init(self.init)
        row_skipping.check_mode(self.compaction)
        algorithm = algorithms.get_algorithm(self.algorithm)
        self._check_algorithm(algorithm, network)
        self._check_opponents()
        self._check_games(algorithm)

    def _check_algorithm(self, algorithm: algorithms.Algorithm, network: models.ModelEntry) -> None:
        """What the algorithm needs of the network and of the search, and what it cannot use."""
        if algorithm.needs_value_head and not network.value_head:
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
                "a replay buffer serves search-based training (alphazero, alphazero-hard); "
                f"{self.algorithm} learns on-policy"
            )

    def _check_opponents(self) -> None:
        """The search, the opponent and the pool: each known, and together as training plays them."""
        if self.search:
            search.search_of(self.search)  # one-line error for a bad search or size
            if self.opponent == "pool":
                raise ValueError("search-based training plays self-play or a built-in opponent, not a pool")
        if self.opponent not in OPPONENTS:
            raise ValueError(f"unknown opponent {self.opponent!r}; choose one of {', '.join(OPPONENTS)}")
        if (self.opponent == "pool") != bool(self.pool.members):
            raise ValueError("opponent 'pool' needs a list of pool members (--pool), and a pool needs opponent 'pool'")
        if self.pool.league and self.opponent != "pool":
            raise ValueError("a league grows an opponent pool: use it with opponent 'pool'")
        for member in self.pool.members:  # a search's options and sizes now; its network is loaded by the set-up
            search.split_search(member)

    def _check_games(self, algorithm: algorithms.Algorithm) -> None:
        """How the games are played, evaluated and compiled: each setting in its range."""
        for name in ("games_per_batch", "eval_games"):
            if getattr(self, name) < 2:
                raise ValueError(
                    f"{name} must be at least 2 (half of the games with each side first), got {getattr(self, name)}"
                )
        eval_opponent_settings(self.eval_opponent)  # one-line error for an unknown opponent
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

    @property
    def promote_every(self) -> int:
        """Batches between promotion checks."""
        return max(1, round(self.promotion.every_games / self.games_per_batch))

    @property
    def window_batches(self) -> int:
        return max(1, math.ceil(self.promotion.window_games / self.games_per_batch))

    def settings_of(self, group: str) -> Any:
        """A group of settings by its name: an algorithm's own (``"ppo"``: the settings given, else
        its defaults as the table has them now; None for an algorithm without settings) or a
        nested group (``"pool"``)."""
        if group in NESTED:
            return getattr(self, group)
        given = dict(self.algorithm_settings)
        if group in given:
            return given[group]
        cls = algorithms.settings_classes().get(group)
        return None if cls is None else cls()

    def algorithm_groups(self) -> tuple:
        """``(name, settings)`` of every algorithm of the table that has settings, in the table's
        order (:meth:`settings_of` each), then any given for an algorithm no longer in it."""
        classes = algorithms.settings_classes()
        given = tuple((name, s) for name, s in self.algorithm_settings if name not in classes)
        return (*((name, self.settings_of(name)) for name in classes), *given)

    def _compared(self) -> tuple:
        """What two configs are equal by: the fields, with each algorithm's settings as read."""
        return tuple(
            self.algorithm_groups() if f.name == "algorithm_settings" else getattr(self, f.name)
            for f in dataclasses.fields(self)
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TrainConfig):
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def to_dict(self) -> dict:
        """JSON-ready: nested settings as objects, the settings of every algorithm that has some
        under its name (as ``"ppo"`` always was; defaults included, so the file says what the run
        used), the pool's members as a list, every player spec as its text (no search: ``""``)."""
        stored: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "algorithm_settings":
                stored.update(dict(self.algorithm_groups()))
            else:
                stored[field.name] = "" if field.name == "search" and value is None else value
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
        """The config stored in a run.json, scan.json or checkpoint, an old one read as what its
        run did (:func:`czjax.learn.migration.current_form`: ``init`` as ``"flax"``, flat names of
        settings now nested moved into their group), so an old run resumes as it began."""
        classes = setting_groups()
        current = migration.current_form(stored, classes)
        top = {k: v for k, v in current.items() if k not in classes}
        nested = {group: NESTED[group](**values) for group, values in current.items() if group in NESTED}
        own = tuple(
            (group, classes[group](**values))
            for group, values in current.items()
            if group in classes and group not in NESTED
        )
        return cls(**top, **nested, algorithm_settings=own)


def json_ready(value):
    """``value`` as JSON writes it: a settings dataclass as an object of its fields, a player spec
    as its text, tuples as lists."""
    if isinstance(value, PlayerSpec):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_ready(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    return [json_ready(v) for v in value] if isinstance(value, (tuple, list)) else value


def as_spec(spec: PlayerSpec | str) -> PlayerSpec:
    """A player spec given as text (a flag, a stored config) or already parsed, parsed."""
    return PlayerSpec.parse(spec) if isinstance(spec, str) else spec


def spec_or_none(spec: PlayerSpec | str | None) -> PlayerSpec | None:
    """:func:`as_spec`, with None or ``""`` for none (a config without a search)."""
    return as_spec(spec) if spec else None


def eval_opponent_settings(spec: PlayerSpec | str) -> str | minimax.Minimax:
    """What the evaluation games' opponent is: a built-in player's name, or ``minimax[:OPTIONS]``'s
    settings (the trainer's set-up makes the player, :func:`czjax.learn.trainer.eval_opponent`);
    one-line ``ValueError`` otherwise."""
    spec = as_spec(spec)
    if spec.name == minimax.NAME:
        return minimax.from_spec(spec)
    if spec.plain and spec.name in players.BUILTIN_PLAYERS:
        return spec.name
    raise ValueError(
        f"unknown evaluation opponent {str(spec)!r}; choose {', '.join(players.BUILTIN_PLAYERS)} or minimax:depth=N"
    )
