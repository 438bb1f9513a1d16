"""AlphaZero.jl's minimax baseline as a batched player: ``MinMax.Player(depth, amplify_rewards=true,
tau=0)`` (its ``src/minmax.jl``) with its Connect Four heuristic (``heuristic_value`` in
``games/connect-four/game.jl``), the yardstick of its Pons benchmark.

* A move that wins is worth ``+inf`` to its mover (``amplify_rewards``), a draw 0; after
  ``depth`` plies a position is worth its heuristic for the side to move there.
* The heuristic: for every line of four cells on the board that holds no opponent stone,
  ``0.1 ** (3 - n)`` with ``n`` the side's stones in it, summed; the side to move's sum minus the
  opponent's. czjax counts it in units of ``0.001`` as integers (a line is worth 1, 10, 100 or
  1000), so equal values are equal exactly; AlphaZero.jl sums float64 in the order of its
  alignments, where two mathematically equal values can differ in the last bit.
* ``think`` spreads its policy over the tied best moves (over the winning ones when there are
  any; uniformly over all when every move loses), and the benchmark plays ``argmax(pi)``, the
  first of them: ``ties="first"``. ``ties="random"`` plays one of them uniformly, for games.

Every line of play is expanded to ``depth`` plies (``7 ** depth`` leaves a position, finished
games kept as no-ops under masks), in chunks of positions so that memory stays bounded.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from czjax import game
from czjax.players.base import LOSS_MASK_VALUE, Player, PlayerOutput
from czjax.util.options import make_settings
from czjax.util.specs import PlayerSpec

WIN = 1 << 30  # a won line (+inf); no heuristic comes near it (at most 69 lines x 1,000)
ILLEGAL = -(1 << 31) + 1  # below every legal move's value, a loss included
TIES = ("first", "random")
LEAVES_PER_CHUNK = 1 << 18  # leaves expanded at once: positions per chunk = this // 7 ** depth


def alignments() -> np.ndarray:
    """``int (69, 4)``: the flat cells (``row * 7 + col``, row 0 on top) of every line of four."""
    lines = []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(game.ROWS):
            for c in range(game.COLS):
                cells = [(r + i * dr, c + i * dc) for i in range(4)]
                if all(0 <= rr < game.ROWS and 0 <= cc < game.COLS for rr, cc in cells):
                    lines.append([rr * game.COLS + cc for rr, cc in cells])
    return np.asarray(lines, np.int32)


def _line_matrix() -> np.ndarray:
    """``float32 (42, 69)``: 1 where a cell belongs to a line."""
    lines = alignments()
    matrix = np.zeros((game.NUM_CELLS, len(lines)), np.float32)
    for j, cells in enumerate(lines):
        matrix[cells, j] = 1.0
    return matrix


LINES = _line_matrix()


def heuristic(boards: jax.Array) -> jax.Array:
    """``int32 (...)``: AlphaZero.jl's ``heuristic_value`` of int8 ``boards (..., 6, 7)`` for the
    side to move, in units of 0.001."""
    flat = boards.reshape(boards.shape[:-2] + (game.NUM_CELLS,))
    lines = jnp.asarray(LINES)
    mine = (flat == 1).astype(jnp.float32) @ lines  # stones per line, exact small integers
    theirs = (flat == -1).astype(jnp.float32) @ lines
    worth = jnp.asarray([1.0, 10.0, 100.0, 1000.0, 10000.0], jnp.float32)
    own = jnp.where(theirs == 0, worth[mine.astype(jnp.int32)], 0.0).sum(-1)
    other = jnp.where(mine == 0, worth[theirs.astype(jnp.int32)], 0.0).sum(-1)
    return (own - other).astype(jnp.int32)  # sums below 2 ** 24: exact in float32


# Every line of four as (window, shift, start mask) over the packed words (czjax.game's layout: bit
# 8 r + c of a window of four rows): horizontal lines in rows 0-3 of ``lo`` and rows 4-5 (the last
# two of ``hi``); vertical and both diagonals starting on the first row of each window (rows 0-3,
# 1-4, 2-5). 24 + 21 + 12 + 12 = 69 lines, each once.
_FIRST_ROW, _LEFT, _RIGHT = 0x7F, 0x0F, 0x78
_ROWS_0_3 = sum(_LEFT << (8 * r) for r in range(4))
_ROWS_2_3 = sum(_LEFT << (8 * r) for r in (2, 3))
LINE_FAMILIES = (
    ("lo", 1, _ROWS_0_3),
    ("hi", 1, _ROWS_2_3),
    *(
        (window, shift, start)
        for window in ("lo", "mid", "hi")
        for shift, start in ((8, _FIRST_ROW), (9, _LEFT), (7, _RIGHT))
    ),
)


def _windows(lo: jax.Array, hi: jax.Array) -> dict[str, jax.Array]:
    return {"lo": lo, "mid": (lo >> 8) | (hi << 8), "hi": hi}


def _side_value(mine: dict[str, jax.Array], theirs: dict[str, jax.Array]) -> jax.Array:
    """``sum over lines free of ``theirs`` of 10 ** (stones of ``mine`` in the line)``, int32."""
    total = jnp.zeros(mine["lo"].shape, jnp.int32)
    for window, shift, start in LINE_FAMILIES:
        m, t = mine[window], theirs[window]
        a, b, c, d = (m >> (k * shift) for k in range(4))
        free = jnp.uint32(start) & ~(t | (t >> shift) | (t >> 2 * shift) | (t >> 3 * shift))
        one_ab, two_ab, one_cd, two_cd = a ^ b, a & b, c ^ d, c & d
        none_ab, none_cd = ~(a | b), ~(c | d)
        exactly = (
            none_ab & none_cd,
            (one_ab & none_cd) | (one_cd & none_ab),
            (two_ab & none_cd) | (two_cd & none_ab) | (one_ab & one_cd),
            (two_ab & one_cd) | (two_cd & one_ab),
            two_ab & two_cd,
        )
        for n, lines in enumerate(exactly):
            total = total + 10**n * jax.lax.population_count(free & lines).astype(jnp.int32)
    return total


def packed_heuristic(pos: game.Position) -> jax.Array:
    """:func:`heuristic` of packed positions, with bit operations on the position's words."""
    mine, theirs = _windows(pos.mine_lo, pos.mine_hi), _windows(pos.theirs_lo, pos.theirs_hi)
    return _side_value(mine, theirs) - _side_value(theirs, mine)


