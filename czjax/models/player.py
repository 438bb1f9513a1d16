"""Deprecated: a network as a player moved to :mod:`czjax.players.network` (``czjax.models``
still names :func:`czjax.models.model_player` and :func:`czjax.models.apply_model`). Each old
name still answers here, with a ``DeprecationWarning``, for one release."""

from __future__ import annotations

from typing import Any

from czjax.deprecation import moved

MOVED = {"apply_model": "czjax.players.network", "model_player": "czjax.players.network"}


def __getattr__(name: str) -> Any:
    return moved(__name__, MOVED, name)
