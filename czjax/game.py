"""Connect 4 rules on batches of boards, compatible with ``jax.jit`` and ``jax.vmap``.

Conventions (docs/DESIGN.md): a board is ``int8 (..., 6, 7)``, row 0 is the top row, ``+1`` is a
piece of the side to move, ``-1`` of the opponent, ``0`` empty. After every move the board is
negated, so the side to move is always ``+1``. Columns are ``0..6``.

Two representations share one set of rules:

* ``int8`` boards, the public format that players, trajectories and files use;
* :class:`Position`, a packed bitboard that the compiled rollouts carry from ply to ply. Every
  field is a ``uint32`` array of the batch shape, so each rule is a handful of elementwise
  integer ops over contiguous batch lanes, which XLA vectorises well on CPU and GPU (an
  ``int8 (B, 6, 7)`` win check with slicing was 3x slower on CPU).

Bit layout of a :class:`Position` side: cell (row ``r``, column ``c``) is bit ``8*r + c`` of
``lo`` for rows 0-3 and bit ``8*(r-2) + c`` of ``hi`` for rows 2-5 (rows 2 and 3 live in both
words). Bit 7 of every byte is an always-empty guard, so shifting by 1, 7, 8 or 9 never joins
two cells that are not neighbours on the board. Every line of four fits in one of the windows
rows 0-3 (``lo``), rows 2-5 (``hi``) or rows 1-4 (derived from both), so a win check is
Pascal Pons' shift-and test on three 32-bit words. ``heights`` holds 3 bits per column: how
many pieces it has.

Illegal moves inside ``jit``: :func:`step` and :func:`position_step` never write into a full
or out-of-range column. The position is returned unchanged (not negated), ``won`` is False and
``done`` is True: the game ends with the mover forfeiting it, so a corrupt board can never be
produced or played on. (:func:`czjax.rollout.play_games` never plays one: its sampling is
masked.) Host-side callers get a ``ValueError`` instead (:func:`step` on concrete arrays,
:func:`apply_moves`, :func:`from_moves`).
"""

from __future__ import annotations

from collections.abc import Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np

from czjax.util.pytree import pytree_dataclass

ROWS = 6
COLS = 7
NUM_CELLS = ROWS * COLS

_U32 = jnp.uint32
_FULL_HEIGHTS = sum(ROWS << (3 * c) for c in range(COLS))


@pytree_dataclass(frozen=True)
class Position:
    """A batch of canonical positions as packed bitboards (see the module docstring).

    ``mine_*`` are the pieces of the side to move, ``theirs_*`` the opponent's. All fields are
    ``uint32`` arrays of the same batch shape.
    """

    mine_lo: chex.Array
    mine_hi: chex.Array
    theirs_lo: chex.Array
    theirs_hi: chex.Array
    heights: chex.Array


# ---------------------------------------------------------------------------------------------
# Input checks (trace time: shapes and dtypes are static, so these work inside jit too)


def _check_boards(boards) -> jax.Array:
    dtype = getattr(boards, "dtype", None)
    shape = getattr(boards, "shape", None)
    if shape is None or dtype is None:
        raise TypeError(f"boards must be an int8 array of shape (..., 6, 7), got {type(boards).__name__}")
    if tuple(shape[-2:]) != (ROWS, COLS):
        raise ValueError(f"boards must have shape (..., 6, 7), got {tuple(shape)}")
    if dtype != jnp.int8:
        raise TypeError(f"boards must have dtype int8, got {dtype}")
    if not isinstance(boards, jax.core.Tracer):
        values = np.asarray(boards)
        if values.size and (values.min() < -1 or values.max() > 1):
            raise ValueError("boards may only hold -1, 0 and +1")
    return jnp.asarray(boards)


