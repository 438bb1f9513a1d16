"""Solver-labelled accuracy: how often a player's move is optimal, or keeps the game's outcome.

A positions file is JSON Lines in the format of ``czjax/data/c4_eval_public.jsonl`` (its README
is in the PyTorch project's data folder): per position at least ``moves`` (1-based solver move
string) and ``scores`` (7 exact solver scores from the mover's view, ``null`` for a full
column). The optimal columns and the outcome-keeping columns are derived from ``scores``:

* optimal: the score equals the best score;
* keeps the outcome: the score has the sign of the best score (a win stays a win, a draw a
  draw); in a lost position every legal column keeps it.

The greedy move is the player's most likely legal column. The sampled move's figures are the
exact expectation over the player's distribution (the sum of its probabilities over the good
columns), so they carry no sampling noise.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np

from czjax import game
from czjax.agents import Agent, policy

PLY_BIN = 5
ACCURACY_KEYS = ("greedy_optimal", "greedy_keeps_outcome", "sampled_optimal", "sampled_keeps_outcome")


def default_positions_path() -> Path:
    return Path(str(resources.files("czjax") / "data" / "c4_eval_public.jsonl"))


def read_game_records(path, what: str, required: tuple[str, ...]):
    """Yield ``(where, record, board)`` for each line of a JSON Lines file of positions given
    by ``moves`` (a 1-based solver move string): ``where`` is ``path:line`` for messages,
    ``board`` the canonical position. Raises ValueError naming the line of a record that is
    not JSON, lacks one of ``required``, or has an illegal move string."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no {what} file at {path}")
    with path.open() as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not JSON ({err.msg})") from None
            if not isinstance(record, dict) or any(k not in record for k in required):
                raise ValueError(f"{where}: a {what} record needs {', '.join(repr(k) for k in required)}")
            try:
                board = game.from_moves(record["moves"])
            except (ValueError, TypeError) as err:
                raise ValueError(f"{where}: {err}") from None
            yield where, record, board


def load_positions(path=None) -> dict[str, np.ndarray]:
    """Read a positions file: ``boards (N, 6, 7)``, ``scores (N, 7)`` (NaN = full column),
    ``ply (N,)``, ``moves`` (list). Raises ValueError naming the line of a malformed record."""
    path = Path(path) if path is not None else default_positions_path()
    boards, scores, plies, moves = [], [], [], []
    for where, record, board in read_game_records(path, "positions", ("moves", "scores")):
        row = record["scores"]
        if not isinstance(row, list) or len(row) != game.COLS:
            raise ValueError(f"{where}: 'scores' must be a list of 7 entries")
        legal = board[0] == 0
        for c, (s, ok) in enumerate(zip(row, legal)):
            if ok != (s is not None) or (s is not None and not isinstance(s, (int, float))):
                raise ValueError(f"{where}: score of column {c + 1} must be a number for a legal column and null for a full one")
        if not legal.any():
            raise ValueError(f"{where}: the board is full")
        if "board" in record and game.to_string(board) != record["board"]:
            raise ValueError(f"{where}: 'board' does not match the position after 'moves'")
        boards.append(board)
        scores.append([np.nan if s is None else float(s) for s in row])
        plies.append(len(record["moves"].strip()))
        moves.append(record["moves"])
    if not boards:
        raise ValueError(f"{path} holds no positions")
    return {
        "boards": np.stack(boards),
        "scores": np.asarray(scores, np.float64),
        "ply": np.asarray(plies, np.int32),
        "moves": moves,
    }


