"""Keeping a searched subtree between moves (AlphaZero's tree reuse; asked of mctx in its issues
#51 and #104): after the search's move and the opponent's reply, the subtree below those two
moves becomes the next search's tree, with its statistics, and the next search's simulations
add to it.

The tree keeps its fixed shape. A tree that is reused has ``keep + sims`` nodes: slots
``[0, keep)`` hold the reused subtree (at most ``keep`` nodes: its root and the first of its
nodes in the order they were added, so a node's parent is always kept before it), the
simulations add nodes ``keep, keep + 1, ...``; the slots of a subtree smaller than ``keep`` stay
empty (no parent points to them, no backup touches them).

- :func:`reroot`: a pure function over :class:`czjax.search.tree.Tree`: the subtree below a path
  of moves, gathered into a fresh tree of a given size, its parents, children, depths and
  ancestor bits renumbered; its statistics as they were. Its result is the ``tree`` a search
  continues (``PUCT.run(..., tree=reroot(out.tree, path, keep, keep + sims)[0])``): from the
  subtree where the path leads into the earlier tree, from a fresh root elsewhere (there the
  search is the one it runs without a tree, move for move).
- :func:`reusable`: whether a search allows it. PUCT (``mcts``, ``entropy-mcts``) does: its
  rule at every node reads only the node's statistics. Gumbel MuZero does not: sequential
  halving at the root follows a schedule of this search's simulations from zero visits, and its
  Gumbel noise is drawn for each search; the rollout improver keeps no tree, and AlphaZero.jl's
  graph is not re-rooted. Those refuse a tree (:func:`czjax.search.base.refuse_tree`).
- :func:`empty_tree`: a tree that holds no node, which every path leaves: the earlier tree of a
  game's first search, so that its searches compile once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from czjax import game
from czjax.search.base import NUM_ACTIONS
from czjax.search.puct import PUCT
from czjax.search.tree import ROOT, UNVISITED, Tree, ancestor_mask, init_tree, make_tree


def reusable(search: Any) -> bool:
    """Whether ``search`` can continue from a reused tree (see the module's docstring)."""
    return isinstance(search, PUCT)


def subtree_root(tree: Tree, path: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(node, found)`` for one tree (no batch axis): the node reached from the root by the
    moves ``path (P,)`` (a negative entry is no move: a shorter path; an entry past the columns
    leads out of every tree), and whether it is a node
    of the tree (visited) and not terminal (a position a search can start from)."""
    node = jnp.int32(ROOT)
    for i in range(path.shape[0]):
        move = path[i]
        child = tree.children_index[jnp.maximum(node, 0), jnp.clip(move, 0, NUM_ACTIONS - 1)]
        child = jnp.where((node == UNVISITED) | (move >= NUM_ACTIONS), UNVISITED, child)
        node = jnp.where(move < 0, node, child)
    safe = jnp.maximum(node, 0)
    found = (node != UNVISITED) & (tree.node_visits[safe] > 0) & ~tree.terminal[safe]
    return node, found


def empty_tree(batch: int, num_nodes: int) -> Tree:
    """Trees of ``num_nodes`` slots holding no node (no root either): the earlier tree of a game's
    first search, which every path leaves (:func:`reroot` of it is empty: a fresh root)."""
    tree = init_tree(
        game.pack(jnp.zeros((batch, game.ROWS, game.COLS), jnp.int8)),
        jnp.zeros((batch, NUM_ACTIONS), jnp.float32),
        jnp.zeros((batch,), jnp.float32),
        jnp.zeros((batch, NUM_ACTIONS), bool),
        num_nodes,
    )
    return dataclasses.replace(tree, node_visits=jnp.zeros_like(tree.node_visits))


def _pack_bits(bits: jax.Array) -> jax.Array:
    """``uint32 (..., W)`` ancestor words from ``bool (..., n)`` (bit ``i`` of word ``i // 32``)."""
    n = bits.shape[-1]
    words = -(-n // 32)
    padded = jnp.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, words * 32 - n)])
    shaped = padded.reshape(bits.shape[:-1] + (words, 32)).astype(jnp.uint32)
    return (shaped << jnp.arange(32, dtype=jnp.uint32)).sum(-1, dtype=jnp.uint32)


def _reroot_one(tree: Tree, path: jax.Array, keep: int, num_nodes: int) -> tuple[Tree, jax.Array]:
    old_nodes = tree.node_visits.shape[0]
    root, found = subtree_root(tree, path)
    safe_root = jnp.maximum(root, 0)
    index = jnp.arange(old_nodes)
    # the subtree: the root and every node with the root among its ancestors; a slot with no
    # visit is no node (empty, or written by a simulation that revisited a terminal node)
    below = ((tree.ancestors[:, safe_root // 32] >> (safe_root % 32).astype(jnp.uint32)) & 1).astype(bool)
    member = found & (below | (index == safe_root)) & (tree.node_visits > 0)
    rank = jnp.cumsum(member) - 1  # the new numbering: the order in which the nodes were added
    kept = member & (rank < keep)
    new_index = jnp.where(kept, rank, UNVISITED).astype(jnp.int32)  # old node -> new slot
    old_index = (
        jnp.full((num_nodes,), old_nodes, jnp.int32)
        .at[jnp.where(kept, rank, num_nodes)]
        .set(index.astype(jnp.int32), mode="drop")
    )  # new slot -> old node; old_nodes marks an empty slot
    filled = old_index < old_nodes
    source = jnp.minimum(old_index, old_nodes - 1)
    is_root = filled & (old_index == safe_root)

    def gather(field: jax.Array, empty=0) -> jax.Array:
        taken = field[source]
        mask = filled.reshape((num_nodes,) + (1,) * (taken.ndim - 1))
        return jnp.where(mask, taken, jnp.asarray(empty, taken.dtype))

    def renumber(old: jax.Array) -> jax.Array:  # an old node index (or UNVISITED) -> its new slot
        return jnp.where(old == UNVISITED, UNVISITED, new_index[jnp.maximum(old, 0)])

    old_bits = jax.vmap(lambda words: ancestor_mask(words, old_nodes))(tree.ancestors)  # (old, old)
    bits = old_bits[source][:, source] & filled[:, None] & filled[None, :]  # (new, new): ancestor of
    rerooted = make_tree(
        position_words=gather(tree.position_words),
        terminal=gather(tree.terminal, False) & ~is_root,
        reward=jnp.where(is_root, 0.0, gather(tree.reward)),
        raw_value=gather(tree.raw_value),
        node_visits=gather(tree.node_visits),
        node_values=gather(tree.node_values),
        parents=jnp.where(is_root | ~filled, UNVISITED, renumber(gather(tree.parents, UNVISITED))),
        action_from_parent=jnp.where(is_root | ~filled, UNVISITED, gather(tree.action_from_parent, UNVISITED)),
        legal=gather(tree.legal, False),
        prior_logits=gather(tree.prior_logits),
        prior=gather(tree.prior),
        children_index=jnp.where(filled[:, None], renumber(gather(tree.children_index, UNVISITED)), UNVISITED),
        depth=jnp.where(filled, gather(tree.depth) - tree.depth[safe_root], 0),
        ancestors=_pack_bits(bits),
        gumbel=tree.gumbel,
    )
    return rerooted, found


def reroot(tree: Tree, path: jax.Array, keep: int, num_nodes: int) -> tuple[Tree, jax.Array]:
    """The subtree of each tree below the moves ``path (B, P)`` (negative entries: no move;
    entries past the columns: out of the tree), as a fresh tree of ``num_nodes`` slots:
    ``(tree, found (B,))``.

    Slot 0 is the node the path reaches, the root; slots ``1..keep-1`` its descendants in the
    order they were added (the first ``keep - 1`` of them when there are more: a kept node's
    parent is always kept, and its visits still count those that went below it into nodes not
    kept), the rest empty, ready for a search's new nodes. Node statistics
    (visits, values, raw values, rewards, priors, legal moves, positions) are the old nodes';
    parents, children and ancestor bits are renumbered, depths counted from the new root; the
    root has no parent, and no reward (the move into it is history now). ``found`` is False
    where the path leaves the tree (a move no simulation tried) or ends on a terminal node:
    that tree is empty, and a search starts afresh there."""
    if not 1 <= keep <= num_nodes:
        raise ValueError(f"keep must be in [1, num_nodes], got keep={keep}, num_nodes={num_nodes}")
    return jax.vmap(lambda t, p: _reroot_one(t, p, keep, num_nodes))(tree, jnp.asarray(path, jnp.int32))
