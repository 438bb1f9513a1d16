"""Looking at a model's games: play it in the terminal, analyse a game, list its openings.

Host-side code. Boards are shown in absolute colours (``X`` moved first, ``O`` second) with
the column numbers 1-7 underneath; columns are typed and printed 1-based, as in move strings.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import jax
import numpy as np

from czjax import game
from czjax.players.agent import Agent, SearchedMove, policy, search_details, searched_move, self_play
from czjax.search import reuse as search_reuse
from czjax.util.progress import Progress

QUIT = ("q", "quit", "exit")
REUSE_PLIES = 2  # a search's tree serves the next search this many plies later: its move and the reply
# Whether play and serve keep a PUCT search's tree between moves by default (czjax.search.reuse):
# not, by measurement (experiments/tree-reuse/tree_reuse.py, docs/search.md "Tree reuse"): at equal
# simulations a PUCT search over the shipped networks that reuses its tree loses to one that does
# not (it has more visits, and more visits alone lose too at these settings)
REUSE_TREES = False


def absolute_board(moves: list[int]) -> np.ndarray:
    """``+1`` for the first player's stones, ``-1`` for the second's (0-based ``moves``)."""
    board = game.apply_moves(moves)
    return board if len(moves) % 2 == 0 else -board


def show_board(moves: list[int]) -> str:
    board = absolute_board(moves)
    rows = ["| " + " ".join({1: "X", -1: "O", 0: "."}[int(v)] for v in row) + " |" for row in board]
    return "\n".join(rows + ["  " + " ".join(str(c + 1) for c in range(game.COLS))])


def game_result(moves: list[int]) -> int | None:
    """``+1``/``-1`` if the first/second player has won, 0 for a draw, None while going on."""
    board = absolute_board(moves)
    for side in (1, -1):
        if game.host_has_four(board == side):
            return side
    return 0 if len(moves) == game.NUM_CELLS else None


def masked_entropy(probs: np.ndarray) -> float:
    p = probs[probs > 0]
    return float(-(p * np.log(p)).sum())


def format_probs(probs: np.ndarray, legal=None) -> str:
    """``1:0.12  2: -- ...``: ``--`` marks a full column (``legal`` False; by default, a zero)."""
    legal = np.asarray(probs) > 0 if legal is None else legal
    return "  ".join(f"{c + 1}:{p:4.2f}" if ok else f"{c + 1}: -- " for c, (p, ok) in enumerate(zip(probs, legal)))


def choose_move(probs: np.ndarray, greedy: int, temperature: float, rng: np.random.Generator) -> int:
    if temperature == 0:
        return int(greedy)
    logits = np.where(probs > 0, np.log(np.maximum(probs, 1e-30)) / temperature, -np.inf)
    p = np.exp(logits - logits.max())
    return int(rng.choice(game.COLS, p=p / p.sum()))


def human_move(board: np.ndarray, mark: str, read: Callable[[str], str], write: Callable[[str], None]) -> int | None:
    """The human's column (0-based) read from ``read``; -1 after saying why the text is no legal
    column; None when the human quits or the input ends."""
    try:
        text = read(f"your move ({mark}), column 1-7: ").strip().lower()
    except EOFError:
        write("input ended: game abandoned")
        return None
    if text in QUIT:
        write("game abandoned")
        return None
    if not text.isdigit():
        write(f"{text!r} is not a column: type a number 1-7, or q to quit")
        return -1
    col = int(text) - 1
    if not 0 <= col < game.COLS:
        write(f"there is no column {text}: the columns are 1-7")
        return -1
    if board[0, col] != 0:
        write(f"column {col + 1} is full: choose another")
        return -1
    return col


class SearchMemory:
    """A player's reports of the positions of one game (:func:`czjax.players.agent.searched_move`: one
    search per position for a search), and, for a search that allows it (PUCT:
    :func:`czjax.search.reuse.reusable`) with ``reuse`` (off by default: :data:`REUSE_TREES`),
    its last tree: the next search starts
    from the subtree below the moves played since (up to :data:`REUSE_PLIES`, its move and the
    reply), ``keep`` nodes of it at most (default: the search's simulations), and adds its own
    simulations to it. Any other position (a new game, an undone move) is searched afresh."""

    def __init__(self, agent: Agent, reuse: bool = REUSE_TREES, keep: int | None = None):
        self.agent = agent
        reusable = reuse and agent.search is not None and search_reuse.reusable(agent.search)
        self.keep = (keep or agent.search.sims) if reusable else 0
        self.root_moves: list[int] | None = None  # the moves to the last tree's root
        self.tree = None

    def searched(self, moves: list[int]) -> SearchedMove:
        """The player's report of the position after ``moves`` (0-based), batch of one."""
        board = game.apply_moves(moves)[None]
        if not self.keep:
            return searched_move(self.agent, board)
        previous, path, root = self.tree, None, self.root_moves
        if root is not None and moves[: len(root)] == root and len(moves) - len(root) <= REUSE_PLIES:
            since = moves[len(root) :]
            path = np.asarray([since + [-1] * (REUSE_PLIES - len(since))], np.int32)
        else:
            previous = None  # nothing to reuse: an empty tree (czjax.players.agent.searched_move)
        report = searched_move(self.agent, board, previous, path, self.keep)
        self.root_moves, self.tree = list(moves), report.tree
        return report


def model_move(
    agent: Agent,
    board: np.ndarray,
    temperature: float,
    rng,
    write: Callable[[str], None],
    report: SearchedMove | None = None,
) -> int:
    """The model's column, written with its probabilities (or a search's visit shares) and value,
    from one search (:func:`czjax.players.agent.searched_move`); ``report``: that report of ``board``,
    when the caller has it (a :class:`SearchMemory`'s)."""
    report = searched_move(agent, board[None]) if report is None else report
    probs, value, greedy = report.probs[0], report.value[0], report.greedy[0]
    col = choose_move(probs, greedy, temperature, rng)
    value_text = "" if np.isnan(value) else f"; its value for this position {value:+.2f}"
    shares = report.shares
    spread = (
        f"visit shares {format_probs(shares[0], board[0] == 0)}"
        if shares is not None
        else f"probabilities {format_probs(probs)}"
    )
    write(f"{agent.name} plays {col + 1} ({spread}{value_text})")
    return col


def play(
    agent: Agent,
    first: str = "human",
    temperature: float = 0.0,
    seed: int = 0,
    read: Callable[[str], str] = input,
    write: Callable[[str], None] = print,
    reuse: bool = REUSE_TREES,
) -> dict:
    """A human against ``agent`` in the terminal. ``first``: human, model or random. ``reuse``:
    a PUCT search keeps its tree from one move to the next (:class:`SearchMemory`; off by
    default, :data:`REUSE_TREES`).

    Returns ``{"moves", "result", "human"}``: the 1-based move string, ``"human"``,
    ``"model"``, ``"draw"`` or ``"abandoned"``, and whether the human moved first.
    """
    if first not in ("human", "model", "random"):
        raise ValueError(f"--first must be human, model or random, got {first!r}")
    rng = np.random.default_rng(seed)
    human_first = first == "human" or (first == "random" and bool(rng.integers(2)))
    human_side = 0 if human_first else 1
    marks = ("X", "O")
    how = "its most likely column" if temperature == 0 else "sampled from its move probabilities"
    write(
        f"You play {marks[human_side]} ({'first' if human_first else 'second'}) against {agent.name}, which plays at "
        f"temperature {temperature:g} ({how}; --temperature changes it). Type a column 1-7 and Enter; q quits."
    )
    moves: list[int] = []
    memory = SearchMemory(agent, reuse)
    result = None
    while result is None:
        write("")
        write(show_board(moves))
        board = game.apply_moves(moves)
        if len(moves) % 2 == human_side:
            col = human_move(board, marks[human_side], read, write)
            if col is None:
                result = "abandoned"
                break
            if col < 0:  # not a legal column: asked again
                continue
        else:
            col = model_move(agent, board, temperature, rng, write, memory.searched(moves))
        moves.append(col)
        outcome = game_result(moves)
        if outcome is not None:
            write("")
            write(show_board(moves))
            if outcome == 0:
                result = "draw"
            else:
                result = "human" if (outcome == 1) == human_first else "model"
    move_string = "".join(str(c + 1) for c in moves)
    verdict = {"human": "you win", "model": f"{agent.name} wins", "draw": "a draw", "abandoned": "abandoned"}[result]
    write(f"game over: {verdict} after {len(moves)} moves; moves {move_string or '(none)'}")
    return {"moves": move_string, "result": result, "human_first": human_first}


def self_play_moves(agent: Agent, temperature: float, seed: int) -> list[int]:
    """One game of ``agent`` against itself, sampled at ``temperature`` (0 = greedy)."""
    rng = np.random.default_rng(seed)
    moves: list[int] = []
    while game_result(moves) is None:
        probs, _, greedy = (x[0] for x in policy(agent, game.apply_moves(moves)[None]))
        moves.append(choose_move(probs, greedy, temperature, rng))
    return moves


def analyze(agent: Agent, moves: str | None = None, temperature: float = 1.0, seed: int = 0) -> dict:
    """Per move of a game (given, or ``agent``'s own self-play game): the probability the
    agent gives the move played, its entropy, its value and its favourite column; for a
    search, also its visits and Q per column (``visits``, ``q``: 7 numbers, Q None where the
    column was not visited)."""
    cols = game.parse_moves(moves) if moves is not None else self_play_moves(agent, temperature, seed)
    game.apply_moves(cols, column_base=1)  # ValueError for an illegal game, columns 1-based
    boards = np.stack([game.apply_moves(cols[:t]) for t in range(len(cols))]) if cols else np.zeros((0, 6, 7), np.int8)
    probs, values, greedy = policy(agent, boards)
    visits, q = search_details(agent, boards) if agent.search is not None else (None, None)
    rows = []
    for t, col in enumerate(cols):
        rows.append(
            {
                "ply": t + 1,
                "player": "XO"[t % 2],
                "column": col + 1,
                "prob": float(probs[t, col]),
                "entropy": masked_entropy(probs[t]),
                "value": None if np.isnan(values[t]) else float(values[t]),
                "best": int(greedy[t]) + 1,
                "best_prob": float(probs[t, greedy[t]]),
            }
        )
        if visits is not None and q is not None:  # a search's details: both or neither
            rows[-1]["visits"] = [int(v) for v in visits[t]]
            rows[-1]["q"] = [None if np.isnan(x) else float(x) for x in q[t]]
    outcome = game_result(cols)
    result = {None: "unfinished", 0: "draw", 1: "X (first) wins", -1: "O (second) wins"}[outcome]
    return {"player": agent.name, "moves": "".join(str(c + 1) for c in cols), "result": result, "plies": rows}


def format_analysis(report: dict) -> str:
    lines = [
        f"{report['player']} on the game {report['moves']}",
        f"{'ply':>4s} {'who':>3s} {'col':>3s} {'p(move)':>8s} {'entropy':>8s} {'value':>6s}  favourite",
    ]
    for r in report["plies"]:
        value = "   -  " if r["value"] is None else f"{r['value']:+6.2f}"
        mark = "" if r["best"] == r["column"] else f"  {r['best']} ({r['best_prob']:.2f})"
        lines.append(
            f"{r['ply']:4d} {r['player']:>3s} {r['column']:3d} {r['prob']:8.3f} {r['entropy']:8.3f} "
            f"{value}{mark or '  ='}"
        )
        if "visits" in r:
            cells = [
                f"{c + 1}:{n}/{'  -  ' if x is None else f'{x:+.2f}'}"
                for c, (n, x) in enumerate(zip(r["visits"], r["q"]))
            ]
            lines.append(f"{'':15s} visits/Q  " + "  ".join(cells))
    lines += ["", show_board(game.parse_moves(report["moves"])), f"result: {report['result']}"]
    return "\n".join(lines)


def openings(
    agent: Agent, games: int = 1000, depth: int = 4, top: int = 10, temperature: float = 1.0, seed: int = 0, log=None
) -> dict:
    """The most frequent first ``depth`` moves when ``agent`` plays itself ``games`` times
    (sampled at ``temperature``), as the PyTorch project's joseki script lists them; ``log``:
    progress lines while the games are played (:func:`czjax.players.agent.self_play`'s slices)."""
    if games < 2:
        raise ValueError(f"--games must be at least 2, got {games}")
    if not 1 <= depth <= game.NUM_CELLS:
        raise ValueError(f"--depth must be 1-42, got {depth}")
    traj = self_play(agent, games, jax.random.key(seed), temperature, Progress(log, "games", games))
    actions = np.asarray(traj.actions)[:depth].T  # (G, depth)
    valid = np.asarray(traj.valid)[:depth].T
    counts = collections.Counter(
        "".join(str(int(c) + 1) for c, v in zip(row, ok) if v) for row, ok in zip(actions, valid)
    )
    return {
        "player": agent.name,
        "games": games,
        "depth": depth,
        "distinct": len(counts),
        "openings": [{"moves": m, "count": n, "share": n / games} for m, n in counts.most_common(top)],
    }


def format_openings(report: dict) -> str:
    lines = [
        f"{report['player']} against itself, {report['games']:,} games: {report['distinct']:,} distinct openings of "
        f"{report['depth']} moves; the most frequent:",
        f"{'moves':>10s} {'games':>7s} {'share':>6s}",
    ]
    lines += [f"{r['moves']:>10s} {r['count']:7d} {r['share']:6.1%}" for r in report["openings"]]
    if report["openings"]:
        lines += ["", "the most frequent, on the board:", show_board(game.parse_moves(report["openings"][0]["moves"]))]
    return "\n".join(lines)
