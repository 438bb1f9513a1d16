"""AlphaZero.jl's Pons benchmark players in plain Python, sharing no code with czjax: its MCTS
(``src/mcts.jl``) and its MinMax player (``src/minmax.jl``) with the Connect Four heuristic
(``heuristic_value`` in ``games/connect-four/game.jl``), as read from AlphaZero.jl's source.

The board is Pascal Pons' bitboard (bit ``7 * col + row``, row 0 at the bottom, a guard bit on
top of each column), a different representation from czjax's. Columns are 0-based here.

MCTS (``MCTS.Env``, ``run_simulation!``, ``uct_scores``, ``policy``):

* the tree is a dictionary keyed by the position (transpositions share a node); the first
  visit of a position only creates its node and returns the oracle's value;
* ``score = W / max(N, 1) + cpuct * P * sqrt(sum N) / (N + 1)`` over the available actions
  (an unvisited action's Q is 0), the first best action on ties (Julia's ``argmax``);
* a move that wins is worth 1 to its mover and the terminal position 0; a draw 0;
* the policy is the visit shares, the benchmark's move ``argmax(pi)``: the most visited, the
  lowest column on ties.

MinMax (``MinMax.Player(depth, amplify_rewards=true, tau=0)``): a win is worth ``+inf``, the
heuristic at the horizon, ``think`` spreads ``pi`` over the tied best moves (over the winning
ones if any; uniform when every move loses), and the benchmark takes ``argmax(pi)``, the first.
The heuristic is summed in float64 in AlphaZero.jl's order of alignments, as Julia's ``sum``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

ROWS, COLS = 6, 7
H1 = ROWS + 1
BOTTOM = sum(1 << (H1 * c) for c in range(COLS))
FULL = BOTTOM * ((1 << ROWS) - 1)


def column_bit(col: int, row: int) -> int:
    return 1 << (H1 * col + row)


class Board:
    """``current``: the side to move's stones; ``mask``: every stone; ``moves``: plies played."""

    __slots__ = ("current", "mask", "moves")

    def __init__(self, current: int = 0, mask: int = 0, moves: int = 0):
        self.current, self.mask, self.moves = current, mask, moves

    @classmethod
    def from_moves(cls, moves: str) -> Board:
        """A position from a solver move string (1-based columns)."""
        b = cls()
        for ch in moves.strip():
            col = int(ch) - 1
            assert b.can_play(col) and not b.wins(col), moves
            b = b.play(col)
        return b

    def key(self) -> tuple[int, int]:
        return self.current, self.mask

    def can_play(self, col: int) -> bool:
        return not self.mask & column_bit(col, ROWS - 1)

    def actions(self) -> list[int]:
        return [c for c in range(COLS) if self.can_play(c)]

    def play(self, col: int) -> Board:
        mask = self.mask | (self.mask + column_bit(col, 0))
        return Board(self.current ^ self.mask, mask, self.moves + 1)

    def wins(self, col: int) -> bool:
        """Playing ``col`` completes four for the side to move."""
        stones = self.current | ((self.mask + column_bit(col, 0)) & column_mask(col))
        return aligned(stones)

    def cell(self, col: int, row: int) -> int:
        """+1 the side to move's stone, -1 the opponent's, 0 empty (row 0 at the bottom)."""
        bit = column_bit(col, row)
        if not self.mask & bit:
            return 0
        return 1 if self.current & bit else -1


def column_mask(col: int) -> int:
    return ((1 << ROWS) - 1) << (H1 * col)


def aligned(stones: int) -> bool:
    for shift in (1, H1 - 1, H1, H1 + 1):
        m = stones & (stones >> shift)
        if m & (m >> (2 * shift)):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# MCTS

Oracle = Callable[[Board], tuple[list[float], float]]
"""``board -> (P over board.actions(), V for the side to move)``."""


def uniform_oracle(board: Board) -> tuple[list[float], float]:
    """AlphaZero.jl's ``RandomOracle``: a uniform prior and a value of 0."""
    n = len(board.actions())
    return [1.0 / n] * n, 0.0


class Node:
    __slots__ = ("P", "W", "N", "V")

    def __init__(self, P: list[float], V: float):
        self.P, self.V = P, V
        self.W = [0.0] * len(P)
        self.N = [0] * len(P)


