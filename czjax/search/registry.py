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

SEARCHES: dict[str, Callable[..., Search]] = {
    "rollout": RolloutImprover,
    "mcts": PUCT,
    "entropy-mcts": functools.partial(PUCT, entropy=True),
    "gumbel": Gumbel,
    "azjl": AlphaZeroJlMCTS,
}
"""Each search's name in specs -> its settings (a dataclass, or one with a setting fixed)."""

OptionValue = str | int | float | bool


def split_options(options: str) -> dict[str, str]:
    """``"sims=64,c=1.5"`` -> ``{"sims": "64", "c": "1.5"}``; one-line ``ValueError`` otherwise."""
    pairs = [item.partition("=") for item in options.split(",") if item.strip()]
    if any(not sep for _, sep, _ in pairs):
        raise ValueError(f"options are key=value pairs separated by commas, got {options!r}")
    return {k.strip(): v.strip() for k, _, v in pairs}


def parse_option(name: str, field: dataclasses.Field[Any], text: OptionValue) -> OptionValue:
    """The value of option ``field`` of search ``name`` from ``text`` (or a Python value), of the
    type of the field's default; one-line ``ValueError`` when it does not parse."""
    default = field.default
    try:
        if isinstance(default, bool):
            return (
                text
                if isinstance(text, bool)
                else {"1": True, "true": True, "0": False, "false": False}[str(text).lower()]
            )
        if isinstance(default, str):
            return str(text)
        if isinstance(default, int):
            return int(text)
        return float(text)
    except (KeyError, ValueError):
        expected = "0 or 1" if isinstance(default, bool) else "a number" if isinstance(default, float) else "an integer"
        raise ValueError(f"{name} option {field.name} must be {expected}, got {text!r}") from None


def make_settings(name: str, factory: Callable[..., Any], options: str | Mapping[str, OptionValue] = "") -> Any:
    """``factory(**options)`` checked: the settings dataclass of ``name`` (a search, or another
    player with options such as ``minimax``) from ``"key=value,..."`` text or a dict; one-line
    ``ValueError`` for an unknown option or a value that does not parse or is out of range."""
    fields = {f.name: f for f in dataclasses.fields(factory())}
    if isinstance(options, str):
        options = split_options(options)
    values = {}
    for key, text in options.items():
        if key not in fields:
            raise ValueError(f"{name} has no option {key!r}; its options are {', '.join(fields)}")
        values[key] = parse_option(name, fields[key], text)
    settings = factory(**values)
    settings.check()
    return settings


def make_search(name: str, options: str | Mapping[str, OptionValue] = "") -> Search:
    """The search ``name`` with ``options`` (``"sims=64,c=1.5"`` or a dict); one-line
    ``ValueError`` for an unknown name, option or value."""
    if name not in SEARCHES:
        raise ValueError(f"unknown search {name!r}; choose one of {', '.join(SEARCHES)}")
    return make_settings(name, SEARCHES[name], options)


def search_options() -> str:
    """Every search with its options and their defaults, for help texts."""
    parts = []
    for name, factory in SEARCHES.items():
        defaults = factory()
        fields = [f.name for f in dataclasses.fields(defaults) if not (name == "entropy-mcts" and f.name == "entropy")]
        parts.append(f"{name} ({', '.join(f'{f}={getattr(defaults, f)}' for f in fields)})")
    return "; ".join(parts)


def parse_spec(spec: str) -> tuple[Search, str] | None:
    """``(search, base spec)`` for a player spec ``NAME:OPTIONS:BASE`` or ``NAME:BASE``
    (``mcts:sims=64:runs/ex3``, ``gumbel:runs/ex3``, ``rollout:width=4,depth=4:runs/ex3``), or
    None when ``spec`` does not start with a search's name."""
    name, sep, rest = spec.partition(":")
    if not sep or name not in SEARCHES:
        return None
    options, sep, base = rest.partition(":")
    if "=" not in options:  # no options: everything after the name is the player (which may hold colons)
        options, base = "", rest
    if not base:
        raise ValueError(f"{spec!r} names no player to search with (e.g. {name}:sims=64:runs/ex3)")
    return make_search(name, options), base


@functools.cache
def search_player(search: Search, player: Player, env: Environment = CONNECT_FOUR) -> Player:
    """``search`` over ``player``'s network in ``env`` as a player: its logits say the search's
    move (see each search's ``logits``), its value is the root's, its policy target the search's
    policy (zeros where the search says it is not to be trained on: no policy loss there).
    Cached, so the same search over the same network is the same function (no recompiles)."""

    def searched(params: Any, boards: jax.Array, key: jax.Array) -> PlayerOutput:
        out = search.run(player, params, boards, key, env=env)
        target = out.policy if out.trained is None else jnp.where(out.trained[:, None], out.policy, 0.0)
        return PlayerOutput(logits=search.logits(out), value=out.value, policy_target=target)

    searched.__name__ = f"{type(search).__name__}_{getattr(player, '__name__', 'player')}"
    return searched