def good_columns(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(optimal (N, 7), keeps_outcome (N, 7), value (N,))`` from solver ``scores``."""
    legal = ~np.isnan(scores)
    value = np.nanmax(scores, axis=1)
    filled = np.where(legal, scores, -np.inf)
    optimal = legal & (filled == value[:, None])
    keeps = legal & ((np.sign(filled) == np.sign(value)[:, None]) | (value[:, None] < 0))
    return optimal, keeps, value


def accuracy_from_policy(scores, ply, probs, greedy) -> dict:
    """The accuracy report for given move distributions ``probs (N, 7)`` and greedy moves."""
    optimal, keeps, value = good_columns(np.asarray(scores, np.float64))
    probs = np.asarray(probs, np.float64)
    rows = np.arange(len(value))
    per_position = {
        "greedy_optimal": optimal[rows, greedy].astype(np.float64),
        "greedy_keeps_outcome": keeps[rows, greedy].astype(np.float64),
        "sampled_optimal": (probs * optimal).sum(1),
        "sampled_keeps_outcome": (probs * keeps).sum(1),
    }

    def summary(mask) -> dict:
        out = {"n": int(mask.sum())}
        out.update({k: float(v[mask].mean()) if mask.any() else None for k, v in per_position.items()})
        return out

    everything = np.ones(len(value), bool)
    not_lost = value >= 0
    report = summary(everything)
    report["n_not_lost"] = int(not_lost.sum())
    report.update({f"{k}_not_lost": summary(not_lost)[k] for k in ("greedy_keeps_outcome", "sampled_keeps_outcome")})
    # plies in bins of five: 1-5, 6-10, ... (the public file covers 6-30)
    bins = sorted({(int(p) - 1) // PLY_BIN for p in ply})
    report["by_ply"] = [
        {"plies": f"{PLY_BIN * b + 1}-{PLY_BIN * b + PLY_BIN}", **summary((ply - 1) // PLY_BIN == b)} for b in bins
    ]
    return report


def accuracy(agent: Agent, positions: dict) -> dict:
    """Solver-labelled accuracy of ``agent`` on ``positions`` (from :func:`load_positions`)."""
    probs, _, greedy = policy(agent, positions["boards"])
    report = accuracy_from_policy(positions["scores"], positions["ply"], probs, greedy)
    return {"player": agent.name, **report}


def format_accuracy(report: dict) -> str:
    lines = [
        f"{report['player']}: {report['n']} positions ({report['n_not_lost']} not already lost)",
        f"{'plies':>8s} {'n':>5s}  {'greedy optimal':>14s} {'keeps':>6s}  {'sampled optimal':>15s} {'keeps':>6s}",
    ]
    for row in report["by_ply"] + [{"plies": "all", **report}]:
        lines.append(
            f"{row['plies']:>8s} {row['n']:5d}  {row['greedy_optimal']:14.3f} {row['greedy_keeps_outcome']:6.3f}"
            f"  {row['sampled_optimal']:15.3f} {row['sampled_keeps_outcome']:6.3f}"
        )
    lines.append(
        f"not already lost: greedy keeps the outcome {report['greedy_keeps_outcome_not_lost']:.3f}, "
        f"sampled {report['sampled_keeps_outcome_not_lost']:.3f}"
    )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Pascal Pons' benchmark sets: does the value say win, draw or loss?

PONS_SETS = ("Test_L3_R1", "Test_L2_R1", "Test_L2_R2", "Test_L1_R1", "Test_L1_R2", "Test_L1_R3")
OUTCOMES = ("loss", "draw", "win")
DRAW_BAND = 1.0 / 3.0  # a value within +-1/3 reads as a draw


def default_pons_dir() -> Path:
    return Path(str(resources.files("czjax") / "data" / "pons"))


def load_pons(directory=None) -> dict[str, dict]:
    """Pons' sets in ``directory`` (default: the six shipped with czjax, 1,000 positions each):
    ``{set name: {"boards", "scores", "moves"}}``. A line is ``MOVES SCORE``, the score the
    position's exact value for the side to move (positive: it wins). One-line ValueError
    naming the line of a malformed one."""
    directory = Path(directory) if directory is not None else default_pons_dir()
    names = [n for n in PONS_SETS if (directory / n).is_file()] or sorted(p.name for p in directory.glob("Test_*"))
    if not names:
        raise ValueError(f"no Pons benchmark sets (Test_L*_R*) in {directory}")
    sets = {}
    for name in names:
        boards, scores, moves = [], [], []
        for lineno, line in enumerate((directory / name).read_text().splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split()
            try:
                if len(parts) != 2:
                    raise ValueError("a line is 'moves score'")
                boards.append(game.from_moves(parts[0]))
                scores.append(int(parts[1]))
            except ValueError as err:
                raise ValueError(f"{directory / name}:{lineno}: {err}") from None
            moves.append(parts[0])
        sets[name] = {"boards": np.stack(boards), "scores": np.asarray(scores), "moves": moves}
    return sets


def value_outcome(value: np.ndarray) -> np.ndarray:
    """-1 / 0 / +1 (loss, draw, win) read from values in [-1, 1]: a draw within +-1/3."""
    return np.where(value > DRAW_BAND, 1, np.where(value < -DRAW_BAND, -1, 0))


def pons(agent: Agent, sets: dict) -> dict:
    """Per set, how often ``agent``'s value (the value head, or a search's root value) reads the
    position's outcome right: overall, per true outcome, and the sign alone on decided positions."""
    if not agent.has_value and agent.search is None:
        raise ValueError(f"{agent.name} has no value head: eval pons scores a value")
    report: dict = {"player": agent.name, "draw_band": DRAW_BAND, "sets": []}
    for name, data in sets.items():
        _, value, _ = policy(agent, data["boards"])
        truth = np.sign(data["scores"])
        guess = value_outcome(value)
        decided = truth != 0
        row = {"set": name, "n": int(len(truth)), "outcome": float((guess == truth).mean()),
               "sign_on_decided": float((np.sign(value[decided]) == truth[decided]).mean()) if decided.any() else None}
        for outcome, label in zip((-1, 0, 1), OUTCOMES):
            mask = truth == outcome
            row[f"n_{label}"] = int(mask.sum())
            row[label] = float((guess[mask] == outcome).mean()) if mask.any() else None
        report["sets"].append(row)
    return report


def format_pons(report: dict) -> str:
    def cell(x):
        return "    -" if x is None else f"{x:5.3f}"

    lines = [f"{report['player']}: outcome read from the value (a draw within +-{report['draw_band']:.2f})",
             f"{'set':>11s} {'n':>5s} {'outcome':>8s} {'win':>11s} {'draw':>11s} {'loss':>11s} {'sign (decided)':>15s}"]
    for r in report["sets"]:
        per = "".join(f" {cell(r[k])} ({r[f'n_{k}']:4d})" for k in ("win", "draw", "loss"))
        lines.append(f"{r['set']:>11s} {r['n']:5d} {r['outcome']:8.3f}{per} {cell(r['sign_on_decided']):>15s}")
    return "\n".join(lines)
