"""The batched search tree: its arrays, one simulation (descend, expand, back up), and the
search loop, for any selection rule (:class:`Selection`) and any recurrent function
(:data:`czjax.search.base.RecurrentFn`: the environment's step and the network).

The tree is a few ``(B, N, ...)`` arrays (``N = simulations + 1``): what a node holds from when
it is added as one row of 32-bit words (:data:`NODE_FIELDS`), its visits, values and children
apart; positions travel packed (:class:`czjax.game.Position`). ``Q(s, a) = reward(child) -
value(child)``: the reward is 1 when the move into the child won, and a child's value is negated
for its parent (a two-player game's discount of -1). A move that ends the game leads to a *terminal* node: value
0, never expanded; a simulation that selects it again backs up its reward once more. Illegal
columns get ``-1e9`` logits at every node and are never selected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp

from czjax import game
from czjax.players import LOSS_MASK_VALUE, Player
from czjax.search.base import CONNECT_FOUR, NUM_ACTIONS, Environment, RecurrentFn, make_recurrent_fn, network_value
from czjax.util import platforms
from czjax.util.pytree import pytree_dataclass
from czjax.util.words import from_words, to_words

ROOT = 0
UNVISITED = -1


# What a node holds from the simulation that adds it on, stored as one array of 32-bit words a
# node (:attr:`Tree.node_words`) so that a simulation writes its new node once (on a GPU each
# array it writes is a kernel: eleven were). Each field: its name, its words (None: the ancestor
# bits, a word per 32 nodes), its type (bool stored as 0 or 1, int32 and float32 bit for bit).
NODE_FIELDS = (
    ("position_words", 5, jnp.uint32),
    ("terminal", 1, jnp.bool_),
    ("reward", 1, jnp.float32),
    ("raw_value", 1, jnp.float32),
    ("parents", 1, jnp.int32),
    ("action_from_parent", 1, jnp.int32),
    ("legal", NUM_ACTIONS, jnp.bool_),
    ("prior_logits", NUM_ACTIONS, jnp.float32),
    ("prior", NUM_ACTIONS, jnp.float32),
    ("depth", 1, jnp.int32),
    ("ancestors", None, jnp.uint32),
)
_NODE_FIELD_NAMES = tuple(name for name, _, _ in NODE_FIELDS)


def ancestor_words(num_nodes: int) -> int:
    """Words of ancestor bits a node of a tree of ``num_nodes`` holds."""
    return -(-num_nodes // 32)


def _node_layout(total_words: int) -> dict[str, tuple[int, int, Any]]:
    """Each node field's ``(first word, words, type)`` in a node of ``total_words`` words."""
    fixed = sum(width for _, width, _ in NODE_FIELDS if width is not None)
    layout, start = {}, 0
    for name, width, dtype in NODE_FIELDS:
        width = total_words - fixed if width is None else width
        layout[name] = (start, width, dtype)
        start += width
    return layout


def pack_nodes(**fields: jax.Array) -> jax.Array:
    """Every field of :data:`NODE_FIELDS` (``(..., width)``, or ``(...)`` for a field of one word)
    as one uint32 array of words a node, ``(..., K)``."""
    if sorted(fields) != sorted(_NODE_FIELD_NAMES):
        raise ValueError(f"pack_nodes takes the fields {', '.join(_NODE_FIELD_NAMES)}, got {', '.join(sorted(fields))}")
    parts = []
    for name, width, dtype in NODE_FIELDS:
        x = jnp.asarray(fields[name], dtype)
        parts.append(to_words(x[..., None] if width == 1 else x))
    return jnp.concatenate(parts, axis=-1)


def _node_field(node_words: jax.Array, name: str) -> jax.Array:
    """Field ``name`` of nodes' words ``(..., K)``: ``(...)`` for a field of one word (but the
    ancestor bits, always ``(..., W)``), else ``(..., width)``, in its type."""
    start, width, dtype = _node_layout(node_words.shape[-1])[name]
    x = from_words(node_words[..., start : start + width], dtype)
    return x[..., 0] if width == 1 and name != "ancestors" else x


