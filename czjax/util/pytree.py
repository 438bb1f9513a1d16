"""The dataclass every pytree of czjax is declared with.

``chex.dataclass`` registers a frozen dataclass as a JAX pytree; type checkers do not know it
makes a dataclass, so they read it as the standard ``dataclasses.dataclass`` it is built on
(same fields, same constructor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dataclasses import dataclass as pytree_dataclass
else:
    from chex import dataclass as pytree_dataclass

__all__ = ["pytree_dataclass"]
