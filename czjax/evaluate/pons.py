"""Pascal Pons' benchmark sets, scored as AlphaZero.jl scores its networks: how often a player's
move does not keep the game-theoretic outcome (its move error), and how often its value reads the
outcome right.

The six sets ship with every column's exact score (``czjax/data/pons_moves.jsonl.gz``, the
format of :mod:`czjax.evaluate.positions`); a folder of Pons' own ``Test_L*_R*`` files holds each
position's value only. Under a protocol (:mod:`czjax.evaluate.protocol`) the player is the one the
protocol plays, its move always its most likely column, and its searches stopped when decided.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import numpy as np

from czjax import game
from czjax.evaluate.positions import good_columns, load_positions
from czjax.evaluate.protocol import (
    Protocol,
    SetPolicy,
    protocol_of,
    stopped_set_policies,
    stops_when_decided,
    streams,
)
from czjax.players.agent import Agent, policy
from czjax.util.progress import Progress

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


def set_policies(agent: Agent, sets: dict, log=None, stopped_by: Protocol | None = None) -> Iterator[SetPolicy]:
    """``agent`` on each Pons set's positions, with one progress line over all the sets.
    ``stopped_by``: where the agent is AlphaZero.jl's MCTS over a network, that protocol's scoring
    (:func:`czjax.evaluate.protocol.stopped_set_policies`: every search stopped once its move is
    decided, the same moves, the probs and value those at the stop, with each search's counts)."""
    progress = Progress(log, "positions", sum(len(data["boards"]) for data in sets.values()))
    if stopped_by is not None and streams(agent):
        yield from stopped_set_policies(agent, sets, progress, stopped_by)
        return
    for name, data in sets.items():
        yield SetPolicy(name, data, *policy(agent, data["boards"], progress=progress))


def pons_greedy_errors(agent: Agent, sets: dict, log=None) -> dict[str, np.ndarray]:
    """Per set, 1 for each position whose greedy move (the most likely column, the lowest on ties:
    AlphaZero.jl's ``argmax(pi)``) does not keep the game-theoretic outcome, else 0: the
    per-position errors behind :func:`pons`'s rates, for paired comparisons of two players."""
    return {
        row.name: move_errors(row.data["scores"], row.probs, row.greedy)[0] for row in set_policies(agent, sets, log)
    }


def pons(
    agent: Agent, sets: dict, log=None, protocol: Protocol | str | None = None, full_searches: bool = False
) -> dict:
    """Move error on Pons' sets as AlphaZero.jl measures it.

    An error is a move that does not keep the game-theoretic outcome (``optimal_on`` false).
    The move is the player's most likely column or the search's move; for a player that samples
    (random, RandomPunisher) the expectation over its draw, unless ``protocol`` is given.

    Args:
        agent: the player (for AlphaZero.jl's protocol, the one
            :func:`czjax.evaluate.protocol.protocol_agent` gives).
        sets: from :func:`load_pons`.
        log: a callable for progress lines while a slow player (a search) works.
        protocol: the protocol the agent was built for (``"alphazero.jl"``, or a
            :class:`czjax.evaluate.protocol.Protocol`): the move is always its most likely
            column, the lowest on ties (AlphaZero.jl's ``argmax(pi)``), and the report says so.
            Under it each MCTS over a network stops once its move is decided
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
    rules = None if protocol is None else protocol_of(protocol)
    samples = agent.temperature() > 0 and rules is None
    stopped = stops_when_decided(agent, rules, full_searches)
    report: dict = {
        "player": agent.name,
        "protocol": None if rules is None else rules.name,
        "draw_band": DRAW_BAND,
        "move": "expected over its draw" if samples else "greedy",
        "searches": "stopped when decided" if stopped else "full",
        "reference": PONS_REFERENCE,
        "reference_labels": PONS_REFERENCE_LABELS,
    }
    with_value = agent.has_value or agent.search is not None
    report["sets"] = [
        set_row(row, samples, with_value) for row in set_policies(agent, sets, log, rules if stopped else None)
    ]
    errors = [r["move_error"] for r in report["sets"] if "move_error" in r]
    report["mean_move_error"] = float(np.mean(errors)) if errors else None
    return report


def set_row(found: SetPolicy, samples: bool, with_value: bool) -> dict:
    """:func:`pons`'s row for one set: its move error (the expectation over the player's draw
    where it ``samples``), the reference rows, what the protocol's searches took on average, and
    the outcome read (``with_value``)."""
    row: dict = {"set": found.name, "name": PONS_NAMES.get(found.name, found.name), "n": int(len(found.data["boards"]))}
    if found.counts is not None:  # what the protocol's searches took, on average
        row["simulations"], row["evaluations"] = (float(c.mean()) for c in found.counts)
    if "scores" in found.data:
        greedy_error, expected_error = move_errors(found.data["scores"], found.probs, found.greedy)
        row["move_error"] = 100.0 * float((expected_error if samples else greedy_error).mean())
        row["greedy_error"] = 100.0 * float(greedy_error.mean())
    row.update({f"ref_{k}": v.get(found.name) for k, v in PONS_REFERENCE.items()})
    if with_value and found.value is not None:
        row.update(outcome_read(found.data["value"], found.value))
    return row


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
