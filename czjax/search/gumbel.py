"""Gumbel MuZero (as mctx 0.0.71's ``gumbel_muzero_policy``): sequential halving with Gumbel
noise at the root, the deterministic interior selection of
:func:`czjax.search.selection.gumbel_select`, and the completed-Q improved policy."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from czjax.players import LOSS_MASK_VALUE, Player, PlayerOutput
from czjax.search.base import CONNECT_FOUR, NUM_ACTIONS, Environment, SearchOutput, check_ranges, refuse_tree
from czjax.search.selection import completed_q, considered_score, gumbel_select
from czjax.search.tree import ROOT, RootPerturbation, Tree, edge_stats, root_q, run_tree_search

GUMBEL_MOVES = ("action", "policy")


def gumbel_output(tree: Tree, c_visit: float, c_scale: float, rescale: bool = True) -> SearchOutput:
    """Sequential halving's winner as the move, ``softmax(logits + sigma(completed Q))`` at the
    root as the policy; the tree."""

    def move_and_policy(tree: Tree) -> tuple[jax.Array, jax.Array]:
        visits = edge_stats(tree, ROOT)[0]
        legal = tree.legal[ROOT]
        sigma_q = completed_q(tree, ROOT, c_visit, c_scale, rescale)
        score = considered_score(visits.max(), tree.gumbel, tree.prior_logits[ROOT], sigma_q, visits)
        action = jnp.argmax(jnp.where(legal, score, -jnp.inf)).astype(jnp.int32)
        policy = jax.nn.softmax(jnp.where(legal, tree.prior_logits[ROOT] + sigma_q, -jnp.inf))
        return action, policy

    action, policy = jax.vmap(move_and_policy)(tree)
    visits = jax.vmap(lambda t: edge_stats(t, ROOT)[0])(tree)
    return SearchOutput(
        action=action, policy=policy, visits=visits, q=root_q(tree), value=tree.node_values[:, ROOT], tree=tree
    )


def tempered(player: Player, temperature: float) -> Player:
    """``player`` with its logits divided by ``temperature``."""

    def at_temperature(params: Any, boards: jax.Array, key: jax.Array) -> PlayerOutput:
        out = player(params, boards, key)
        return dataclasses.replace(out, logits=out.logits / temperature)

    return at_temperature


@dataclasses.dataclass(frozen=True)
class Gumbel:
    """Gumbel MuZero: ``sims`` simulations, at most ``considered`` root columns, Gumbel noise
    times ``scale`` (0: deterministic), ``sigma`` constants ``c_visit`` and ``c_scale``; the
    policy is ``softmax(logits + sigma(completed Q))``, Q rescaled to [0, 1] by the node's min and
    max (``rescale``, mctx's default) or taken as it is, in [-1, 1]. ``move``: what a player built on it
    plays: ``action``, sequential halving's winner, or ``policy``, a draw from the improved
    policy at the player's temperature (its most likely column at 0), as the full-GPU Gumbel
    AlphaZero of AlphaZero.jl issue #217 plays its self-play games. ``prior_temperature``: the
    network's logits divided by it at every node (AlphaZero.jl's ``prior_temperature``), which
    flattens (above 1) the prior and the improved policy built on it. ``fast_sims`` and
    ``full_fraction``: KataGo's playout cap randomization: each call (a ply of a batch of games)
    searches with ``sims`` simulations with probability ``full_fraction``, else with
    ``fast_sims``, whose policy plays the move but is no training target (``trained`` False)."""

    sims: int = 64
    considered: int = 16
    scale: float = 1.0
    c_visit: float = 50.0
    c_scale: float = 0.1
    rescale: bool = True
    move: str = "action"
    prior_temperature: float = 1.0
    fast_sims: int = 0
    full_fraction: float = 1.0
    description: ClassVar[str] = "Gumbel MuZero (sequential halving at the root, completed-Q policy)"

    @property
    def evaluations_per_move(self) -> int:
        """Network evaluations behind one move: the root and one per simulation (with playout cap
        randomization, the expected number)."""
        if self.fast_sims:
            return round(self.full_fraction * self.sims + (1 - self.full_fraction) * self.fast_sims) + 1
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
        gumbel: jax.Array | None = None,
    ) -> SearchOutput:
        """The search from int8 ``boards (B, 6, 7)`` with ``player``'s network in ``env``; its
        output carries its tree (none under playout cap randomization, whose two searches'
        trees differ in size). ``tree``: refused, since sequential halving follows a schedule of
        this search's own simulations from a fresh root. ``gumbel (B, 7)``: the root noise,
        drawn from ``key`` when not given."""
        refuse_tree(self, tree)
        if self.fast_sims:
            return self._capped(player, params, boards, key, env, gumbel)
        key, gumbel_key = jax.random.split(key)
        if gumbel is None:
            gumbel = self.scale * jax.random.gumbel(gumbel_key, boards.shape[:1] + (NUM_ACTIONS,), jnp.float32)
        if self.prior_temperature != 1.0:
            player = tempered(player, self.prior_temperature)
        selection = gumbel_select(self.sims, self.considered, self.c_visit, self.c_scale, self.rescale)
        tree = run_tree_search(player, params, boards, key, self.sims, selection, RootPerturbation(gumbel=gumbel), env)
        return gumbel_output(tree, self.c_visit, self.c_scale, self.rescale)

    def _capped(
        self, player: Player, params: Any, boards: jax.Array, key: jax.Array, env: Environment, gumbel: jax.Array | None
    ) -> SearchOutput:
        """Playout cap randomization: the search with ``sims`` simulations with probability
        ``full_fraction``, else with ``fast_sims``, whose policy is no training target."""
        cap_key, key = jax.random.split(key)
        full = jax.random.bernoulli(cap_key, self.full_fraction)
        searches = [dataclasses.replace(self, sims=s, fast_sims=0) for s in (self.fast_sims, self.sims)]

        def searched(settings: Gumbel) -> SearchOutput:
            out = settings.run(player, params, boards, key, env=env, gumbel=gumbel)
            return dataclasses.replace(out, tree=None)  # the two trees differ in size

        out = jax.lax.cond(full, lambda: searched(searches[1]), lambda: searched(searches[0]))
        return dataclasses.replace(out, trained=jnp.broadcast_to(full, out.action.shape))

    def logits(self, out: SearchOutput) -> jax.Array:
        """``move="action"``: sequential halving's winner only (the Gumbel noise already made the
        choice); ``"policy"``: the improved policy's log-probabilities."""
        if self.move == "policy":
            return jnp.where(
                out.policy > 0, jnp.log(jnp.maximum(out.policy, jnp.finfo(jnp.float32).tiny)), LOSS_MASK_VALUE
            )
        return jnp.where(jax.nn.one_hot(out.action, NUM_ACTIONS) > 0, 0.0, LOSS_MASK_VALUE)

    def check(self) -> None:
        """One-line ``ValueError`` for a setting out of its range."""
        check_ranges(self, at_least_one=("sims", "considered"), non_negative=("scale", "c_visit", "c_scale"))
        if self.fast_sims and not (1 <= self.fast_sims < self.sims and 0 <= self.full_fraction <= 1):
            raise ValueError("fast_sims must be below sims, and full_fraction in [0, 1]")
        if not self.prior_temperature > 0:
            raise ValueError(f"prior_temperature must be positive, got {self.prior_temperature}")
        if self.move not in GUMBEL_MOVES:
            raise ValueError(f"move must be one of {', '.join(GUMBEL_MOVES)}, got {self.move!r}")