def _check_cols(cols, batch_shape) -> jax.Array:
    dtype = getattr(cols, "dtype", None)
    if dtype is not None and not jnp.issubdtype(dtype, jnp.integer):
        raise TypeError(f"cols must be integers, got dtype {dtype}")
    if isinstance(cols, (float, bool)):
        raise TypeError(f"cols must be integers, got {type(cols).__name__}")
    cols = jnp.asarray(cols)
    if cols.shape != tuple(batch_shape):
        raise ValueError(f"cols must have shape {tuple(batch_shape)} (one column per board), got {cols.shape}")
    if not isinstance(cols, jax.core.Tracer):
        values = np.asarray(cols)
        if values.size and (values.min() < 0 or values.max() >= COLS):
            raise ValueError(f"columns must be in 0..6, got {values.min()}..{values.max()}")
    return cols.astype(jnp.int32)


# ---------------------------------------------------------------------------------------------
# Packed positions: the rules


def new_positions(n: int) -> Position:
    """``n`` empty positions."""
    zero = jnp.zeros((n,), _U32)
    return Position(mine_lo=zero, mine_hi=zero, theirs_lo=zero, theirs_hi=zero, heights=zero)


def _has_four_window(x: jax.Array) -> jax.Array:
    """Nonzero where a 4-row window word holds four in a row (Pons' shift-and test)."""
    found = jnp.zeros_like(x)
    for shift in (1, 7, 8, 9):  # horizontal, anti-diagonal, vertical, diagonal
        pairs = x & (x >> shift)
        found = found | (pairs & (pairs >> (2 * shift)))
    return found


def has_four(lo: jax.Array, hi: jax.Array) -> jax.Array:
    """True where the side whose pieces are ``(lo, hi)`` has four in a row."""
    mid = (lo >> 8) | (hi << 8)  # rows 1-4
    return (_has_four_window(lo) | _has_four_window(mid) | _has_four_window(hi)) != 0


