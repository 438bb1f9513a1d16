"""Whole games between two players as one compiled ``lax.scan`` over the 42 plies.

Games ``[0, n_a_first)`` start with player A, the rest with player B (``n_a_first =
ceil(num_games / 2)``). So on every ply each player moves in a static half of the batch: A
moves in the first half on even plies and in the second half on odd plies. Each player sees
only the boards where it is to move (no gathers for that), and the scan body covers two
plies at a time so that every slice is static.

Finished games keep stepping as no-ops under a ``done`` mask; a pair of plies in which every
game has already ended is skipped with ``lax.cond`` where the platform skips them. An expensive
player is also run only on the games still going (:func:`evaluate_active`), which does gather
them.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from czjax import game, row_skipping
from czjax.players import Player, sample_masked_uniform
from czjax.row_skipping import all_configurations
from czjax.util import platforms
from czjax.util.devices import split as split_games
from czjax.util.pytree import pytree_dataclass
from czjax.util.words import from_words, to_words

PLIES = game.NUM_CELLS  # 42: the longest possible game


@pytree_dataclass(frozen=True)
class Trajectory:
    """Every ply of a batch of games; arrays are ``(T=42, B, ...)``.

    positions: the mover's canonical position before the ply (packed; ``boards()`` decodes).
    actions: ``int8`` column played (0 where the ply did not happen).
    player: ``int8`` 0 if player A moved, 1 if player B.
    valid: ``bool`` the ply happened (the game was not over yet).
    policy_targets: ``float (T, B, 7)``, the mover's policy target (a search's visit counts, say;
        ``softmax(logits)`` for a player without one), when the games were played with
        ``record_targets``; else None.
    values: ``float (T, B)``, the mover's value of its position (a search's root value; 0 for a
        player without a value), with ``record_targets``; else None.
    """

    positions: game.Position
    actions: chex.Array
    player: chex.Array
    valid: chex.Array
    policy_targets: chex.Array | None = None
    values: chex.Array | None = None

    def boards(self) -> jax.Array:
        """The mover's canonical int8 boards before each ply, ``(T, B, 6, 7)``."""
        return game.unpack(self.positions)


