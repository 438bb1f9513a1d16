"""A network as a player: :func:`apply_model` (logits, and the value when it has a value head)
and :func:`model_player`, the ``(params, boards, key) -> PlayerOutput`` function of a model.
"""

from __future__ import annotations

import flax.linen as nn
import jax

from czjax.players import PlayerOutput


def model_player(model: nn.Module):
    """The model as a player ``(params, boards, key) -> PlayerOutput`` (logits, and the value
    when it has a value head).

    Cached per model (flax modules compare by their fields), so the same model gives the same
    function and jitted callers are not recompiled.
    """
    return _model_player(model)


_PLAYERS: dict = {}


def _model_player(model):
    if model not in _PLAYERS:

        def player(params, boards, key):
            del key
            logits, value = apply_model(model, params, boards)
            return PlayerOutput(logits=logits, value=value)

        player.__name__ = f"{type(model).__name__}_player"
        _PLAYERS[model] = player
    return _PLAYERS[model]


def apply_model(model: nn.Module, params, boards):
    """``(logits, value)``; ``value`` is None for a model without a value head."""
    with jax.named_scope("network"):
        out = model.apply(params, boards)
    if isinstance(out, tuple):
        return out
    return out, None