def cell_bits(row: jax.Array, col: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The ``(lo, hi)`` bit masks of cell (row, col); row 0 is the top. Zero off the board."""
    on_board = (row >= 0) & (row < ROWS) & (col >= 0) & (col < COLS)
    lo_shift = jnp.clip(8 * row + col, 0, 31).astype(_U32)
    hi_shift = jnp.clip(8 * (row - 2) + col, 0, 31).astype(_U32)
    lo = jnp.where(on_board & (row <= 3), _U32(1) << lo_shift, _U32(0))
    hi = jnp.where(on_board & (row >= 2), _U32(1) << hi_shift, _U32(0))
    return lo, hi


def column_heights(pos: Position) -> jax.Array:
    """Pieces in each column, ``int32 (..., 7)``."""
    shifts = 3 * jnp.arange(COLS, dtype=_U32)
    return ((pos.heights[..., None] >> shifts) & 7).astype(jnp.int32)


def position_legal_mask(pos: Position) -> jax.Array:
    """``bool (..., 7)``: True where the column is not full."""
    return column_heights(pos) < ROWS


def position_step(pos: Position, cols: jax.Array) -> tuple[Position, jax.Array, jax.Array]:
    """Drop a piece of the side to move in ``cols`` (int, batch shape).

    Returns ``(next_position, won, done)``: the next player's canonical position, whether the
    mover completed four in a row, whether the game ended (win, full board, or an illegal
    column, which leaves the position unchanged; see the module docstring).
    """
    cols = cols.astype(jnp.int32)
    in_range = (cols >= 0) & (cols < COLS)
    safe_cols = jnp.clip(cols, 0, COLS - 1)
    height = ((pos.heights >> (3 * safe_cols).astype(_U32)) & 7).astype(jnp.int32)
    legal = in_range & (height < ROWS)
    lo_bit, hi_bit = cell_bits(ROWS - 1 - height, safe_cols)
    mine_lo = pos.mine_lo | jnp.where(legal, lo_bit, _U32(0))
    mine_hi = pos.mine_hi | jnp.where(legal, hi_bit, _U32(0))
    heights = pos.heights + jnp.where(legal, _U32(1) << (3 * safe_cols).astype(_U32), _U32(0))
    won = legal & has_four(mine_lo, mine_hi)
    full = heights == _U32(_FULL_HEIGHTS)
    flipped = Position(
        mine_lo=pos.theirs_lo, mine_hi=pos.theirs_hi, theirs_lo=mine_lo, theirs_hi=mine_hi, heights=heights
    )
    next_pos = jax.tree.map(lambda new, old: jnp.where(legal, new, old), flipped, pos)
    return next_pos, won, won | full | ~legal


# ---------------------------------------------------------------------------------------------
# int8 boards <-> packed positions

_ROW = np.arange(ROWS)[:, None]
_COL = np.arange(COLS)[None, :]
_IN_LO = _ROW <= 3
# For each cell: its bit in lo (rows 0-3) or else in hi (rows 4-5).
_DECODE_SHIFT = np.where(_IN_LO, 8 * _ROW + _COL, 8 * (_ROW - 2) + _COL).astype(np.uint32)
_LO_WEIGHT = np.where(_IN_LO, 1 << (8 * _ROW + _COL), 0).astype(np.uint32)
_HI_WEIGHT = np.where(_ROW >= 2, 1 << np.clip(8 * (_ROW - 2) + _COL, 0, 31), 0).astype(np.uint32)


def pack(boards: jax.Array) -> Position:
    """int8 boards ``(..., 6, 7)`` -> :class:`Position` with the batch shape ``...``."""
    boards = _check_boards(boards)
    mine = (boards == 1).astype(_U32)
    theirs = (boards == -1).astype(_U32)

    def bits(x, weight):
        return (x * weight).sum(axis=(-2, -1), dtype=_U32)

    counts = (boards != 0).sum(axis=-2).astype(_U32)  # (..., 7)
    heights = (counts << (3 * jnp.arange(COLS, dtype=_U32))).sum(axis=-1, dtype=_U32)
    return Position(
        mine_lo=bits(mine, _LO_WEIGHT),
        mine_hi=bits(mine, _HI_WEIGHT),
        theirs_lo=bits(theirs, _LO_WEIGHT),
        theirs_hi=bits(theirs, _HI_WEIGHT),
        heights=heights,
    )


def unpack(pos: Position) -> jax.Array:
    """:class:`Position` -> int8 boards ``(..., 6, 7)``."""

    def plane(lo, hi):
        word = jnp.where(_IN_LO, lo[..., None, None], hi[..., None, None])
        return ((word >> _DECODE_SHIFT) & 1).astype(jnp.int8)

    return plane(pos.mine_lo, pos.mine_hi) - plane(pos.theirs_lo, pos.theirs_hi)


# ---------------------------------------------------------------------------------------------
# The public int8 API


def new_boards(n: int) -> jax.Array:
    """Empty boards.

    Args:
        n: how many.

    Returns:
        ``int8 (n, 6, 7)`` zeros.
    """
    return jnp.zeros((n, ROWS, COLS), jnp.int8)


def legal_mask(boards: jax.Array) -> jax.Array:
    """The legal columns.

    Args:
        boards: ``int8 (..., 6, 7)``.

    Returns:
        ``bool (..., 7)``: True where the column's top cell is empty.
    """
    boards = _check_boards(boards)
    return boards[..., 0, :] == 0


def step(boards: jax.Array, cols) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Drop a piece of the side to move (``+1``) in ``cols[i]`` of ``boards[i]``.

    An illegal column inside ``jit`` ends the game with the board unchanged (the module
    docstring); called from Python with concrete arrays, it raises.

    Args:
        boards: ``int8 (..., 6, 7)`` canonical boards, the side to move ``+1``.
        cols: ``int (...)`` columns, 0-6.

    Returns:
        ``(next_boards, won, done)``: ``int8 (..., 6, 7)`` the next player's canonical boards
        (negated); ``bool (...)`` whether the mover completed four in a row; ``bool (...)``
        whether the game ended (a win, a full board, or an illegal column).

    Raises:
        ValueError: from Python, a full or out-of-range column.
    """
    boards = _check_boards(boards)
    cols = _check_cols(cols, boards.shape[:-2])
    if not isinstance(boards, jax.core.Tracer) and not isinstance(cols, jax.core.Tracer):
        full = ~np.take_along_axis(np.asarray(boards[..., 0, :] == 0), np.asarray(cols)[..., None], -1)[..., 0]
        if full.any():
            raise ValueError(f"illegal move: column {int(np.asarray(cols)[full].flat[0])} is full")
    next_pos, won, done = position_step(pack(boards), cols)
    return unpack(next_pos), won, done


def winner_mask(boards: jax.Array) -> jax.Array:
    """``bool (...)``: True where the player who just moved (the ``-1`` pieces) has four in a row."""
    pos = pack(boards)
    return has_four(pos.theirs_lo, pos.theirs_hi)


# ---------------------------------------------------------------------------------------------
# Host side: move strings and text


def _one_board(board) -> np.ndarray:
    board = np.asarray(board)
    if board.shape != (ROWS, COLS):
        raise ValueError(f"expected one board of shape (6, 7), got {board.shape}")
    return board


def apply_moves(cols: Sequence[int], board=None, column_base: int = 0) -> np.ndarray:
    """Play moves on the host.

    Args:
        cols: 0-based columns, first mover first.
        board: ``int8 (6, 7)`` canonical board to start from (default: empty).
        column_base: how messages number columns (1 for games given as move strings).

    Returns:
        ``np.int8 (6, 7)``: the canonical board for the side to move after the moves.

    Raises:
        ValueError: a column out of range, a full column, or a move after the game has ended.
    """
    board = np.zeros((ROWS, COLS), np.int8) if board is None else _one_board(board).astype(np.int8)
    if host_has_four(board == -1):
        raise ValueError("the game is already over")
    grid = board.tolist()  # plain lists: this runs per record when files of games are read
    heights = [sum(1 for r in range(ROWS) if grid[r][c] != 0) for c in range(COLS)]
    stones = sum(heights)
    side = 1  # the mover's stones are ``side``; the board is negated at the end, not per move
    for i, col in enumerate(cols):
        if not 0 <= col < COLS:
            raise ValueError(
                f"move {i + 1}: column {col + column_base} is out of range {column_base}..{COLS - 1 + column_base}"
            )
        if heights[col] == ROWS:
            raise ValueError(f"move {i + 1}: column {col + column_base} is full")
        row = ROWS - 1 - heights[col]
        grid[row][col] = side
        heights[col] += 1
        stones += 1
        if _four_through(grid, row, col, side):
            if i != len(cols) - 1:
                raise ValueError(f"move {i + 2}: the game ended with move {i + 1}")
        elif stones == NUM_CELLS and i != len(cols) - 1:
            raise ValueError(f"move {i + 2}: the board is full after move {i + 1}")
        side = -side
    return (np.asarray(grid, np.int8) * np.int8(side)).astype(np.int8)


def _four_through(grid: list, row: int, col: int, side: int) -> bool:
    """Whether the stone at ``(row, col)`` is part of four ``side`` stones in a line (only lines
    through the last stone can be new, so this is all a move needs checked)."""
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLS and grid[r][c] == side:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def host_has_four(mask: np.ndarray) -> bool:
    m = mask.astype(bool)
    return bool(
        (m[:, :-3] & m[:, 1:-2] & m[:, 2:-1] & m[:, 3:]).any()
        or (m[:-3] & m[1:-2] & m[2:-1] & m[3:]).any()
        or (m[:-3, :-3] & m[1:-2, 1:-2] & m[2:-1, 2:-1] & m[3:, 3:]).any()
        or (m[:-3, 3:] & m[1:-2, 2:-1] & m[2:-1, 1:-2] & m[3:, :-3]).any()
    )


def parse_moves(moves: str) -> list[int]:
    """A 1-based solver move string (``"4453"``) -> 0-based columns. Whitespace is ignored."""
    if not isinstance(moves, str):
        raise TypeError(f"a move string must be str, got {type(moves).__name__}")
    cols = []
    for i, ch in enumerate(moves.strip()):
        if ch not in "1234567":
            raise ValueError(f"bad move string {moves!r}: character {i + 1} ({ch!r}) is not a column 1-7")
        cols.append(int(ch) - 1)
    return cols


def from_moves(moves: str) -> np.ndarray:
    """A position from a solver move string.

    Args:
        moves: 1-based columns, first mover first (``"4453"``), as the evaluation data and the
            well-known Connect 4 solvers write them.

    Returns:
        ``np.int8 (6, 7)``: the canonical board for the side to move.

    Raises:
        ValueError: a character that is not a column 1-7, a full column, a move after a win.
    """
    try:
        return apply_moves(parse_moves(moves), column_base=1)
    except ValueError as err:
        raise ValueError(f"bad move string {moves!r}: {err}") from None


_PIECE_CHARS = {1: "X", -1: "O", 0: "."}


def to_text(board) -> str:
    """The PyTorch project's printed board.

    Args:
        board: ``int8 (6, 7)`` canonical board.

    Returns:
        Six lines, the top row first: ``X`` the side to move's piece (+1), ``O`` the
        opponent's (-1), ``.`` empty.
    """
    board = _one_board(board)
    return "\n".join(" ".join(_PIECE_CHARS[int(v)] for v in row) for row in board)


def from_text(text: str) -> np.ndarray:
    """Inverse of :func:`to_text`. Spaces are optional; blank lines around it are ignored."""
    if not isinstance(text, str):
        raise TypeError(f"board text must be str, got {type(text).__name__}")
    lines = [line.replace(" ", "") for line in text.strip().splitlines() if line.strip()]
    if len(lines) != ROWS or any(len(line) != COLS for line in lines):
        raise ValueError(f"board text must have 6 rows of 7 cells, got {[len(line) for line in lines]}")
    return from_string("".join(lines))


def to_string(board) -> str:
    """The 42-character form: top row first, left to right, ``X`` = +1, ``O`` = -1, ``.`` empty."""
    return "".join(_PIECE_CHARS[int(v)] for v in _one_board(board).reshape(-1))


def from_string(s: str) -> np.ndarray:
    """Inverse of :func:`to_string`; checks that the board is reachable in a game (gravity, piece
    counts, at most the last mover has four in a row)."""
    if not isinstance(s, str):
        raise TypeError(f"board string must be str, got {type(s).__name__}")
    if len(s) != NUM_CELLS:
        raise ValueError(f"board string must have 42 characters, got {len(s)}")
    bad = sorted(set(s) - set("XO."))
    if bad:
        raise ValueError(f"board string may only hold 'X', 'O' and '.', got {''.join(bad)!r}")
    board = np.array([{"X": 1, "O": -1, ".": 0}[ch] for ch in s], np.int8).reshape(ROWS, COLS)
    check_board(board)
    return board


def check_board(board) -> None:
    """Raise ``ValueError`` unless ``board`` is a canonical position reachable in a game."""
    board = _one_board(board)
    if not np.isin(board, (-1, 0, 1)).all():
        raise ValueError("a board may only hold -1, 0 and +1")
    for c in range(COLS):
        filled = board[:, c] != 0
        first = np.argmax(filled) if filled.any() else ROWS
        if not filled[first:].all():
            raise ValueError(f"column {c} has a piece above an empty cell")
    diff = int((board == -1).sum()) - int((board == 1).sum())
    if diff not in (0, 1):
        raise ValueError(
            f"the side to move (+1/X) has {(board == 1).sum()} pieces and the opponent {(board == -1).sum()}: "
            "the opponent must have as many or one more"
        )
    if host_has_four(board == 1):
        raise ValueError("the side to move already has four in a row")
