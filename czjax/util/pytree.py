"""The dataclass every pytree of czjax is declared with.

``chex.dataclass`` registers a frozen dataclass as a JAX pytree; type checkers do not know it
makes a dataclass, so they read it as the standard ``dataclasses.dataclass`` it is built on
(same fields, same constructor).

The ``.replace(**changes)`` method chex adds is ``dataclasses.replace(self, **changes)``; a type
checker does not see it, so typed code calls ``dataclasses.replace(x, ...)`` (the same call, with
its field names checked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dataclasses import dataclass as pytree_dataclass
else:
    from chex import dataclass as pytree_dataclass

__all__ = ["pytree_dataclass"]
