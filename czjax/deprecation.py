"""Old import paths kept for one release (CHANGELOG.md, "Deprecated"): a module whose names moved
answers for them from its ``__getattr__`` (PEP 562) with :func:`moved`, which warns and names the
new home. The new home is imported when a name is first used, not with the old module, so an
old module adds no import edge to the floors of docs/DESIGN.md."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
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


class _RenamedPackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of ``old.<module>`` answered by ``new.<module>`` (the same module object), with a
    ``DeprecationWarning``: a renamed package's submodules keep their old import paths."""

    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def find_spec(self, fullname, path=None, target=None):
        if (
            not fullname.startswith(self.old + ".")
            or importlib.util.find_spec(self.new + fullname[len(self.old) :]) is None
        ):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = self.new + spec.name[len(self.old) :]
        warnings.warn(
            f"{spec.name} moved to {new}; import it from there ({spec.name} goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        """The module is the new one, already run."""


def renamed_package(old: str, new: str) -> None:
    """Let ``old.<module>`` imports find ``new.<module>``, once per process (call it from the old
    package's ``__init__``, whose ``__getattr__`` answers ``from old import <module>`` with
    :func:`moved_module`)."""
    if not any(isinstance(f, _RenamedPackage) and f.old == old for f in sys.meta_path):
        sys.meta_path.insert(0, _RenamedPackage(old, new))


def moved_module(old: str, new: str, name: str) -> Any:
    """``from old import name``, a module of the package renamed to ``new``, with a warning."""
    if importlib.util.find_spec(f"{new}.{name}") is None:
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    warnings.warn(
        f"{old}.{name} moved to {new}.{name}; import it from there ({old}.{name} goes in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )
    module = importlib.import_module(f"{new}.{name}")
    setattr(sys.modules[old], name, module)  # one warning: ``from old import name`` asks twice
    return module
