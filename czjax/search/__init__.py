"""Search on the device: Connect-Zero's rollout improver and batched Monte Carlo tree search.

Every search takes a network player (``(params, boards, key) -> PlayerOutput``, its value 0
when it has no value head) and a batch of int8 boards, and returns a :class:`SearchOutput`:
the chosen move, the policy to train towards, visits and Q per column, and the root value.
Everything is fixed-shape and compiled: the tree is a set of ``(B, N)`` / ``(B, N, 7)``
arrays (``N = simulations + 1``), positions travel packed (:class:`czjax.game.Position`).

Signs (docs/DESIGN.md): a node's value is from the point of view of the player to move there.
``Q(s, a) = reward(child) - value(child)``: the reward is 1 when the move into the child won,
and a child's value is negated for its parent (a two-player game's discount of -1). A move
that ends the game leads to a *terminal* node: value 0, never expanded; a simulation that
selects it again backs up its reward once more. Illegal columns get ``-1e9`` logits at every
node and are never selected.

The algorithms (the :data:`SEARCHES` table; each a frozen dataclass whose fields are its
settings and whose ``run`` searches):

- ``rollout``: the PyTorch project's rollout improver (``treesearch.multiple_rollouts``).
- ``mcts``: AlphaZero's PUCT with Dirichlet noise at the root and a visit-count policy.
- ``entropy-mcts``: seed 004's entropy-guided PUCT (see :func:`subtree_entropy`).
- ``gumbel``: Gumbel MuZero's root (sequential halving with Gumbel noise, completed-Q improved
  policy) with its deterministic interior selection, as in ``mctx.gumbel_muzero_policy``.

A search is a player too (:func:`search_player`), so every evaluation command can use it
(``agents.load_agent("mcts:sims=64:runs/ex3")``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from czjax import game
from czjax.players import (
    LOSS_MASK_VALUE,
    Player,
    PlayerOutput,
    mask_for_loss,
    sample_masked,
)
from czjax.util.pytree import pytree_dataclass

A = game.COLS
ROOT = 0
UNVISITED = -1


# Reductions over a node's 7 columns, written out column by column (a fixed left-to-right
# order). The selection rules are written for one tree and vmapped: these then become
# elementwise operations on (B,) columns, which XLA's CPU backend runs much faster than its
# reductions over a minor axis of 7 (those were a third of Gumbel's descent on the CPU).
def col_sum(x):
    return functools.reduce(jnp.add, [x[..., i] for i in range(x.shape[-1])])


def col_max(x):
    return functools.reduce(jnp.maximum, [x[..., i] for i in range(x.shape[-1])])


def col_min(x):
    return functools.reduce(jnp.minimum, [x[..., i] for i in range(x.shape[-1])])


def col_argmax(x):
    """The first column holding the largest value, as ``jnp.argmax`` (for values without NaN)."""
    best, index = x[..., 0], jnp.zeros(x.shape[:-1], jnp.int32)
    for i in range(1, x.shape[-1]):
        better = x[..., i] > best
        best, index = jnp.where(better, x[..., i], best), jnp.where(better, i, index)
    return index


def col_softmax(x):
    e = jnp.exp(x - col_max(x)[..., None])
    return e / col_sum(e)[..., None]


ROLLOUT_MASK = -1e12  # the rollout improver's logits off its chosen column (the PyTorch project's)


@pytree_dataclass(frozen=True)
class Tree:
    """A batch of search trees. Node 0 is the root; simulation ``i`` adds node ``i + 1`` (left
    unused when the simulation revisited a terminal node).

    positions: packed positions ``(B, N)``, the side to move's point of view.
    terminal: ``bool (B, N)``: the move into the node ended the game.
    reward: ``float (B, N)``: 1 when the move into the node won (for its mover), else 0.
    raw_value: ``float (B, N)``: the network's value when the node was added (0 if terminal).
    node_visits, node_values: ``(B, N)``: visits, and the mean of the values backed up.
    parents, action_from_parent: ``int32 (B, N)``.
    legal: ``bool (B, N, 7)``; prior_logits: ``float (B, N, 7)``, -1e9 added where illegal;
    prior: their softmax.
    children_index: ``int32 (B, N, 7)``, :data:`UNVISITED` where the child is not in the tree.
    depth: ``int32 (B, N)``: the node's distance from the root.
    ancestors: ``uint32 (B, N, W)``: a bit per node (``W`` words of 32), set for the node's
        ancestors; a simulation's path is its leaf's ancestors and the leaf.

    Each node has one parent, so an edge's statistics are its child's: ``N(s, a)`` is the
    child's visits and ``Q(s, a)`` its reward minus its value (:func:`edge_stats`, and the
    ``children_visits`` and ``children_q`` properties for whole trees). The backup then updates
    node statistics only, densely over the path's nodes, with no scatter.
    """

    positions: game.Position
    terminal: chex.Array
    reward: chex.Array
    raw_value: chex.Array
    node_visits: chex.Array
    node_values: chex.Array
    parents: chex.Array
    action_from_parent: chex.Array
    legal: chex.Array
    prior_logits: chex.Array
    prior: chex.Array
    children_index: chex.Array
    depth: chex.Array
    ancestors: chex.Array
    gumbel: chex.Array

    @property
    def children_visits(self) -> jax.Array:
        """``int32 (B, N, 7)``: ``N(s, a)``, 0 for a child not in the tree."""
        return jax.vmap(jax.vmap(lambda tree, node: edge_stats(tree, node)[0], (None, 0)), (0, None))(
            self, jnp.arange(self.node_visits.shape[1])
        )

    @property
    def children_q(self) -> jax.Array:
        """``float (B, N, 7)``: ``Q(s, a)``, 0 for a child not in the tree."""
        return jax.vmap(jax.vmap(lambda tree, node: edge_stats(tree, node)[1], (None, 0)), (0, None))(
            self, jnp.arange(self.node_visits.shape[1])
        )


def edge_stats(tree: Tree, node) -> tuple[jax.Array, jax.Array]:
    """``(N(s, a), Q(s, a))`` of one tree's ``node`` (no batch axis), ``(7,)`` each, read from its
    children: visits, and reward minus value (0 for a child not in the tree)."""
    child = tree.children_index[node]
    safe = jnp.maximum(child, 0)
    expanded = child != UNVISITED
    return (
        jnp.where(expanded, tree.node_visits[safe], 0),
        jnp.where(expanded, tree.reward[safe] - tree.node_values[safe], 0.0),
    )


def ancestor_mask(words, num_nodes: int) -> jax.Array:
    """``bool (num_nodes,)`` from a node's ancestor words ``uint32 (W,)``."""
    bits = (words[:, None] >> jnp.arange(32, dtype=jnp.uint32)[None, :]) & jnp.uint32(1)
    return bits.reshape(-1)[:num_nodes].astype(bool)