def _every_move(pos: game.Position) -> tuple[game.Position, jax.Array, jax.Array, jax.Array]:
    """Each position with each column played: ``(next (..., 7), won, done, legal)``."""
    legal = game.position_legal_mask(pos)
    spread = jax.tree.map(lambda x: jnp.broadcast_to(x[..., None], x.shape + (game.COLS,)), pos)
    cols = jnp.broadcast_to(jnp.arange(game.COLS), legal.shape)
    nxt, won, done = game.position_step(spread, cols)
    return nxt, won, done, legal


def move_values(pos: game.Position, depth: int) -> jax.Array:
    """``int32 (..., 7)``: each column's minimax value for the side to move, ``depth`` plies deep
    (:data:`WIN` for a win, ``-WIN`` for a forced loss, :data:`ILLEGAL` for a full column)."""
    nxt, won, done, legal = _every_move(pos)
    if depth == 1:
        below = packed_heuristic(nxt)
    else:
        below = move_values(nxt, depth - 1).max(-1)
    value = jnp.where(won, WIN, jnp.where(done, 0, -below))
    return jnp.where(legal, value, ILLEGAL)


def best_moves(values: jax.Array) -> jax.Array:
    """``bool (..., 7)``: the support of ``think``'s policy: the winning columns if any, else the
    best valued ones, or every legal column when all of them lose."""
    legal = values > ILLEGAL
    winning = values == WIN
    all_lose = ~((values > -WIN) & legal).any(-1, keepdims=True)
    best = legal & (values == values.max(-1, keepdims=True))
    return jnp.where(winning.any(-1, keepdims=True), winning, jnp.where(all_lose, legal, best))


