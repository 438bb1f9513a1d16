"""The selection rules of the tree searches, each a :class:`czjax.search.tree.Selection` for
one tree (no batch axis): PUCT and entropy-guided PUCT (:func:`puct_select`), and
Gumbel MuZero's sequential halving at the root with its deterministic interior rule
(:func:`gumbel_select`, as mctx 0.0.71: ``seq_halving``, ``qtransform_completed_by_mix_value``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from czjax.search.base import NUM_ACTIONS
from czjax.search.columns import col_argmax, col_max, col_min, col_softmax, col_sum
from czjax.search.tree import ROOT, UNVISITED, Selection, Tree, edge_stats

# ---------------------------------------------------------------------------------------------
# PUCT and the entropy-guided variant


def subtree_entropy(tree: Tree, node: jax.Array | int) -> jax.Array:
    """Entropy-guided PUCT's ``E(s, a)`` for every column ``a`` of ``node`` (one tree), in ``[0, 1]``.

    The proposal of entropy-guided PUCT defines ``E`` as the entropy of the distribution over the
    leaves that a playout through the child reaches, which needs the whole subtree. On a batched
    tree czjax uses the one-step version the proposal's discussion suggested: the distribution of the child's
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

    def select(tree: Tree, node: jax.Array | int) -> jax.Array:
        visits, edge_q = edge_stats(tree, node)
        q = jnp.where(visits > 0, edge_q, tree.node_values[node])
        prior = tree.prior[node]
        damping = visits * (subtree_entropy(tree, node) if entropy_guided else 1.0)
        score = q + c_puct * prior * jnp.sqrt(tree.node_visits[node].astype(jnp.float32)) / (1.0 + damping)
        return col_argmax(jnp.where(tree.legal[node], score, -jnp.inf))

    return Selection(root=lambda tree: select(tree, ROOT), interior=select)


# ---------------------------------------------------------------------------------------------
# Gumbel MuZero


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


def completed_q(tree: Tree, node: jax.Array | int, c_visit: float, c_scale: float, rescale: bool = True) -> jax.Array:
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


def considered_score(
    considered_visit: jax.Array, gumbel: jax.Array, logits: jax.Array, sigma_q: jax.Array, visits: jax.Array
) -> jax.Array:
    """Sequential halving's score of the root's columns, ``g + logits + sigma(Q)``, ``-inf``
    for a column whose visits are not ``considered_visit`` (no longer considered, or ahead)."""
    logits = logits - col_max(logits)[..., None]
    penalty = jnp.where(visits == considered_visit, 0.0, -jnp.inf)
    return jnp.maximum(-1e9, gumbel + logits + sigma_q) + penalty


def gumbel_select(
    num_simulations: int, max_considered: int, c_visit: float, c_scale: float, rescale: bool = True
) -> Selection:
    """Gumbel MuZero's selection for one tree (its root's noise in ``tree.gumbel``): sequential
    halving among the top columns at the root, ``argmax(pi' - N / (1 + sum N))`` below, with
    ``pi' = softmax(logits + sigma(completed Q))``."""
    schedule = jnp.asarray([considered_visits(m, num_simulations) for m in range(NUM_ACTIONS + 1)], jnp.int32)

    def root(tree: Tree) -> jax.Array:
        visits = edge_stats(tree, ROOT)[0]
        legal = tree.legal[ROOT]
        sigma_q = completed_q(tree, ROOT, c_visit, c_scale, rescale)
        considered = jnp.minimum(max_considered, col_sum(legal.astype(jnp.int32)))
        score = considered_score(
            schedule[considered, col_sum(visits)], tree.gumbel, tree.prior_logits[ROOT], sigma_q, visits
        )
        return col_argmax(jnp.where(legal, score, -jnp.inf))

    def interior(tree: Tree, node: jax.Array) -> jax.Array:
        visits = edge_stats(tree, node)[0]
        improved = col_softmax(tree.prior_logits[node] + completed_q(tree, node, c_visit, c_scale, rescale))
        score = improved - visits / (1.0 + col_sum(visits))
        return col_argmax(jnp.where(tree.legal[node], score, -jnp.inf))

    return Selection(root=root, interior=interior)