@pytree_dataclass(frozen=True)
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


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a match: its ``player``, a pure function ``(params, boards, key) ->
    PlayerOutput``; its ``params`` (None for a built-in player); the ``temperature`` it samples
    its moves at (0: the most likely legal column). A pytree whose player is static (part of the
    compiled program, as a ``jit`` static argument is) and whose parameters and temperature are
    traced (a new network or temperature does not compile again)."""

    player: Player
    params: Any = None
    temperature: Any = 1.0


jax.tree_util.register_dataclass(Side, data_fields=["params", "temperature"], meta_fields=["player"])


def first_player_split(num_games: int) -> int:
    """Number of games in which player A moves first (the first ones in the batch)."""
    return num_games - num_games // 2


def default_chunks(player: Player, params, boards_per_call: int) -> int:
    """Chunks for :func:`evaluate_active`: several for an expensive player on enough boards,
    else 1 (evaluate every board); see :func:`czjax.row_skipping.rollout_chunks`."""
    return row_skipping.rollout_chunks(row_skipping.flops_per_board(player, params), boards_per_call)


def _logits_and_target(player: Player, params, boards, key) -> jax.Array:
    """``float (B, 15)``: the player's logits, its policy target (``softmax(logits)`` when it
    gives none) and its value (0 without one), side by side so the compaction below moves them
    as one array."""
    out = player(params, boards, key)
    logits = out.logits.astype(jnp.float32)
    target = jax.nn.softmax(logits) if out.policy_target is None else out.policy_target.astype(jnp.float32)
    value = jnp.zeros(logits.shape[:1], jnp.float32) if out.value is None else out.value.astype(jnp.float32)
    return jnp.concatenate([logits, target, value[:, None]], axis=-1)


def evaluate_active(
    player: Player,
    params,
    boards: jax.Array,
    key,
    active: jax.Array,
    num_chunks: int,
    axis_name=None,
    with_targets: bool = False,
) -> jax.Array:
    """The player's float32 logits ``(B, 7)`` on the ``active`` boards (``(B, 14)``: logits and
    policy targets and value, with ``with_targets``); the rows of the other boards are not to be used
    (zeros, or the player's output when every board is evaluated).

    Games end at different plies, and a fixed-shape rollout would otherwise run the model on
    every finished game until the longest one ends: the active boards are evaluated in
    ``num_chunks`` static chunks, idle chunks skipped (:func:`czjax.row_skipping.over_valid_chunks`).
    ``num_chunks <= 1`` evaluates every board.
    """

    def run_player(boards, key):
        if with_targets:
            return _logits_and_target(player, params, boards, key)
        return player(params, boards, key).logits.astype(jnp.float32)

    if num_chunks <= 1:
        return run_player(boards, key)

    def run(index, chunk_boards):
        return run_player(chunk_boards, jax.random.fold_in(key, index))

    outputs, destination = row_skipping.over_valid_chunks(run, boards, active, num_chunks, axis_name)
    return outputs.reshape(-1, outputs.shape[-1])[destination]


class _Match(NamedTuple):
    """What every ply of :func:`play_games` reads that does not change during the games."""

    sides: tuple[Side, Side]  # A, B
    halves: tuple[slice, slice]  # the games A starts, the games B starts
    chunks: list[int]  # per player: how evaluate_active splits its boards
    mover_is_a: dict  # movers (0, 1) or (1, 0) -> whether A moves, per game
    sample_plies: int | None
    axis_name: str | None
    record_targets: bool
    # Both halves' movers evaluated as one vmapped call (``merged_halves``, :func:`_match`): per
    # movers (0, 1) or (1, 0), the two movers' parameters stacked once a batch (stacked every ply,
    # they were a GPU's ~20 launches a ply pair); None where each half's mover is its own call.
    stacked_params: dict | None
    packed_records: bool  # each ply's records as one array (``packed_records``, :func:`pack_words`)

    @property
    def merged(self) -> bool:
        return self.stacked_params is not None

    @property
    def a_first(self) -> jax.Array:
        """``bool (B,)``: A made the game's first move."""
        return self.mover_is_a[(0, 1)]


def _mover_outputs(match: _Match, boards, keys, done, movers) -> tuple[jax.Array, jax.Array]:
    """The movers' outputs and temperatures for every game: each half's mover on its boards."""
    temps = [
        jnp.broadcast_to(jnp.asarray(match.sides[mover].temperature, jnp.float32), (half.stop - half.start,))
        for half, mover in zip(match.halves, movers)
    ]
    if match.merged:
        return _merged_outputs(match, boards, keys, done, movers), jnp.concatenate(temps)
    outputs = []
    for half, mover in zip(match.halves, movers):
        side = match.sides[mover]
        outputs.append(
            evaluate_active(
                side.player,
                side.params,
                boards[half],
                keys[mover],
                ~done[half],
                match.chunks[mover],
                match.axis_name,
                match.record_targets,
            )
        )
    return jnp.concatenate(outputs), jnp.concatenate(temps)


HALVES_AXIS = "halves"  # the axis of a merged call's two halves (:func:`_merged_outputs`)


def _merged_outputs(match: _Match, boards, keys, done, movers) -> jax.Array:
    """Both halves' movers, one player with each half's parameters and key, as one call vmapped
    over the two halves: the same outputs as two calls, in half the programs a ply. Compacted,
    each half's running games go first in its chunks as they would alone, and a chunk is skipped
    when it is idle in both halves (and in every configuration of a vmapped scan)."""
    player = match.sides[0].player
    assert match.stacked_params is not None  # merged
    params = match.stacked_params[movers]
    halves = boards.reshape((2, -1) + boards.shape[1:])
    active = ~done.reshape(2, -1)
    axis_name = HALVES_AXIS if match.axis_name is None else (match.axis_name, HALVES_AXIS)
    evaluate = functools.partial(
        evaluate_active, player, num_chunks=match.chunks[0], axis_name=axis_name, with_targets=match.record_targets
    )
    outputs = jax.vmap(evaluate, axis_name=HALVES_AXIS)(params, halves, jnp.stack([keys[m] for m in movers]), active)
    return outputs.reshape((-1,) + outputs.shape[2:])


def _ply(match: _Match, carry, randomness, movers, index):
    """One ply, the game's ``index``-th; ``movers`` is ``(mover in first half, mover in second
    half)`` as 0/1 for A/B; ``randomness`` is ``(player keys (2,), uniforms (num_games,))``."""
    pos, done, outcome, length = carry
    keys, uniform = randomness
    boards = game.unpack(pos)  # only computed if a player reads the boards
    legal = game.position_legal_mask(pos)
    outputs, temps = _mover_outputs(match, boards, keys, done, movers)
    if match.sample_plies is not None:
        temps = jnp.where(index < match.sample_plies, temps, 0.0)
    action = sample_masked_uniform(uniform, legal, outputs[:, : game.COLS], temps)
    active = ~done
    # Finished games play column -1, which position_step treats as an illegal move: their
    # position stays as it is. Sampling only returns legal columns, so for the games still
    # running ``ended`` is a win or a full board.
    with jax.named_scope("rules"):
        next_pos, won, ended = game.position_step(pos, jnp.where(active, action, -1))
    outcome = jnp.where(won, jnp.where(match.mover_is_a[movers], 1, -1).astype(jnp.int8), outcome)
    new_carry = (next_pos, done | ended, outcome, length + active.astype(jnp.int32))
    record: tuple = (pos, jnp.where(active, action, 0).astype(jnp.int8), active)
    if match.record_targets:
        record += (
            jnp.where(active[:, None], outputs[:, game.COLS : 2 * game.COLS], 0.0),
            jnp.where(active, outputs[:, 2 * game.COLS], 0.0),
        )
    return new_carry, record


def _two_plies(match: _Match, num_games: int, skip_finished: bool, carry, randomness):
    """A pair of plies (A then B in the first half of the games, B then A in the second); a pair
    in which every game has ended is skipped with ``lax.cond`` when ``skip_finished``."""
    keys, uniforms, pair = randomness

    def play(carry):
        carry, rec0 = _ply(match, carry, (keys[0], uniforms[0]), (0, 1), 2 * pair)
        carry, rec1 = _ply(match, carry, (keys[1], uniforms[1]), (1, 0), 2 * pair + 1)
        return carry, _pair_records(match, rec0, rec1)

    def skip(carry):
        idle = _idle_record(carry[0], num_games, match.record_targets)
        return carry, _pair_records(match, idle, idle)

    if not skip_finished:
        return play(carry)
    return lax.cond(all_configurations(carry[1].all(), match.axis_name), skip, play, carry)


def _pair_records(match: _Match, first, second):
    """A pair of plies' records as the scan collects them, stacked: each ply's packed into one
    array of words where the platform packs them (``packed_records``, :func:`pack_words`)."""
    if match.packed_records:
        first, second = pack_words(first), pack_words(second)
    return jax.tree.map(lambda a, b: jnp.stack([a, b]), first, second)


def pack_words(record) -> jax.Array:
    """A pytree of per-game arrays (leading axis the games) as ``uint32`` words ``(games, W)``:
    32-bit leaves bit for bit, narrower integers and booleans widened. A ply's record is then one
    array for the scan to collect: on a GPU each array a loop step outputs is a kernel that
    writes it (a ply's record is seven arrays, nine with the targets); on a CPU packing costs more
    than it saves (random games at 16,384 a batch 15% slower)."""
    return jnp.concatenate([to_words(x.reshape(x.shape[0], -1)) for x in jax.tree.leaves(record)], axis=1)


def unpack_words(words: jax.Array, like):
    """:func:`pack_words`'s inverse: ``words (..., games, W)`` as the pytree ``like`` (one record's
    shapes and dtypes), each leaf ``(..., games, *its trailing shape)``."""
    leaves, treedef = jax.tree.flatten(like)
    sizes = [int(np.prod(x.shape[1:], dtype=int)) for x in leaves]
    out, start = [], 0
    for x, size in zip(leaves, sizes):
        part = words[..., start : start + size]  # (..., games, size)
        start += size
        out.append(from_words(part, x.dtype).reshape(words.shape[:-1] + tuple(x.shape[1:])))
    return jax.tree.unflatten(treedef, out)


def _start(key, num_games: int, openings: int, devices: int) -> tuple:
    """``(position, done, outcome, length)`` of every game before its first move."""
    start = (
        game.new_positions(num_games)
        if not openings
        else draw_openings(jax.random.fold_in(key, OPENINGS_STREAM), num_games, openings)
    )
    init = (start, jnp.zeros((num_games,), bool), jnp.zeros((num_games,), jnp.int8), jnp.zeros((num_games,), jnp.int32))
    return jax.tree.map(lambda x: split_games(x, devices), init)


def _match(
    sides: tuple[Side, Side],
    num_games: int,
    platform: str,
    chunks: int | None,
    sample_plies: int | None,
    axis_name: str | None,
    record_targets: bool,
) -> _Match:
    """What every ply of a batch of ``num_games`` reads (see :func:`play_games`'s options).

    Where the ``platform`` merges halves (``merged_halves``, :mod:`czjax.util.platforms`) and both
    sides are the same player (self-play, with its frozen copy's parameters or its own), the two
    halves' movers are one call vmapped over the halves, compacted as each half would be. On a
    GPU each call is a program of its own, a search a chain of them, so one call a ply halves the
    programs of a batch (and a search's simulation steps); on a CPU each half compacted alone
    skips a chunk as soon as that half's games in it have ended. The same games either way."""
    split = first_player_split(num_games)
    a_first = jnp.arange(num_games) < split
    chunks_of = [default_chunks(s.player, s.params, num_games - split) if chunks is None else chunks for s in sides]
    halves = (slice(0, split), slice(split, num_games))
    mover_is_a = {(0, 1): a_first, (1, 0): ~a_first}
    choices = platforms.choices_for(platform)
    merged = (
        choices.merged_halves
        and sides[0].player is sides[1].player
        and 2 * split == num_games
        and chunks_of[0] == chunks_of[1]
    )
    stacked = (
        {movers: jax.tree.map(lambda *p: jnp.stack(p), *(sides[m].params for m in movers)) for movers in mover_is_a}
        if merged
        else None
    )
    return _Match(
        sides, halves, chunks_of, mover_is_a, sample_plies, axis_name, record_targets, stacked, choices.packed_records
    )


# play_games's size and options: each shapes the compiled program (as the sides' players do)
_STATIC_ARGS = (
    "num_games",
    "axis_name",
    "chunks",
    "devices",
    "record_targets",
    "sample_plies",
    "unroll",
    "openings",
    "skip_finished",
    "platform",
)


@functools.partial(jax.jit, static_argnames=_STATIC_ARGS)
def play_games(
    key: jax.Array,
    a: Side,
    b: Side,
    num_games: int,
    *,
    axis_name: str | None = None,
    chunks: int | None = None,
    devices: int = 1,
    record_targets: bool = False,
    sample_plies: int | None = None,
    unroll: int = 1,
    openings: int = 0,
    skip_finished: bool | None = None,
    platform: str | None = None,
) -> tuple[Trajectory, GameResults]:
    """Play whole games between two sides, as one compiled loop over the plies.

    Games ``[0, ceil(num_games / 2))`` start with side A, the rest with side B. The sides'
    players and ``num_games`` are static, their parameters and temperatures traced. The same
    key gives the same games on any number of ``devices`` and any ``chunks``.

    Args:
        key: the games' random stream.
        a, b: the two sides (:class:`Side`: player, parameters, temperature).
        num_games: games in the batch (static).
        axis_name: the vmapped axis of a scan, if any (:func:`all_configurations`).
        chunks: how :func:`evaluate_active` splits each player's boards (default
            :func:`default_chunks`).
        devices: split the games over this many devices (:mod:`czjax.util.devices`).
        record_targets: keep every mover's policy target and value in the trajectory.
        sample_plies: sample at the temperatures on the first ``sample_plies`` plies only, the
            most likely move after (AlphaZero's schedule); None samples throughout.
        unroll: pairs of plies per step of the compiled loop (fewer steps, each a host round
            trip on a GPU; the same games).
        openings: start each game from a position drawn uniformly from every distinct position
            0 to ``openings`` plies deep (:func:`opening_positions`; AlphaZero.jl issue #217's
            random starts), its side to move the game's first mover; 0: the empty board.
        skip_finished: skip a pair of plies in which every game has ended (``lax.cond``); False
            plays it under the ``done`` mask (the same records, no data-dependent branch, whose
            predicate a GPU sends to the host at every step); None: the platform's choice
            (``skip_finished_pairs``, :mod:`czjax.util.platforms`).
        platform: the platform the program is built for (None: the one being built for, else this
            machine's): its choices (:mod:`czjax.util.platforms`) make the program; the same games.

    Returns:
        ``(trajectory, results)``: :class:`Trajectory`, every ply as ``(42, num_games, ...)``
        arrays with masks, and :class:`GameResults`, ``(num_games,)`` arrays: ``outcome`` (+1 A
        won, -1 B won, 0 draw), ``length`` in plies, ``a_first``, the final position.
    """
    if num_games < 2:
        raise ValueError(f"num_games must be at least 2 (half of the games with each side first), got {num_games}")
    platform = platforms.checked(platform) if platform else platforms.target()
    if skip_finished is None:
        skip_finished = platforms.choices_for(platform).skip_finished_pairs
    with platforms.building_for(platform):  # what the players build (a search's descent) is the platform's
        match = _match((a, b), num_games, platform, chunks, sample_plies, axis_name, record_targets)
        return _play(match, key, num_games, openings, devices, skip_finished, unroll)


def _play(match: _Match, key, num_games: int, openings: int, devices: int, skip_finished: bool, unroll: int):
    """:func:`play_games`'s loop over the plies, its options read."""
    init = _start(key, num_games, openings, devices)
    player_keys, uniforms = game_randomness(key, num_games)
    randomness = (player_keys, split_games(uniforms, devices, axis=2), jnp.arange(PLIES // 2))
    step = functools.partial(_two_plies, match, num_games, skip_finished)
    (final, _, outcome, length), collected = lax.scan(step, init, randomness, unroll=unroll)
    records = jax.tree.map(lambda x: x.reshape((PLIES,) + x.shape[2:]), collected)  # pairs of plies -> plies
    if match.packed_records:
        like = jax.eval_shape(lambda pos: _idle_record(pos, num_games, match.record_targets), init[0])
        records = unpack_words(records, like)
    results = GameResults(outcome=outcome, length=length, a_first=match.a_first, final=final)
    return assemble(records, match.a_first), results


OPENINGS_STREAM = 0x09E1  # folded into a batch's key for its starting positions (a stream of its own)


@functools.cache
def opening_positions(max_plies: int) -> np.ndarray:
    """Every distinct position reachable in 0 to ``max_plies`` plies from the empty board,
    int8 boards ``(K, 6, 7)`` (NumPy: a constant of the compiled programs), in a fixed order (by
    depth, then by the move sequence that first reaches it). Two move orders that reach the same
    stones count once, so a uniform draw from this table is
    uniform over positions, not over move sequences (1 + 7 + 49 + 238 positions for
    ``max_plies=3``). A position 6 plies deep or less cannot be won, so none is terminal."""
    if not 0 <= max_plies <= 6:
        raise ValueError(f"openings must be between 0 and 6 plies, got {max_plies}")
    seen: dict[bytes, np.ndarray] = {}
    frontier = [np.zeros((game.ROWS, game.COLS), np.int8)]
    for depth in range(max_plies + 1):
        next_frontier: list[np.ndarray] = []
        for board in frontier:
            board = np.asarray(board, np.int8)
            if board.tobytes() in seen:
                continue
            seen[board.tobytes()] = board
            if depth < max_plies:
                next_frontier.extend(game.apply_moves([col], board) for col in range(game.COLS) if board[0, col] == 0)
        frontier = next_frontier
    return np.stack(list(seen.values()))


def draw_openings(key, num_games: int, max_plies: int) -> game.Position:
    """A starting position per game, uniform over :func:`opening_positions` (``max_plies``)."""
    table = opening_positions(max_plies)
    index = jax.random.randint(key, (num_games,), 0, table.shape[0])
    return game.pack(jnp.asarray(table)[index])


def _idle_record(pos: game.Position, num_games: int, record_targets: bool):
    """The record of a ply after every game has ended: nothing happened."""
    record: tuple = (pos, jnp.zeros((num_games,), jnp.int8), jnp.zeros((num_games,), bool))
    if record_targets:
        record += (jnp.zeros((num_games, game.COLS), jnp.float32), jnp.zeros((num_games,), jnp.float32))
    return record


def game_randomness(key, num_games: int):
    """All of a batch's randomness, drawn before the game rather than ply by ply (on XLA's CPU
    backend every threefry draw is a rolled loop of small ops): a key per ply and player, which
    XLA drops when the players ignore them, and a uniform per ply and game for sampling; both
    with a leading axis of pairs of plies."""
    player_key, sample_key = jax.random.split(key)
    return jax.random.split(player_key, (PLIES // 2, 2, 2)), jax.random.uniform(sample_key, (PLIES // 2, 2, num_games))


def assemble(records, a_first: jax.Array) -> Trajectory:
    """The trajectory from every ply's records ``(positions, actions, valid[, policy targets,
    values])``, each ``(42, games, ...)``."""
    positions, actions, valid, *targets = records
    # A moves on even plies of the games it starts and on odd plies of the others
    player = ((jnp.arange(PLIES)[:, None] + (~a_first)) % 2).astype(jnp.int8)
    player = jnp.broadcast_to(player, (PLIES, a_first.shape[0]))
    policy_targets, values = targets if targets else (None, None)
    return Trajectory(
        positions=positions, actions=actions, player=player, valid=valid, policy_targets=policy_targets, values=values
    )


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