class MCTS:
    """``MCTS.Env`` with ``cpuct``, no noise, ``gamma = 1``. ``transpositions=False`` keys nodes
    by their path from the root instead (a plain tree, as czjax's searches build)."""

    def __init__(self, oracle: Oracle = uniform_oracle, cpuct: float = 2.0, transpositions: bool = True):
        self.oracle, self.cpuct, self.transpositions = oracle, cpuct, transpositions
        self.tree: dict = {}

    def simulate(self, board: Board, path: tuple, terminal: bool) -> float:
        """One simulation from ``board``: its value for the side to move there."""
        if terminal:
            return 0.0
        key = board.key() if self.transpositions else path
        node = self.tree.get(key)
        if node is None:
            P, V = self.oracle(board)
            self.tree[key] = Node(P, V)
            return V
        actions = board.actions()
        sqrt_total = math.sqrt(sum(node.N))
        best, best_score = 0, -math.inf
        for i in range(len(actions)):
            q = node.W[i] / max(node.N[i], 1)
            score = q + self.cpuct * node.P[i] * sqrt_total / (node.N[i] + 1)
            if score > best_score:  # strictly greater: the first best on ties
                best, best_score = i, score
        col = actions[best]
        won = board.wins(col)
        nxt = board.play(col)
        reward = 1.0 if won else 0.0
        q = reward - self.simulate(nxt, path + (col,), won or nxt.mask == FULL)
        node.W[best] += q
        node.N[best] += 1
        return q

    def explore(self, board: Board, sims: int) -> None:
        for _ in range(sims):
            self.simulate(board, (), False)

    def policy(self, board: Board) -> tuple[list[int], list[float]]:
        node = self.tree[board.key() if self.transpositions else ()]
        total = sum(node.N)
        return board.actions(), [n / total for n in node.N]


def argmax_first(xs: list[float]) -> int:
    best = 0
    for i, x in enumerate(xs):
        if x > xs[best]:
            best = i
    return best


def mcts_move(
    board: Board, sims: int = 600, cpuct: float = 2.0, oracle: Oracle = uniform_oracle, transpositions: bool = True
) -> tuple[int, list[int]]:
    """``(column, visits per column (7,))`` of the benchmark's MCTS player on a fresh tree."""
    env = MCTS(oracle, cpuct, transpositions)
    env.explore(board, sims)
    actions, pi = env.policy(board)
    visits = [0] * COLS
    for a, n in zip(actions, env.tree[board.key() if transpositions else ()].N):
        visits[a] = n
    return actions[argmax_first(pi)], visits


# ---------------------------------------------------------------------------------------------
# MinMax and the Connect Four heuristic


def alignments() -> list[list[tuple[int, int]]]:
    """AlphaZero.jl's ``ALIGNMENTS``: directions (1,1), (1,-1), (0,1), (1,0) in that order, each
    from every start ``(x, y)``, x (column) the outer loop, y (row, 0 at the bottom) the inner."""
    out = []
    for dx, dy in ((1, 1), (1, -1), (0, 1), (1, 0)):
        for x in range(COLS):
            for y in range(ROWS):
                cells = [(x + i * dx, y + i * dy) for i in range(4)]
                if all(0 <= cx < COLS and 0 <= cy < ROWS for cx, cy in cells):
                    out.append(cells)
    return out


ALIGNMENTS = alignments()
GAMMA = 0.1


def heuristic_for(board: Board, side: int, exact: bool = False) -> float:
    """``exact``: in integer units of 0.001 (1, 10, 100, 1000 a line) instead of float64."""
    total = 0.0
    for al in ALIGNMENTS:
        n = 0
        for col, row in al:
            cell = board.cell(col, row)
            if cell == side:
                n += 1
            elif cell == -side:
                break
        else:
            total += 10**n if exact else GAMMA ** (4 - 1 - n)
    return total


def heuristic(board: Board, exact: bool = False) -> float:
    """``GI.heuristic_value``: the side to move's alignments minus the opponent's."""
    return heuristic_for(board, 1, exact) - heuristic_for(board, -1, exact)


def minmax_value(board: Board, depth: int, exact: bool = False) -> float:
    if depth == 0:
        return heuristic(board, exact)
    return max(minmax_qvalue(board, col, depth, exact) for col in board.actions())