@pytree_dataclass(frozen=True)
class Tree:
    """A batch of search trees. Node 0 is the root; simulation ``i`` adds node ``i + 1`` (left
    unused when the simulation revisited a terminal node).

    node_words: ``uint32 (B, N, K)``: what a node holds from when it is added, one row of words
        a node (:data:`NODE_FIELDS`; :func:`make_tree` and :meth:`with_nodes` write it), read
        field by field as these properties:

        - position_words ``uint32 (B, N, 5)``: the node's packed position (the side to move's
          point of view), :class:`czjax.game.Position`'s five words (``positions`` reads them
          as a Position);
        - terminal ``bool (B, N)``: the move into the node ended the game;
        - reward ``float (B, N)``: 1 when the move into the node won (for its mover), else 0;
        - raw_value ``float (B, N)``: the network's value when the node was added (0 if
          terminal);
        - parents, action_from_parent ``int32 (B, N)``;
        - legal ``bool (B, N, 7)``; prior_logits ``float (B, N, 7)``, -1e9 added where
          illegal; prior, their softmax;
        - depth ``int32 (B, N)``: the node's distance from the root;
        - ancestors ``uint32 (B, N, W)``: a bit per node (``W`` words of 32), set for the
          node's ancestors; a simulation's path is its leaf's ancestors and the leaf.
    node_visits, node_values: ``(B, N)``: visits, and the mean of the values backed up.
    children_index: ``int32 (B, N, 7)``, :data:`UNVISITED` where the child is not in the tree.
    gumbel: ``float (B, 7)``: the root's Gumbel noise (0 for searches without it).

    Each node has one parent, so an edge's statistics are its child's: ``N(s, a)`` is the
    child's visits and ``Q(s, a)`` its reward minus its value (:func:`edge_stats`, and the
    ``children_visits`` property for whole trees). The backup then updates
    node statistics only, densely over the path's nodes, with no scatter.
    """

    node_words: chex.Array
    node_visits: chex.Array
    node_values: chex.Array
    children_index: chex.Array
    gumbel: chex.Array

    position_words = property(lambda self: _node_field(self.node_words, "position_words"))
    terminal = property(lambda self: _node_field(self.node_words, "terminal"))
    reward = property(lambda self: _node_field(self.node_words, "reward"))
    raw_value = property(lambda self: _node_field(self.node_words, "raw_value"))
    parents = property(lambda self: _node_field(self.node_words, "parents"))
    action_from_parent = property(lambda self: _node_field(self.node_words, "action_from_parent"))
    legal = property(lambda self: _node_field(self.node_words, "legal"))
    prior_logits = property(lambda self: _node_field(self.node_words, "prior_logits"))
    prior = property(lambda self: _node_field(self.node_words, "prior"))
    depth = property(lambda self: _node_field(self.node_words, "depth"))
    ancestors = property(lambda self: _node_field(self.node_words, "ancestors"))

    @property
    def positions(self) -> game.Position:
        """The nodes' packed positions, ``(B, N)`` words."""
        return position_of(self.position_words)

    @property
    def children_visits(self) -> jax.Array:
        """``int32 (B, N, 7)``: ``N(s, a)``, 0 for a child not in the tree."""
        return jax.vmap(jax.vmap(lambda tree, node: edge_stats(tree, node)[0], (None, 0)), (0, None))(
            self, jnp.arange(self.node_visits.shape[1])
        )

    def with_nodes(self, **changes: jax.Array) -> Tree:
        """This tree with some node fields (:data:`NODE_FIELDS`) replaced, whole."""
        fields = {name: changes.pop(name, getattr(self, name)) for name in _NODE_FIELD_NAMES}
        if changes:
            raise ValueError(f"not node fields: {', '.join(sorted(changes))}")
        return dataclasses.replace(self, node_words=pack_nodes(**fields))


