"""Deprecated: agents moved into :mod:`czjax.players` (the :class:`Agent` and its queries to
:mod:`czjax.players.agent`, loading them to :mod:`czjax.players.loading`). Each old name still
answers here, with a ``DeprecationWarning``, for one release."""

from __future__ import annotations

from typing import Any

from czjax.deprecation import moved

_AGENT = ("Agent", "LARGE_JOB_EVALUATIONS", "SELF_PLAY_SLICE", "SearchedMove")
_QUERIES = ("in_batches", "policy", "search_details", "searched_each", "searched_move", "self_play", "visit_shares")
_LOADING = (
    "DEFAULT_OPPONENT",
    "SHIPPED_MODEL",
    "SHIPPED_MODELS",
    "SHIPPED_NAME",
    "TORCH_SUFFIXES",
    "UNTRAINED",
    "load_agent",
    "load_params",
    "load_weights",
    "network_agent",
    "shipped_path",
    "unknown_player",
    "untrained_agent",
    "with_search",
)
MOVED = {
    **{name: "czjax.players.agent" for name in (*_AGENT, *_QUERIES)},
    **{name: "czjax.players.loading" for name in _LOADING},
}


def __getattr__(name: str) -> Any:
    return moved(__name__, MOVED, name)
