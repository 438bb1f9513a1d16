"""The rules against the plain-Python reference, hand-built positions and the solver's positions."""

import json
import random
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game
from tests.reference import COLS, ROWS, RefGame, random_game, replay

DATA = Path(__file__).parent / "data"
NUM_GAMES = 4000

step_jit = jax.jit(game.step)


@pytest.fixture(scope="module")
def ref_games():
    rng = random.Random(1234)
    return [random_game(rng) for _ in range(NUM_GAMES)]


@pytest.fixture(scope="module")
def stepped(ref_games):
    """Drive czjax.step over all reference games in one batch, ply by ply; record what it says."""
    boards = game.new_boards(NUM_GAMES)
    per_ply = []
    for t in range(ROWS * COLS):
        cols = np.array([g.moves[t] if t < len(g.moves) else 0 for g in ref_games], np.int32)
        legal = np.asarray(game.legal_mask(boards))
        next_boards, won, done = step_jit(boards, cols)
        per_ply.append((np.asarray(boards), legal, np.asarray(won), np.asarray(done)))
        boards = next_boards
    return per_ply


def test_reference_data_covers_all_directions_and_edges(ref_games):
    """The random games really exercise wins in every direction, on every edge, and draws."""
    directions, edges = set(), set()
    for g in ref_games:
        if g.win_line:
            name, cells = g.win_line
            directions.add(name)
            rows = {r for r, _ in cells}
            cols = {c for _, c in cells}
            edges |= {
                e
                for e, hit in (("top", 0 in rows), ("bottom", 5 in rows), ("left", 0 in cols), ("right", 6 in cols))
                if hit
            }
    assert directions == {"horizontal", "vertical", "diagonal", "anti-diagonal"}
    assert edges == {"top", "bottom", "left", "right"}
    assert any(g.winner == 0 for g in ref_games), "no draw among the reference games"


def test_step_matches_reference_on_random_games(ref_games, stepped):
    for i, g in enumerate(ref_games):
        ref = RefGame()
        for t, col in enumerate(g.moves):
            boards, legal, won, done = stepped[t]
            assert boards[i].tolist() == ref.canonical(), f"game {i} ply {t}"
            assert legal[i].tolist() == ref.legal(), (i, t)
            ref.play(col)
            assert bool(done[i]) == ref.over, (i, t)
            assert bool(won[i]) == (ref.winner != 0), (i, t)


def test_game_lengths_and_results_match_reference(ref_games, stepped):
    lengths = np.full(NUM_GAMES, -1)
    winners = np.zeros(NUM_GAMES, bool)
    for t, (_, _, won, done) in enumerate(stepped):
        newly = done & (lengths < 0)
        lengths[newly] = t + 1
        winners[newly] = won[newly]
    assert lengths.tolist() == [len(g.moves) for g in ref_games]
    assert winners.tolist() == [g.winner != 0 for g in ref_games]


def test_canonical_flip_negates_and_places_one_piece():
    board = game.from_moves("4453")
    next_board, won, done = game.step(jnp.asarray(board)[None], jnp.array([0]))
    expected = -board.copy()
    expected[5, 0] = -1  # the mover's new piece, seen from the next player
    np.testing.assert_array_equal(np.asarray(next_board[0]), expected)
    assert not bool(won[0]) and not bool(done[0])


# Hand-built wins on the board's edges, every direction; the last move wins.
EDGE_WINS = {  # found by random search with the reference; the test re-checks them against it
    "horizontal bottom-left corner": "1122334",
    "horizontal bottom-right corner": "7167564",
    "horizontal top row": "447145554472565152471336676673627",
    "vertical left column": "1315161",
    "vertical right column to the top": "767247472747",
    "diagonal top-left corner": "141112237327224471216433",
    "diagonal bottom-right corner": "4435756466524",
    "anti-diagonal top-right corner": "63575445767524476161537756",
    "anti-diagonal bottom-left corner": "2354442543153",
}


@pytest.mark.parametrize("name", sorted(EDGE_WINS))
def test_hand_built_wins(name):
    moves = EDGE_WINS[name]
    ref = replay([int(ch) - 1 for ch in moves])
    assert ref.winner != 0 and len(ref.moves) == len(moves), "hand-built sequence must end on a win"
    before = game.from_moves(moves[:-1])
    _, won, done = game.step(jnp.asarray(before)[None], jnp.array([int(moves[-1]) - 1]))
    assert bool(won[0]) and bool(done[0])


def test_full_board_draw(ref_games):
    draw = next(g for g in ref_games if g.winner == 0)
    moves = "".join(str(c + 1) for c in draw.moves)
    before = game.from_moves(moves[:-1])
    next_board, won, done = game.step(jnp.asarray(before)[None], jnp.array([draw.moves[-1]]))
    assert not bool(won[0]) and bool(done[0])
    assert (np.asarray(next_board) != 0).all()
    assert not np.asarray(game.legal_mask(next_board)).any()


def _solver_lines():
    for path in sorted((DATA / "pons").iterdir()):
        for line in path.read_text().splitlines():
            moves, score = line.split()
            yield path.name, moves, int(score)


