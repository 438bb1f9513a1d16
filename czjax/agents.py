"""Agents: a player with its parameters and a name, loaded from a checkpoint or a built-in name.

Every evaluation command (accuracy, puzzles, tournaments, play, analyze, openings) takes a
*spec*: a path to a czjax checkpoint (a run folder or its ``checkpoint.msgpack``), the name
of a built-in player (``random``, ``random-punisher``, ``czjax`` the shipped model),
AlphaZero.jl's minimax (``minimax:depth=5``), a fresh network (``untrained:mlp3``), or a search
over any of them (``mcts:sims=64:runs/ex3``).
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

from czjax import game, minimax, models, search
from czjax.models import torch_layout
from czjax.players import BUILTIN_PLAYERS, Player, mask_for_sampling
from czjax.rollout import Side, Trajectory, play_games
from czjax.search import reuse as search_reuse
from czjax.util import checkpoint
from czjax.util.progress import Progress
from czjax.util.specs import PlayerSpec

# The models shipped with the package, oldest first: ``czjax@N`` names each, ``czjax`` the newest.
# docs/strength.md says how each was trained and how strong it is; a better one is added, never
# replaces an older one, so that a player once named stays loadable.
SHIPPED_NAME = "czjax"
SHIPPED_MODELS = {
    "czjax@1": Path(__file__).parent / "data" / "models" / "czjax-1.msgpack",  # example 3 (Mk4), 61k games, CPU
    "czjax@2": Path(__file__).parent / "data" / "models" / "czjax-2.msgpack",  # gumbel-az (MLP3), one CPU hour
    # gumbel-az with 16 replay steps (MLP3), one hour on a core of its own
    "czjax@3": Path(__file__).parent / "data" / "models" / "czjax-3.msgpack",
    # gumbel-az-gpu (a 5 x 64 ResNet), 507 s on one H200: the campaign's strength step
    "czjax@4": Path(__file__).parent / "data" / "models" / "czjax-4.msgpack",
}
SHIPPED_MODEL = SHIPPED_MODELS["czjax@4"]
# The default opponent of `czjax play` and `czjax serve`, chosen by measurement (docs/strength.md,
# "The default search"): the strongest under AlphaZero.jl's protocol that answers within 0.3 s a
# move on a 2-core CPU (over czjax@4's ResNet 600 simulations take 0.27 s, 800 take 0.36 s).
DEFAULT_OPPONENT = f"azjl:sims=600:{SHIPPED_NAME}"


def shipped_path(spec: str) -> Path | None:
    """The file of a shipped model's name (``czjax``, ``czjax@1``, ...), else None."""
    return SHIPPED_MODEL if spec == SHIPPED_NAME else SHIPPED_MODELS.get(spec)


# A job of more network evaluations than this is announced before it starts (about 20 s on a 2-core CPU).
LARGE_JOB_EVALUATIONS = 50_000


class Agent(NamedTuple):
    """A player with its parameters and a name, what every evaluation command takes.

    Attributes:
        name: the spec it was loaded from (``czjax``, ``runs/ex3``, ``gumbel:sims=64:czjax``).
        player: ``(params, boards, key) -> PlayerOutput``, static under ``jit``.
        params: its parameters (None for a built-in player).
        model_name: the network's registry name (None for a built-in player).
        search: the search wrapped around the network (a :class:`czjax.search.Search`), or None.
        network: the searched network's own player, when searching.
    """

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
        """Network evaluations behind one move: what the search says it costs, 1 for a network or
        a built-in player."""
        return 1 if self.search is None else int(self.search.evaluations_per_move)

    def cost_note(self, moves: int, what: str, stopped: bool = False) -> str | None:
        """A line saying that a search's job is large (None when it is not): how many network
        evaluations ``moves`` moves of it cost (at most that many when each search is ``stopped``
        once its move is decided)."""
        total = self.evaluations_per_move * moves
        if self.search is None or total < LARGE_JOB_EVALUATIONS:
            return None
        per_move = f"{self.evaluations_per_move:,} times per move"
        if stopped:
            why = "each search stops once its move is decided"
            count = f"up to {per_move}: at most {total:,} evaluations for {what} ({why})"
        else:
            count = f"{per_move}: about {total:,} evaluations for {what}"
        return f"{self.name} evaluates its network {count}; this takes a while on a CPU (progress follows)"

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
    if not models.same_network(found, model_name):  # "resnet" is "resnet:blocks=5,channels=64"
        raise ValueError(f"{spec} holds weights of model {found!r}, not {model_name!r}")
    return params


