"""Deprecated: this module was split by job, and its names resolve here for one more release, each
with a ``DeprecationWarning`` saying where it lives now:

- :mod:`czjax.evaluate.positions`: loading solver-labelled positions, accuracy on them;
- :mod:`czjax.evaluate.pons`: Pascal Pons' sets and their scoring (``load_pons``, ``pons``);
- :mod:`czjax.evaluate.protocol`: AlphaZero.jl's protocol (``protocol_spec``, the stopped
  searches; ``protocol_agent`` for ``load_agent(protocol_spec(...))``).

Names are looked up in their new home at each use, so a test that patches the new home patches
what this module gives too.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from typing import Any

from czjax.deprecation import moved

POSITIONS, PONS, PROTOCOL = "czjax.evaluate.positions", "czjax.evaluate.pons", "czjax.evaluate.protocol"
MOVED = {
    **dict.fromkeys(
        (
            "PLY_BIN",
            "ACCURACY_KEYS",
            "default_positions_path",
            "read_game_records",
            "load_positions",
            "good_columns",
            "accuracy_from_policy",
            "accuracy",
            "format_accuracy",
        ),
        POSITIONS,
    ),
    **dict.fromkeys(
        (
            "PONS_SETS",
            "OUTCOMES",
            "DRAW_BAND",
            "PONS_REFERENCE_ORDER",
            "PONS_NAMES",
            "PONS_REFERENCE",
            "PONS_REFERENCE_LABELS",
            "default_pons_dir",
            "default_pons_moves_path",
            "load_pons_moves",
            "load_pons",
            "value_outcome",
            "move_errors",
            "pons_greedy_errors",
            "pons",
            "outcome_read",
            "format_pons",
        ),
        PONS,
    ),
    **dict.fromkeys(("protocol_spec", "streams", "stops_when_decided"), PROTOCOL),
}
"""Each name this module had -> the module that holds it now, unchanged."""


def _protocols() -> dict[str, str]:
    """This module's ``PROTOCOLS``: each protocol's name -> its search spec (now
    :data:`czjax.evaluate.protocol.PROTOCOLS` holds the whole :class:`~czjax.evaluate.protocol.Protocol`)."""
    protocol = importlib.import_module(PROTOCOL)
    return {name: rules.search for name, rules in protocol.PROTOCOLS.items()}


def _stopped_searches(agent, boards, progress=None, game_end_rounds: int | None = None):
    """This module's ``stopped_searches``, whose rounds were an argument: now a field of the
    :class:`~czjax.evaluate.protocol.Protocol` that :func:`czjax.evaluate.protocol.stopped_searches` takes."""
    protocol = importlib.import_module(PROTOCOL)
    rules = dataclasses.replace(protocol.ALPHAZERO_JL, game_end_rounds=game_end_rounds)
    return protocol.stopped_searches(agent, boards, progress, rules)


CHANGED = {
    "PROTOCOLS": ("czjax.evaluate.protocol.PROTOCOLS (name -> Protocol)", _protocols),
    "stopped_searches": (
        "czjax.evaluate.protocol.stopped_searches (the rounds a field of its Protocol)",
        lambda: _stopped_searches,
    ),
}
"""Names whose replacement changed shape -> (the replacement, the old value)."""


def __getattr__(name: str) -> Any:
    if name == "YARDSTICK_CONV":
        raise AttributeError(
            "czjax.evaluate.solver.YARDSTICK_CONV is gone: the convolution of a network in the protocol's searches "
            "is its entry's search_cost.cpu_conv in czjax.models.MODELS"
        )
    if name not in CHANGED:
        return moved(__name__, MOVED, name)
    replacement, value = CHANGED[name]
    warnings.warn(
        f"{__name__}.{name} moved to {replacement}; import it from there ({__name__}.{name} goes in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return value()


def __dir__() -> list[str]:
    return sorted([*globals(), *MOVED, *CHANGED])
