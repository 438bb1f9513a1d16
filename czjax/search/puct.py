"""AlphaZero's PUCT tree search (and its entropy-guided variant, whose exploration term scales a
column's visit count by its child's normalised policy entropy): Dirichlet noise at the root,
:func:`czjax.search.selection.puct_select` below it, the root's visit counts as policy."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from czjax.players import LOSS_MASK_VALUE, Player
from czjax.search.base import CONNECT_FOUR, Environment, SearchOutput, check_ranges
from czjax.search.selection import puct_select
from czjax.search.tree import ROOT, RootNoise, RootPerturbation, Tree, edge_stats, root_q, run_tree_search


def dirichlet_noise(alpha: float, fraction: float) -> RootNoise:
    """AlphaZero's root noise: ``(1 - fraction) P + fraction Dir(alpha)`` over the legal columns."""

    def noise(key: jax.Array, probs: jax.Array, legal: jax.Array) -> jax.Array:
        gammas = jnp.where(legal, jax.random.gamma(key, alpha, probs.shape), 0.0)
        dirichlet = gammas / jnp.maximum(gammas.sum(-1, keepdims=True), 1e-30)
        return (1.0 - fraction) * probs + fraction * dirichlet

    return noise


def visit_output(tree: Tree) -> SearchOutput:
    """The root's visit counts as the policy; the most visited column as the move; the tree."""
    visits = jax.vmap(lambda t: edge_stats(t, ROOT)[0])(tree)
    total = jnp.maximum(visits.sum(-1, keepdims=True), 1)
    return SearchOutput(
        action=jnp.argmax(visits, -1).astype(jnp.int32),
        policy=visits / total,
        visits=visits,
        q=root_q(tree),
        value=tree.node_values[:, ROOT],
        tree=tree,
    )


@dataclasses.dataclass(frozen=True)
class PUCT:
    """AlphaZero's PUCT: ``sims`` simulations, exploration ``c``, root noise ``(1 - noise) P +
    noise Dir(noise_alpha)`` (0 for play and evaluation); the policy is the root's visit counts.
    ``entropy``: entropy-guided PUCT, each column's visit count in the exploration term scaled by
    its child's normalised policy entropy ``E`` in ``[0, 1]``, ``1 + N(s, a) E(s, a)`` in the
    denominator (:func:`czjax.search.selection.subtree_entropy`)."""

    sims: int = 64
    c: float = 2.0
    noise: float = 0.0
    noise_alpha: float = 0.3
    entropy: bool = False
    description: ClassVar[str] = "AlphaZero's PUCT tree search (visit-count policy)"
    option_aliases: ClassVar[dict[str, str]] = {"alpha": "noise_alpha"}  # its name before

    @property
    def evaluations_per_move(self) -> int:
        """Network evaluations behind one move: the root and one per simulation."""
        return self.sims + 1

    def run(
        self,
        player: Player,
        params: Any,
        boards: jax.Array,
        key: jax.Array,
        *,
        env: Environment = CONNECT_FOUR,
        tree: Tree | None = None,
    ) -> SearchOutput:
        """The search from int8 ``boards (B, 6, 7)`` with ``player``'s network in ``env``; its
        output carries its tree. ``tree``: a tree rooted at ``boards`` to continue (PUCT's rule
        at a node reads only the node's statistics, so a subtree an earlier search left serves
        as it is: :mod:`czjax.search.reuse`), of ``keep + sims`` slots whose first ``keep``
        hold it; where it is empty, a fresh root."""
        noise = dirichlet_noise(self.noise_alpha, self.noise) if self.noise > 0 else None
        selection = puct_select(self.c, self.entropy)
        root = RootPerturbation(noise=noise, tree=tree)
        return visit_output(run_tree_search(player, params, boards, key, self.sims, selection, root, env))

    def logits(self, out: SearchOutput) -> jax.Array:
        """``log N(a)``: a player sampling at temperature ``T`` plays ``a`` with probability
        proportional to ``N(a) ** (1 / T)``, AlphaZero's rule; at ``T = 0`` the most visited."""
        return jnp.where(out.visits > 0, jnp.log(jnp.maximum(out.visits, 1).astype(jnp.float32)), LOSS_MASK_VALUE)

    def check(self) -> None:
        """One-line ``ValueError`` for a setting out of its range."""
        check_ranges(self, at_least_one=("sims",), non_negative=("c", "noise", "noise_alpha"))
        if self.noise > 1:
            raise ValueError(f"noise must be in [0, 1], got {self.noise}")
        if self.noise_alpha == 0 and self.noise > 0:
            raise ValueError("noise_alpha must be positive when noise is on")
