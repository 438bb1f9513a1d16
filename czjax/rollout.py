"""Whole games between two players as one compiled ``lax.scan`` over the 42 plies.

Games ``[0, n_a_first)`` start with player A, the rest with player B (``n_a_first =
ceil(num_games / 2)``). So on every ply each player moves in a static half of the batch: A
moves in the first half on even plies and in the second half on odd plies. Each player
evaluates exactly the boards where it is to move (no wasted forward passes, no gathers), and
the scan body covers two plies at a time so that every slice is static.

Finished games keep stepping as no-ops under a ``done`` mask; a pair of plies in which every
game has already ended is skipped with ``lax.cond``.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
from jax import lax

from czjax import game
from czjax.players import Player, player_logits, sample_masked

PLIES = game.NUM_CELLS  # 42: the longest possible game


@chex.dataclass(frozen=True)
class Trajectory:
    """Every ply of a batch of games; arrays are ``(T=42, B, ...)``.

    positions: the mover's canonical position before the ply (packed; ``boards()`` decodes).
    actions: ``int8`` column played (0 where the ply did not happen).
    player: ``int8`` 0 if player A moved, 1 if player B.
    valid: ``bool`` the ply happened (the game was not over yet).
    """

    positions: game.Position
    actions: chex.Array
    player: chex.Array
    valid: chex.Array

    def boards(self) -> jax.Array:
        """The mover's canonical int8 boards before each ply, ``(T, B, 6, 7)``."""
        return game.unpack(self.positions)


@chex.dataclass(frozen=True)
class GameResults:
    """Per-game results, arrays ``(B,)``.

    outcome: ``int8`` +1 if player A won, -1 if player B won, 0 for a draw.
    length: ``int32`` number of plies played.
    a_first: ``bool`` player A made the first move.
    final: the position after the last ply (packed, canonical for the side to move next).
    """

    outcome: chex.Array
    length: chex.Array
    a_first: chex.Array
    final: game.Position


def first_player_split(num_games: int) -> int:
    """Number of games in which player A moves first (the first ones in the batch)."""
    return num_games - num_games // 2


def all_configurations(predicate: jax.Array, axis_name: str | None) -> jax.Array:
    """``predicate`` for every configuration of a vmapped scan (``axis_name``), else itself.

    Under ``vmap`` a ``lax.cond`` on a batched predicate becomes a select that runs both
    branches; reduced over the named axis with a collective, the predicate is unbatched and
    the cond stays a real branch (skipped when it holds for all configurations).
    """
    if axis_name is None:
        return predicate
    return lax.psum((~predicate).astype(jnp.int32), axis_name) == 0


@functools.partial(jax.jit, static_argnames=("player_a", "player_b", "num_games", "axis_name"))
def play_games(
    key: jax.Array,
    player_a: Player,
    params_a,
    player_b: Player,
    params_b,
    num_games: int,
    temperature_a=1.0,
    temperature_b=1.0,
    axis_name: str | None = None,
) -> tuple[Trajectory, GameResults]:
    """Play ``num_games`` whole games between two players; returns ``(trajectory, results)``.

    Players are pure functions ``(params, boards, key) -> logits`` (or ``(logits, values)``);
    they and ``num_games`` are static, parameters and temperatures are traced. The same key
    gives the same games. ``axis_name``: the vmapped axis of a scan, if any (see
    :func:`all_configurations`).
    """
    if num_games < 2:
        raise ValueError(f"num_games must be at least 2 (half of the games with each side first), got {num_games}")
    split = first_player_split(num_games)
    halves = (slice(0, split), slice(split, num_games))
    a_first = jnp.arange(num_games) < split

    def ply(carry, key, movers):
        """One ply; ``movers`` is ``(mover in first half, mover in second half)`` as 0/1 for A/B."""
        pos, done, outcome, length = carry
        boards = game.unpack(pos)  # only computed if a player reads the boards
        legal = game.position_legal_mask(pos)
        keys = jax.random.split(key, 3)
        logits, temps = [], []
        for half, mover in zip(halves, movers):
            player, params, temp = ((player_a, params_a, temperature_a), (player_b, params_b, temperature_b))[mover]
            out = player_logits(player(params, boards[half], keys[mover]))
            logits.append(out.astype(jnp.float32))
            temps.append(jnp.broadcast_to(jnp.asarray(temp, jnp.float32), (half.stop - half.start,)))
        action = sample_masked(keys[2], legal, jnp.concatenate(logits), jnp.concatenate(temps))
        # sample_masked only returns legal columns, so ``ended`` is a win or a full board.
        next_pos, won, ended = game.position_step(pos, action)
        mover_is_a = jnp.concatenate([jnp.full((h.stop - h.start,), m == 0) for h, m in zip(halves, movers)])
        mover_sign = jnp.where(mover_is_a, 1, -1).astype(jnp.int8)
        result = jnp.where(won, mover_sign, 0).astype(jnp.int8)
        active = ~done
        new_carry = (
            jax.tree.map(lambda n, o: jnp.where(active, n, o), next_pos, pos),
            done | ended,
            jnp.where(active, result, outcome),
            length + active.astype(jnp.int32),
        )
        record = (pos, jnp.where(active, action, 0).astype(jnp.int8), jnp.where(mover_is_a, 0, 1).astype(jnp.int8), active)
        return new_carry, record

    def two_plies(carry, keys):
        def play(carry):
            carry, rec0 = ply(carry, keys[0], (0, 1))
            carry, rec1 = ply(carry, keys[1], (1, 0))
            return carry, jax.tree.map(lambda a, b: jnp.stack([a, b]), rec0, rec1)

        def skip(carry):
            pos = carry[0]
            zeros = jnp.zeros((2, num_games), jnp.int8)
            player = jnp.stack([jnp.where(a_first, 0, 1), jnp.where(a_first, 1, 0)]).astype(jnp.int8)
            stacked = jax.tree.map(lambda x: jnp.stack([x, x]), pos)
            return carry, (stacked, zeros, player, jnp.zeros((2, num_games), bool))

        return lax.cond(all_configurations(carry[1].all(), axis_name), skip, play, carry)

    init = (
        game.new_positions(num_games),
        jnp.zeros((num_games,), bool),
        jnp.zeros((num_games,), jnp.int8),
        jnp.zeros((num_games,), jnp.int32),
    )
    keys = jax.random.split(key, (PLIES // 2, 2))
    (final, _, outcome, length), records = lax.scan(two_plies, init, keys)
    positions, actions, player, valid = jax.tree.map(lambda x: x.reshape((PLIES,) + x.shape[2:]), records)
    trajectory = Trajectory(positions=positions, actions=actions, player=player, valid=valid)
    results = GameResults(outcome=outcome, length=length, a_first=a_first, final=final)
    return trajectory, results


def player_plies(traj: Trajectory, num_games: int, player: int = 0) -> Trajectory:
    """The plies of one player (0 = A, 1 = B) as a static half of the trajectory, ``(21, B)``.

    A moves on even plies in the games it starts (the first ``ceil(B / 2)``) and on odd plies
    in the others; B the other way round. No gather: two strided slices.
    """
    split = first_player_split(num_games)
    first, second = (slice(0, None, 2), slice(1, None, 2))[:: 1 if player == 0 else -1]

    def take(x):
        return jnp.concatenate([x[first, :split], x[second, split:]], axis=1)

    return jax.tree.map(take, traj)
