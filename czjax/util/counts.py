"""Counts that outgrow int32, without 64-bit types in JAX.

czjax runs JAX as it comes, without ``jax_enable_x64``, so the largest integer a compiled
program holds is 32 bits wide: an int32 count of games wraps after 2**31 (about six hours at
100,000 games/s). A run's totals (batches done, games played, positions trained on in a chunk)
are therefore wide counts (:class:`WideCount`): two uint32 words, ``value = high * 2**32 + low``: exact to
2**64, and pytrees, so they travel through ``jit``, ``vmap``, ``lax.scan`` and checkpoints like
any array.

Inside a compiled program: :meth:`WideCount.add`, :meth:`WideCount.mod` (the count modulo a
fixed number, for schedules) and :func:`total` (the exact sum of an array of counts). On the
host: ``int(count)``, ``float(count)``, ``np.asarray(count)`` (int64) read the value, and
``count[i]`` picks one configuration of a scan's stacked counts. :meth:`WideCount.of` makes one
from a number, and reads an int32 count of an older checkpoint.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

WORD = 2**32  # the low word's range
GROUP = 2**16  # values summed at once by total(): their 16-bit halves' sums fit in 32 bits


@dataclasses.dataclass(frozen=True, eq=False)
class WideCount:
    """A non-negative count below 2**64 as two uint32 words (arrays of one shape): ``high *
    2**32 + low``. Compared by value on the host through ``int()``, never with ``==`` (which
    compares identity, as for any pytree of arrays)."""

    high: Any
    low: Any

    @classmethod
    def zeros(cls, shape: tuple[int, ...] = ()) -> WideCount:
        """Zero, in arrays of ``shape``."""
        return cls(high=jnp.zeros(shape, jnp.uint32), low=jnp.zeros(shape, jnp.uint32))

    @classmethod
    def of(cls, value) -> WideCount:
        """The count of ``value`` (an int or integer array, host side) in NumPy words. An int32
        value is read as its unsigned bits: an int32 count of an older checkpoint that has wrapped
        past 2**31 once (a negative number) is its true value, below 2**32."""
        v = np.asarray(value)
        if v.dtype.kind not in "iu":
            raise TypeError(f"a count is an integer, got {v.dtype}")
        if v.dtype == np.int32:
            v = v.view(np.uint32)
        elif v.dtype.kind == "i" and (v < 0).any():
            raise ValueError(f"a count is not negative, got {v.min()}")
        v = v.astype(np.uint64)
        return cls(high=(v >> np.uint64(32)).astype(np.uint32), low=(v & np.uint64(WORD - 1)).astype(np.uint32))

    def add(self, n) -> WideCount:
        """This count plus ``n``: a non-negative integer array (int32 or uint32, broadcastable)
        or Python int below 2**32; the carry goes into the high word."""
        n = jnp.asarray(n, jnp.uint32) if isinstance(n, int) else jnp.asarray(n).astype(jnp.uint32)
        low = self.low + n
        return WideCount(high=self.high + (low < self.low).astype(jnp.uint32), low=low)

    def mod(self, m: int) -> jax.Array:
        """The count modulo ``m`` (a Python int, 1 to 2**31 - 1), as int32: ``((high mod m) *
        (2**32 mod m) + low mod m) mod m``, every step in uint32 without overflow."""
        if not 1 <= m < 2**31:
            raise ValueError(f"the modulus must be in [1, 2**31), got {m}")
        divisor = jnp.uint32(m)
        high, low = self.high % divisor, self.low % divisor
        return ((_times_mod(high, WORD % m, m) + low) % divisor).astype(jnp.int32)

    def __getitem__(self, index) -> WideCount:
        return WideCount(high=self.high[index], low=self.low[index])

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        value = np.asarray(np.asarray(self.high).astype(np.int64) * WORD + np.asarray(self.low).astype(np.int64))
        return value if dtype is None else value.astype(dtype)

    def __int__(self) -> int:
        return int(np.asarray(self.high)) * WORD + int(np.asarray(self.low))

    def __float__(self) -> float:
        return float(int(self))

    def __repr__(self) -> str:
        try:
            return f"WideCount({np.asarray(self).tolist()})"
        except (TypeError, jax.errors.TracerArrayConversionError):  # traced: no value to show
            return f"WideCount(high={self.high!r}, low={self.low!r})"


jax.tree_util.register_dataclass(WideCount, data_fields=["high", "low"], meta_fields=[])


def _times_mod(a: jax.Array, c: int, m: int) -> jax.Array:
    """``a * c mod m`` for uint32 ``a < m`` and a Python int ``c < m``, ``m < 2**31``: the
    product directly when it fits in 32 bits, else by doubling and adding (every partial sum
    below ``2 * m <= 2**32``)."""
    if c == 0:
        return jnp.zeros_like(a)
    divisor = jnp.uint32(m)
    if (m - 1) * c < WORD:
        return (a * jnp.uint32(c)) % divisor
    result, power = jnp.zeros_like(a), a
    for bit in range(c.bit_length()):
        if (c >> bit) & 1:
            result = (result + power) % divisor
        power = (power + power) % divisor
    return result


def total(values: jax.Array) -> WideCount:
    """The exact sum of non-negative integer ``values`` (any shape, each below 2**32), however
    many: the 16-bit halves of up to :data:`GROUP` values at a time summed in uint32 (where they
    cannot overflow), then put together."""
    flat = jnp.asarray(values).astype(jnp.uint32).reshape(-1)
    result = WideCount.zeros()
    for start in range(0, max(flat.shape[0], 1), GROUP):
        part = flat[start : start + GROUP]
        low_sum = (part & jnp.uint32(0xFFFF)).sum(dtype=jnp.uint32)  # < 2**16 * 2**16
        high_sum = (part >> jnp.uint32(16)).sum(dtype=jnp.uint32)
        # high_sum * 2**16 + low_sum: high_sum's top 16 bits go to the high word
        result = _plus(result, WideCount(high=high_sum >> jnp.uint32(16), low=high_sum << jnp.uint32(16)).add(low_sum))
    return result


def _plus(a: WideCount, b: WideCount) -> WideCount:
    """The sum of two counts."""
    summed = a.add(b.low)
    return WideCount(high=summed.high + b.high, low=summed.low)
