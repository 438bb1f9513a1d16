"""Tactical puzzles: win now, or block the opponent's single threat.

Two kinds, as in the PyTorch project's puzzle set:

* ``win``: the side to move can complete four at once; every winning column is an answer.
* ``block``: the side to move has no immediate win and the opponent threatens to complete four
  in exactly one column; that column is the only answer.

:func:`generate` finds them with czjax's own engine on device: it plays a batch of random games
(one compiled ``play_games``), classifies every position that occurred, drops repeats, and draws
the requested number of each kind with a seeded shuffle, so the set depends only on the seed.
The package ships the set for seed 0 (``czjax/data/puzzles.jsonl``, 5,000 of each kind).

Scores: a player's sampled success is the exact expected success under its move distribution
(the sum of its probabilities over the answers), its greedy success whether its most likely
column is an answer; with a value head, the error of its value on win puzzles (the side to move
wins with its next stone, so the target is +1).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from czjax import game
from czjax.evaluate.positions import read_game_records
from czjax.players import random_player, winning_columns
from czjax.players.agent import Agent, policy
from czjax.rollout import Side, play_games
from czjax.util.progress import Progress

KINDS = ("win", "block")
DEFAULT_PER_KIND = 5000
DEFAULT_SEED = 0
GAMES_PER_DRAW = 4096


def default_puzzles_path() -> Path:
    return Path(str(resources.files("czjax") / "data" / "puzzles.jsonl"))


@jax.jit
def _classify(boards: jax.Array):
    wins, threats = winning_columns(boards)
    return wins, threats


def _candidate_positions(key: jax.Array, num_games: int):
    """Every position of ``num_games`` random games: ``(moves (N, 42) int8 with -1 padding,
    plies (N,), boards (N, 6, 7))``, in ply-major order."""
    traj, _ = play_games(key, Side(random_player), Side(random_player), num_games)
    actions = np.asarray(traj.actions)  # (42, G)
    valid = np.asarray(traj.valid)
    boards = np.asarray(traj.boards())  # (42, G, 6, 7), the mover's view before each ply
    t_idx, g_idx = np.nonzero(valid)  # ply-major
    history = np.where(np.arange(game.NUM_CELLS)[None, :] < t_idx[:, None], actions[:, g_idx].T, -1).astype(np.int8)
    return history, t_idx.astype(np.int32), boards[t_idx, g_idx]


def generate(seed: int = DEFAULT_SEED, per_kind: int = DEFAULT_PER_KIND, log=None) -> list[dict]:
    """``per_kind`` puzzles of each kind, deterministic in ``seed``; a list of records
    ``{"id", "kind", "moves" (1-based solver string), "ply", "cols" (1-based answers)}``."""
    if per_kind <= 0:
        raise ValueError(f"the number of puzzles per kind must be positive, got {per_kind}")
    key = jax.random.key(seed)
    found: dict[str, dict[bytes, tuple]] = {kind: {} for kind in KINDS}
    draws = 0
    while min(len(v) for v in found.values()) < per_kind:
        if draws >= 64:
            raise RuntimeError(
                f"could not find {per_kind} distinct puzzles of each kind in {draws * GAMES_PER_DRAW} games"
            )
        key, draw_key = jax.random.split(key)
        history, plies, boards = _candidate_positions(draw_key, GAMES_PER_DRAW)
        wins, threats = (np.asarray(x) for x in _classify(jnp.asarray(boards)))
        kinds = {"win": wins.any(1), "block": ~wins.any(1) & (threats.sum(1) == 1)}
        for kind, mask in kinds.items():
            answers = wins if kind == "win" else threats
            for i in np.flatnonzero(mask):
                found[kind].setdefault(boards[i].tobytes(), (history[i, : plies[i]], answers[i]))
        draws += 1
        if log:
            log(
                f"  {draws * GAMES_PER_DRAW:,} random games: {len(found['win']):,} win and "
                f"{len(found['block']):,} block positions"
            )
    rng = np.random.default_rng(seed)
    records = []
    for kind in KINDS:
        candidates = list(found[kind].values())
        for j, i in enumerate(sorted(rng.permutation(len(candidates))[:per_kind])):
            moves, answers = candidates[i]
            records.append(
                {
                    "id": f"{kind}-{j:05d}",
                    "kind": kind,
                    "moves": "".join(str(int(c) + 1) for c in moves),
                    "ply": int(len(moves)),
                    "cols": [int(c) + 1 for c in np.flatnonzero(answers)],
                }
            )
    return records


def write(path, records: list[dict]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    tmp.replace(path)


def load(path=None) -> dict:
    """``kind (N,)``, ``boards (N, 6, 7)``, ``answers (N, 7) bool``, ``records``; ValueError
    naming the line of a malformed record."""
    path = Path(path) if path is not None else default_puzzles_path()
    records, boards, answers = [], [], []
    for where, record, board in read_game_records(path, "puzzles", ("kind", "moves", "cols")):
        kind, cols = record["kind"], record["cols"]
        if kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if not isinstance(cols, list) or not cols or any(c not in range(1, game.COLS + 1) for c in cols):
            raise ValueError(f"{where}: 'cols' must be a non-empty list of columns 1-7")
        mask = np.zeros(game.COLS, bool)
        mask[np.asarray(cols) - 1] = True
        records.append(record)
        boards.append(board)
        answers.append(mask)
    if not records:
        raise ValueError(f"{path} holds no puzzles")
    return {
        "kind": np.array([r["kind"] for r in records]),
        "boards": np.stack(boards),
        "answers": np.stack(answers),
        "records": records,
    }


def score(agent: Agent, puzzles: dict, log=None) -> dict:
    """Success rates of ``agent`` per kind: ``{kind: {n, sampled, greedy}}`` plus
    ``value_error_win`` (mean |1 - value| on win puzzles; None without a value head); ``log``:
    progress lines while a slow player (a search) works."""
    probs, value, greedy = policy(agent, puzzles["boards"], progress=Progress(log, "puzzles", len(puzzles["boards"])))
    answers = puzzles["answers"]
    sampled = (probs.astype(np.float64) * answers).sum(1)
    greedy_ok = answers[np.arange(len(greedy)), greedy]
    report: dict = {"player": agent.name}
    for kind in KINDS:
        mask = puzzles["kind"] == kind
        report[kind] = {
            "n": int(mask.sum()),
            "sampled": float(sampled[mask].mean()) if mask.any() else None,
            "greedy": float(greedy_ok[mask].mean()) if mask.any() else None,
        }
    win = puzzles["kind"] == "win"
    report["value_error_win"] = float(np.abs(1.0 - value[win]).mean()) if agent.has_value and win.any() else None
    return report


def format_score(report: dict) -> str:
    lines = [f"{report['player']}:", f"{'kind':>6s} {'n':>6s} {'sampled':>8s} {'greedy':>7s}"]
    for kind in KINDS:
        r = report[kind]
        if r["n"]:
            lines.append(f"{kind:>6s} {r['n']:6d} {r['sampled']:8.3f} {r['greedy']:7.3f}")
    if report["value_error_win"] is not None:
        lines.append(f"value head on win puzzles: mean |1 - value| = {report['value_error_win']:.3f}")
    return "\n".join(lines)