def node_bit(node, words: int) -> jax.Array:
    """``uint32 (..., W)``: the bit of ``node`` (an int array) in ancestor words."""
    node = jnp.asarray(node)
    which = jnp.arange(words)
    bit = jnp.left_shift(jnp.uint32(1), (node % 32).astype(jnp.uint32))
    return jnp.where(which == (node // 32)[..., None], bit[..., None], jnp.uint32(0))


@pytree_dataclass(frozen=True)
class SearchOutput:
    """What a search says about a batch of boards.

    action: ``int32 (B,)``, the search's move (PUCT: the most visited; Gumbel: sequential
        halving's winner; rollout: the best mean).
    policy: ``float (B, 7)``, the distribution to train towards (visit counts; the completed-Q
        improved policy; one-hot on the rollout's move).
    visits: ``int32 (B, 7)`` per root column (rollouts per column for the rollout improver).
    q: ``float (B, 7)``, the root's Q per column, NaN where not visited or illegal.
    value: ``float (B,)``, the root's value for the side to move.
    """

    action: chex.Array
    policy: chex.Array
    visits: chex.Array
    q: chex.Array
    value: chex.Array


def evaluate(player: Player, params, pos: game.Position, key) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(masked logits, value, legal)`` of the network on packed positions (value 0 without a
    value head)."""
    out = player(params, game.unpack(pos), key)
    legal = game.position_legal_mask(pos)
    value = jnp.zeros(legal.shape[:-1], jnp.float32) if out.value is None else out.value.astype(jnp.float32)
    return mask_for_loss(legal, out.logits.astype(jnp.float32)), value, legal


# ---------------------------------------------------------------------------------------------
# The rollout improver


def rollout_values(player: Player, params, pos: game.Position, key, width: int, depth: int, gamma, temperature):
    """``float (B, 7)``: the rollout improver's value of every column, ``-inf`` where illegal.

    As ``treesearch.multiple_rollouts``: a column that wins now is worth 1 (a full board 0);
    otherwise ``width`` rollouts of at most ``depth`` plies with the policy at
    ``temperature``, where rollout ply ``k`` (0 = the opponent's reply) ending in a win
    scores ``gamma**(k+1)``, positive when the searching side won (odd ``k``), and an
    unfinished rollout scores ``gamma**(depth+1) * v``, ``v`` the value head's value of the
    leaf for the searching side. The column's value is the mean over its rollouts.
    """
    batch = pos.heights.shape[0]
    legal = game.position_legal_mask(pos)
    cols = jnp.broadcast_to(jnp.arange(A, dtype=jnp.int32), (batch, A))
    after, won, done = game.position_step(jax.tree.map(lambda x: jnp.repeat(x[:, None], A, 1), pos), cols)
    # every (board, column) pair `width` times, flattened: (B * 7 * width,)
    flat = jax.tree.map(lambda x: jnp.repeat(x.reshape(-1), width), after)
    running = jnp.repeat(~done.reshape(-1), width)

    def ply(carry, k):
        pos, running, score, key = carry
        key, eval_key, sample_key = jax.random.split(key, 3)
        logits, _, legal = evaluate(player, params, pos, eval_key)
        moves = sample_masked(sample_key, legal, logits, temperature)
        nxt, won, done = game.position_step(pos, moves)
        sign = jnp.where(k % 2 == 1, 1.0, -1.0)
        score = score + jnp.where(running & won, sign * gamma ** (k + 1.0), 0.0)
        pos = jax.tree.map(lambda new, old: jnp.where(running, new, old), nxt, pos)
        return (pos, running & ~done, score, key), None

    key, leaf_key = jax.random.split(key)
    zero = jnp.zeros(running.shape, jnp.float32)
    (leaf, unfinished, score, _), _ = jax.lax.scan(
        ply, (flat, running, zero, key), jnp.arange(depth, dtype=jnp.float32)
    )
    _, leaf_value, _ = evaluate(player, params, leaf, leaf_key)
    leaf_sign = 1.0 if depth % 2 == 1 else -1.0  # the searching side moves at the leaf after an odd number of plies
    score = score + jnp.where(unfinished, leaf_sign * gamma ** (depth + 1.0) * leaf_value, 0.0)
    mean = score.reshape(batch, A, width).mean(-1)
    value = jnp.where(won, 1.0, jnp.where(done, 0.0, mean))
    return jnp.where(legal, value, -jnp.inf)


# ---------------------------------------------------------------------------------------------
# The tree: creation, one simulation (descend, expand, back up)


def init_tree(pos: game.Position, logits, value, legal, num_nodes: int, gumbel=None) -> Tree:
    """A tree per board with only its root: ``logits`` masked, ``value (B,)``, ``legal (B, 7)``."""
    batch = value.shape[0]

    def nodes(root, fill=0):
        x = jnp.full((batch, num_nodes) + root.shape[1:], fill, root.dtype)
        return x.at[:, ROOT].set(root)

    return Tree(
        positions=jax.tree.map(nodes, pos),
        terminal=jnp.zeros((batch, num_nodes), bool),
        reward=jnp.zeros((batch, num_nodes), jnp.float32),
        raw_value=nodes(value),
        node_visits=nodes(jnp.ones((batch,), jnp.int32)),
        node_values=nodes(value),
        parents=jnp.full((batch, num_nodes), UNVISITED, jnp.int32),
        action_from_parent=jnp.full((batch, num_nodes), UNVISITED, jnp.int32),
        legal=nodes(legal),
        prior_logits=nodes(logits),
        prior=nodes(jax.nn.softmax(logits)),
        children_index=jnp.full((batch, num_nodes, A), UNVISITED, jnp.int32),
        depth=jnp.zeros((batch, num_nodes), jnp.int32),
        ancestors=jnp.zeros((batch, num_nodes, -(-num_nodes // 32)), jnp.uint32),
        gumbel=jnp.zeros((batch, A), jnp.float32) if gumbel is None else jnp.asarray(gumbel, jnp.float32),
    )


@dataclasses.dataclass(frozen=True)
class Selection:
    """How a search picks a column at a node of one tree (no batch axis): ``root(tree)`` at the
    root, ``interior(tree, node)`` below it; each returns an ``int32`` column."""

    root: Callable[[Tree], jax.Array]
    interior: Callable[[Tree, jax.Array], jax.Array]


def descend(tree: Tree, selection: Selection):
    """``(action, child, node)`` for one tree: from the root, follow the selection while the
    chosen child is in the tree and not terminal; ``node`` is where ``action`` was chosen last,
    ``child`` is :data:`UNVISITED` (to be added) or a terminal node (its reward is backed up
    again). The path is not recorded: the backup reads it from the leaf's ancestors. The root's
    choice is made before the loop, so a search whose root rule differs (Gumbel's sequential
    halving) pays for it once per simulation, not once per level."""
    first = selection.root(tree)

    def go_on(state):
        child = state[1]
        return (child != UNVISITED) & ~tree.terminal[jnp.maximum(child, 0)]

    def step(state):
        _, node, _ = state
        action = selection.interior(tree, node)
        return action, tree.children_index[node, action], node

    return jax.lax.while_loop(go_on, step, (first, tree.children_index[ROOT, first], jnp.int32(ROOT)))


def backup(tree: Tree, leaf, value) -> Tree:
    """Back ``value`` (for the side to move at ``leaf``) up one tree: every node on the path
    (the leaf and its ancestors) gets its visit and the new mean of its values, elementwise
    over the nodes, with no scatter. Edge statistics follow, being their children's.

    Only the leaf can be terminal, so every other node's reward is 0 and the value for the
    side to move ``d >= 1`` levels above the leaf is ``(-1)**(d - 1) * (reward(leaf) - value)``.
    """
    num_nodes = tree.node_visits.shape[0]
    on_path = ancestor_mask(tree.ancestors[leaf], num_nodes) | (jnp.arange(num_nodes) == leaf)
    above = tree.depth[leaf] - tree.depth  # levels above the leaf, for the nodes on the path
    g = jnp.where(above == 0, value, jnp.where(above % 2 == 1, 1.0, -1.0) * (tree.reward[leaf] - value))
    visits = tree.node_visits
    new_values = (tree.node_values * visits + g) / (visits + 1)
    return tree.replace(node_values=jnp.where(on_path, new_values, tree.node_values), node_visits=visits + on_path)


def _at(tree_field, index):
    """``tree_field[b, index[b]]`` for every tree ``b``."""
    return tree_field[jnp.arange(index.shape[0]), index]


def simulate(tree: Tree, sim, selection: Selection, player: Player, params, key) -> Tree:
    """Simulation ``sim`` on every tree: descend, add node ``sim + 1`` (the network evaluates
    it; a terminal node gets value 0), back up."""
    with jax.named_scope("descend"):
        action, child, parent = jax.vmap(lambda t: descend(t, selection))(tree)
    rows = jnp.arange(parent.shape[0])
    expand = child == UNVISITED
    new = sim + 1
    pos, won, done = game.position_step(jax.tree.map(lambda x: _at(x, parent), tree.positions), action)
    logits, value, legal = evaluate(player, params, pos, key)
    value = jnp.where(done, 0.0, value)

    def write(field, x):
        return field.at[:, new].set(x)

    tree = tree.replace(
        positions=jax.tree.map(write, tree.positions, pos),
        terminal=write(tree.terminal, done),
        reward=write(tree.reward, won.astype(jnp.float32)),
        raw_value=write(tree.raw_value, value),
        parents=write(tree.parents, parent),
        action_from_parent=write(tree.action_from_parent, action),
        legal=write(tree.legal, legal),
        prior_logits=write(tree.prior_logits, logits),
        prior=write(tree.prior, jax.nn.softmax(logits)),
        children_index=tree.children_index.at[rows, parent, action].set(jnp.where(expand, new, child)),
        depth=write(tree.depth, _at(tree.depth, parent) + 1),
        ancestors=write(tree.ancestors, _at(tree.ancestors, parent) | node_bit(parent, tree.ancestors.shape[-1])),
    )
    leaf = jnp.where(expand, new, child)
    with jax.named_scope("backup"):
        return jax.vmap(backup)(tree, leaf, jnp.where(expand, value, 0.0))


def run_tree_search(
    player: Player, params, boards, key, num_simulations: int, selection: Selection, root_noise=None, gumbel=None
) -> Tree:
    """The tree after ``num_simulations`` simulations from int8 ``boards (B, 6, 7)``.
    ``root_noise(key, prior_probs, legal) -> prior_probs`` perturbs the root's prior;
    ``gumbel (B, 7)`` is stored in the tree for a Gumbel selection."""
    pos = game.pack(boards)
    key, root_key, noise_key = jax.random.split(key, 3)
    logits, value, legal = evaluate(player, params, pos, root_key)
    if root_noise is not None:
        probs = root_noise(noise_key, jax.nn.softmax(logits), legal)
        logits = jnp.where(legal, jnp.log(jnp.maximum(probs, 1e-30)), LOSS_MASK_VALUE)
    tree = init_tree(pos, logits, value, legal, num_simulations + 1, gumbel)
    keys = jax.random.split(key, num_simulations)
    return jax.lax.fori_loop(0, num_simulations, lambda i, t: simulate(t, i, selection, player, params, keys[i]), tree)


def root_q(tree: Tree) -> jax.Array:
    visits, q = jax.vmap(lambda t: edge_stats(t, ROOT))(tree)
    return jnp.where((visits > 0) & tree.legal[:, ROOT], q, jnp.nan)


# ---------------------------------------------------------------------------------------------
# PUCT and the entropy-guided variant


def subtree_entropy(tree: Tree, node) -> jax.Array:
    """``E(s, a)`` of seed 004 for every column ``a`` of ``node`` (one tree), in ``[0, 1]``.

    Seed 004 defines ``E`` as the entropy of the distribution over the leaves that a playout
    through the child reaches, which needs the whole subtree. On a batched tree czjax uses the
    one-step version the proposal's discussion suggested: the distribution of the child's
    *next* playout over the child's own columns, ``p(b) = (N(c, b) + P(c, b)) / (N(c) + 1)``
    (its visits so far plus one visit spread by its prior, so a once-visited child gives the
    entropy of its prior, as in the proposal's worked example), its entropy divided by
    ``log(L)``, ``L`` the child's number of legal columns. ``E = 0`` for a forced reply
    (``L = 1``), a terminal child (a decided line) and a child not yet in the tree (whose
    ``N(s, a) = 0`` makes ``E`` irrelevant).
    """
    child = tree.children_index[node]
    safe = jnp.maximum(child, 0)
    prior = tree.prior[safe]  # (7, 7)
    weights = jax.vmap(lambda c: edge_stats(tree, c)[0])(safe).astype(jnp.float32) + prior
    p = weights / weights.sum(-1, keepdims=True)
    legal = tree.legal[safe]
    plogp = jnp.where(legal & (p > 0), p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0)
    count = legal.sum(-1)
    normalised = -plogp.sum(-1) / jnp.log(jnp.maximum(count, 2).astype(jnp.float32))
    open_line = (child != UNVISITED) & ~tree.terminal[safe] & (count > 1)
    return jnp.where(open_line, jnp.clip(normalised, 0.0, 1.0), 0.0)


def puct_select(c_puct: float, entropy_guided: bool) -> Selection:
    """``argmax_a Q(s,a) + c P(s,a) sqrt(N(s)) / (1 + N(s,a) E(s,a))`` over legal columns;
    ``E = 1`` for plain PUCT. An unvisited column's Q is the node's own value (first-play
    urgency as in mctx); ``N(s)`` counts the node's visits, its expansion included."""

    def select(tree: Tree, node):
        visits, edge_q = edge_stats(tree, node)
        q = jnp.where(visits > 0, edge_q, tree.node_values[node])
        prior = tree.prior[node]
        damping = visits * (subtree_entropy(tree, node) if entropy_guided else 1.0)
        score = q + c_puct * prior * jnp.sqrt(tree.node_visits[node].astype(jnp.float32)) / (1.0 + damping)
        return col_argmax(jnp.where(tree.legal[node], score, -jnp.inf))

    return Selection(root=lambda tree: select(tree, ROOT), interior=select)


def dirichlet_noise(alpha: float, fraction: float):
    """AlphaZero's root noise: ``(1 - fraction) P + fraction Dir(alpha)`` over the legal columns."""

    def noise(key, probs, legal):
        gammas = jnp.where(legal, jax.random.gamma(key, alpha, probs.shape), 0.0)
        dirichlet = gammas / jnp.maximum(gammas.sum(-1, keepdims=True), 1e-30)
        return (1.0 - fraction) * probs + fraction * dirichlet

    return noise


def visit_output(tree: Tree) -> SearchOutput:
    visits = jax.vmap(lambda t: edge_stats(t, ROOT)[0])(tree)
    total = jnp.maximum(visits.sum(-1, keepdims=True), 1)
    return SearchOutput(
        action=jnp.argmax(visits, -1).astype(jnp.int32),
        policy=visits / total,
        visits=visits,
        q=root_q(tree),
        value=tree.node_values[:, ROOT],
    )


# ---------------------------------------------------------------------------------------------
# Gumbel MuZero (as mctx 0.0.71: seq_halving, qtransform_completed_by_mix_value)


def considered_visits(max_considered: int, num_simulations: int) -> tuple[int, ...]:
    """Sequential halving's schedule: the visit count an action must have to be chosen at each
    simulation, when ``max_considered`` actions are considered."""
    if max_considered <= 1:
        return tuple(range(num_simulations))
    log2max = math.ceil(math.log2(max_considered))
    sequence: list[int] = []
    visits = [0] * max_considered
    considered = max_considered
    while len(sequence) < num_simulations:
        extra = max(1, int(num_simulations / (log2max * considered)))
        for _ in range(extra):
            sequence.extend(visits[:considered])
            for i in range(considered):
                visits[i] += 1
        considered = max(2, considered // 2)
    return tuple(sequence[:num_simulations])


def completed_q(tree: Tree, node, c_visit: float, c_scale: float, rescale: bool = True) -> jax.Array:
    """``sigma(completed Q)`` of one node: unvisited columns take the mixed value (the raw value
    mixed with the prior-weighted Q of the visited ones), rescaled to [0, 1] by min and max
    (``rescale``; else as they are, in [-1, 1]), times ``(c_visit + max N) * c_scale``."""
    visits, q = edge_stats(tree, node)
    visited = visits > 0
    prior = jnp.maximum(tree.prior[node], jnp.finfo(jnp.float32).tiny)
    total = col_sum(visits)
    visited_prior = col_sum(jnp.where(visited, prior, 0.0))
    weighted_q = col_sum(jnp.where(visited, prior * q / jnp.where(visited, visited_prior, 1.0), 0.0))
    mixed = (tree.raw_value[node] + total * weighted_q) / (total + 1)
    completed = jnp.where(visited, q, mixed)
    if rescale:
        low, high = col_min(completed), col_max(completed)
        completed = (completed - low) / jnp.maximum(high - low, 1e-8)
    return (c_visit + col_max(visits)) * c_scale * completed


def _score_considered(considered_visit, gumbel, logits, sigma_q, visits):
    logits = logits - col_max(logits)[..., None]
    penalty = jnp.where(visits == considered_visit, 0.0, -jnp.inf)
    return jnp.maximum(-1e9, gumbel + logits + sigma_q) + penalty


def gumbel_select(
    num_simulations: int, max_considered: int, c_visit: float, c_scale: float, rescale: bool = True
) -> Selection:
    """Gumbel MuZero's selection for one tree (its root's noise in ``tree.gumbel``): sequential
    halving among the top columns at the root, ``argmax(pi' - N / (1 + sum N))`` below, with
    ``pi' = softmax(logits + sigma(completed Q))``."""
    table = jnp.asarray([considered_visits(m, num_simulations) for m in range(A + 1)], jnp.int32)

    def root(tree: Tree):
        visits = edge_stats(tree, ROOT)[0]
        legal = tree.legal[ROOT]
        sigma_q = completed_q(tree, ROOT, c_visit, c_scale, rescale)
        considered = jnp.minimum(max_considered, col_sum(legal.astype(jnp.int32)))
        score = _score_considered(
            table[considered, col_sum(visits)], tree.gumbel, tree.prior_logits[ROOT], sigma_q, visits
        )
        return col_argmax(jnp.where(legal, score, -jnp.inf))

    def interior(tree: Tree, node):
        visits = edge_stats(tree, node)[0]
        improved = col_softmax(tree.prior_logits[node] + completed_q(tree, node, c_visit, c_scale, rescale))
        score = improved - visits / (1.0 + col_sum(visits))
        return col_argmax(jnp.where(tree.legal[node], score, -jnp.inf))

    return Selection(root=root, interior=interior)


def gumbel_output(tree: Tree, c_visit: float, c_scale: float, rescale: bool = True) -> SearchOutput:
    def one(tree):
        visits = edge_stats(tree, ROOT)[0]
        legal = tree.legal[ROOT]
        sigma_q = completed_q(tree, ROOT, c_visit, c_scale, rescale)
        score = _score_considered(visits.max(), tree.gumbel, tree.prior_logits[ROOT], sigma_q, visits)
        action = jnp.argmax(jnp.where(legal, score, -jnp.inf)).astype(jnp.int32)
        policy = jax.nn.softmax(jnp.where(legal, tree.prior_logits[ROOT] + sigma_q, -jnp.inf))
        return action, policy

    action, policy = jax.vmap(one)(tree)
    visits = jax.vmap(lambda t: edge_stats(t, ROOT)[0])(tree)
    return SearchOutput(action=action, policy=policy, visits=visits, q=root_q(tree), value=tree.node_values[:, ROOT])


# ---------------------------------------------------------------------------------------------
# The algorithms: settings, run, and how each becomes a player's logits


@dataclasses.dataclass(frozen=True)
class RolloutImprover:
    """The PyTorch project's rollout improver: ``width`` rollouts of ``depth`` plies per column
    with the policy at ``temperature``, discount ``gamma`` (see :func:`rollout_values`)."""

    width: int = 4
    depth: int = 4
    gamma: float = 0.9
    temperature: float = 1.0
    description: ClassVar[str] = "the PyTorch project's rollout improver (treesearch.multiple_rollouts)"

    def run(self, player: Player, params, boards, key) -> SearchOutput:
        pos = game.pack(boards)
        key, root_key = jax.random.split(key)
        values = rollout_values(player, params, pos, key, self.width, self.depth, self.gamma, self.temperature)
        _, root_value, legal = evaluate(player, params, pos, root_key)
        action = jnp.argmax(values, -1).astype(jnp.int32)
        visits = jnp.where(legal, self.width, 0).astype(jnp.int32)
        return SearchOutput(
            action=action,
            policy=jax.nn.one_hot(action, A),
            visits=visits,
            q=jnp.where(legal, values, jnp.nan),
            value=root_value,
        )

    def logits(self, out: SearchOutput) -> jax.Array:
        return jnp.where(jax.nn.one_hot(out.action, A) > 0, 1.0, ROLLOUT_MASK)


@dataclasses.dataclass(frozen=True)
class PUCT:
    """AlphaZero's PUCT: ``sims`` simulations, exploration ``c``, root noise ``(1 - noise) P +
    noise Dir(alpha)`` (0 for play and evaluation); the policy is the root's visit counts.
    ``entropy``: seed 004's entropy-guided exploration (:func:`subtree_entropy`)."""

    sims: int = 64
    c: float = 2.0
    noise: float = 0.0
    alpha: float = 0.3
    entropy: bool = False
    description: ClassVar[str] = "AlphaZero's PUCT tree search (visit-count policy)"

    def run(self, player: Player, params, boards, key) -> SearchOutput:
        noise = dirichlet_noise(self.alpha, self.noise) if self.noise > 0 else None
        tree = run_tree_search(player, params, boards, key, self.sims, puct_select(self.c, self.entropy), noise)
        return visit_output(tree)

    def logits(self, out: SearchOutput) -> jax.Array:
        """``log N(a)``: a player sampling at temperature ``T`` plays ``a`` with probability
        proportional to ``N(a) ** (1 / T)``, AlphaZero's rule; at ``T = 0`` the most visited."""
        return jnp.where(out.visits > 0, jnp.log(jnp.maximum(out.visits, 1).astype(jnp.float32)), LOSS_MASK_VALUE)


@dataclasses.dataclass(frozen=True)
class Gumbel:
    """Gumbel MuZero: ``sims`` simulations, at most ``considered`` root columns, Gumbel noise
    times ``scale`` (0: deterministic), ``sigma`` constants ``c_visit`` and ``c_scale``; the
    policy is ``softmax(logits + sigma(completed Q))``, Q rescaled to [0, 1] by the node's min and
    max (``rescale``, mctx's default) or taken as it is, in [-1, 1]. ``move``: what a player built on it
    plays: ``action``, sequential halving's winner, or ``policy``, a draw from the improved
    policy at the player's temperature (its most likely column at 0), as the full-GPU Gumbel
    AlphaZero of AlphaZero.jl issue #217 plays its self-play games."""

    sims: int = 64
    considered: int = 16
    scale: float = 1.0
    c_visit: float = 50.0
    c_scale: float = 0.1
    rescale: bool = True
    move: str = "action"
    description: ClassVar[str] = "Gumbel MuZero (sequential halving at the root, completed-Q policy)"

    def run(self, player: Player, params, boards, key, gumbel=None) -> SearchOutput:
        """``gumbel (B, 7)``: the root noise, drawn from ``key`` when not given."""
        key, gumbel_key = jax.random.split(key)
        if gumbel is None:
            gumbel = self.scale * jax.random.gumbel(gumbel_key, boards.shape[:1] + (A,), jnp.float32)
        select = gumbel_select(self.sims, self.considered, self.c_visit, self.c_scale, self.rescale)
        tree = run_tree_search(player, params, boards, key, self.sims, select, gumbel=gumbel)
        return gumbel_output(tree, self.c_visit, self.c_scale, self.rescale)

    def logits(self, out: SearchOutput) -> jax.Array:
        """``move="action"``: sequential halving's winner only (the Gumbel noise already made the
        choice); ``"policy"``: the improved policy's log-probabilities."""
        if self.move == "policy":
            return jnp.where(
                out.policy > 0, jnp.log(jnp.maximum(out.policy, jnp.finfo(jnp.float32).tiny)), LOSS_MASK_VALUE
            )
        return jnp.where(jax.nn.one_hot(out.action, A) > 0, 0.0, LOSS_MASK_VALUE)


GUMBEL_MOVES = ("action", "policy")

SEARCHES: dict[str, Callable[..., object]] = {
    "rollout": RolloutImprover,
    "mcts": PUCT,
    "entropy-mcts": functools.partial(PUCT, entropy=True),
    "gumbel": Gumbel,
}


def _check_settings(search) -> None:
    for field in dataclasses.fields(search):
        value = getattr(search, field.name)
        if field.name in ("sims", "width", "depth", "considered") and value < 1:
            raise ValueError(f"{field.name} must be at least 1, got {value}")
        if (
            field.name in ("c", "noise", "alpha", "scale", "c_visit", "c_scale", "temperature", "gamma")
            and not value >= 0
        ):
            raise ValueError(f"{field.name} must be non-negative, got {value}")
    if getattr(search, "move", "action") not in GUMBEL_MOVES:
        raise ValueError(f"move must be one of {', '.join(GUMBEL_MOVES)}, got {search.move!r}")
    if getattr(search, "noise", 0) > 1:
        raise ValueError(f"noise must be in [0, 1], got {search.noise}")
    if getattr(search, "alpha", 1) == 0 and getattr(search, "noise", 0) > 0:
        raise ValueError("alpha must be positive when noise is on")


def make_search(name: str, options: str | dict = ""):
    """The search ``name`` with ``options`` (``"sims=64,c=1.5"`` or a dict); one-line
    ``ValueError`` for an unknown name, option or value."""
    if name not in SEARCHES:
        raise ValueError(f"unknown search {name!r}; choose one of {', '.join(SEARCHES)}")
    factory = SEARCHES[name]
    cls = factory.func if isinstance(factory, functools.partial) else factory
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if isinstance(options, str):
        pairs = [item.partition("=") for item in options.split(",") if item.strip()]
        if any(not sep for _, sep, _ in pairs):
            raise ValueError(f"search options are key=value pairs separated by commas, got {options!r}")
        options = {k.strip(): v.strip() for k, _, v in pairs}
    values = {}
    for key, text in options.items():
        if key not in fields:
            raise ValueError(f"{name} has no option {key!r}; its options are {', '.join(fields)}")
        kind = type(fields[key].default)
        try:
            if kind is bool:
                values[key] = (
                    text
                    if isinstance(text, bool)
                    else {"1": True, "true": True, "0": False, "false": False}[str(text).lower()]
                )
            elif kind is str:
                values[key] = str(text)
            else:
                values[key] = kind(text)
        except (KeyError, ValueError):
            raise ValueError(
                f"{name} option {key} must be {'0 or 1' if kind is bool else 'a number' if kind is float else 'an integer'}, got {text!r}"
            ) from None
    search = factory(**values)
    _check_settings(search)
    return search


def search_options() -> str:
    """Every search with its options and their defaults, for help texts."""
    parts = []
    for name, factory in SEARCHES.items():
        defaults = factory()
        fields = [f.name for f in dataclasses.fields(defaults) if not (name == "entropy-mcts" and f.name == "entropy")]
        parts.append(f"{name} ({', '.join(f'{f}={getattr(defaults, f)}' for f in fields)})")
    return "; ".join(parts)


def parse_spec(spec: str):
    """``(search, base spec)`` for a player spec ``NAME:OPTIONS:BASE`` or ``NAME:BASE``
    (``mcts:sims=64:runs/ex3``, ``gumbel:runs/ex3``, ``rollout:width=4,depth=4:runs/ex3``), or
    None when ``spec`` does not start with a search's name."""
    name, sep, rest = spec.partition(":")
    if not sep or name not in SEARCHES:
        return None
    options, sep, base = rest.partition(":")
    if not sep and "=" not in options:
        options, base = "", options
    if not base:
        raise ValueError(f"{spec!r} names no player to search with (e.g. {name}:sims=64:runs/ex3)")
    return make_search(name, options), base


@functools.cache
def search_player(search, player: Player) -> Player:
    """``search`` over ``player``'s network as a player: its logits say the search's move (see
    each search's ``logits``), its value is the root's, its policy target the search's policy.
    Cached, so the same search over the same network is the same function (no recompiles)."""

    def searched(params, boards, key):
        out = search.run(player, params, boards, key)
        return PlayerOutput(logits=search.logits(out), value=out.value, policy_target=out.policy)

    searched.__name__ = f"{type(search).__name__}_{getattr(player, '__name__', 'player')}"
    return searched