def minmax_qvalue(board: Board, col: int, depth: int, exact: bool = False) -> float:
    if board.wins(col):
        return math.inf  # amplify_rewards: a win is +inf, the terminal position 0
    nxt = board.play(col)
    if nxt.mask == FULL:
        return 0.0
    return -minmax_value(nxt, depth - 1, exact)


def minmax_think(board: Board, depth: int, exact: bool = False) -> tuple[list[int], list[float], list[float]]:
    """``(actions, pi, q)`` of ``MinMax.Player(depth, amplify_rewards=true, tau=0)`` (``exact``:
    the heuristic in integers, see :func:`heuristic_for`)."""
    actions = board.actions()
    qs = [minmax_qvalue(board, a, depth, exact) for a in actions]
    winning = [i for i, q in enumerate(qs) if q == math.inf]
    if winning:
        pi = [1.0 if i in winning else 0.0 for i in range(len(qs))]
    elif not any(q > -math.inf for q in qs):
        pi = [1.0] * len(qs)
    else:
        best = max(qs)
        pi = [1.0 if q == best else 0.0 for q in qs]
    total = sum(pi)
    return actions, [p / total for p in pi], qs


def minmax_move(board: Board, depth: int, exact: bool = False) -> int:
    actions, pi, _ = minmax_think(board, depth, exact)
    return actions[argmax_first(pi)]


# ---------------------------------------------------------------------------------------------
# The benchmark's error (``optimal_on``)


def error(scores: list, col: int) -> bool:
    """True where ``col`` is an error by ``optimal_on``: its outcome's sign is below the best
    column's (``scores``: the solver's score per column, None for a full one)."""

    def sign(x: float) -> int:
        return (x > 0) - (x < 0)

    best = max(sign(s) for s in scores if s is not None)
    return sign(scores[col]) < best


# ---------------------------------------------------------------------------------------------
# From the command line: the reference players' error rates on Pons' sets (slow: plain Python)


def noisy_uniform_oracle(sigma: float, seed: int = 0) -> Oracle:
    """A uniform prior and a value drawn once per position from N(0, sigma) (a stand-in for an
    untrained network's small, position-dependent values, which break exact ties)."""
    import random

    def oracle(board: Board) -> tuple[list[float], float]:
        n = len(board.actions())
        return [1.0 / n] * n, random.Random(hash((board.key(), seed))).gauss(0.0, sigma)

    return oracle


def main(argv=None) -> None:
    """``python -m tests.reference_azjl {mcts,minimax} [--value-noise S] [--no-transpositions]
    [--depth D] [--sets ...] [--limit N]``: the error rate (%) per set."""
    import argparse
    import gzip
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("player", choices=("mcts", "minimax"))
    parser.add_argument("--value-noise", type=float, default=0.0, help="mcts: N(0, S) values, a uniform prior")
    parser.add_argument("--no-transpositions", action="store_true")
    parser.add_argument("--sims", type=int, default=600)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--sets", nargs="+", default=None)
    parser.add_argument("--limit", type=int, default=None, help="the first N positions of each set")
    args = parser.parse_args(argv)
    path = Path(__file__).resolve().parent.parent / "czjax" / "data" / "pons_moves.jsonl.gz"
    records: dict[str, list] = {}
    with gzip.open(path, "rt") as f:
        for line in f:
            r = json.loads(line)
            records.setdefault(r["set"], []).append(r)
    oracle = noisy_uniform_oracle(args.value_noise) if args.value_noise else uniform_oracle
    for name in args.sets or ["Test_L1_R1", "Test_L2_R1", "Test_L3_R1", "Test_L1_R2", "Test_L2_R2", "Test_L1_R3"]:
        rows = records[name][: args.limit]
        errors = 0
        for r in rows:
            board = Board.from_moves(r["moves"])
            if args.player == "mcts":
                col, _ = mcts_move(board, args.sims, 2.0, oracle, not args.no_transpositions)
            else:
                col = minmax_move(board, args.depth)
            errors += error(r["scores"], col)
        print(f"{name}: {100 * errors / len(rows):.1f}% of {len(rows)}", flush=True)


if __name__ == "__main__":
    main()
