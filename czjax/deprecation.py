"""Old import paths kept for one release (CHANGELOG.md, "Deprecated"): a module whose names moved
answers for them from its ``__getattr__`` (PEP 562) with :func:`moved`, which warns and names the
new home. The new home is imported when a name is first used, not with the old module, so an
old module adds no import edge to the floors of docs/DESIGN.md."""

from __future__ import annotations

import importlib
import warnings
from typing import Any


def moved(old: str, homes: dict[str, str], name: str) -> Any:
    """``name`` of the old module ``old`` from its new module ``homes[name]``, with a
    ``DeprecationWarning`` that points at the caller's line; ``AttributeError`` for a name that
    ``old`` never had."""
    if name not in homes:
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    warnings.warn(
        f"{old}.{name} moved to {homes[name]}.{name}; import it from there ({old}.{name} goes in the next release)",
        DeprecationWarning,
        stacklevel=3,  # moved <- the old module's __getattr__ <- the line that asked
    )
    return getattr(importlib.import_module(homes[name]), name)
