"""A spec as users type it, ``NAME[:OPTIONS][:BASE]``, parsed once into :class:`PlayerSpec`.

Every player a command or a config names is written in this grammar: a built-in player or a
path (``random``, ``runs/ex3``), a player with options (``minimax:depth=5``), a search over
another player (``mcts:sims=64:runs/ex3``, ``gumbel:czjax``), a fresh network
(``untrained:resnet:blocks=2,channels=32:1``). A training search (``--search mcts:sims=32``) and a
network (``--model resnet:blocks=5``) are the same grammar without a base. The text is split here
and only here; each consumer reads the parts it knows (the searches' table, the models' table,
minimax) from the typed value.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class PlayerSpec:
    """``NAME[:OPTIONS][:BASE]``, split.

    The second part is the options when it holds a ``=`` (``key=value,...``, read by
    :func:`czjax.util.options.make_settings`), else it starts the base: ``gumbel:runs/ex3``
    searches ``runs/ex3`` with the search's defaults. The base is itself a spec (``mcts:sims=8:
    untrained:mlp3`` searches ``untrained:mlp3``), so a path holding colons is read as one too:
    ``str(spec)`` gives back the text exactly, which is what a consumer that takes the spec as a
    path or a name uses.

    Attributes:
        name: the first part: a search's, a player's or a network's name, or a path.
        options: ``key=value,...``; empty when none are given.
        base: the player after the options (the one a search searches), or None.
    """

    name: str
    options: str = ""
    base: PlayerSpec | None = None

    @classmethod
    def parse(cls, text: str) -> PlayerSpec:
        """The spec ``text`` writes. Every text is one (a consumer refuses what it cannot use),
        and ``str(PlayerSpec.parse(text)) == text``."""
        name, sep, rest = text.partition(":")
        if not sep:
            return cls(name)
        options, sep, base = rest.partition(":")
        if "=" not in options:  # no options: everything after the name is the base (which may hold colons)
            return cls(name, "", cls.parse(rest))
        return cls(name, options, cls.parse(base) if sep else None)

    @property
    def head(self) -> PlayerSpec:
        """The spec without its base, ``NAME[:OPTIONS]``: a search or a network by itself."""
        return dataclasses.replace(self, base=None)

    @property
    def plain(self) -> bool:
        """Whether the spec is a name alone (a built-in player, a shipped model or a path)."""
        return not self.options and self.base is None

    def __str__(self) -> str:
        parts = [self.name]
        if self.options:
            parts.append(self.options)
        if self.base is not None:
            parts.append(str(self.base))
        return ":".join(parts)
