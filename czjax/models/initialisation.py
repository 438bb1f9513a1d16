"""Fresh parameters (:data:`INITS`): drawn as PyTorch initialises the same layers
(:func:`torch_init`, the default, as the PyTorch project's runs start) or Flax's defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.traverse_util import flatten_dict, unflatten_dict

from czjax import game


def fan_in(kernel_shape) -> int:
    """Inputs per output of a Flax kernel: every axis but the last. Dense kernels are ``(in,
    out)``, convolution kernels ``(kh, kw, in, out)`` (``nn.Conv`` and :class:`Conv3x3` alike), so
    this is PyTorch's fan_in of the same layer (``in`` for ``nn.Linear``, ``in * kh * kw`` for
    ``nn.Conv2d``)."""
    return math.prod(kernel_shape[:-1])


def torch_init(shapes, key: jax.Array):
    """Parameters shaped like ``shapes`` (a Flax variable tree of arrays or ShapeDtypeStructs),
    drawn as PyTorch initialises the same layers.

    ``nn.Linear`` and ``nn.Conv2d`` draw their weight with ``kaiming_uniform_(a=sqrt(5))``, which
    is uniform in +-1/sqrt(fan_in), and their bias uniform in the same range; ``nn.LayerNorm``
    and ``nn.GroupNorm`` start at weight 1, bias 0. In a Flax tree a layer is the module that
    holds the leaves: one with a ``kernel`` is a linear layer (its ``bias``, if any, takes the
    kernel's fan_in), one with a ``scale`` is a norm. Any other leaf is an error, so a new kind
    of layer cannot silently keep another initialisation.
    """
    flat = flatten_dict(shapes)
    keys = dict(zip(flat, jax.random.split(key, len(flat))))

    def draw(path, leaf):
        layer, name = path[:-1], path[-1]
        kernel = flat.get(layer + ("kernel",))
        if kernel is not None and name in ("kernel", "bias"):
            bound = 1.0 / math.sqrt(fan_in(kernel.shape))
            return jax.random.uniform(keys[path], leaf.shape, leaf.dtype, -bound, bound)
        if kernel is None and (layer + ("scale",)) in flat and name in ("scale", "bias"):
            return (jnp.ones if name == "scale" else jnp.zeros)(leaf.shape, leaf.dtype)
        raise ValueError(f"no PyTorch initialisation is known for parameter {'/'.join(path)}")

    return unflatten_dict({path: draw(path, leaf) for path, leaf in flat.items()})


def _flax_init(model: nn.Module, key: jax.Array):
    return model.init(key, game.new_boards(1))


def _torch_init(model: nn.Module, key: jax.Array):
    return torch_init(jax.eval_shape(lambda k: _flax_init(model, k), key), key)


# Initialisation schemes by name: (model, key) -> parameters.
INITS: dict[str, Callable] = {"torch": _torch_init, "flax": _flax_init}


def check_init(name: str) -> str:
    """``name`` if it is a known initialisation; a one-line ``ValueError`` otherwise."""
    if name not in INITS:
        raise ValueError(f"unknown init {name!r}; choose one of {', '.join(INITS)}")
    return name


def init_params(model: nn.Module, key: jax.Array, init: str = "torch"):
    """Fresh parameters of ``model`` from ``key``: PyTorch's initialisation (the default, as the
    PyTorch project's runs start) or Flax's (``init="flax"``, czjax's before it had a choice)."""
    return INITS[check_init(init)](model, key)


def count_params(params) -> int:
    return sum(x.size for x in jax.tree.leaves(params))