def load_agent(spec: PlayerSpec | str) -> Agent:
    """The agent a spec names.

    Args:
        spec: a built-in player (``random``, ``random-punisher``), a shipped model (``czjax``,
            ``czjax@1``, ...), a checkpoint file or run folder, AlphaZero.jl's minimax
            (``minimax:depth=5[,ties=random]``), a fresh network (``untrained:MODEL[:SEED]``), or
            a search over any of these but a search: ``NAME[:OPTIONS]:BASE`` with NAME one of
            :data:`czjax.search.SEARCHES` (``mcts:sims=64:runs/ex3``, ``gumbel:runs/ex3``,
            ``azjl:sims=600:czjax``). Text is parsed once here (:class:`czjax.util.specs.PlayerSpec`);
            the command line passes the spec it parsed.

    Returns:
        The :class:`Agent`, named by the spec's text.

    Raises:
        ValueError: one line saying what is wrong with the spec (an unknown name, search or
            option, a folder without a checkpoint, a path that does not exist).
        czjax.util.checkpoint.CheckpointError: a damaged or foreign checkpoint.
    """
    spec = PlayerSpec.parse(spec) if isinstance(spec, str) else spec
    searched = search.split_search(spec)
    if searched is not None:
        settings, base = searched
        if search.split_search(base) is not None:
            raise ValueError(
                f"{str(spec)!r}: a search cannot search a search; "
                "give a checkpoint or a built-in player after the options"
            )
        return with_search(load_agent(base), settings, str(spec))
    if spec.plain and spec.name in BUILTIN_PLAYERS:
        return Agent(name=spec.name, player=BUILTIN_PLAYERS[spec.name], params=None, model_name=None)
    if spec.name == minimax.NAME:
        return Agent(name=str(spec), player=minimax.from_spec(spec).player(), params=None, model_name=None)
    if spec.name == UNTRAINED and not spec.plain:
        return untrained_agent(spec)
    path = shipped_path(str(spec)) or checkpoint.resolve(str(spec))  # a name or a path, colons and all
    if not path.exists():
        raise ValueError(unknown_player(spec))
    model_name, params, _ = load_params(path)
    return network_agent(str(spec), model_name, params)


def network_agent(name: str, model_name: str, params) -> Agent:
    """A network's parameters in memory (a scan's configuration, say) as an agent."""
    return Agent(
        name=name, player=models.model_player(models.get_model(model_name)), params=params, model_name=model_name
    )


def with_search(base: Agent, settings, name: str) -> Agent:
    """``base`` searched by ``settings`` (a :class:`czjax.search.Search`), named ``name``."""
    return base._replace(
        name=name, player=search.search_player(settings, base.player), search=settings, network=base.player
    )


UNTRAINED = "untrained"


def untrained_agent(spec: PlayerSpec) -> Agent:
    """``untrained:MODEL[:SEED]``: the network ``MODEL`` (``NAME[:OPTIONS]``, the spec's base) as
    a run with that seed starts it (PyTorch-style initialisation, seed 0 by default), for
    calibrating an evaluation."""
    if spec.options or spec.base is None:
        raise ValueError(
            f"{str(spec)!r}: a fresh network is untrained:MODEL[:SEED] (e.g. untrained:mlp3, untrained:resnet:1)"
        )
    network, tail = spec.base, spec.base.base
    seed = int(tail.name) if tail is not None and tail.plain and tail.name.isdigit() else None
    model_name = str(network if seed is None else network.head)  # MODEL[:OPTIONS], then the seed if there is one
    if not models.is_model_name(model_name):
        raise ValueError(f"{str(spec)!r}: unknown model {model_name!r} (e.g. untrained:mlp3, untrained:resnet:1)")
    model = models.get_model(model_name)
    params = models.init_params(model, jax.random.key(0 if seed is None else seed))
    return Agent(name=str(spec), player=models.model_player(model), params=params, model_name=model_name)


