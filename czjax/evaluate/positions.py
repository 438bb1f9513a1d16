"""Solver-labelled positions and accuracy: how often a player's move is optimal, or keeps the
game's outcome.

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

import gzip
import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from czjax import game
from czjax.players.agent import Agent, policy
from czjax.util.progress import Progress

PLY_BIN = 5
ACCURACY_KEYS = ("greedy_optimal", "greedy_keeps_outcome", "sampled_optimal", "sampled_keeps_outcome")


def default_positions_path() -> Path:
    return Path(str(resources.files("czjax") / "data" / "c4_eval_public.jsonl"))


def read_game_records(path, what: str, required: tuple[str, ...]):
    """Yield ``(where, record, board)`` for each line of a JSON Lines file of positions given
    by ``moves`` (a 1-based solver move string): ``where`` is ``path:line`` for messages,
    ``board`` the canonical position. Raises ValueError naming the line of a record that is
    not JSON, lacks one of ``required``, has an illegal move string, or ends the game (a side has
    four in a row, or the board is full: there is no move to judge); and naming the file when it
    is not text (not UTF-8, or a ``.gz`` that is not gzip)."""
    import zlib

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no {what} file at {path}")
    try:
        with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8") as f:
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
                if game.host_has_four(board == -1):
                    raise ValueError(f"{where}: the game is already over (the side that moved last has four in a row)")
                if not (board[0] == 0).any():
                    raise ValueError(f"{where}: the game is already over (the board is full)")
                yield where, record, board
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text file (not UTF-8): a {what} file is JSON Lines") from None
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise ValueError(f"{path} is not a whole gzip file: a .gz {what} file is gzipped JSON Lines") from None


def load_positions(path=None) -> dict[str, Any]:
    """Read a file of solver-labelled positions.

    Args:
        path: JSON Lines (or gzipped ``.gz``) in the format of ``czjax/data/c4_eval_public.jsonl``;
            default: that file, the 1,000 public positions.

    Returns:
        ``{"boards": int8 (N, 6, 7), "scores": float (N, 7) (NaN: a full column), "ply": (N,),
        "moves": [str], "set": [str or None]}``.

    Raises:
        ValueError: one line naming the file and line of a malformed record.
    """
    path = Path(path) if path is not None else default_positions_path()
    boards, scores, plies, moves, sets = [], [], [], [], []
    for where, record, board in read_game_records(path, "positions", ("moves", "scores")):
        row = record["scores"]
        if not isinstance(row, list) or len(row) != game.COLS:
            raise ValueError(f"{where}: 'scores' must be a list of 7 entries")
        legal = board[0] == 0
        for c, (s, ok) in enumerate(zip(row, legal)):
            if ok != (s is not None) or (s is not None and not isinstance(s, (int, float))):
                raise ValueError(
                    f"{where}: score of column {c + 1} must be a number for a legal column and null for a full one"
                )
        if "board" in record and game.to_string(board) != record["board"]:
            raise ValueError(f"{where}: 'board' does not match the position after 'moves'")
        boards.append(board)
        scores.append([np.nan if s is None else float(s) for s in row])
        plies.append(len(record["moves"].strip()))
        moves.append(record["moves"])
        sets.append(record.get("set"))
    if not boards:
        raise ValueError(f"{path} holds no positions")
    return {
        "boards": np.stack(boards),
        "scores": np.asarray(scores, np.float64),
        "ply": np.asarray(plies, np.int32),
        "moves": moves,
        "set": sets,
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

    def summary(mask) -> dict[str, Any]:
        out: dict[str, Any] = {"n": int(mask.sum())}
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


def accuracy(agent: Agent, positions: dict, log=None) -> dict:
    """How often an agent's move is optimal, or keeps the game's outcome.

    Args:
        agent: the player.
        positions: from :func:`load_positions`.
        log: a callable for progress lines while a slow player (a search) works.

    Returns:
        A report: ``greedy_optimal``, ``greedy_keeps_outcome``, ``sampled_optimal``,
        ``sampled_keeps_outcome`` (exact expectations over the player's distribution), the same
        on positions not already lost, and ``by_ply`` in bins of five plies.
    """
    probs, _, greedy = policy(agent, positions["boards"], progress=Progress(log, "positions", len(positions["boards"])))
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