def test_from_moves_accepts_solver_benchmark_positions():
    lines = list(_solver_lines())
    assert len(lines) >= 1000
    boards = []
    for name, moves, _ in lines:
        board = game.from_moves(moves)
        ref = replay([int(ch) - 1 for ch in moves])
        assert ref.winner == 0, f"{name} {moves}: the reference says this position is already won"
        np.testing.assert_array_equal(board, np.array(ref.canonical(), np.int8), err_msg=moves)
        boards.append((board, ref.legal()))
    legal = np.asarray(game.legal_mask(jnp.asarray(np.stack([b for b, _ in boards]))))
    assert legal.tolist() == [lm for _, lm in boards]
    # no such position is won for the player who just moved
    assert not np.asarray(game.winner_mask(jnp.asarray(np.stack([b for b, _ in boards])))).any()


def test_eval_positions_board_strings_round_trip():
    path = Path(game.__file__).parent / "data" / "c4_eval_public.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == 1000
    for rec in records:
        board = game.from_moves(rec["moves"])
        assert game.to_string(board) == rec["board"]
        np.testing.assert_array_equal(game.from_string(rec["board"]), board)
        np.testing.assert_array_equal(game.from_text(game.to_text(board)), board)
        assert [c + 1 for c in range(COLS) if board[0, c] == 0] == rec["legal_cols"]


def test_text_format_matches_the_pytorch_printout():
    board = game.from_moves("4453")
    assert game.to_text(board).splitlines() == [". . . . . . ."] * 4 + [". . . O . . .", ". . O X X . ."]
    assert game.to_string(board) == "." * 31 + "O" + "." * 5 + "OXX" + ".."


def test_pack_unpack_round_trip(ref_games):
    boards = []
    for g in ref_games[:300]:
        for t in range(0, len(g.moves), 3):
            boards.append(replay(g.moves[:t]).canonical())
    boards = jnp.asarray(np.array(boards, np.int8))
    np.testing.assert_array_equal(np.asarray(game.unpack(game.pack(boards))), np.asarray(boards))


# ---------------------------------------------------------------------------------------------
# jit, vmap, illegal columns inside jit


def test_vmap_over_single_boards_matches_batched_step():
    boards = jnp.asarray(np.stack([game.from_moves(m) for m in ["", "4453", "112233", "717273"]]))
    cols = jnp.array([3, 6, 3, 6])
    batched = game.step(boards, cols)
    vmapped = jax.jit(jax.vmap(game.step))(boards, cols)
    for a, b in zip(batched, vmapped):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(jax.vmap(game.legal_mask)(boards)), np.asarray(game.legal_mask(boards)))


def test_illegal_column_inside_jit_ends_game_without_touching_board():
    full_col = game.from_moves("111111")  # column 1 (index 0) is full
    boards = jnp.asarray(np.stack([full_col, full_col, full_col]))
    next_boards, won, done = step_jit(boards, jnp.array([0, 7, -1]))
    np.testing.assert_array_equal(np.asarray(next_boards), np.asarray(boards))
    assert not np.asarray(won).any() and np.asarray(done).all()


# ---------------------------------------------------------------------------------------------
# Bad input from Python


@pytest.mark.parametrize(
    "moves, message",
    [
        ("48", "not a column"),
        ("4a", "not a column"),
        ("0", "not a column"),
        ("1111111", "full"),
        ("12121212", "game ended"),
        ("4 4", "not a column"),
    ],
)
def test_from_moves_rejects_bad_strings(moves, message):
    with pytest.raises(ValueError, match=message):
        game.from_moves(moves)


def test_from_moves_allows_the_winning_move_last():
    board = game.from_moves("1212121")
    assert bool(np.asarray(game.winner_mask(jnp.asarray(board)[None]))[0])


def _board_string(cells: dict) -> str:
    chars = ["."] * 42
    for (r, c), ch in cells.items():
        chars[7 * r + c] = ch
    return "".join(chars)


@pytest.mark.parametrize(
    "text, message",
    [
        ("X" * 41, "42 characters"),
        ("." * 41 + "Z", "only hold"),
        ("X" + "." * 41, "above an empty"),
        (_board_string({(5, 0): "X", (5, 1): "X"}), "as many or one more"),
        (
            _board_string(
                {(2, 0): "X", (3, 0): "X", (4, 0): "X", (5, 0): "X", (5, 1): "O", (5, 2): "O", (5, 3): "O", (5, 5): "O"}
            ),
            "already has four",
        ),
    ],
)
def test_from_string_rejects_malformed_boards(text, message):
    with pytest.raises(ValueError, match=message):
        game.from_string(text)


def test_from_text_rejects_wrong_shape():
    with pytest.raises(ValueError, match="6 rows of 7"):
        game.from_text(". . .\n. . .")


def test_step_rejects_bad_arrays():
    boards = game.new_boards(2)
    with pytest.raises(TypeError, match="int8"):
        game.step(boards.astype(jnp.float32), jnp.array([0, 1]))
    with pytest.raises(ValueError, match=r"\(\.\.\., 6, 7\)"):
        game.step(jnp.zeros((2, 7, 6), jnp.int8), jnp.array([0, 1]))
    with pytest.raises(ValueError, match="one column per board"):
        game.step(boards, jnp.array([0, 1, 2]))
    with pytest.raises(ValueError, match="0..6"):
        game.step(boards, jnp.array([0, 7]))
    with pytest.raises(TypeError, match="integers"):
        game.step(boards, jnp.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="-1, 0 and \\+1"):
        game.step(jnp.full((2, 6, 7), 2, jnp.int8), jnp.array([0, 1]))
    with pytest.raises(ValueError, match="full"):
        game.step(jnp.asarray(game.from_moves("111111"))[None], jnp.array([0]))
    with pytest.raises(TypeError):
        game.legal_mask([[0] * 7] * 6)