@dataclasses.dataclass(frozen=True)
class Minimax:
    """AlphaZero.jl's minimax player: ``depth`` plies, then the heuristic; ``ties``: ``first``
    (the lowest tied column, as its benchmark plays) or ``random`` (uniform among them)."""

    depth: int = 5
    ties: str = "first"
    description: ClassVar[str] = "AlphaZero.jl's depth-limited minimax with its Connect Four heuristic"

    def check(self) -> None:
        if not 1 <= self.depth <= 8:
            raise ValueError(f"minimax depth must be 1 to 8 (7 ** depth lines a position), got {self.depth}")
        if self.ties not in TIES:
            raise ValueError(f"minimax ties must be one of {', '.join(TIES)}, got {self.ties!r}")

    @property
    def evaluations_per_move(self) -> int:
        """Heuristic evaluations behind one move."""
        return game.COLS**self.depth

    def player(self) -> Player:
        """The player: logits 0 on the columns it may play, ``-1e9`` elsewhere (it needs no
        parameters and no key)."""
        return _minimax_player(self.depth, self.ties)


NAME = "minimax"  # its name in player specs: minimax[:OPTIONS]


def from_spec(spec: PlayerSpec) -> Minimax:
    """The settings ``minimax[:OPTIONS]`` gives (``minimax:depth=5,ties=random``; ``.player()`` is
    the player); one-line ``ValueError`` for another name, a bad option or a player after the
    options."""
    if spec.name != NAME or spec.base is not None:
        raise ValueError(
            f"{str(spec)!r}: minimax takes options only, as in minimax:depth=5,ties=random (it searches no player)"
        )
    return make_settings(NAME, Minimax, spec.options)


def minimax_choice(boards: jax.Array, depth: int, ties: str) -> tuple[jax.Array, jax.Array]:
    """``(playable bool (B, 7), values int32 (B, 7))`` for int8 ``boards (B, 6, 7)``, computed
    in chunks of positions; ``playable`` is one column for ``ties="first"``."""
    batch = boards.shape[0]
    chunk = max(1, min(batch, LEAVES_PER_CHUNK // game.COLS**depth))
    padded = -(-batch // chunk) * chunk
    boards = jnp.concatenate([boards, jnp.zeros((padded - batch,) + boards.shape[1:], boards.dtype)])
    values = jax.lax.map(lambda b: move_values(game.pack(b), depth), boards.reshape((-1, chunk) + boards.shape[1:]))
    values = values.reshape((padded, game.COLS))[:batch]
    playable = best_moves(values)
    if ties == "first":
        playable = jax.nn.one_hot(jnp.argmax(playable, -1), game.COLS, dtype=bool)
    return playable, values


_PLAYERS: dict[tuple[int, str], Player] = {}


def _minimax_player(depth: int, ties: str) -> Player:
    """One function per setting, so that a jitted caller compiles it once."""
    if (depth, ties) not in _PLAYERS:

        def minimax_player(params: Any, boards: jax.Array, key: jax.Array) -> PlayerOutput:
            del params, key
            playable, _ = minimax_choice(boards.reshape((-1,) + boards.shape[-2:]), depth, ties)
            logits = jnp.where(playable, 0.0, LOSS_MASK_VALUE).astype(jnp.float32)
            return PlayerOutput(logits=logits.reshape(boards.shape[:-2] + (game.COLS,)))

        minimax_player.__name__ = f"minimax_depth{depth}_{ties}"
        _PLAYERS[depth, ties] = minimax_player
    return _PLAYERS[depth, ties]
