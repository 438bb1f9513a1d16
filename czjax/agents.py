"""Agents: a player with its parameters and a name, loaded from a checkpoint or a built-in name.

Every evaluation command (accuracy, puzzles, tournaments, play, analyze, openings) takes a
*spec*: a path to a czjax checkpoint (a run folder or its ``checkpoint.msgpack``) or the name
of a built-in player (``random``, ``random-punisher``).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization
from flax.traverse_util import flatten_dict

from czjax import game, models, search
from czjax.models import torch_layout
from czjax.players import BUILTIN_PLAYERS, Player, mask_for_sampling
from czjax.rollout import Trajectory, play_games
from czjax.util import checkpoint
from czjax.util.progress import Progress

# The model shipped with the package (the player name "czjax"), and the default opponent of
# `czjax play` and `czjax serve`: Gumbel MuZero with 64 simulations over it. The README's
# "The shipped model" says how it was trained and how strong it is.
SHIPPED_NAME = "czjax"
SHIPPED_MODEL = Path(__file__).parent / "data" / "models" / "czjax.msgpack"
DEFAULT_OPPONENT = f"gumbel:sims=64:{SHIPPED_NAME}"

# A job of more network evaluations than this is announced before it starts (about 20 s on a 2-core CPU).
LARGE_JOB_EVALUATIONS = 50_000


class Agent(NamedTuple):
    name: str
    player: Player  # (params, boards, key) -> PlayerOutput; static under jit
    params: Any  # None for the built-in players
    model_name: str | None  # registry name, None for a built-in player
    search: Any = None  # the search (czjax.search) wrapped around the network, if any
    network: Player | None = None  # the searched network's own player, when searching

    def temperature(self, given: float | None = None) -> float:
        """The sampling temperature to play at: ``given``, else 1 for a built-in player (random
        and RandomPunisher are stochastic by definition) and 0 (its most likely column, or the
        search's move) for a trained model or a search."""
        if given is not None:
            return given
        return 1.0 if self.model_name is None and self.search is None else 0.0

    @property
    def evaluations_per_move(self) -> int:
        """Network evaluations behind one move: a search's simulations and its root (a rollout
        search's width x depth), 1 for a network or a built-in player."""
        if self.search is None:
            return 1
        sims = getattr(self.search, "sims", None)
        return sims + 1 if sims is not None else getattr(self.search, "width", 1) * getattr(self.search, "depth", 1)

    def cost_note(self, moves: int, what: str) -> str | None:
        """A line saying that a search's job is large (None when it is not): how many network
        evaluations ``moves`` moves of it cost."""
        total = self.evaluations_per_move * moves
        if self.search is None or total < LARGE_JOB_EVALUATIONS:
            return None
        return (
            f"{self.name} evaluates its network {self.evaluations_per_move:,} times per move: about {total:,} "
            f"evaluations for {what}; this takes a while on a CPU (progress follows)"
        )

    @property
    def has_value(self) -> bool:
        return self.model_name is not None and models.has_value_head(models.get_model(self.model_name))


def load_params(path) -> tuple[str, Any, dict]:
    """``(model name, params, meta)`` of the learner in a training checkpoint."""
    path = Path(path)
    meta, raw = checkpoint.read_meta(path)
    model_name = meta.get("config", {}).get("model")
    if not models.is_model_name(model_name):
        raise checkpoint.CheckpointError(f"{path} names an unknown model {model_name!r}")
    model = models.get_model(model_name)
    template = jax.eval_shape(lambda key: models.init_params(model, key), jax.random.key(0))
    raw_params = raw.get("params") if isinstance(raw, dict) else None
    if not isinstance(raw_params, dict):
        raise checkpoint.CheckpointError(f"{path} holds no model parameters")
    expected = {k: v.shape for k, v in flatten_dict(serialization.to_state_dict(template)).items()}
    got = {k: np.shape(v) for k, v in flatten_dict(raw_params).items()}
    if expected != got:
        stacked = all(len(got.get(k, ())) == len(s) + 1 and got[k][1:] == s for k, s in expected.items())
        hint = " (a scan checkpoint holds several configurations; load a single run's checkpoint)" if stacked else ""
        raise checkpoint.CheckpointError(f"{path}: its parameters do not match model {model_name!r}{hint}")
    params = serialization.from_state_dict(template, raw_params)
    params = jax.tree.map(lambda t, x: jnp.asarray(x, t.dtype), template, params)
    return model_name, params, meta


TORCH_SUFFIXES = (".pth", ".pt")


def load_weights(spec, model_name: str):
    """The ``model_name`` parameters in ``spec``, to start a run from: a PyTorch project file
    (``.pth`` / ``.pt``, converted by :mod:`czjax.models.torch_layout`) or a czjax checkpoint (a run folder
    or a checkpoint file; its learner's parameters only). A file of another model, or one that
    is neither, is a one-line ``ValueError``."""
    path = Path(spec)
    if path.suffix in TORCH_SUFFIXES:
        return torch_layout.read_params(path, model_name)[1]
    found, params, _ = load_params(checkpoint.resolve(path))
    if found != model_name:
        raise ValueError(f"{spec} holds weights of model {found!r}, not {model_name!r}")
    return params


def load_agent(spec: str) -> Agent:
    """A built-in player by name, the learner of a checkpoint file or run folder, or a search
    over either: ``NAME[:OPTIONS]:BASE`` with NAME one of :data:`czjax.search.SEARCHES`
    (``mcts:sims=64:runs/ex3``, ``gumbel:runs/ex3``, ``rollout:width=4,depth=4:random``)."""
    parsed = search.parse_spec(spec)
    if parsed is not None:
        settings, base_spec = parsed
        if search.parse_spec(base_spec) is not None:
            raise ValueError(
                f"{spec!r}: a search cannot search a search; give a checkpoint or a built-in player after the options"
            )
        base = load_agent(base_spec)
        return base._replace(
            name=spec, player=search.search_player(settings, base.player), search=settings, network=base.player
        )
    if spec in BUILTIN_PLAYERS:
        return Agent(spec, BUILTIN_PLAYERS[spec], None, None)
    path = SHIPPED_MODEL if spec == SHIPPED_NAME else checkpoint.resolve(spec)
    if not path.exists():
        raise ValueError(unknown_player(spec))
    model_name, params, _ = load_params(path)
    return Agent(spec, models.model_player(models.get_model(model_name)), params, model_name)


def unknown_player(spec: str) -> str:
    """What is wrong with a player spec that names nothing: a run folder with no checkpoint yet,
    an unknown search, or a path that does not exist."""
    builtins = ", ".join((*BUILTIN_PLAYERS, SHIPPED_NAME))
    path = Path(spec)
    if path.is_dir():
        return (
            f"{spec!r} is a folder with no {checkpoint.FILENAME} yet (a run that has not saved its first checkpoint?)"
        )
    name, sep, _ = spec.partition(":")
    if sep and "/" not in name and "." not in name:
        return (
            f"{spec!r}: unknown search {name!r}; a search player is SEARCH[:OPTIONS]:PLAYER with SEARCH one of "
            f"{', '.join(search.SEARCHES)}"
        )
    return (
        f"{spec!r} is neither a built-in player ({builtins}) nor an existing checkpoint file or run folder: "
        "no such path"
    )


@functools.partial(jax.jit, static_argnames="player")
def _policy(player: Player, params, boards: jax.Array):
    out = player(params, boards, jax.random.key(0))
    logits = out.logits
    value = jnp.full(boards.shape[:1], jnp.nan) if out.value is None else out.value
    legal = game.legal_mask(boards)
    probs = jax.nn.softmax(mask_for_sampling(legal, logits.astype(jnp.float32)), axis=-1)
    # greedy: the most likely legal column; ties go to the lowest column
    greedy = jnp.argmax(jnp.where(legal, probs, -1.0), axis=-1)
    return probs, value.astype(jnp.float32), greedy


def policy(
    agent: Agent, boards, batch_size: int = 1024, progress: Progress | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(probs (N, 7), value (N,), greedy (N,))`` of ``agent`` on int8 ``boards (N, 6, 7)``.

    ``probs`` is the sampling distribution (softmax over legal columns, exactly 0 elsewhere);
    ``value`` is NaN for a player without a value head. Boards go through in fixed-size
    batches (padded), so any number of boards compiles once per batch size; ``progress``
    counts them.
    """
    empty = (np.zeros((0, game.COLS), np.float32), np.zeros((0,), np.float32), np.zeros((0,), np.int32))
    # in_batches returns as many arrays as _policy does: three
    return cast(
        "tuple[np.ndarray, np.ndarray, np.ndarray]",
        in_batches(lambda chunk, _: _policy(agent.player, agent.params, chunk), boards, batch_size, empty, progress),
    )


def in_batches(fn, boards, batch_size: int, empty: tuple, progress: Progress | None = None) -> tuple[np.ndarray, ...]:
    """``fn(chunk, index) -> arrays`` over int8 ``boards (N, 6, 7)`` in batches of one fixed
    size (the last padded with empty boards and its padding dropped), so any number of boards
    compiles once per batch size; the results concatenated, ``empty`` for no boards.
    ``progress``: each batch is a step of it, counted in boards."""
    boards = np.asarray(boards, np.int8)
    progress = progress or Progress()
    n = boards.shape[0]
    size = min(batch_size, max(n, 1))
    outs = []
    for index, start in enumerate(range(0, n, size)):
        chunk = boards[start : start + size]
        pad = size - chunk.shape[0]
        if pad:
            chunk = np.concatenate([chunk, np.zeros((pad,) + chunk.shape[1:], np.int8)])

        def run(chunk=chunk, index=index, pad=pad):
            return tuple(x[: size - pad] for x in jax.device_get(fn(jnp.asarray(chunk), index)))

        outs.append(progress.step(run, size - pad))
    if not outs:
        return empty
    return tuple(np.concatenate(parts) for parts in zip(*outs))


# Games per compiled call of a long self-play job (openings, distillation), so that it reports progress.
SELF_PLAY_SLICE = 512


def self_play(agent: Agent, num_games: int, key, temperature: float, progress: Progress | None = None) -> Trajectory:
    """Every ply of ``num_games`` games of ``agent`` against itself, each move sampled at
    ``temperature``. Up to :data:`SELF_PLAY_SLICE` games are one call with ``key`` (the games
    that key always gave); more are equal slices (slice ``i`` with ``fold_in(key, i)``, the extra
    games of the last dropped), each a step of ``progress``, counted in games."""
    slices = -(-num_games // SELF_PLAY_SLICE)
    size = -(-num_games // slices)
    size += size % 2  # half of the games with each side first
    keys = [key] if slices == 1 else [jax.random.fold_in(key, i) for i in range(slices)]

    def one_slice(k):
        traj, _ = play_games(k, agent.player, agent.params, agent.player, agent.params, size, temperature, temperature)
        return jax.device_get(traj)

    progress = progress or Progress()
    parts = [progress.step(lambda k=k: one_slice(k), min(size, num_games - i * size)) for i, k in enumerate(keys)]
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis=1)[:, :num_games], *parts)


@functools.partial(jax.jit, static_argnames=("search", "network"))
def _search_details(search, network: Player, params, boards: jax.Array):
    out = search.run(network, params, boards, jax.random.key(0))
    return out.visits, out.q


def visit_shares(agent: Agent, boards) -> np.ndarray | None:
    """A search's root visits on int8 ``boards (N, 6, 7)`` as shares of each position's visits
    ``(N, 7)`` (what its move is chosen from, where its move probabilities are one-hot); None
    for a player that does not search."""
    if agent.search is None:
        return None
    visits = search_details(agent, boards)[0].astype(np.float64)
    return visits / np.maximum(visits.sum(-1, keepdims=True), 1.0)


def search_details(agent: Agent, boards) -> tuple[np.ndarray, np.ndarray]:
    """``(visits (N, 7), q (N, 7))`` of a search agent's root on int8 ``boards (N, 6, 7)``: its
    visits (rollouts for the rollout improver) and Q per column (NaN where not visited), with
    the same key as :func:`policy`, so they explain the moves it reports."""
    if agent.search is None:
        raise ValueError(f"{agent.name} is not a search")
    boards = np.asarray(boards, np.int8)
    if boards.shape[0] == 0:
        return np.zeros((0, game.COLS), np.int32), np.zeros((0, game.COLS), np.float32)
    visits, q = _search_details(agent.search, agent.network, agent.params, jnp.asarray(boards))
    return np.asarray(visits), np.asarray(q)
