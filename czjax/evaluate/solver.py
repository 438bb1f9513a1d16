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

import dataclasses
import gzip
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jax
import numpy as np

from czjax import game, minimax, models
from czjax.agents import Agent, policy
from czjax.models.layers import backend_method
from czjax.search import azjl_stream, is_search
from czjax.search.azjl import AlphaZeroJlMCTS
from czjax.util.progress import Progress
from czjax.util.specs import PlayerSpec

PLY_BIN = 5
# How the protocol's searches compute a network's 3x3 convolutions, by backend: on a CPU, where
# the network is nearly the whole cost, XLA's own convolution (compiled with czjax's options for
# convolutions): a pool step of czjax@4 on 512 boards took 335 ms against 427 with Winograd's
# F(2x2, 3x3), whose transforms are passes bound by memory (docs/strength.md, "The yardstick";
# the same moves, tests/test_protocol.py); elsewhere the model's own.
YARDSTICK_CONV = {"cpu": "xla"}
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


# ---------------------------------------------------------------------------------------------
# Pascal Pons' benchmark sets: does the value say win, draw or loss?

PONS_SETS = ("Test_L3_R1", "Test_L2_R1", "Test_L2_R2", "Test_L1_R1", "Test_L1_R2", "Test_L1_R3")
OUTCOMES = ("loss", "draw", "win")
DRAW_BAND = 1.0 / 3.0  # a value within +-1/3 reads as a draw
# AlphaZero.jl's Connect Four benchmark: the error rate (%) of a player's move on each set, an
# error being a move that does not keep the game-theoretic outcome. Its order and names:
PONS_REFERENCE_ORDER = ("Test_L1_R1", "Test_L2_R1", "Test_L3_R1", "Test_L1_R2", "Test_L2_R2", "Test_L1_R3")
PONS_NAMES = {
    "Test_L1_R1": "beginning-easy",
    "Test_L2_R1": "middle-easy",
    "Test_L3_R1": "end-easy",
    "Test_L1_R2": "beginning-medium",
    "Test_L2_R2": "middle-medium",
    "Test_L1_R3": "beginning-hard",
}
# AlphaZero.jl's Connect Four tutorial plots, per set, the error rate of its benchmark player over
# the training iterations beside depth-5 minimax (``games/connect-four/scripts/pons_benchmark.jl``);
# read off that plot (docs/src/assets/img/connect-four/pons-benchmark-results.png): the untrained
# 5x128 ResNet under MCTS-600 (iteration 0), depth-5 minimax, and the network after 15 iterations
# (5,000 games x 600 simulations each, 15-30 hours on an RTX 2070).
PONS_REFERENCE = {
    "azjl-iter0": {
        "Test_L1_R1": 3.7,
        "Test_L2_R1": 1.3,
        "Test_L3_R1": 1.0,
        "Test_L1_R2": 11.7,
        "Test_L2_R2": 11.0,
        "Test_L1_R3": 35.0,
    },
    "minimax-5": {
        "Test_L1_R1": 1.7,
        "Test_L2_R1": 0.7,
        "Test_L3_R1": 1.4,
        "Test_L1_R2": 7.3,
        "Test_L2_R2": 9.2,
        "Test_L1_R3": 23.5,
    },
    "azjl-iter15": {
        "Test_L1_R1": 0.0,
        "Test_L2_R1": 0.0,
        "Test_L3_R1": 0.0,
        "Test_L1_R2": 2.0,
        "Test_L2_R2": 2.7,
        "Test_L1_R3": 7.3,
    },
}
PONS_REFERENCE_LABELS = {
    "azjl-iter0": "AlphaZero.jl iteration 0 (untrained network + MCTS-600)",
    "minimax-5": "depth-5 minimax (AlphaZero.jl's baseline)",
    "azjl-iter15": "AlphaZero.jl iteration 15 (MCTS-600)",
}

# AlphaZero.jl's benchmark player (``test_alphazero``): its MCTS with 600 simulations, cpuct 2,
# no Dirichlet noise, temperature 0 (the most visited column, the lowest on ties).
PROTOCOLS = {"alphazero.jl": "azjl:sims=600,c=2.0"}


