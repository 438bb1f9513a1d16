"""AlphaZero.jl's MCTS (its ``src/mcts.jl``), the search of AlphaZero.jl's Pons benchmark player.

It differs from czjax's ``mcts`` (mctx's conventions) in four ways, each of which moves the
benchmark's error rates (docs/strength.md, "AlphaZero.jl's protocol"):

* **Transpositions.** Nodes are positions, not paths: a move that reaches a position already
  in the tree links to its node, so its statistics are shared by every path to it. Statistics
  live on the edges (``N(s, a)``, ``W(s, a)``), as in AlphaZero.jl's ``ActionStats``.
* **An unvisited column's Q is 0** (``W / max(N, 1)``), not the node's value.
* ``U = c P sqrt(sum_b N(s, b)) / (N(s, a) + 1)``: the sum of the edges' visits, which is 0 on
  the node's first selection (the first legal column is then chosen: Julia's ``argmax`` takes
  the first best score, and so does this search on every tie).
* **The simulations count the root's creation**: AlphaZero.jl's first simulation only
  evaluates the root, so ``sims = 600`` is 599 visits below it.

A move that wins is worth 1 to its mover and ends the line (no node is made for the finished
position); a draw is worth 0. The policy is the root's visit shares and the move the most
visited column, the lowest one on ties (``argmax(pi)``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

from czjax import game
from czjax.players import LOSS_MASK_VALUE, Player
from czjax.search.base import (
    CONNECT_FOUR,
    NUM_ACTIONS,
    Environment,
    SearchOutput,
    check_ranges,
    network_value,
    refuse_tree,
)
from czjax.search.columns import col_argmax, col_sum
from czjax.util.pytree import pytree_dataclass

ROOT = 0
UNLINKED = -1  # the move below this edge has not been tried
TERMINAL = -2  # the move below this edge ended the game
MAX_PATH = game.NUM_CELLS  # a simulation's path has at most one edge per empty cell


@pytree_dataclass(frozen=True)
class TranspositionTree:
    """A batch of search graphs with one node per position (``N`` nodes each).

    positions: packed positions ``(B, N)``, the side to move's view.
    legal: ``bool (B, N, 7)``; prior: ``float (B, N, 7)``, the network's probabilities.
    value: ``float (B, N)``: the network's value of the node, for its side to move.
    children: ``int32 (B, N, 7)``: the node a column leads to, :data:`UNLINKED` or
        :data:`TERMINAL`.
    reward: ``float (B, N, 7)``: 1 where the column won (a terminal edge), else 0.
    visits, total: ``(B, N, 7)``: ``N(s, a)`` and ``W(s, a)``, the sum of the values backed up
        through the edge for the side to move at ``s``.
    size: ``int32 (B,)``: nodes in use.
    """

    positions: game.Position
    legal: chex.Array
    prior: chex.Array
    value: chex.Array
    children: chex.Array
    reward: chex.Array
    visits: chex.Array
    total: chex.Array
    size: chex.Array


def init_graph(positions: game.Position, prior: jax.Array, value: jax.Array, legal: jax.Array, num_nodes: int):
    """A graph per root with only its root node."""
    batch = value.shape[0]

    def nodes(root: jax.Array) -> jax.Array:
        return jnp.zeros((batch, num_nodes) + root.shape[1:], root.dtype).at[:, ROOT].set(root)

    edges = (batch, num_nodes, NUM_ACTIONS)
    return TranspositionTree(
        positions=jax.tree.map(nodes, positions),
        legal=nodes(legal),
        prior=nodes(prior),
        value=nodes(value),
        children=jnp.full(edges, UNLINKED, jnp.int32),
        reward=jnp.zeros(edges, jnp.float32),
        visits=jnp.zeros(edges, jnp.int32),
        total=jnp.zeros(edges, jnp.float32),
        size=jnp.ones((batch,), jnp.int32),
    )


def uct_select(graph: TranspositionTree, node: jax.Array, c: float) -> jax.Array:
    """AlphaZero.jl's ``uct_scores`` and ``argmax`` at ``node`` of one graph: the first legal
    column with the best ``W / max(N, 1) + c P sqrt(sum N) / (N + 1)``."""
    visits = graph.visits[node].astype(jnp.float32)
    q = graph.total[node] / jnp.maximum(visits, 1.0)
    score = q + c * graph.prior[node] * jnp.sqrt(col_sum(visits)) / (visits + 1.0)
    return col_argmax(jnp.where(graph.legal[node], score, -jnp.inf))


def find_node(graph: TranspositionTree, position: game.Position) -> tuple[jax.Array, jax.Array]:
    """``(found, index)`` of ``position`` among one graph's nodes."""
    same = (
        (graph.positions.mine_lo == position.mine_lo)
        & (graph.positions.mine_hi == position.mine_hi)
        & (graph.positions.theirs_lo == position.theirs_lo)
        & (graph.positions.theirs_hi == position.theirs_hi)
        & (jnp.arange(graph.value.shape[0]) < graph.size)
    )
    return same.any(), jnp.argmax(same).astype(jnp.int32)


