"""The table of searches (:data:`SEARCHES`), and their options parsed from text
(:func:`make_search`; from a parsed spec, :func:`search_of` and :func:`split_search`). A search
as a player is :func:`czjax.players.searched.search_player`.

A new search is one module (a frozen settings dataclass with ``run``, ``logits`` and ``check``,
see :class:`czjax.search.base.Search`) and one entry here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from czjax.deprecation import moved
from czjax.search.azjl import AlphaZeroJlMCTS
from czjax.search.base import Search
from czjax.search.gumbel import Gumbel
from czjax.search.playouts import RolloutImprover
from czjax.search.puct import PUCT
from czjax.util.options import OptionValue, make_settings
from czjax.util.specs import PlayerSpec

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


def is_search(spec: PlayerSpec) -> bool:
    """Whether ``spec``'s name is a search's (of :data:`SEARCHES` or :data:`SEARCH_ALIASES`)."""
    return SEARCH_ALIASES.get(spec.name, spec.name) in SEARCHES


def search_of(spec: PlayerSpec) -> Search:
    """The search a spec without a player names, ``NAME[:OPTIONS]`` (``mcts:sims=32``: training's
    ``--search``, which searches the learner); one-line ``ValueError`` for a player after it, or
    as :func:`make_search`'s."""
    if spec.base is not None:
        raise ValueError(
            f"{str(spec)!r}: this search plays with the learner's network; give {spec.name}[:OPTIONS] with no player"
        )
    return make_search(spec.name, spec.options)


def split_search(spec: PlayerSpec) -> tuple[Search, PlayerSpec] | None:
    """``(search, the player it searches)`` of a player spec ``NAME[:OPTIONS]:PLAYER``
    (``mcts:sims=64:runs/ex3``, ``gumbel:runs/ex3``, ``playouts:width=4,depth=4:random``), or None
    when its name is no search's; one-line ``ValueError`` for a search with no player or bad options."""
    if not is_search(spec) or spec.plain:
        return None
    if spec.base is None or not str(spec.base):
        raise ValueError(f"{str(spec)!r} names no player to search with (e.g. {spec.name}:sims=64:runs/ex3)")
    return make_search(spec.name, spec.options), spec.base


# A search as a player moved to czjax.players.searched; its old name answers here for one release.
MOVED = {"search_player": "czjax.players.searched"}


def __getattr__(name: str) -> Any:
    return moved(__name__, MOVED, name)