def make_tree(node_visits, node_values, children_index, gumbel, **node_fields: jax.Array) -> Tree:
    """A :class:`Tree` from every field by name, the node fields (:data:`NODE_FIELDS`) packed."""
    return Tree(
        node_words=pack_nodes(**node_fields),
        node_visits=node_visits,
        node_values=node_values,
        children_index=children_index,
        gumbel=gumbel,
    )


_POSITION_FIELDS = tuple(field.name for field in dataclasses.fields(game.Position))


def words_of(position: game.Position) -> jax.Array:
    """A Position's five words side by side, ``(..., 5)``."""
    return jnp.stack([getattr(position, name) for name in _POSITION_FIELDS], axis=-1)


def position_of(words: jax.Array) -> game.Position:
    """:func:`words_of`'s inverse."""
    return game.Position(**{name: words[..., i] for i, name in enumerate(_POSITION_FIELDS)})


def edge_stats(tree: Tree, node: jax.Array | int) -> tuple[jax.Array, jax.Array]:
    """``(N(s, a), Q(s, a))`` of one tree's ``node`` (no batch axis), ``(7,)`` each, read from its
    children: visits, and reward minus value (0 for a child not in the tree)."""
    child = tree.children_index[node]
    safe = jnp.maximum(child, 0)
    expanded = child != UNVISITED
    return (
        jnp.where(expanded, tree.node_visits[safe], 0),
        jnp.where(expanded, tree.reward[safe] - tree.node_values[safe], 0.0),
    )


def ancestor_mask(words: jax.Array, num_nodes: int) -> jax.Array:
    """``bool (num_nodes,)`` from a node's ancestor words ``uint32 (W,)``."""
    bits = (words[:, None] >> jnp.arange(32, dtype=jnp.uint32)[None, :]) & jnp.uint32(1)
    return bits.reshape(-1)[:num_nodes].astype(bool)


