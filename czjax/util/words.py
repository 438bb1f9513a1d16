"""Arrays as 32-bit words, so that values of several types travel as one ``uint32`` array: a
rollout's records of a ply (:func:`czjax.rollout.pack_words`), a search tree's node
(:func:`czjax.search.tree.pack_nodes`). On a GPU each array a loop step writes is a kernel."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def to_words(x: jax.Array) -> jax.Array:
    """``x`` as ``uint32`` of the same shape: 32-bit values bit for bit, narrower integers and
    booleans widened (through int32, so a negative one comes back as it was)."""
    if jnp.dtype(x.dtype).itemsize == 4:
        return lax.bitcast_convert_type(x, jnp.uint32)
    return x.astype(jnp.int32).astype(jnp.uint32)


def from_words(words: jax.Array, dtype) -> jax.Array:
    """:func:`to_words`' inverse: ``words`` as ``dtype``."""
    if jnp.dtype(dtype).itemsize == 4:
        return lax.bitcast_convert_type(words, dtype)
    return words.astype(jnp.int32).astype(dtype)