@pytree_dataclass(frozen=True)
class Descent:
    """Where one simulation's walk down one graph stopped.

    node, action: the last edge; path_nodes, path_actions: ``int32 (MAX_PATH,)``, the edges
    walked (the last one included), ``length`` of them; path_links: ``int32 (MAX_PATH,)``, the
    node a walked edge was linked to on the way (a transposition found), else :data:`UNLINKED`.
    A walk never meets a node twice (each move adds a stone), so the links it finds are written
    only with the simulation and the graph is not copied along the walk. next_position, won,
    done: the move of the last edge, when it was untried (``untried``).
    """

    node: chex.Array
    action: chex.Array
    path_nodes: chex.Array
    path_actions: chex.Array
    path_links: chex.Array
    length: chex.Array
    untried: chex.Array
    next_position: game.Position
    won: chex.Array
    done: chex.Array
    linked: chex.Array


def _record(d: Descent, add: jax.Array | bool = True, link: jax.Array | int = UNLINKED) -> Descent:
    """``d``'s edge ``(node, action)`` appended to its path where ``add``, with the node ``link``
    it was linked to on the way."""
    at = jnp.minimum(d.length, MAX_PATH - 1)
    return dataclasses.replace(
        d,
        path_nodes=d.path_nodes.at[at].set(jnp.where(add, d.node, d.path_nodes[at])),
        path_actions=d.path_actions.at[at].set(jnp.where(add, d.action, d.path_actions[at])),
        path_links=d.path_links.at[at].set(jnp.where(add, link, d.path_links[at])),
        length=d.length + jnp.asarray(add, jnp.int32),
    )


def _at_root(graph: TranspositionTree) -> Descent:
    """A walk down ``graph`` before its first edge: at the root, nothing recorded."""
    return Descent(
        node=jnp.int32(ROOT),
        action=jnp.int32(0),
        path_nodes=jnp.zeros((MAX_PATH,), jnp.int32),
        path_actions=jnp.zeros((MAX_PATH,), jnp.int32),
        path_links=jnp.full((MAX_PATH,), UNLINKED, jnp.int32),
        length=jnp.int32(0),
        untried=jnp.array(False),
        next_position=jax.tree.map(lambda x: x[ROOT], graph.positions),
        won=jnp.array(False),
        done=jnp.array(False),
        linked=jnp.array(True),
    )