def protocol_spec(protocol: str, spec: PlayerSpec) -> PlayerSpec:
    """The player ``spec`` as ``protocol`` scores it: a network (or a built-in player) under the
    protocol's search; a search or minimax as it is. One-line ``ValueError`` for an unknown
    protocol."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    if is_search(spec) or spec.name == minimax.NAME:
        return spec
    return dataclasses.replace(PlayerSpec.parse(PROTOCOLS[protocol]), base=spec)


def default_pons_dir() -> Path:
    return Path(str(resources.files("czjax") / "data" / "pons"))


def default_pons_moves_path() -> Path:
    return Path(str(resources.files("czjax") / "data" / "pons_moves.jsonl.gz"))


def load_pons_moves(path=None) -> dict[str, dict]:
    """Pons' six sets with every column's exact score (``czjax/data/pons_moves.jsonl.gz``, the
    format of the public positions file plus ``set``): ``{set name: {"boards", "scores (N,
    7)", "moves"}}`` in AlphaZero.jl's order."""
    positions = load_positions(path if path is not None else default_pons_moves_path())
    names = [n for n in PONS_REFERENCE_ORDER if n in positions["set"]] + sorted(
        {n for n in positions["set"] if n not in PONS_REFERENCE_ORDER and n is not None}
    )
    if not names:
        raise ValueError(f"{path}: no record names its Pons set ('set')")
    which = np.asarray(positions["set"], dtype=object)
    return {
        name: {
            "boards": positions["boards"][which == name],
            "scores": positions["scores"][which == name],
            "moves": [m for m, s in zip(positions["moves"], positions["set"]) if s == name],
        }
        for name in names
    }


def load_pons(directory=None) -> dict[str, dict]:
    """Pascal Pons' benchmark sets.

    Args:
        directory: a folder of ``Test_L*_R*`` files (lines ``MOVES SCORE``, the position's exact
            value only: no move errors then); default: the shipped sets with every column's
            score (:func:`load_pons_moves`).

    Returns:
        ``{set name: {"boards": int8 (N, 6, 7), "value": (N,), "moves": [str], "scores": (N, 7)
        where known}}`` in AlphaZero.jl's order.

    Raises:
        ValueError: one line naming the file and line of a malformed record.
    """
    if directory is None:
        sets = load_pons_moves()
        for data in sets.values():
            data["value"] = np.nanmax(data["scores"], axis=1)
        return sets
    directory = Path(directory)
    names = [n for n in PONS_SETS if (directory / n).is_file()] or sorted(p.name for p in directory.glob("Test_*"))
    if not names:
        raise ValueError(f"no Pons benchmark sets (Test_L*_R*) in {directory}")
    sets = {}
    for name in names:
        boards, values, moves = [], [], []
        for lineno, line in enumerate((directory / name).read_text().splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split()
            try:
                if len(parts) != 2:
                    raise ValueError("a line is 'moves score'")
                boards.append(game.from_moves(parts[0]))
                values.append(int(parts[1]))
            except ValueError as err:
                raise ValueError(f"{directory / name}:{lineno}: {err}") from None
            moves.append(parts[0])
        sets[name] = {"boards": np.stack(boards), "value": np.asarray(values), "moves": moves}
    return sets


def value_outcome(value: np.ndarray) -> np.ndarray:
    """-1 / 0 / +1 (loss, draw, win) read from values in [-1, 1]: a draw within +-1/3."""
    return np.where(value > DRAW_BAND, 1, np.where(value < -DRAW_BAND, -1, 0))


def move_errors(scores: np.ndarray, probs: np.ndarray, greedy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(greedy, expected)`` per position: 1 where the greedy move does not keep the
    game-theoretic outcome (AlphaZero.jl's error), and the probability that a move drawn from
    ``probs`` does not."""
    _, keeps, _ = good_columns(np.asarray(scores, np.float64))
    return (~keeps[np.arange(len(greedy)), greedy]).astype(np.float64), 1.0 - (
        np.asarray(probs, np.float64) * keeps
    ).sum(1)


def stopped_searches(
    agent: Agent, boards, progress: Progress | None = None, game_end_rounds: int | None = None
) -> azjl_stream.StreamResult:
    """The protocol's searches of an ``agent`` that :func:`streams` from int8 ``boards (M, 6, 7)``,
    each stopped once its move is decided (:func:`czjax.search.azjl_stream.stream_search`), its
    network computing convolutions as :data:`YARDSTICK_CONV` says. ``game_end_rounds``: the
    rounds of game-ending simulations before each network call (default
    :func:`_game_end_rounds`'s choice for the network)."""
    model_name = agent.model_name if streams(agent) else None
    if model_name is None:
        raise ValueError(f"{agent.name}: the protocol's stopped searches need AlphaZero.jl's MCTS over a network")
    model = models.get_model(model_name, conv=backend_method("auto", YARDSTICK_CONV, "auto"))
    return azjl_stream.stream_search(
        agent.search,
        models.model_player(model),
        agent.params,
        boards,
        jax.random.key(0),
        progress=progress,
        convolutions=models.convolves(model),
        game_end_rounds=_game_end_rounds(model) if game_end_rounds is None else game_end_rounds,
    )


def _set_policies(agent: Agent, sets: dict, log=None, stop_when_decided: bool = False):
    """Per Pons set, ``(name, data, probs, value, greedy, counts)`` of ``agent`` on its positions,
    with one progress line over all the sets (``counts``: each search's simulations and network
    evaluations, ``(sims, evaluations)``, where they were stopped when decided, else None).
    ``stop_when_decided``: where the agent is AlphaZero.jl's MCTS over a network, every
    position's search is stopped once its move is decided (:mod:`czjax.search.azjl_stream`):
    the same moves, the probs and value those at the stop."""
    progress = Progress(log, "positions", sum(len(data["boards"]) for data in sets.values()))
    if stop_when_decided and streams(agent):
        found = stopped_searches(agent, np.concatenate([data["boards"] for data in sets.values()]), progress)
        start = 0
        for name, data in sets.items():
            rows = slice(start, start + len(data["boards"]))
            start = rows.stop
            counts = (found.sims_used[rows], found.evaluations[rows])
            yield name, data, found.policy[rows], found.value[rows], found.action[rows], counts
        return
    for name, data in sets.items():
        yield (name, data, *policy(agent, data["boards"], progress=progress), None)


def _game_end_rounds(model) -> int:
    """Rounds of game-ending simulations before each network call of the protocol's pool: they
    pay for a convolutional network's call, not for an MLP's, which costs about a walk of the
    pool (the untrained MLP3 on 1,500 of Pons' positions, 2-core CPU: 55 s with none, 67 s with
    4 rounds, 82 s with 8; docs/results/pons-protocol/yardstick-xla-conv-2026-11-27)."""
    return azjl_stream.GAME_ENDS_PER_STEP if isinstance(model, (models.ResNet, models.CNNMk4)) else 0


def streams(agent: Agent) -> bool:
    """Whether ``agent``'s moves can come from searches stopped when decided: AlphaZero.jl's MCTS
    (with transpositions) over a network, whose evaluations draw nothing at random."""
    search = agent.search
    return isinstance(search, AlphaZeroJlMCTS) and search.transpositions and agent.model_name is not None


def stops_when_decided(agent: Agent, protocol: str | None, full_searches: bool) -> bool:
    """Whether :func:`pons` stops each of ``agent``'s searches once its move is decided: under a
    protocol, unless ``full_searches``, for a player that :func:`streams`."""
    return protocol is not None and not full_searches and streams(agent)


def pons_greedy_errors(agent: Agent, sets: dict, log=None) -> dict[str, np.ndarray]:
    """Per set, 1 for each position whose greedy move (the most likely column, the lowest on ties:
    AlphaZero.jl's ``argmax(pi)``) does not keep the game-theoretic outcome, else 0: the
    per-position errors behind :func:`pons`'s rates, for paired comparisons of two players."""
    return {
        name: move_errors(data["scores"], probs, greedy)[0]
        for name, data, probs, _, greedy, _ in _set_policies(agent, sets, log)
    }


def pons(agent: Agent, sets: dict, log=None, protocol: str | None = None, full_searches: bool = False) -> dict:
    """Move error on Pons' sets as AlphaZero.jl measures it.

    An error is a move that does not keep the game-theoretic outcome (``optimal_on`` false).
    The move is the player's most likely column or the search's move; for a player that samples
    (random, RandomPunisher) the expectation over its draw, unless ``protocol`` is given.

    Args:
        agent: the player (for AlphaZero.jl's protocol, the one :func:`protocol_spec` names).
        sets: from :func:`load_pons`.
        log: a callable for progress lines while a slow player (a search) works.
        protocol: the protocol the agent was built for (``"alphazero.jl"``): the move is always
            its most likely column, the lowest on ties (AlphaZero.jl's ``argmax(pi)``), and the
            report says so. Under it each MCTS over a network stops once its move is decided
            (:mod:`czjax.search.azjl_stream`): the same moves in about three fifths of the
            simulations; the root values read are those at the stop.
        full_searches: run every search to its last simulation all the same (the root values
            of the whole search).

    Returns:
        A report: per set ``move_error`` (%) beside AlphaZero.jl's reference rows, and, when the
        player has a value (a value head, or a search's root value), how often it reads the
        outcome right; ``mean_move_error`` over the sets; with searches stopped when decided, each
        set's mean ``simulations`` and network ``evaluations`` a search (a simulation that ends
        the game needs none).
    """
    with_value = agent.has_value or agent.search is not None
    samples = agent.temperature() > 0 and protocol is None
    stop_when_decided = stops_when_decided(agent, protocol, full_searches)
    report: dict = {
        "player": agent.name,
        "protocol": protocol,
        "draw_band": DRAW_BAND,
        "move": "expected over its draw" if samples else "greedy",
        "searches": "stopped when decided" if stop_when_decided else "full",
        "reference": PONS_REFERENCE,
        "reference_labels": PONS_REFERENCE_LABELS,
        "sets": [],
    }
    for name, data, probs, value, greedy, counts in _set_policies(agent, sets, log, stop_when_decided):
        row: dict = {"set": name, "name": PONS_NAMES.get(name, name), "n": int(len(data["boards"]))}
        if counts is not None:  # what the protocol's searches took, on average
            row["simulations"], row["evaluations"] = (float(c.mean()) for c in counts)
        if "scores" in data:
            greedy_error, expected_error = move_errors(data["scores"], probs, greedy)
            row["move_error"] = 100.0 * float((expected_error if samples else greedy_error).mean())
            row["greedy_error"] = 100.0 * float(greedy_error.mean())
        row.update({f"ref_{k}": v.get(name) for k, v in PONS_REFERENCE.items()})
        if with_value:
            row.update(outcome_read(data["value"], value))
        report["sets"].append(row)
    errors = [r["move_error"] for r in report["sets"] if "move_error" in r]
    report["mean_move_error"] = float(np.mean(errors)) if errors else None
    return report


def outcome_read(true_value: np.ndarray, value: np.ndarray) -> dict:
    """How often ``value`` reads the outcome of ``true_value`` right (:func:`value_outcome`):
    over every position (``outcome``), by its sign alone on the decided ones
    (``sign_on_decided``), and per true outcome (``loss``, ``draw``, ``win``, with their counts
    ``n_loss``, ...); None where no position has that outcome."""
    truth = np.sign(true_value)
    guess = value_outcome(value)
    decided = truth != 0
    read: dict = {
        "outcome": float((guess == truth).mean()),
        "sign_on_decided": float((np.sign(value[decided]) == truth[decided]).mean()) if decided.any() else None,
    }
    for outcome, label in zip((-1, 0, 1), OUTCOMES):
        mask = truth == outcome
        read[f"n_{label}"] = int(mask.sum())
        read[label] = float((guess[mask] == outcome).mean()) if mask.any() else None
    return read


def format_pons(report: dict) -> str:
    def cell(x, width=5, fmt="{:5.3f}"):
        return " " * (width - 1) + "-" if x is None else fmt.format(x)

    refs = list(report["reference"])
    protocol = f"; protocol {report['protocol']}" if report.get("protocol") else ""
    if report.get("searches") == "stopped when decided":
        protocol += ", each search stopped once its move was decided"
    lines = [
        f"{report['player']}: move error (%), a move that does not keep the game-theoretic outcome "
        f"(AlphaZero.jl's measure; {report['move']} move{protocol})"
    ]
    lines.append(f"{'set':>11s} {'':16s} {'n':>5s} {'error':>6s} " + " ".join(f"{r:>12s}" for r in refs))
    for r in report["sets"]:
        lines.append(
            f"{r['set']:>11s} {r['name']:16s} {r['n']:5d} {cell(r.get('move_error'), 6, '{:6.1f}')} "
            + " ".join(f"{cell(r[f'ref_{k}'], 12, '{:12.1f}')}" for k in refs)
        )
    if report["mean_move_error"] is not None:
        means = [np.mean([v for v in report["reference"][k].values()]) for k in refs]
        lines.append(
            f"{'mean':>11s} {'':16s} {'':5s} {report['mean_move_error']:6.1f} " + " ".join(f"{m:12.1f}" for m in means)
        )
    labels = report.get("reference_labels", {})
    lines.extend(f"  {k}: {labels[k]}" for k in refs if k in labels)
    if all("simulations" in r for r in report["sets"]) and report["sets"]:
        lines.append(
            "per search until its move was decided, mean simulations (network evaluations): "
            + ", ".join(f"{r['set']} {r['simulations']:.0f} ({r['evaluations']:.0f})" for r in report["sets"])
        )
    if any("outcome" in r for r in report["sets"]):
        lines.append(f"outcome read from the value (a draw within +-{report['draw_band']:.2f}):")
        lines.append(
            f"{'set':>11s} {'n':>5s} {'outcome':>8s} {'win':>11s} {'draw':>11s} {'loss':>11s} {'sign (decided)':>15s}"
        )
        for r in report["sets"]:
            per = "".join(f" {cell(r[k])} ({r[f'n_{k}']:4d})" for k in ("win", "draw", "loss"))
            lines.append(f"{r['set']:>11s} {r['n']:5d} {r['outcome']:8.3f}{per} {cell(r['sign_on_decided']):>15s}")
    return "\n".join(lines)