def unknown_player(spec: PlayerSpec) -> str:
    """What is wrong with a player spec that names nothing: a run folder with no checkpoint yet,
    an unknown search, or a path that does not exist."""
    builtins = ", ".join((*BUILTIN_PLAYERS, SHIPPED_NAME, *SHIPPED_MODELS))
    text = str(spec)
    if Path(text).is_dir():
        return (
            f"{text!r} is a folder with no {checkpoint.FILENAME} yet (a run that has not saved its first checkpoint?)"
        )
    if not spec.plain and "/" not in spec.name and "." not in spec.name:
        return (
            f"{text!r}: unknown search {spec.name!r}; a search player is SEARCH[:OPTIONS]:PLAYER with SEARCH one of "
            f"{', '.join(search.SEARCHES)}"
        )
    return (
        f"{text!r} is neither a built-in player ({builtins}) nor an existing checkpoint file or run folder: "
        "no such path"
    )


@functools.partial(jax.jit, static_argnames="player")
def _policy(player: Player, params, boards: jax.Array):
    out = player(params, boards, jax.random.key(0))
    return _reported(out.logits, out.value, boards)


def _reported(logits: jax.Array, value: jax.Array | None, boards: jax.Array):
    """``(probs, value, greedy)`` of a player's logits and value (NaN without one) on ``boards``."""
    value = jnp.full(boards.shape[:1], jnp.nan) if value is None else value
    legal = game.legal_mask(boards)
    probs = jax.nn.softmax(mask_for_sampling(legal, logits.astype(jnp.float32)), axis=-1)
    # greedy: the most likely legal column; ties go to the lowest column
    greedy = jnp.argmax(jnp.where(legal, probs, -1.0), axis=-1)
    return probs, value.astype(jnp.float32), greedy


