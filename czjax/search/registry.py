"""The table of searches (:data:`SEARCHES`), their options parsed from text
(:func:`make_search`, :func:`parse_spec`), and a search as a player (:func:`search_player`).

A new search is one module (a frozen settings dataclass with ``run``, ``logits`` and ``check``,
see :class:`czjax.search.base.Search`) and one entry here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from czjax.players import Player, PlayerOutput
from czjax.search.azjl import AlphaZeroJlMCTS
from czjax.search.base import CONNECT_FOUR, Environment, Search
from czjax.search.gumbel import Gumbel
from czjax.search.playouts import RolloutImprover
from czjax.search.puct import PUCT
from czjax.util.options import OptionValue, make_settings

SEARCHES: dict[str, Callable[..., Search]] = {
    "playouts": RolloutImprover,
    "mcts": PUCT,
    "entropy-mcts": functools.partial(PUCT, entropy=True),
    "gumbel": Gumbel,
    "azjl": AlphaZeroJlMCTS,
}
"""Each search's name in specs -> its settings (a dataclass, or one with a setting fixed)."""

SEARCH_ALIASES = {"rollout": "playouts"}
"""Names a search had before, still read where users type them (specs, stored configs)."""


def make_search(name: str, options: str | Mapping[str, OptionValue] = "") -> Search:
    """A search's settings by name.

    Args:
        name: one of :data:`SEARCHES` (or an earlier name in :data:`SEARCH_ALIASES`).
        options: ``"sims=64,c=1.5"`` or a dict; the rest keep their defaults.

    Returns:
        The search (a frozen dataclass: :class:`czjax.search.Search`), checked.

    Raises:
        ValueError: one line: an unknown name or option, or a value that does not parse or is
            out of range.
    """
    name = SEARCH_ALIASES.get(name, name)
    if name not in SEARCHES:
        raise ValueError(f"unknown search {name!r}; choose one of {', '.join(SEARCHES)}")
    return make_settings(name, SEARCHES[name], options)


def search_options() -> str:
    """Every search with its options and their defaults, for help texts."""
    parts = []
    for name, factory in SEARCHES.items():
        defaults = factory()
        fixed = getattr(factory, "keywords", {})  # an entry with settings fixed (entropy-mcts) hides them
        fields = [f.name for f in dataclasses.fields(defaults) if f.name not in fixed]
        parts.append(f"{name} ({', '.join(f'{f}={getattr(defaults, f)}' for f in fields)})")
    return "; ".join(parts)


def parse_spec(spec: str) -> tuple[Search, str] | None:
    """``(search, base spec)`` for a player spec ``NAME:OPTIONS:BASE`` or ``NAME:BASE``
    (``mcts:sims=64:runs/ex3``, ``gumbel:runs/ex3``, ``playouts:width=4,depth=4:runs/ex3``), or
    None when ``spec`` does not start with a search's name."""
    name, sep, rest = spec.partition(":")
    if not sep or SEARCH_ALIASES.get(name, name) not in SEARCHES:
        return None
    options, sep, base = rest.partition(":")
    if "=" not in options:  # no options: everything after the name is the player (which may hold colons)
        options, base = "", rest
    if not base:
        raise ValueError(f"{spec!r} names no player to search with (e.g. {name}:sims=64:runs/ex3)")
    return make_search(name, options), base


@functools.cache
def search_player(search: Search, player: Player, env: Environment = CONNECT_FOUR) -> Player:
    """A search over a network as a player. Cached, so the same search over the same network is
    the same function (no recompiles).

    Args:
        search: the search's settings (:func:`make_search`).
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
