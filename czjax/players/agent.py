"""The agent: a player with what the host needs around it (its parameters, its name, its network
and search), and what is asked of it on the host: its policy on positions (:func:`policy`), a
search's move, value and visit shares from one search (:func:`searched_move`,
:func:`searched_each`), its root's details (:func:`search_details`), games against itself
(:func:`self_play`). The agent a spec names is :func:`czjax.players.loading.load_agent`'s.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np

from czjax import game, models
from czjax.players.base import Player, mask_for_sampling
from czjax.rollout import Side, Trajectory, play_games
from czjax.search import reuse
from czjax.search.base import SearchOutput
from czjax.search.tree import Tree
from czjax.util.progress import Progress

# A job of more network evaluations than this is announced before it starts (tens of seconds on a CPU).
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


@functools.partial(jax.jit, static_argnames=("search", "network", "keep"))
def _searched(
    search, network: Player, params, boards: jax.Array, previous: Tree | None = None, path=None, keep: int = 0
) -> tuple[tuple[jax.Array, jax.Array, jax.Array], SearchOutput]:
    """One search of ``boards`` with :func:`_policy`'s key: ``(report, output)``, the report
    :func:`_reported` makes of the search player's logits and value (what the search player
    itself computes) and the search's output. ``keep > 0``: the search continues from the
    subtree of ``previous`` below the moves ``path`` (:func:`czjax.search.reuse.reroot`, ``keep``
    nodes of it at most) and its output carries its tree; otherwise its tree is dropped."""
    tree = None if previous is None else reuse.reroot(previous, path, keep, keep + search.sims)[0]
    out = search.run(network, params, boards, jax.random.key(0), tree=tree)
    if not keep:
        out = dataclasses.replace(out, tree=None)
    return _reported(search.logits(out), out.value, boards), out


def searched_move(agent: Agent, boards, previous=None, path=None, keep: int = 0) -> SearchedMove:
    """:func:`policy` and :func:`visit_shares` of ``agent`` on int8 ``boards (N, 6, 7)`` at once: a
    search runs once, in one compiled call, and gives the same numbers as those two. ``keep > 0``
    (a search that allows it, :func:`czjax.search.reuse.reusable`): the search keeps its tree
    (``keep + sims`` slots) and starts from the subtree of ``previous`` (an earlier result's
    ``tree``) below the moves ``path (N, P)`` (-1: no move) where it holds one, from a fresh root
    elsewhere (its ``tree`` argument, :class:`czjax.search.Search`)."""
    boards = np.asarray(boards, np.int8)
    if agent.search is None:
        probs, value, greedy = policy(agent, boards)
        return SearchedMove(probs=probs, value=value, greedy=greedy, shares=None)
    keep = keep if keep > 0 and reuse.reusable(agent.search) else 0
    if not keep:
        previous = path = None
    elif previous is None:  # the first search of a game: an empty tree, so every move compiles once
        previous = reuse.empty_tree(boards.shape[0], keep + agent.search.sims)
        path = np.full((boards.shape[0], 2), -1, np.int32)
    path = None if path is None else jnp.asarray(path, jnp.int32)
    report, out = _searched(agent.search, agent.network, agent.params, jnp.asarray(boards), previous, path, keep)
    probs, value, greedy = (np.asarray(x) for x in report)
    return SearchedMove(probs=probs, value=value, greedy=greedy, shares=_shares(out.visits), tree=out.tree)


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
    report, out = _searched_each(agent.search, agent.network, agent.params, boards)
    probs, value, greedy = (np.asarray(x) for x in report)
    return SearchedMove(probs=probs, value=value, greedy=greedy, shares=_shares(out.visits))


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
    _, out = _searched(agent.search, agent.network, agent.params, jnp.asarray(boards))
    return np.asarray(out.visits), np.asarray(out.q)
