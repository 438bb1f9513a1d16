"""The PyTorch project's rollout improver (``treesearch.multiple_rollouts``), the search named
``playouts`` in specs (``playouts:width=4,depth=4:random``; ``rollout`` before): every column scored by the mean of
short playouts of the network's policy."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from czjax import game
from czjax.players import Player, sample_masked
from czjax.search.base import (
    CONNECT_FOUR,
    NUM_ACTIONS,
    Environment,
    SearchOutput,
    check_ranges,
    network_value,
    refuse_tree,
)

ROLLOUT_MASK = -1e12  # the rollout improver's logits off its chosen column (the PyTorch project's)


def rollout_values(
    improver: RolloutImprover,
    player: Player,
    params: Any,
    pos: game.Position,
    key: jax.Array,
    env: Environment = CONNECT_FOUR,
) -> jax.Array:
    """``float (B, 7)``: the rollout improver's value of every column, ``-inf`` where illegal;
    its ``width``, ``depth``, ``gamma`` and ``temperature`` are ``improver``'s.

    As ``treesearch.multiple_rollouts``: a column that wins now is worth 1 (a full board 0);
    otherwise ``width`` rollouts of at most ``depth`` plies with the policy at
    ``temperature``, where rollout ply ``k`` (0 = the opponent's reply) ending in a win
    scores ``gamma**(k+1)``, positive when the searching side won (odd ``k``), and an
    unfinished rollout scores ``gamma**(depth+1) * v``, ``v`` the value head's value of the
    leaf for the searching side. The column's value is the mean over its rollouts. Moves are
    made by ``env.step``.
    """
    width, depth, gamma, temperature = improver.width, improver.depth, improver.gamma, improver.temperature
    batch = pos.heights.shape[0]
    legal = env.legal_mask(pos)
    cols = jnp.broadcast_to(jnp.arange(NUM_ACTIONS, dtype=jnp.int32), (batch, NUM_ACTIONS))
    after, won, done = env.step(jax.tree.map(lambda x: jnp.repeat(x[:, None], NUM_ACTIONS, 1), pos), cols)
    # every (board, column) pair `width` times, flattened: (B * 7 * width,)
    flat = jax.tree.map(lambda x: jnp.repeat(x.reshape(-1), width), after)
    running = jnp.repeat(~done.reshape(-1), width)

    def ply(carry, k):
        pos, running, score, key = carry
        key, eval_key, sample_key = jax.random.split(key, 3)
        logits, _, legal = network_value(player, params, pos, eval_key, env)
        moves = sample_masked(sample_key, legal, logits, temperature)
        nxt, won, done = env.step(pos, moves)
        sign = jnp.where(k % 2 == 1, 1.0, -1.0)
        score = score + jnp.where(running & won, sign * gamma ** (k + 1.0), 0.0)
        pos = jax.tree.map(lambda new, old: jnp.where(running, new, old), nxt, pos)
        return (pos, running & ~done, score, key), None

    key, leaf_key = jax.random.split(key)
    zero = jnp.zeros(running.shape, jnp.float32)
    (leaf, unfinished, score, _), _ = jax.lax.scan(
        ply, (flat, running, zero, key), jnp.arange(depth, dtype=jnp.float32)
    )
    _, leaf_value, _ = network_value(player, params, leaf, leaf_key, env)
    leaf_sign = 1.0 if depth % 2 == 1 else -1.0  # the searching side moves at the leaf after an odd number of plies
    score = score + jnp.where(unfinished, leaf_sign * gamma ** (depth + 1.0) * leaf_value, 0.0)
    mean = score.reshape(batch, NUM_ACTIONS, width).mean(-1)
    value = jnp.where(won, 1.0, jnp.where(done, 0.0, mean))
    return jnp.where(legal, value, -jnp.inf)


@dataclasses.dataclass(frozen=True)
class RolloutImprover:
    """The PyTorch project's rollout improver: ``width`` rollouts of ``depth`` plies per column
    with the policy at ``temperature``, discount ``gamma`` (see :func:`rollout_values`)."""

    width: int = 4
    depth: int = 4
    gamma: float = 0.9
    temperature: float = 1.0
    description: ClassVar[str] = "the PyTorch project's rollout improver (treesearch.multiple_rollouts)"

    @property
    def evaluations_per_move(self) -> int:
        """Network evaluations behind one move: ``width`` rollouts of ``depth`` plies per column,
        and the root."""
        return NUM_ACTIONS * self.width * self.depth + 1

    def run(
        self,
        player: Player,
        params: Any,
        boards: jax.Array,
        key: jax.Array,
        *,
        env: Environment = CONNECT_FOUR,
        tree: Any = None,
    ) -> SearchOutput:
        """The column with the best mean over its rollouts, from int8 ``boards (B, 6, 7)``; it
        keeps no tree (the output's is None), so ``tree`` is refused."""
        refuse_tree(self, tree)
        pos = env.encode(boards)
        key, root_key = jax.random.split(key)
        values = rollout_values(self, player, params, pos, key, env)
        _, root_value, legal = network_value(player, params, pos, root_key, env)
        action = jnp.argmax(values, -1).astype(jnp.int32)
        visits = jnp.where(legal, self.width, 0).astype(jnp.int32)
        return SearchOutput(
            action=action,
            policy=jax.nn.one_hot(action, NUM_ACTIONS),
            visits=visits,
            q=jnp.where(legal, values, jnp.nan),
            value=root_value,
        )

    def logits(self, out: SearchOutput) -> jax.Array:
        """A one-hot on the chosen column (:data:`ROLLOUT_MASK` elsewhere)."""
        return jnp.where(jax.nn.one_hot(out.action, NUM_ACTIONS) > 0, 1.0, ROLLOUT_MASK)

    def check(self) -> None:
        """One-line ``ValueError`` for a setting out of its range."""
        check_ranges(self, at_least_one=("width", "depth"), non_negative=("gamma", "temperature"))
