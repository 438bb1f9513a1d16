"""Options written as text, ``"key=value,..."``, read into a settings dataclass: one parser for
every spec a user types (a search's ``mcts:sims=600``, ``minimax:depth=5``, a model's
``resnet:blocks=2,channels=32``).

A settings dataclass has a default for every field (whose type tells how its text is read), may
name earlier spellings of its options (``option_aliases``, a class attribute) and checks its
values (``check()``, raising a one-line ``ValueError``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

OptionValue = str | int | float | bool


def split_options(options: str) -> dict[str, str]:
    """``"sims=64,c=1.5"`` -> ``{"sims": "64", "c": "1.5"}``; one-line ``ValueError`` otherwise."""
    pairs = [item.partition("=") for item in options.split(",") if item.strip()]
    if any(not sep for _, sep, _ in pairs):
        raise ValueError(f"options are key=value pairs separated by commas, got {options!r}")
    return {k.strip(): v.strip() for k, _, v in pairs}


def parse_option(name: str, field: dataclasses.Field[Any], text: OptionValue) -> OptionValue:
    """The value of option ``field`` of ``name`` (a search, a player, a model) from ``text`` (or a
    Python value), of the type of the field's default; one-line ``ValueError`` when it does not parse."""
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
    """``factory(**options)`` checked: the settings dataclass of ``name`` (a search, a player
    with options such as ``minimax``, a model such as ``resnet``) from ``"key=value,..."`` text or a dict; one-line
    ``ValueError`` for an unknown option or a value that does not parse or is out of range."""
    fields = {f.name: f for f in dataclasses.fields(factory())}
    aliases = getattr(factory, "option_aliases", {})  # options' earlier names
    if isinstance(options, str):
        options = split_options(options)
    values = {}
    for key, text in options.items():
        key = aliases.get(key, key)
        if key not in fields:
            raise ValueError(f"{name} has no option {key!r}; its options are {', '.join(fields)}")
        values[key] = parse_option(name, fields[key], text)
    settings = factory(**values)
    settings.check()
    return settings
