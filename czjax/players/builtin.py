"""The built-in players: uniformly random, and RandomPunisher (win now, else block, else
random) with its ties spread or to the leftmost column, by name in :data:`BUILTIN_PLAYERS`.
They need no parameters and no key (pass ``None``): the sampler draws their moves.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from czjax import game
from czjax.players.base import LOSS_MASK_VALUE, Player, PlayerOutput


def random_player(params, boards: jax.Array, key: jax.Array) -> PlayerOutput:
    """The uniformly random player.

    Args:
        params: ignored (None).
        boards: ``int8 (B, 6, 7)``.
        key: ignored (the sampler draws).

    Returns:
        :class:`PlayerOutput` with ``logits (B, 7)`` all 0: uniform over the legal columns once
        the sampler masks the illegal ones; no value.
    """
    del params, key
    return PlayerOutput(logits=jnp.zeros(boards.shape[:-2] + (game.COLS,), jnp.float32))


def winning_columns(boards: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(wins, threats)``, each ``bool (..., 7)``: columns where the side to move completes four
    now, and columns where the opponent would complete four by playing there next."""
    pos = game.pack(boards)
    heights = game.column_heights(pos)  # (..., 7)
    cols = jnp.arange(game.COLS)
    lo_bit, hi_bit = game.cell_bits(game.ROWS - 1 - heights, cols)  # zero for full columns
    playable = heights < game.ROWS

    def completes(lo, hi):
        return playable & game.has_four(lo[..., None] | lo_bit, hi[..., None] | hi_bit)

    return completes(pos.mine_lo, pos.mine_hi), completes(pos.theirs_lo, pos.theirs_hi)


def forced_columns(boards: jax.Array) -> jax.Array:
    """RandomPunisher's forced columns, ``bool (..., 7)``: those that win now, else those that
    block the opponent's immediate win; none where neither exists."""
    wins, threats = winning_columns(boards)
    return jnp.where(wins.any(-1, keepdims=True), wins, threats)


def random_punisher(params, boards: jax.Array, key: jax.Array) -> PlayerOutput:
    """RandomPunisher with ties spread: win now if it can, else block the opponent's immediate
    win, else uniform over the legal columns; ties (several wins, several threats) are uniform
    among them, as the evaluation data's reference player (``czjax/data``) plays. The PyTorch
    project's own breaks ties to the leftmost column: :func:`random_punisher_leftmost`.

    Args:
        params: ignored (None).
        boards: ``int8 (B, 6, 7)``.
        key: ignored (the sampler draws).

    Returns:
        :class:`PlayerOutput` with ``logits (B, 7)``: 0 on the columns it may play, ``-1e9``
        elsewhere; no value.
    """
    del params, key
    forced = forced_columns(boards)
    choice = jnp.where(forced.any(-1, keepdims=True), forced, True)
    return PlayerOutput(logits=jnp.where(choice, 0.0, LOSS_MASK_VALUE).astype(jnp.float32))


def random_punisher_leftmost(params, boards: jax.Array, key: jax.Array) -> PlayerOutput:
    """The PyTorch project's RandomPunisher (its ``find_best_move``): the leftmost column that
    wins now, else the leftmost that blocks the opponent's immediate win, else uniform over the
    legal columns. Its ties matter to a learner: a network trained against it learns to leave
    the threat it will not block (PyTorch's example-4 network wins 56% against it, 50% against
    :func:`random_punisher`, docs/results/same-start/ex4/diagnosis.md).

    Args and returns as :func:`random_punisher`'s.
    """
    del params, key
    forced = forced_columns(boards)
    leftmost = forced & (jnp.cumsum(forced, axis=-1) == 1)
    choice = jnp.where(forced.any(-1, keepdims=True), leftmost, True)
    return PlayerOutput(logits=jnp.where(choice, 0.0, LOSS_MASK_VALUE).astype(jnp.float32))


BUILTIN_PLAYERS: dict[str, Player] = {
    "random": random_player,
    "random-punisher": random_punisher,
    "random-punisher-leftmost": random_punisher_leftmost,
}