def descend(graph: TranspositionTree, c: float, env: Environment, transpositions: bool = True) -> Descent:
    """One graph's walk from the root: follow the selected edges while they lead to a node;
    an untried edge whose position is already a node is linked to it (a transposition) and the
    walk goes on from there. It stops at an untried edge to a new position or at an edge that
    ends the game; that edge closes the path."""

    def select(node: jax.Array) -> jax.Array:
        return uct_select(graph, node, c)

    def follows_a_link(d: Descent) -> jax.Array:
        return graph.children[d.node, d.action] >= 0

    def step_along_link(d: Descent) -> Descent:
        d = _record(d)
        node = graph.children[d.node, d.action]
        return dataclasses.replace(d, node=node, action=select(node))

    def try_edge(d: Descent) -> Descent:
        d = jax.lax.while_loop(follows_a_link, step_along_link, dataclasses.replace(d, action=select(d.node)))
        position = jax.tree.map(lambda x: x[d.node], graph.positions)
        next_position, won, done = env.step(position, d.action)
        if transpositions:
            found, index = find_node(graph, next_position)
        else:  # a tree: no lookup
            found, index = jnp.array(False), jnp.int32(0)
        untried = graph.children[d.node, d.action] == UNLINKED
        transposition = untried & ~done & found
        # a transposition: link the edge to the node and walk on from it
        d = dataclasses.replace(
            _record(d, transposition, index),
            untried=untried,
            next_position=next_position,
            won=won,
            done=done,
            linked=transposition,
        )
        return dataclasses.replace(d, node=jnp.where(transposition, index, d.node))

    return _record(jax.lax.while_loop(lambda d: d.linked, try_edge, _at_root(graph)))


def ends_game(graph: TranspositionTree, d: Descent) -> jax.Array:
    """Whether the walk's last edge ends the game (tried now or before): its simulation backs up
    the move's reward and needs no network evaluation."""
    return d.done & d.untried | (graph.children[d.node, d.action] == TERMINAL)


def expand_and_back_up(
    graph: TranspositionTree, d: Descent, prior, value, legal, apply: jax.Array | bool = True
) -> TranspositionTree:
    """One graph after a simulation: the transpositions its walk found linked, a new node for an
    untried edge to a new position (with the network's ``prior``, ``value``, ``legal`` of it), a
    terminal edge's reward, and every edge of the path updated with the value for its mover
    (``(-1) ** k`` of the last edge's, ``k`` edges above it). Where ``apply`` is false the graph
    is left as it was."""
    ends = ends_game(graph, d)
    new_node = d.untried & ~d.done & apply
    index = graph.size
    last = graph.children[d.node, d.action]
    reward = jnp.where(d.untried, d.won.astype(jnp.float32), graph.reward[d.node, d.action])
    last_q = jnp.where(ends, reward, -value)
    link = jnp.where(new_node, index, jnp.where(ends, TERMINAL, last))

    num_nodes = graph.value.shape[0]
    slot = jnp.where(new_node, index, num_nodes)  # out of range: the write is dropped, nothing copied

    def put(field, x):
        return field.at[slot].set(x, mode="drop")

    steps = jnp.arange(MAX_PATH)
    on_path = (steps < d.length) & apply
    sign = jnp.where((d.length - 1 - steps) % 2 == 0, 1.0, -1.0)
    links_found = jnp.where(on_path & (d.path_links >= 0), d.path_nodes, num_nodes)
    children = graph.children.at[links_found, d.path_actions].set(d.path_links, mode="drop")
    return dataclasses.replace(
        graph,
        positions=jax.tree.map(put, graph.positions, d.next_position),
        legal=put(graph.legal, legal),
        prior=put(graph.prior, prior),
        value=put(graph.value, value),
        children=children.at[d.node, d.action].set(jnp.where(apply, link, last)),
        reward=graph.reward.at[d.node, d.action].set(jnp.where(apply, reward, graph.reward[d.node, d.action])),
        visits=graph.visits.at[d.path_nodes, d.path_actions].add(on_path.astype(jnp.int32)),
        total=graph.total.at[d.path_nodes, d.path_actions].add(jnp.where(on_path, sign * last_q, 0.0)),
        size=graph.size + new_node.astype(jnp.int32),
    )


