"""What a player is and how its move is drawn: :class:`PlayerOutput`, the :data:`Player`
function ``(params, boards, key) -> PlayerOutput``, masking and sampling.

A :class:`PlayerOutput` holds the logits ``(B, 7)``, a value ``(B,)`` when the player has one,
and room for a policy target such as a search's visit distribution. Logits are raw (unmasked):
the rollout masks illegal columns itself, so a player never needs to.

Masking follows docs/DESIGN.md: for sampling, illegal logits become ``-inf``; for losses and entropy
``-1e9`` is *added*, so probabilities of illegal columns are 0 and ``p * log p`` stays finite.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from czjax import game
from czjax.util import platforms
from czjax.util.pytree import pytree_dataclass

LOSS_MASK_VALUE = -1e9


@pytree_dataclass(frozen=True)
class PlayerOutput:
    """What a player says about a batch of boards.

    Attributes:
        logits: ``float (B, 7)``, raw: illegal columns are masked by whoever samples.
        value: ``float (B,)`` in ``[-1, 1]`` from the side to move's point of view, or None.
        policy_target: ``float (B, 7)``, a distribution to train towards (a search's visit
            counts, say), or None: the move distribution is then ``softmax(logits)``.
    """

    logits: chex.Array
    value: chex.Array | None = None
    policy_target: chex.Array | None = None


Player = Callable[[Any, jax.Array, jax.Array], PlayerOutput]


def mask_for_sampling(legal: jax.Array, logits: jax.Array) -> jax.Array:
    """Illegal columns become ``-inf``."""
    return jnp.where(legal, logits, -jnp.inf)


def mask_for_loss(legal: jax.Array, logits: jax.Array) -> jax.Array:
    """``-1e9`` added to illegal columns (finite, so gradients and ``p log p`` stay finite)."""
    return logits + jnp.where(legal, 0.0, LOSS_MASK_VALUE).astype(logits.dtype)


def masked_log_probs(legal: jax.Array, logits: jax.Array) -> jax.Array:
    """Log-softmax over the legal columns, with the loss masking."""
    return jax.nn.log_softmax(mask_for_loss(legal, logits), axis=-1)


def masked_entropy(legal: jax.Array, logits: jax.Array) -> jax.Array:
    """Entropy (nats) of the policy restricted to legal columns, ``(...)``; finite with full columns."""
    log_p = masked_log_probs(legal, logits)
    return -(jnp.exp(log_p) * log_p).sum(-1)


def entropy(boards: jax.Array, logits: jax.Array) -> jax.Array:
    """Masked entropy for int8 ``boards``."""
    return masked_entropy(game.legal_mask(boards), logits)


def sample_masked(key: jax.Array, legal: jax.Array, logits: jax.Array, temperature=1.0) -> jax.Array:
    """Sample one legal column per row of ``logits (B, 7)`` at ``temperature``; ``int32 (B,)``.

    ``temperature == 0`` (may be traced) picks the most likely legal column. Sampling inverts
    the CDF with a single float32 uniform per row instead of drawing 7 Gumbels (7x fewer random
    numbers): the same distribution to float32's resolution, about 2**-23 = 1.2e-7 of the row's
    total. Below it the two differ: the uniform's grid gives the first column with any weight
    at least 2**-23, and a column after the favourite whose share is under about 6e-8 is
    absorbed into the running sum and never drawn (PyTorch's ``multinomial`` draws both as
    often as their probability). The result is always a legal column when the row has one: a row
    whose legal logits are all ``-inf`` or NaN is sampled uniformly over its legal columns
    (and its greedy choice is its first legal column). A row with no legal column returns 0.
    """
    uniform = jax.random.uniform(key, logits.shape[:-1], jnp.float32)
    return sample_masked_uniform(uniform, legal, logits, temperature)


def sample_masked_uniform(uniform: jax.Array, legal: jax.Array, logits: jax.Array, temperature=1.0) -> jax.Array:
    """:func:`sample_masked` with the row's uniform in ``[0, 1)`` given, ``uniform (B,)``.

    The rollout draws every ply's uniforms in one call before the game: on XLA's CPU backend
    each threefry draw is a rolled five-round loop of small ops, and drawing ply by ply made
    the ``mlp`` 50-game rollout 7% slower. Computed over whole rows, or column by column where
    the platform being built for samples so (``column_sampling``, :mod:`czjax.util.platforms`):
    the same numbers either way.
    """
    logits = jnp.where(jnp.isnan(logits), -jnp.inf, logits.astype(jnp.float32))
    temperature = jnp.asarray(temperature, jnp.float32)
    masked = mask_for_sampling(legal, logits)
    if platforms.choices_for().column_sampling:
        sampled, greedy = _sample_columns(uniform, legal, masked, temperature)
    else:
        sampled, greedy = _sample_rows(uniform, legal, masked, temperature)
    return jnp.where(temperature > 0, sampled, greedy).astype(jnp.int32)


# Upper-triangular ones: w @ _PREFIX is the running sum over columns (a cumsum that XLA's CPU
# backend runs faster than its reduce-window cumsum). A NumPy constant: importing czjax must not
# start a JAX backend (jax.distributed.initialize has to come first on several hosts).
_PREFIX = np.triu(np.ones((game.COLS, game.COLS), np.float32))


def _sample_rows(uniform, legal, masked, temperature) -> tuple[jax.Array, jax.Array]:
    """The sampled and the greedy columns, ``(B,)`` each, by reductions over each row of the masked
    logits and a matrix product for the running sum (a CPU's: 4x faster in its rollouts than
    :func:`_sample_columns`)."""
    top = jnp.max(masked, axis=-1, keepdims=True)
    usable = jnp.isfinite(top)  # some legal column has a finite logit
    greedy = jnp.where(usable[..., 0], jnp.argmax(masked, axis=-1), jnp.argmax(legal, axis=-1))
    scaled = (masked - jnp.where(usable, top, 0.0)) / jnp.maximum(temperature, 1e-6)[..., None]
    weights = jnp.where(usable, jnp.exp(scaled), legal.astype(jnp.float32))
    cdf = weights @ _PREFIX
    u = uniform[..., None] * cdf[..., -1:]
    return jnp.minimum((cdf <= u).sum(-1), game.COLS - 1), greedy


def _sample_columns(uniform, legal, masked, temperature) -> tuple[jax.Array, jax.Array]:
    """:func:`_sample_rows` column by column (seven ``(B,)`` arrays, the running sum and the first
    maxima written out): on a GPU one kernel, where the rows' reductions and matrix product are
    five (four reductions and a cuBLAS call); the same numbers (the sums in column order)."""
    masked, legal = _columns(masked), _columns(legal)
    top = functools.reduce(jnp.maximum, masked)
    usable = jnp.isfinite(top)
    greedy = jnp.where(usable, _first_of([m == top for m in masked]), _first_of(legal))
    shift, spread = jnp.where(usable, top, 0.0), jnp.maximum(temperature, 1e-6)
    weights = [jnp.where(usable, jnp.exp((m - shift) / spread), ok.astype(jnp.float32)) for m, ok in zip(masked, legal)]
    cdf = list(itertools.accumulate(weights))
    u = uniform * cdf[-1]
    return jnp.minimum(sum((c <= u).astype(jnp.int32) for c in cdf), game.COLS - 1), greedy


def _columns(rows: jax.Array) -> list[jax.Array]:
    """``(..., 7)`` -> its seven columns, ``(...)`` each."""
    return [rows[..., column] for column in range(rows.shape[-1])]


def _first_of(flags: list[jax.Array]) -> jax.Array:
    """``int32``: the index of the first true flag of each row, 0 where none is (``argmax``'s)."""
    index = jnp.zeros(flags[0].shape, jnp.int32)
    for column in reversed(range(len(flags))):
        index = jnp.where(flags[column], column, index)
    return index


def sample(key: jax.Array, boards: jax.Array, logits: jax.Array, temperature=1.0) -> jax.Array:
    """Sample a legal column for each board from the player's ``logits (B, 7)``."""
    return sample_masked(key, game.legal_mask(boards), logits, temperature)