def node_bit(node: jax.Array, words: int) -> jax.Array:
    """``uint32 (..., W)``: the bit of ``node`` (an int array) in ancestor words."""
    node = jnp.asarray(node)
    which = jnp.arange(words)
    bit = jnp.left_shift(jnp.uint32(1), (node % 32).astype(jnp.uint32))
    return jnp.where(which == (node // 32)[..., None], bit[..., None], jnp.uint32(0))


def init_tree(
    positions: game.Position,
    logits: jax.Array,
    value: jax.Array,
    legal: jax.Array,
    num_nodes: int,
    gumbel: jax.Array | None = None,
) -> Tree:
    """A tree per board with only its root: ``logits`` masked, ``value (B,)``, ``legal (B, 7)``."""
    batch = value.shape[0]

    def nodes(root: jax.Array, fill: int = 0) -> jax.Array:
        x = jnp.full((batch, num_nodes) + root.shape[1:], fill, root.dtype)
        return x.at[:, ROOT].set(root)

    return make_tree(
        position_words=nodes(words_of(positions)),
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
        children_index=jnp.full((batch, num_nodes, NUM_ACTIONS), UNVISITED, jnp.int32),
        depth=jnp.zeros((batch, num_nodes), jnp.int32),
        ancestors=jnp.zeros((batch, num_nodes, ancestor_words(num_nodes)), jnp.uint32),
        gumbel=jnp.zeros((batch, NUM_ACTIONS), jnp.float32) if gumbel is None else jnp.asarray(gumbel, jnp.float32),
    )


@dataclasses.dataclass(frozen=True)
class Selection:
    """How a search picks a column at a node of one tree (no batch axis): ``root(tree)`` at the
    root, ``interior(tree, node)`` below it; each returns an ``int32`` column."""

    root: Callable[[Tree], jax.Array]
    interior: Callable[[Tree, jax.Array], jax.Array]


def _where(condition, new, old):
    return jax.tree.map(lambda a, b: jnp.where(condition, a, b), new, old)


def descend_levels(platform: str | None = None) -> int:
    """Levels of the tree a walk down it goes per test of :func:`descend`'s loop predicate, as
    chosen for ``platform`` (``descend_levels`` in :mod:`czjax.util.platforms`; None: the platform
    being built for). On a GPU each test is a copy of the predicate to the host, and a batch of
    trees walks until its deepest walk ends, so several levels a test, the walks that ended left
    as they are, cost a few idle levels for a fraction of the round trips. The same walks
    whatever the number."""
    return platforms.choices_for(platform).descend_levels


def descend(tree: Tree, selection: Selection, levels: int | None = None) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(action, child, node)`` for one tree: from the root, follow the selection while the
    chosen child is in the tree and not terminal; ``node`` is where ``action`` was chosen last,
    ``child`` is :data:`UNVISITED` (to be added) or a terminal node (its reward is backed up
    again). The path is not recorded: the backup reads it from the leaf's ancestors. The root's
    choice is made before the loop, so a search whose root rule differs (Gumbel's sequential
    halving) pays for it once per simulation, not once per level. ``levels`` (default
    :func:`descend_levels`) is how many levels the loop goes down per test of its predicate, a
    walk that ended staying where it is: the same result for any ``levels``. A tree of at most
    the platform's ``jump_max_nodes`` nodes is descended without a loop
    (:func:`descend_by_jumps`): the same result again."""
    if tree.node_visits.shape[0] <= platforms.choices_for().jump_max_nodes:
        return descend_by_jumps(tree, selection)
    first = selection.root(tree)
    levels = descend_levels() if levels is None else levels

    def child_is_open(state):
        child = state[1]
        return (child != UNVISITED) & ~tree.terminal[jnp.maximum(child, 0)]

    def one_level_down(state):
        _, node, _ = state
        action = selection.interior(tree, node)
        return action, tree.children_index[node, action], node

    def down(state):
        state = one_level_down(state)  # the loop tested this level open
        for _ in range(levels - 1):
            state = _where(child_is_open(state), one_level_down(state), state)
        return state

    return jax.lax.while_loop(child_is_open, down, (first, tree.children_index[ROOT, first], jnp.int32(ROOT)))


def descend_by_jumps(tree: Tree, selection: Selection) -> tuple[jax.Array, jax.Array, jax.Array]:
    """:func:`descend` without a loop: the selection's choice at every node of the tree at once
    (the root's by its own rule), each node pointing to its chosen child where the walk would go
    on (the child is in the tree and not terminal) and to itself where it would stop; that pointer
    composed with itself ``ceil(log2(nodes))`` times reaches past the deepest walk, so it takes
    the root to where the walk stops. On a GPU the walk's loop waited on the host at every test
    and took six kernels a level; here a simulation's descent is a few kernels and no wait, for
    the selection's arithmetic at every node rather than along one path."""
    nodes = jnp.arange(tree.node_visits.shape[0])
    choice = jax.vmap(lambda node: selection.interior(tree, node))(nodes).at[ROOT].set(selection.root(tree))
    child = tree.children_index[nodes, choice]
    goes_on = (child != UNVISITED) & ~tree.terminal[jnp.maximum(child, 0)]
    jump = jnp.where(goes_on, child, nodes)
    for _ in range(max(nodes.shape[0] - 1, 1).bit_length()):  # 2**k jumps at the k-th
        jump = jump[jump]
    node = jump[ROOT]
    return choice[node], child[node], node


def backup(tree: Tree, leaf: jax.Array, value: jax.Array) -> Tree:
    """Back ``value`` (for the side to move at ``leaf``) up one tree: every node on the path
    (the leaf and its ancestors) gets its visit and the new mean of its values, elementwise
    over the nodes, with no scatter. Edge statistics follow, being their children's.

    Only the leaf can be terminal, so every other node's reward is 0 and the value for the
    side to move ``d >= 1`` levels above the leaf is ``(-1)**(d - 1) * (reward(leaf) - value)``.
    """
    num_nodes = tree.node_visits.shape[0]
    on_path = ancestor_mask(tree.ancestors[leaf], num_nodes) | (jnp.arange(num_nodes) == leaf)
    above = tree.depth[leaf] - tree.depth  # levels above the leaf, for the nodes on the path
    backed_up = jnp.where(above == 0, value, jnp.where(above % 2 == 1, 1.0, -1.0) * (tree.reward[leaf] - value))
    visits = tree.node_visits
    new_values = (tree.node_values * visits + backed_up) / (visits + 1)
    return dataclasses.replace(
        tree, node_values=jnp.where(on_path, new_values, tree.node_values), node_visits=visits + on_path
    )


def at_nodes(tree_field: jax.Array, index: jax.Array) -> jax.Array:
    """``tree_field[b, index[b]]`` for every tree ``b``."""
    return tree_field[jnp.arange(index.shape[0]), index]


def simulate(
    tree: Tree, sim: jax.Array, selection: Selection, recurrent_fn: RecurrentFn, params: Any, key: jax.Array
) -> Tree:
    """Simulation ``sim`` on every tree: descend, add node ``sim + 1`` (``recurrent_fn`` steps
    to it and evaluates it; a terminal node gets value 0), back up."""
    with jax.named_scope("descend"):
        action, child, parent = jax.vmap(lambda t: descend(t, selection))(tree)
    rows = jnp.arange(parent.shape[0])
    expand = child == UNVISITED
    new = sim + 1
    parent_words = at_nodes(tree.node_words, parent)  # the parent's row, read once
    parent_positions = position_of(_node_field(parent_words, "position_words"))
    expansion, positions = recurrent_fn(params, key, action, parent_positions)
    value = jnp.where(expansion.done, 0.0, expansion.value)

    added = pack_nodes(
        position_words=words_of(positions),
        terminal=expansion.done,
        reward=expansion.won.astype(jnp.float32),
        raw_value=value,
        parents=parent,
        action_from_parent=action,
        legal=expansion.legal,
        prior_logits=expansion.logits,
        prior=jax.nn.softmax(expansion.logits),
        depth=_node_field(parent_words, "depth") + 1,
        ancestors=_node_field(parent_words, "ancestors") | node_bit(parent, tree.ancestors.shape[-1]),
    )
    tree = dataclasses.replace(
        tree,
        node_words=tree.node_words.at[:, new].set(added),  # the new node, one write
        children_index=tree.children_index.at[rows, parent, action].set(jnp.where(expand, new, child)),
    )
    leaf = jnp.where(expand, new, child)
    with jax.named_scope("backup"):
        return jax.vmap(backup)(tree, leaf, jnp.where(expand, value, 0.0))


RootNoise = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]
"""``(key, prior_probs, legal) -> prior_probs``: a perturbation of the root's prior."""


class RootPerturbation(NamedTuple):
    """What a search adds at the root to the network's evaluation: ``noise`` perturbs the
    root's prior (PUCT's Dirichlet noise); ``gumbel (B, 7)``, the Gumbel noise a Gumbel
    selection reads, is stored in the tree; ``tree``, the statistics an earlier search gathered
    below the root, to continue (:func:`run_tree_search`)."""

    noise: RootNoise | None = None
    gumbel: jax.Array | None = None
    tree: Tree | None = None


UNPERTURBED = RootPerturbation()  # the root as the network evaluates it


def run_tree_search(
    player: Player,
    params: Any,
    boards: jax.Array,
    key: jax.Array,
    num_simulations: int,
    selection: Selection,
    root: RootPerturbation = UNPERTURBED,
    env: Environment = CONNECT_FOUR,
) -> Tree:
    """The tree after ``num_simulations`` simulations from int8 ``boards (B, 6, 7)``, with
    ``player``'s network in ``env`` (its step given to every simulation as the recurrent
    function of :func:`czjax.search.base.make_recurrent_fn`), its root perturbed by ``root``.

    ``root.tree``: a tree to continue, rooted at ``boards`` (:func:`czjax.search.reuse.reroot`
    makes one from an earlier search's), of ``K + num_simulations`` slots whose first ``K`` hold
    it: the simulations add nodes ``K, K + 1, ...`` to it. Where its root holds no visit (an
    empty tree: the moves since led out of the earlier one) the search starts from a fresh root,
    as without one. The network evaluates each root either way, and the root's noise perturbs
    the root's prior either way."""
    positions = env.encode(boards)
    key, root_key, noise_key = jax.random.split(key, 3)
    logits, value, legal = network_value(player, params, positions, root_key, env)
    if root.tree is None:
        if root.noise is not None:
            logits = _noised(root.noise, noise_key, logits, legal)
        tree = init_tree(positions, logits, value, legal, num_simulations + 1, root.gumbel)
    else:
        fresh = init_tree(positions, logits, value, legal, _slots(root.tree, num_simulations), root.gumbel)
        tree = _rooted(root.tree, fresh)
        if root.noise is not None:
            tree = _noised_root(tree, root.noise, noise_key)
    first = tree.node_visits.shape[1] - num_simulations - 1  # simulation i adds node first + i + 1
    keys = jax.random.split(key, num_simulations)
    recurrent_fn = make_recurrent_fn(player, env)
    return jax.lax.fori_loop(
        0,
        num_simulations,
        lambda i, t: simulate(t, i if first == 0 else i + first, selection, recurrent_fn, params, keys[i]),
        tree,
    )


def _noised(noise: RootNoise, key: jax.Array, logits: jax.Array, legal: jax.Array) -> jax.Array:
    """The root's masked ``logits (B, 7)`` after ``noise`` perturbs their probabilities."""
    probs = noise(key, jax.nn.softmax(logits), legal)
    return jnp.where(legal, jnp.log(jnp.maximum(probs, 1e-30)), LOSS_MASK_VALUE)


def _noised_root(tree: Tree, noise: RootNoise, key: jax.Array) -> Tree:
    """``tree`` with its root's prior perturbed by ``noise``."""
    root_logits = _noised(noise, key, tree.prior_logits[:, ROOT], tree.legal[:, ROOT])
    return tree.with_nodes(
        prior_logits=tree.prior_logits.at[:, ROOT].set(root_logits),
        prior=tree.prior.at[:, ROOT].set(jax.nn.softmax(root_logits)),
    )


def _slots(tree: Tree, num_simulations: int) -> int:
    """The slots of a tree to continue (one-line ``ValueError`` when the simulations do not fit)."""
    num_nodes = tree.node_visits.shape[1]
    if num_nodes < num_simulations + 1:
        raise ValueError(f"a tree to continue needs num_simulations + 1 = {num_simulations + 1} slots, has {num_nodes}")
    return num_nodes


def _rooted(tree: Tree, fresh: Tree) -> Tree:
    """``tree`` where it holds a root (a visited one), ``fresh`` where it is empty."""
    found = tree.node_visits[:, ROOT] > 0
    return jax.tree.map(lambda t, f: jnp.where(found.reshape((-1,) + (1,) * (t.ndim - 1)), t, f), tree, fresh)


def root_q(tree: Tree) -> jax.Array:
    """``float (B, 7)``: the root's Q per column, NaN where not visited or illegal."""
    visits, q = jax.vmap(lambda t: edge_stats(t, ROOT))(tree)
    return jnp.where((visits > 0) & tree.legal[:, ROOT], q, jnp.nan)
