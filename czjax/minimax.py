"""Deprecated: AlphaZero.jl's minimax moved to :mod:`czjax.players.minimax`. Each old name still
answers here, with a ``DeprecationWarning``, for one release."""

from __future__ import annotations

from typing import Any

from czjax.deprecation import moved

MOVED = {
    name: "czjax.players.minimax"
    for name in (
        "ILLEGAL",
        "LEAVES_PER_CHUNK",
        "LINES",
        "LINE_FAMILIES",
        "NAME",
        "TIES",
        "WIN",
        "Minimax",
        "alignments",
        "best_moves",
        "from_spec",
        "heuristic",
        "minimax_choice",
        "move_values",
        "packed_heuristic",
    )
}


def __getattr__(name: str) -> Any:
    return moved(__name__, MOVED, name)
