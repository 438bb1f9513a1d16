"""What the reporting commands share: a report as text or JSON, notes on stderr."""

from __future__ import annotations

import json
import sys


def print_report(args, report: dict, fmt) -> int:
    print(json.dumps(report, indent=1) if args.json else fmt(report))
    return 0


# A game between trained players lasts about 22 plies, 11 moves per side (for the cost notes).
AVERAGE_MOVES_PER_SIDE = 11


def stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def announced(agent, moves: int, what: str, stopped: bool = False):
    """``agent``, after saying on stderr when ``moves`` of its moves are a large job (a search);
    ``stopped``: each search stops once its move is decided, so the count is a bound."""
    note = agent.cost_note(moves, what, stopped)
    if note:
        stderr(note)
    return agent


def counted(count: int, noun: str) -> str:
    """``count`` with ``noun`` in the singular or plural: "1 checkpoint promotion", "3 ..."."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
