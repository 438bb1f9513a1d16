"""Reductions over a node's 7 columns, written out column by column (a fixed left-to-right order).

The selection rules are written for one tree and vmapped: these then become elementwise
operations on ``(B,)`` columns, which XLA's CPU backend runs much faster than its reductions
over a minor axis of 7 (those were a third of Gumbel's descent on the CPU).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def col_sum(x: jax.Array) -> jax.Array:
    """The sum over the last axis, left to right."""
    return functools.reduce(jnp.add, [x[..., i] for i in range(x.shape[-1])])


def col_max(x: jax.Array) -> jax.Array:
    """The largest value over the last axis."""
    return functools.reduce(jnp.maximum, [x[..., i] for i in range(x.shape[-1])])


def col_min(x: jax.Array) -> jax.Array:
    """The smallest value over the last axis."""
    return functools.reduce(jnp.minimum, [x[..., i] for i in range(x.shape[-1])])


def col_argmax(x: jax.Array) -> jax.Array:
    """The first column holding the largest value, as ``jnp.argmax`` (for values without NaN)."""
    best, index = x[..., 0], jnp.zeros(x.shape[:-1], jnp.int32)
    for i in range(1, x.shape[-1]):
        better = x[..., i] > best
        best, index = jnp.where(better, x[..., i], best), jnp.where(better, i, index)
    return index


def col_softmax(x: jax.Array) -> jax.Array:
    """The softmax over the last axis, with :func:`col_max` and :func:`col_sum`."""
    e = jnp.exp(x - col_max(x)[..., None])
    return e / col_sum(e)[..., None]
