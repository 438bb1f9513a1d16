"""A network as a player: :func:`apply_model` (logits, and the value when it has a value head)
and :func:`model_player`, the ``(params, boards, key) -> PlayerOutput`` function of a model.

Any Flax module that maps int8 boards to logits (and a value) will do, so this sits below the
models' table (:mod:`czjax.models`, which names both functions too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax

from czjax.players.base import Player, PlayerOutput

if TYPE_CHECKING:  # Flax is loaded by whoever builds a model; a player only calls its apply
    import flax.linen as nn


def model_player(model: nn.Module) -> Player:
    """The model as a player ``(params, boards, key) -> PlayerOutput`` (logits, and the value
    when it has a value head).

    Cached per model (flax modules compare by their fields), so the same model gives the same
    function and jitted callers are not recompiled.
    """
    if model not in _PLAYERS:

        def player(params, boards, key):
            del key
            logits, value = apply_model(model, params, boards)
            return PlayerOutput(logits=logits, value=value)

        player.__name__ = f"{type(model).__name__}_player"
        _PLAYERS[model] = player
    return _PLAYERS[model]


_PLAYERS: dict = {}


def apply_model(model: nn.Module, params, boards):
    """``(logits, value)``; ``value`` is None for a model without a value head."""
    with jax.named_scope("network"):
        out = model.apply(params, boards)
    if isinstance(out, tuple):
        return out
    return out, None
