"""A plain-Python Connect 4, written for the tests and sharing no code with czjax.

Absolute players 1 (first) and 2 (second); ``grid[r][c]`` with row 0 at the top. Wins are
found by walking from the last piece in each of the four directions, a different algorithm
from czjax's bitboards.
"""

from __future__ import annotations

import random

ROWS, COLS = 6, 7
DIRECTIONS = {"horizontal": (0, 1), "vertical": (1, 0), "diagonal": (1, 1), "anti-diagonal": (1, -1)}


class RefGame:
    def __init__(self):
        self.grid = [[0] * COLS for _ in range(ROWS)]
        self.to_move = 1
        self.moves: list[int] = []
        self.winner = 0
        self.win_line: tuple[str, list[tuple[int, int]]] | None = None

    @property
    def over(self) -> bool:
        return self.winner != 0 or len(self.moves) == ROWS * COLS

    def legal(self) -> list[bool]:
        return [self.grid[0][c] == 0 for c in range(COLS)]

    def drop_row(self, col: int) -> int:
        for r in range(ROWS - 1, -1, -1):
            if self.grid[r][col] == 0:
                return r
        raise ValueError("full column")

    def line_through(self, r: int, c: int, player: int):
        """The first direction in which (r, c) is part of four of ``player``'s pieces, or None."""
        for name, (dr, dc) in DIRECTIONS.items():
            cells = [(r, c)]
            for sign in (1, -1):
                rr, cc = r + sign * dr, c + sign * dc
                while 0 <= rr < ROWS and 0 <= cc < COLS and self.grid[rr][cc] == player:
                    cells.append((rr, cc))
                    rr, cc = rr + sign * dr, cc + sign * dc
            if len(cells) >= 4:
                return name, sorted(cells)
        return None

    def play(self, col: int) -> None:
        assert not self.over and self.grid[0][col] == 0
        r = self.drop_row(col)
        self.grid[r][col] = self.to_move
        self.moves.append(col)
        line = self.line_through(r, col, self.to_move)
        if line is not None:
            self.winner = self.to_move
            self.win_line = line
        self.to_move = 3 - self.to_move

    def would_win(self, col: int, player: int) -> bool:
        if self.grid[0][col] != 0:
            return False
        r = self.drop_row(col)
        self.grid[r][col] = player
        won = self.line_through(r, col, player) is not None
        self.grid[r][col] = 0
        return won

    def canonical(self) -> list[list[int]]:
        """+1 for the side to move, -1 for the other."""
        me = self.to_move
        return [[0 if v == 0 else (1 if v == me else -1) for v in row] for row in self.grid]


def random_game(rng: random.Random) -> RefGame:
    g = RefGame()
    while not g.over:
        g.play(rng.choice([c for c in range(COLS) if g.legal()[c]]))
    return g


def replay(cols) -> RefGame:
    g = RefGame()
    for c in cols:
        g.play(c)
    return g