def simulate(
    graph: TranspositionTree,
    c: float,
    player: Player,
    params: Any,
    key: jax.Array,
    env: Environment,
    transpositions: bool = True,
) -> TranspositionTree:
    """One simulation on every graph: walk down, evaluate the new positions (one network call
    for the batch), expand and back up."""
    d = jax.vmap(lambda g: descend(g, c, env, transpositions))(graph)
    logits, value, legal = network_value(player, params, d.next_position, key, env)
    return jax.vmap(expand_and_back_up)(graph, d, jax.nn.softmax(logits), value, legal)


def run_graph_search(
    player: Player,
    params: Any,
    boards: jax.Array,
    key: jax.Array,
    sims: int,
    c: float,
    env: Environment = CONNECT_FOUR,
    transpositions: bool = True,
) -> TranspositionTree:
    """The graphs after ``sims`` simulations from int8 ``boards (B, 6, 7)``, the first of which
    evaluates the root; ``transpositions=False`` makes a new node for every path."""
    positions = env.encode(boards)
    key, root_key = jax.random.split(key)
    logits, value, legal = network_value(player, params, positions, root_key, env)
    graph = init_graph(positions, jax.nn.softmax(logits), value, legal, sims)
    keys = jax.random.split(key, max(sims - 1, 1))
    return jax.lax.fori_loop(
        0, sims - 1, lambda i, g: simulate(g, c, player, params, keys[i], env, transpositions), graph
    )


def graph_output(graph: TranspositionTree) -> SearchOutput:
    """The root's visit shares as the policy, the most visited column (the lowest on ties) as the
    move, ``W / N`` per column as Q; the graph."""
    visits = graph.visits[:, ROOT]
    total = graph.total[:, ROOT]
    legal = graph.legal[:, ROOT]
    count = visits.sum(-1)
    value = jnp.where(count > 0, total.sum(-1) / jnp.maximum(count, 1), graph.value[:, ROOT])
    return SearchOutput(
        action=col_argmax(jnp.where(legal, visits, -1)).astype(jnp.int32),
        policy=visits / jnp.maximum(count, 1)[:, None],
        visits=visits,
        q=jnp.where((visits > 0) & legal, total / jnp.maximum(visits, 1), jnp.nan),
        value=value,
        tree=graph,
    )


@dataclasses.dataclass(frozen=True)
class AlphaZeroJlMCTS:
    """AlphaZero.jl's MCTS: ``sims`` simulations (the first evaluates the root), exploration
    ``c``; ``transpositions=0`` keeps a node per path instead (to measure what they change).
    The defaults are its Pons benchmark player's (600 simulations, ``cpuct = 2``, no noise)."""

    sims: int = 600
    c: float = 2.0
    transpositions: bool = True
    description: ClassVar[str] = "AlphaZero.jl's MCTS (transpositions, unvisited Q 0, ties to the lowest column)"

    @property
    def evaluations_per_move(self) -> int:
        return self.sims

    def run(
        self,
        player: Player,
        params: Any,
        boards: jax.Array,
        key: jax.Array,
        *,
        env: Environment = CONNECT_FOUR,
        tree: TranspositionTree | None = None,
    ) -> SearchOutput:
        """The search from int8 ``boards (B, 6, 7)`` with ``player``'s network in ``env``; its
        output carries its graph. ``tree``: refused (a graph is not re-rooted)."""
        refuse_tree(self, tree)
        graph = run_graph_search(player, params, boards, key, self.sims, self.c, env, self.transpositions)
        return graph_output(graph)

    def logits(self, out: SearchOutput) -> jax.Array:
        """``log N(a)``: at temperature 0 the most visited column, the lowest on ties."""
        return jnp.where(out.visits > 0, jnp.log(jnp.maximum(out.visits, 1).astype(jnp.float32)), LOSS_MASK_VALUE)

    def check(self) -> None:
        """One-line ``ValueError`` for a setting out of its range."""
        check_ranges(self, non_negative=("c",))
        if self.sims < 2:
            raise ValueError(f"sims must be at least 2 (the first evaluates the root), got {self.sims}")