def policy(
    agent: Agent, boards, batch_size: int = 1024, progress: Progress | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What an agent makes of positions, on the host.

    Boards go through in fixed-size batches (padded), so any number of boards compiles once per
    batch size.

    Args:
        agent: the player.
        boards: ``int8 (N, 6, 7)`` canonical boards.
        batch_size: boards per compiled call.
        progress: counts the boards as they go (a slow search's progress lines).

    Returns:
        ``(probs, value, greedy)``: ``float (N, 7)`` the sampling distribution (softmax over
        the legal columns, exactly 0 elsewhere; a search's: its move), ``float (N,)`` the value
        for the side to move (NaN without a value head), ``int (N,)`` the most likely legal
        column (the lowest on ties).
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
        side = Side(agent.player, agent.params, temperature)
        traj, _ = play_games(k, side, side, size)
        return jax.device_get(traj)

    progress = progress or Progress()
    parts = [progress.step(lambda k=k: one_slice(k), min(size, num_games - i * size)) for i, k in enumerate(keys)]
    return jax.tree.map(lambda *xs: np.concatenate(xs, axis=1)[:, :num_games], *parts)


class SearchedMove(NamedTuple):
    """What a player says of a batch of positions, from one compiled call (:func:`searched_move`)."""

    probs: np.ndarray  # (N, 7), as policy() reports them
    value: np.ndarray  # (N,), NaN without a value head
    greedy: np.ndarray  # (N,)
    shares: np.ndarray | None  # (N, 7): a search's root visits as shares, as visit_shares(); None without a search
    tree: Any = None  # the search's tree when it was asked for (czjax.search.reuse), for the next search to reuse


@functools.partial(jax.jit, static_argnames=("search", "network"))
def _searched(search, network: Player, params, boards: jax.Array):
    """A search player's report (:func:`_policy`'s) and the search's root visits, from one search
    with :func:`_policy`'s key: what the search player itself computes."""
    out = search.run(network, params, boards, jax.random.key(0))
    return (*_reported(search.logits(out), out.value, boards), out.visits)


@functools.partial(jax.jit, static_argnames=("search", "network", "keep"))
def _searched_reusing(search, network: Player, params, boards: jax.Array, previous, path, keep: int):
    """:func:`_searched` for a PUCT search that starts from ``previous``'s subtree below ``path``
    where there is one (:func:`czjax.search.reuse.puct_search`); also returns its tree."""
    previous_tree = search_reuse.PreviousTree(previous, path)
    out, tree = search_reuse.puct_search(search, network, params, boards, jax.random.key(0), previous_tree, keep)
    return (*_reported(search.logits(out), out.value, boards), out.visits, tree)


def searched_move(agent: Agent, boards, previous=None, path=None, keep: int = 0) -> SearchedMove:
    """:func:`policy` and :func:`visit_shares` of ``agent`` on int8 ``boards (N, 6, 7)`` at once: a
    search runs once, in one compiled call, and gives the same numbers as those two. ``keep > 0``
    (a search that allows it, :func:`czjax.search.reuse.reusable`): the search keeps its tree
    (``keep + sims`` slots) and starts from the subtree of ``previous`` (an earlier result's
    ``tree``) below the moves ``path (N, P)`` (-1: no move) where it holds one; see
    :func:`czjax.search.reuse.puct_search`."""
    boards = np.asarray(boards, np.int8)
    if agent.search is None:
        probs, value, greedy = policy(agent, boards)
        return SearchedMove(probs=probs, value=value, greedy=greedy, shares=None)
    if keep > 0 and search_reuse.reusable(agent.search):
        if previous is None:
            previous = search_reuse.empty_tree(boards.shape[0], keep + agent.search.sims)
            path = np.full((boards.shape[0], 2), -1, np.int32)
        *report, visits, tree = _searched_reusing(
            agent.search, agent.network, agent.params, jnp.asarray(boards), previous, jnp.asarray(path, jnp.int32), keep
        )
    else:
        *report, visits = _searched(agent.search, agent.network, agent.params, jnp.asarray(boards))
        tree = None
    probs, value, greedy = (np.asarray(x) for x in report)
    return SearchedMove(probs=probs, value=value, greedy=greedy, shares=_shares(visits), tree=tree)


def _shares(visits) -> np.ndarray:
    """Root visits ``(N, 7)`` as shares of each position's visits."""
    visits = np.asarray(visits).astype(np.float64)
    return visits / np.maximum(visits.sum(-1, keepdims=True), 1.0)


def _each(report, boards: jax.Array):
    """``report`` of each of ``boards (N, 6, 7)`` as a batch of one, stacked: vmapped, so the
    positions run as one batch, yet each row is what its board alone gives (the same key for
    every row: a player's or a search's random draws do not depend on the row or the others)."""
    return jax.tree.map(lambda x: x[:, 0], jax.vmap(lambda board: report(board[None]))(boards))


@functools.partial(jax.jit, static_argnames="player")
def _policy_each(player: Player, params, boards: jax.Array):
    return _each(lambda board: _policy(player, params, board), boards)


@functools.partial(jax.jit, static_argnames=("search", "network"))
def _searched_each(search, network: Player, params, boards: jax.Array):
    return _each(lambda board: _searched(search, network, params, board), boards)


def searched_each(agent: Agent, boards) -> SearchedMove:
    """:func:`searched_move` of each of int8 ``boards (N, 6, 7)`` alone, in one compiled call
    (one per ``N``): row ``i`` is what ``searched_move(agent, boards[i : i + 1])`` reports, whatever
    the other boards (a search's noise included; the same to float rounding, since a network's
    products run batched), for a server answering unrelated positions at once
    (:mod:`czjax.evaluate.serve`). No tree reuse: that follows one game."""
    boards = jnp.asarray(np.asarray(boards, np.int8))
    if agent.search is None:
        probs, value, greedy = (np.asarray(x) for x in _policy_each(agent.player, agent.params, boards))
        return SearchedMove(probs=probs, value=value, greedy=greedy, shares=None)
    *report, visits = _searched_each(agent.search, agent.network, agent.params, boards)
    probs, value, greedy = (np.asarray(x) for x in report)
    return SearchedMove(probs=probs, value=value, greedy=greedy, shares=_shares(visits))


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
    return _shares(search_details(agent, boards)[0])


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
