"""The table of networks by name (:data:`MODELS`): each network's options from text, and
:func:`get_model`, which makes the module a spec names (``resnet:blocks=2,channels=32``) with
its activation dtype and the methods of its layers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from czjax.models.layers import CONV_METHODS, NORM_METHODS
from czjax.models.networks import MLP3, CNNMk4, ResNet, SimpleMLP
from czjax.util.options import make_settings
from czjax.util.specs import PlayerSpec

# The dtypes of the products' operands (``dtype`` of every model): "bfloat16" (``--precision
# mixed``) rounds each dense or convolution product's operands to bfloat16 and accumulates in
# float32 (czjax.models.layers); parameters, gradients, optimizer state, activations and the
# outputs stay float32 in every case.
COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


@dataclasses.dataclass(frozen=True)
class ResNetOptions:
    """The options of ``resnet[:blocks=B,channels=C]``: residual blocks and their channels."""

    blocks: int = 5
    channels: int = 64

    def check(self) -> None:
        if self.blocks < 0 or self.channels < 1:
            raise ValueError(
                f"resnet needs blocks >= 0 and channels >= 1, got blocks={self.blocks}, channels={self.channels}"
            )


@dataclasses.dataclass(frozen=True)
class SearchCost:
    """What a network's call costs inside a pool of searches that calls it on large batches, step
    after step (the searches of AlphaZero.jl's protocol, :mod:`czjax.evaluate.protocol`). On a CPU
    the network is nearly the whole cost of such a step, so the searches build it their own way
    there, and walk the pool for simulations that end the game (no network needed) only where a
    call costs more than a walk. The default is a network without convolutions: its own layers,
    no rounds.

    Attributes:
        cpu_conv: how the searches compute its 3x3 convolutions on a CPU (:data:`CONV_METHODS`;
            elsewhere the model's own). A convolutional network's: XLA's own convolution (compiled
            with czjax's options for convolutions): a pool step of czjax@4 on 512 boards took 335 ms
            against 427 with Winograd's F(2x2, 3x3), whose transforms are passes bound by memory
            (docs/results/pons-protocol/yardstick-xla-conv-2026-11-27/pool-step.json, its earlier
            run; the same moves, tests/test_protocol.py).
        game_end_rounds: rounds of game-ending simulations before each of its calls. They pay for
            a convolutional network's call: czjax@4 on 600 of Pons' positions, 145 s with 4 rounds,
            154 s with 8, 186 s with none
            (docs/results/pons-protocol/yardstick-xla-conv-2026-11-27/rounds-czjax.json); not for
            an MLP's, which costs about a walk of the pool: the untrained MLP3 on 1,500, 55 s with
            none, 67 s with 4, 82 s with 8
            (docs/results/pons-protocol/yardstick-xla-conv-2026-11-27/rounds-mlp3.json).
    """

    cpu_conv: str = "auto"
    game_end_rounds: int = 0


CONVOLUTIONAL = SearchCost(cpu_conv="xla", game_end_rounds=4)
"""The search cost of a network whose calls are mostly convolutions (Mk4, the ResNet)."""


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """A network in :data:`MODELS`: ``build(options, dtype, conv, norm)`` makes the module;
    ``options`` is its options' dataclass (read from ``NAME:key=value,...`` by
    :func:`czjax.util.options.make_settings`), None for a network without options;
    ``value_head`` says whether the module it makes has a value head, so that a config naming
    the network is checked without making it (the modules' own ``has_value_head`` agrees, tested);
    ``search_cost`` is what its call costs in a pool of searches (:class:`SearchCost`)."""

    build: Callable[[Any, Any, str, str], nn.Module]
    options: type | None = None
    value_head: bool = False
    search_cost: SearchCost = SearchCost()


MODELS: dict[str, ModelEntry] = {
    "mlp": ModelEntry(lambda options, dtype, conv, norm: SimpleMLP(dtype=dtype)),
    "mlp3": ModelEntry(lambda options, dtype, conv, norm: MLP3(dtype=dtype), value_head=True),
    "cnn-mk4": ModelEntry(
        lambda options, dtype, conv, norm: CNNMk4(value_head=False, conv=conv, dtype=dtype, norm=norm),
        search_cost=CONVOLUTIONAL,
    ),
    "cnn-mk4-value": ModelEntry(
        lambda options, dtype, conv, norm: CNNMk4(value_head=True, conv=conv, dtype=dtype, norm=norm),
        value_head=True,
        search_cost=CONVOLUTIONAL,
    ),
    "resnet": ModelEntry(
        lambda options, dtype, conv, norm: ResNet(
            blocks=options.blocks, channels=options.channels, conv=conv, dtype=dtype, norm=norm
        ),
        ResNetOptions,
        value_head=True,
        search_cost=CONVOLUTIONAL,
    ),
}
"""Each network's name in specs (``--model``, ``untrained:MODEL``) -> how it is built."""


def model_names() -> str:
    """The networks with their options, for messages and help texts: ``mlp, ..., resnet[:blocks=5,channels=64]``."""
    return ", ".join(
        name
        if entry.options is None
        else f"{name}[:{','.join(f'{f.name}={f.default}' for f in dataclasses.fields(entry.options))}]"
        for name, entry in MODELS.items()
    )


def is_model_name(name) -> bool:
    """Whether ``name`` names a model (``NAME`` or ``NAME:OPTIONS`` of :data:`MODELS`)."""
    if not isinstance(name, str):
        return False
    try:
        model_options(name)
    except ValueError:
        return False
    return True


def get_model(name: str, dtype: str = "float32", conv: str = "auto", norm: str = "auto") -> nn.Module:
    """A network by its spec.

    Args:
        name: a name of :data:`MODELS`, with options where it has them (``resnet:blocks=2,channels=32``).
        dtype: the products' operands' dtype (:data:`COMPUTE_DTYPES`); all else stays float32.
        conv: how 3x3 convolutions compute (:data:`CONV_METHODS`).
        norm: how GroupNorm layers compute (:data:`NORM_METHODS`).

    Returns:
        The Flax module; its parameters are the same whatever ``dtype``, ``conv`` and ``norm``.

    Raises:
        ValueError: one line: an unknown name, method or option.
    """
    entry, options = model_options(name, conv, norm)
    return entry.build(options, COMPUTE_DTYPES[dtype], conv, norm)


def model_options(name: str, conv: str = "auto", norm: str = "auto") -> tuple[ModelEntry, Any]:
    """``(entry of MODELS, its options or None)`` of a network's spec, checked without making the
    network (:func:`get_model` makes it from these); one-line ``ValueError`` for an unknown name,
    option or method, as :func:`get_model`'s."""
    if conv not in CONV_METHODS:
        raise ValueError(f"unknown conv {conv!r}; choose one of {', '.join(CONV_METHODS)}")
    if norm not in NORM_METHODS:
        raise ValueError(f"unknown norm {norm!r}; choose one of {', '.join(NORM_METHODS)}")
    spec = PlayerSpec.parse(name)
    if spec.name not in MODELS or spec.base is not None:
        raise ValueError(f"unknown model {name!r}; choose one of {model_names()}")
    entry = MODELS[spec.name]
    if entry.options is None and spec.options.strip():
        raise ValueError(f"model {spec.name!r} takes no options, got {name!r}")
    return entry, None if entry.options is None else make_settings(f"model {spec.name}", entry.options, spec.options)


def same_network(a: str, b: str) -> bool:
    """Whether two specs name the same network (``resnet`` and ``resnet:blocks=5,channels=64``,
    say): Flax modules compare by their fields."""
    return get_model(a) == get_model(b)
