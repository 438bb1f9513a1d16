"""AlphaZero.jl's MCTS over many positions at once, each stopped as soon as its move is decided.

Scoring a network under AlphaZero.jl's protocol runs its MCTS with 600 simulations on each of
Pons' 6,000 positions, and only the move counts: the most visited root column, the lowest on
ties. A simulation adds one visit to one root column, so once the leader is ahead of every
lower column by more than the simulations left, and of every higher one by at least as many,
no later simulation can change the move: the rest are spent for nothing. On czjax@3's network
that point comes after about 380 of the 600 (docs/strength.md, "The yardstick").

:func:`stream_search` therefore keeps a fixed stream of ``slots`` graphs (fixed shapes, one
network call a step for the whole stream) and gives a slot the next position the step after
its search stopped, so the network's batch stays full while every search stops at its own
time. Each position's search is the one :func:`czjax.search.azjl.run_graph_search` runs (the
first evaluation its root's, then the same selection, transpositions, expansion and back-up),
cut where its move is decided: the moves are those of the full search. What the cut changes
is the rest of the output: the root's visit shares and value are those at the stop.

A step spends the network only where a search needs it. A simulation whose walk ends the game
(a winning or drawing move) backs up the move's reward with no evaluation, so before each call
a slot runs such simulations until its next walk reaches a new position (84% of the
simulations on Pons' end-game set). Positions go out fewest stones first, so the searches left
when the last is handed out are short ones, and the stream then halves while half its slots are
idle.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from czjax.players import Player
from czjax.search.azjl import (
    ROOT,
    UNLINKED,
    AlphaZeroJlMCTS,
    TranspositionTree,
    descend,
    ends_game,
    expand_and_back_up,
    init_graph,
)
from czjax.search.base import CONNECT_FOUR, NUM_ACTIONS, Environment, network_value
from czjax.search.columns import col_argmax
from czjax.util import compiling, platforms
from czjax.util.progress import Progress
from czjax.util.pytree import pytree_dataclass

# Graphs searched at once (the network's batch) by default: the platform's choice
# (``stream_slots`` in czjax.util.platforms). On a CPU 512: a ResNet call on 512 boards runs at
# about the rate of one on 1,024 (docs/results/pons-protocol/yardstick-2026-11-27), and the stream's
# tail, where the last searches finish with fewer and fewer slots busy, is half as long;
# elsewhere 1,024.
# Rounds of game-ending simulations a slot may run in a step before the network call, by
# default. Every slot waits for the stream's longest run, so the bound keeps a step short; a slot
# whose run is longer goes on next step (its last simulation then leaves the network's answer
# unused). A round is a walk of every slot: it pays where a network call costs more than a walk
# (czjax@4's ResNet on 100 positions of each of Pons' sets, 2-core CPU: 145 s with 4 rounds,
# 154 s with 8, 186 s with none; docs/results/pons-protocol/yardstick-xla-conv-2026-11-27), not
# for a small MLP, whose caller passes 0 (:func:`stream_search`).
GAME_ENDS_PER_STEP = 4
STEPS_PER_CALL = 64  # simulation steps per compiled call, between progress lines
# Once every position is handed out, the stream halves while half its slots are idle, down to this
# size: in the tail the longest searches would otherwise keep the whole batch busy for little.
MIN_SLOTS = 64


def decided(visits: jax.Array, legal: jax.Array, remaining: jax.Array) -> jax.Array:
    """Whether the move, the most visited legal column (the lowest on ties), stays the move
    whatever ``remaining`` more simulations do, each adding one visit to one column: it leads
    every lower legal column by more than ``remaining`` and every higher one by at least that.
    ``visits``, ``legal``: ``(S, 7)``; ``remaining``: ``(S,)``."""
    best = col_argmax(jnp.where(legal, visits, -1))
    lead = jnp.take_along_axis(visits, best[:, None], axis=1) - visits
    columns = jnp.arange(NUM_ACTIONS)
    needed = remaining[:, None] + (columns < best[:, None])  # a lower column wins a tie
    return (~legal | (columns == best[:, None]) | (lead >= needed)).all(axis=-1)


@pytree_dataclass(frozen=True)
class Stream:
    """A stream of ``S`` graphs working through ``M`` positions.

    graph: the slots' graphs. item: ``int32 (S,)``, the position a slot searches (-1: none left
    to give it). sims: ``int32 (S,)``, its simulations so far (0: its root's evaluation is due).
    handed: positions given to slots so far. The outputs per position, written when its search
    stops: action, visits ``(M, 7)`` at the root, value (the root's ``W / N``), sims_used,
    evaluations (the graph's nodes: one for the root, one for each new position).
    """

    graph: TranspositionTree
    item: chex.Array
    sims: chex.Array
    handed: chex.Array
    action: chex.Array
    visits: chex.Array
    value: chex.Array
    sims_used: chex.Array
    evaluations: chex.Array

    @property
    def finished(self) -> jax.Array:
        """Whether every position's search has stopped."""
        return (self.item < 0).all() & (self.handed >= self.action.shape[0])


def _where(mask: jax.Array, a, b):
    """Per slot (the leading axis), ``a`` where ``mask`` else ``b``, over two pytrees."""
    return jax.tree.map(lambda x, y: jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y), a, b)


def _hand_out(graph: TranspositionTree, item: jax.Array, free: jax.Array, handed: jax.Array, roots) -> tuple:
    """The next positions given to the ``free`` slots in slot order: ``(graph, item, taken)``,
    a taken slot's graph reset to its root alone (its evaluation due next step), a free slot
    left without one when none is left."""
    num = roots.mine_lo.shape[0]
    wanted = handed + jnp.cumsum(free) - 1
    taken = free & (wanted < num)
    item = jnp.where(taken, wanted, jnp.where(free, -1, item))
    root = jax.tree.map(lambda x: x[jnp.clip(wanted, 0, num - 1)], roots)
    rows = jnp.where(taken, jnp.arange(free.shape[0]), free.shape[0])  # out of range: left as it is

    def reset(field, fill):
        return field.at[rows].set(fill, mode="drop")

    graph = dataclasses.replace(
        graph,
        positions=jax.tree.map(lambda nodes, r: nodes.at[rows, ROOT].set(r, mode="drop"), graph.positions, root),
        children=reset(graph.children, UNLINKED),
        reward=reset(graph.reward, 0.0),
        visits=reset(graph.visits, 0),
        total=reset(graph.total, 0.0),
        size=jnp.where(taken, 1, graph.size),
    )
    return graph, item, taken


def start(roots, slots: int, sims: int) -> Stream:
    """The stream before its first step: the first ``slots`` positions handed out."""
    num = roots.mine_lo.shape[0]
    empty_rows = jax.tree.map(lambda x: jnp.zeros((slots,) + x.shape[1:], x.dtype), roots)
    graph = init_graph(
        empty_rows,
        jnp.zeros((slots, NUM_ACTIONS)),
        jnp.zeros((slots,)),
        jnp.zeros((slots, NUM_ACTIONS), bool),
        sims,
    )
    graph, item, _ = _hand_out(graph, jnp.full((slots,), -1), jnp.ones((slots,), bool), jnp.int32(0), roots)
    return Stream(
        graph=graph,
        item=item,
        sims=jnp.zeros((slots,), jnp.int32),
        handed=jnp.minimum(jnp.int32(slots), num),
        action=jnp.zeros((num,), jnp.int32),
        visits=jnp.zeros((num, NUM_ACTIONS), jnp.int32),
        value=jnp.zeros((num,), jnp.float32),
        sims_used=jnp.zeros((num,), jnp.int32),
        evaluations=jnp.zeros((num,), jnp.int32),
    )


def _stopped(graph: TranspositionTree, done_sims: jax.Array, sims: int) -> jax.Array:
    """Whether each slot's search is over: its ``sims`` done or its move decided."""
    return (done_sims >= sims) | decided(graph.visits[:, ROOT], graph.legal[:, ROOT], sims - done_sims)


def _play_out_game_ends(g: TranspositionTree, done_sims, running, walk, sims: int, rounds: int) -> tuple:
    """The simulations that end the game, run without the network: while a ``running`` slot's
    next walk ends at a won or drawn position, its reward is backed up and the slot walks
    again, until its walk needs the network or its search is over (at most ``rounds``
    rounds). ``(graph, done_sims, walk, over)``: each slot's graph
    and count after them, its next walk, and whether its search is over."""
    no_network = (jnp.zeros(g.prior.shape[::2]), jnp.zeros(g.value.shape[:1]), jnp.zeros(g.legal.shape[::2], bool))

    def free(c):
        g, done_sims, d, over, _ = c
        return running & ~over & jax.vmap(ends_game)(g, d)

    def body(c):
        g, done_sims, d, over, rounds = c
        runs = free(c)
        g = jax.vmap(expand_and_back_up)(g, d, *no_network, runs)
        done_sims = done_sims + runs
        return g, done_sims, walk(g), over | runs & _stopped(g, done_sims, sims), rounds + 1

    state = (g, done_sims, walk(g), jnp.zeros_like(running), jnp.int32(0))
    g, done_sims, d, over, _ = jax.lax.while_loop(lambda c: (c[4] < rounds) & free(c).any(), body, state)
    return g, done_sims, d, over


def step(
    s: Stream,
    roots,
    search: AlphaZeroJlMCTS,
    player: Player,
    params: Any,
    key: jax.Array,
    env: Environment,
    rounds: int = GAME_ENDS_PER_STEP,
) -> Stream:
    """One network call for the stream: each busy slot evaluates its root (when due) or runs
    simulations of ``search``, those that end the game first (no network needed, at most
    ``rounds`` of them) and then one that evaluates a new position; a search whose move is
    decided (or whose ``sims`` are done) writes its outputs and its slot takes the next
    position."""
    sims = search.sims
    busy = s.item >= 0
    fresh = s.sims == 0
    walk = jax.vmap(lambda one: descend(one, search.c, env, search.transpositions))
    # an idle slot (no position left to give it) keeps its graph: grown on every step it would
    # outgrow its nodes, and a walk down links past the last node need not end
    g, done_sims, d, over = _play_out_game_ends(s.graph, s.sims, busy & ~fresh, walk, sims, rounds)
    at_root = jax.tree.map(lambda x: x[:, ROOT], g.positions)
    logits, value, legal = network_value(player, params, _where(fresh, at_root, d.next_position), key, env)
    prior = jax.nn.softmax(logits)
    evaluates = busy & ~over
    g = jax.vmap(expand_and_back_up)(g, d, prior, value, legal, evaluates & ~fresh)
    rooted = busy & fresh
    g = dataclasses.replace(
        g,
        prior=g.prior.at[:, ROOT].set(jnp.where(rooted[:, None], prior, g.prior[:, ROOT])),
        value=g.value.at[:, ROOT].set(jnp.where(rooted, value, g.value[:, ROOT])),
        legal=g.legal.at[:, ROOT].set(jnp.where(rooted[:, None], legal, g.legal[:, ROOT])),
    )
    done_sims = done_sims + evaluates
    visits, root_legal = g.visits[:, ROOT], g.legal[:, ROOT]
    stops = busy & (over | _stopped(g, done_sims, sims))
    count = visits.sum(-1)
    root_value = jnp.where(count > 0, g.total[:, ROOT].sum(-1) / jnp.maximum(count, 1), g.value[:, ROOT])
    out = jnp.where(stops, s.item, s.action.shape[0])  # past the end: dropped

    def put(field, x):
        return field.at[out].set(x, mode="drop")

    # the network's answers used: the root's and one per new position, each a node (a walk that
    # ends the game makes none, nor one left over when its run outlasted the rounds)
    nodes = g.size
    g, item, taken = _hand_out(g, s.item, stops | ~busy, s.handed, roots)
    return Stream(
        graph=g,
        item=item,
        sims=jnp.where(taken, 0, done_sims),
        handed=s.handed + taken.sum(dtype=jnp.int32),
        action=put(s.action, col_argmax(jnp.where(root_legal, visits, -1))),
        visits=put(s.visits, visits),
        value=put(s.value, root_value),
        sims_used=put(s.sims_used, done_sims),
        evaluations=put(s.evaluations, nodes),
    )


@functools.partial(jax.jit, static_argnames=("slots",))
def shrink(s: Stream, slots: int) -> Stream:
    """The stream in ``slots`` slots: its busy slots (at most ``slots`` of them) kept, in order,
    the rest idle. Once every position is handed out, the network's batch need not stay the
    stream's first size while fewer and fewer searches remain."""
    keep = jnp.argsort(s.item < 0, stable=True)[:slots]  # busy slots first
    return dataclasses.replace(s, graph=jax.tree.map(lambda x: x[keep], s.graph), item=s.item[keep], sims=s.sims[keep])


def advance(
    s: Stream,
    roots,
    search: AlphaZeroJlMCTS,
    player: Player,
    params: Any,
    key: jax.Array,
    env: Environment,
    steps: int,
    rounds: int = GAME_ENDS_PER_STEP,
):
    """At most ``steps`` steps of the stream, fewer when every search has stopped, each with at
    most ``rounds`` rounds of game-ending simulations."""

    def body(carry):
        s, i = carry
        return step(s, roots, search, player, params, jax.random.fold_in(key, i), env, rounds), i + 1

    s, _ = jax.lax.while_loop(lambda carry: (carry[1] < steps) & ~carry[0].finished, body, (s, jnp.int32(0)))
    return s


@functools.cache
def compiled_advance(convolutions: bool):
    """:func:`advance` compiled with the options :mod:`czjax.util.compiling` gives a program that
    holds convolution ops (``convolutions``) or none; made on first use, since choosing the
    options starts JAX's backend, which importing czjax must not (a run over several hosts
    starts it after ``jax.distributed.initialize``)."""
    return compiling.jit(
        advance, convolutions=convolutions, static_argnames=("search", "player", "env", "steps", "rounds")
    )


class StreamResult(NamedTuple):
    """What :func:`stream_search` gives per position, on the host: the move (``int (M,)``), the
    root's visit shares (``(M, 7)``) and value (``W / N``, the network's value where no visit)
    at the stop, the simulations it took (``int (M,)``, the root's evaluation the first) and the
    network evaluations they needed (``int (M,)``: a simulation that ends the game needs none)."""

    action: np.ndarray
    policy: np.ndarray
    value: np.ndarray
    sims_used: np.ndarray
    evaluations: np.ndarray


def stream_search(
    search: AlphaZeroJlMCTS,
    player: Player,
    params: Any,
    boards,
    key: jax.Array,
    *,
    slots: int | None = None,
    env: Environment = CONNECT_FOUR,
    progress: Progress | None = None,
    min_slots: int = MIN_SLOTS,
    convolutions: bool = False,
    game_end_rounds: int = GAME_ENDS_PER_STEP,
) -> StreamResult:
    """AlphaZero.jl's MCTS ``search`` (its ``sims`` simulations, exploration ``c``) from each of
    int8 ``boards (M, 6, 7)``, each stopped when its move is decided: the move that of the full
    search, the policy and value those at the stop. ``progress`` counts the positions whose
    search stopped. ``slots``: the stream's size (default the platform's ``stream_slots``,
    :mod:`czjax.util.platforms`); once every position is handed out it halves while half its
    slots are idle, down to ``min_slots``. ``convolutions``: whether ``player``'s network holds convolution ops
    (:func:`czjax.models.convolves`), for the options its program is compiled with.
    ``game_end_rounds``: rounds of game-ending simulations a step may run before its network
    call (0 where a call costs less than a walk of the stream)."""
    run = compiled_advance(convolutions)
    slots = slots or platforms.choices_for().stream_slots
    boards = np.asarray(boards, np.int8)
    num = boards.shape[0]
    if num == 0:
        nothing = np.zeros(0, np.int32)
        return StreamResult(nothing, np.zeros((0, NUM_ACTIONS)), np.zeros(0, np.float32), nothing, nothing)
    # handed out fewest stones first: a search from a fuller board is shorter (the game's end is
    # nearer, more of its simulations end it), so the searches left in the stream's tail are short
    order = np.argsort(np.count_nonzero(boards, axis=(1, 2)), kind="stable")
    roots = env.encode(jnp.asarray(boards[order]))
    s = start(roots, max(1, min(slots, num)), search.sims)
    progress = progress or Progress()
    stopped = 0

    def newly_stopped(s: Stream) -> int:
        nonlocal stopped
        now = int(s.handed) - int(np.sum(np.asarray(s.item) >= 0))
        new, stopped = now - stopped, now
        return new

    calls = 0
    while not bool(s.finished):
        size = s.item.shape[0]
        if size // 2 >= min_slots and int(s.handed) >= num and int(np.sum(np.asarray(s.item) >= 0)) <= size // 2:
            s = shrink(s, size // 2)
        key_call = jax.random.fold_in(key, calls)
        s = progress.step(
            lambda s=s, k=key_call: run(s, roots, search, player, params, k, env, STEPS_PER_CALL, game_end_rounds),
            newly_stopped,
        )
        calls += 1
    return _result(s, order)


def _result(s: Stream, order: np.ndarray) -> StreamResult:
    """The finished stream's outputs on the host, each back in the row of its position (the stream
    took them in ``order``)."""
    back = np.argsort(order)

    def rows(x) -> np.ndarray:
        return np.asarray(x)[back]

    visits = rows(s.visits)
    return StreamResult(
        action=rows(s.action),
        policy=visits / np.maximum(visits.sum(-1, keepdims=True), 1),
        value=rows(s.value),
        sims_used=rows(s.sims_used),
        evaluations=rows(s.evaluations),
    )
