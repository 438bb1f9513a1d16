"""A search over another player, as a player (:func:`search_player`): what training plays with a
search's moves, and what every evaluation command plays for a spec ``SEARCH[:OPTIONS]:PLAYER``."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from czjax.players.base import Player, PlayerOutput
from czjax.search.base import CONNECT_FOUR, Environment, Search


@functools.cache
def search_player(search: Search, player: Player, env: Environment = CONNECT_FOUR) -> Player:
    """A search over a network as a player. Cached, so the same search over the same network is
    the same function (no recompiles).

    Args:
        search: the search's settings (:func:`czjax.search.make_search`).
        player: the network's player, ``(params, boards, key) -> PlayerOutput``.
        env: the game as the search sees it (Connect 4 by default).

    Returns:
        A player whose ``logits (B, 7)`` say the search's move (see each search's ``logits``),
        whose ``value (B,)`` is the root's, and whose ``policy_target (B, 7)`` is the search's
        policy (zeros where the search says it is not to be trained on: no policy loss there).
    """

    def searched(params: Any, boards: jax.Array, key: jax.Array) -> PlayerOutput:
        out = search.run(player, params, boards, key, env=env)
        target = out.policy if out.trained is None else jnp.where(out.trained[:, None], out.policy, 0.0)
        return PlayerOutput(logits=search.logits(out), value=out.value, policy_target=target)

    searched.__name__ = f"{type(search).__name__}_{getattr(player, '__name__', 'player')}"
    return searched
