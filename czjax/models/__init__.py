"""Flax versions of the PyTorch project's models, and a registry by name.

Every model takes int8 boards ``(B, 6, 7)`` (``+1`` = side to move) and returns ``logits (B,
7)``, plus ``value (B,)`` in ``[-1, 1]`` when it has a value head. Layers, parameter counts,
normalisation epsilons (1e-5, PyTorch's) and Mk4's channel-major flatten follow the PyTorch
definitions, so weights can be exchanged with it. The ResNet, czjax's own, has its PyTorch module
in :mod:`czjax.interop.torch_models` (layout: :func:`czjax.models.torch_layout.resnet_table`).

| name | PyTorch class | parameters |
| --- | --- | --- |
| ``mlp`` | ``SimpleMLPModel`` | 14,215 |
| ``mlp3`` | ``Connect4MLP3`` (value = tanh of an 8th output) | 409,608 |
| ``cnn-mk4`` | ``Connect4CNN_Mk4(value_head=False)`` | 323,527 |
| ``cnn-mk4-value`` | ``Connect4CNN_Mk4(value_head=True)`` | 356,488 |
| ``resnet[:blocks=B,channels=C]`` | czjax's own, ``torch_models.ResNet(blocks, channels)`` | 375,383 (5 x 64) |

Initialisation (:data:`INITS`): ``"torch"``, the default, draws the parameters as the PyTorch
project's models start (PyTorch's defaults, :func:`torch_init`); ``"flax"`` keeps Flax's
defaults (LeCun-normal kernels, zero biases), about sqrt(3) times PyTorch's spread.

The modules: ``layers`` (the layers, with the gradients written for them), ``networks`` (the
Flax modules), ``registry`` (:data:`MODELS`, options from text, each network's cost in a search,
:func:`get_model`),
``initialisation`` (PyTorch's and Flax's), and ``torch_layout`` (the PyTorch project's parameter
names and layouts, ``.pth`` files). A network as a player, :func:`model_player` and
:func:`apply_model`, is :mod:`czjax.players.network`'s, named here too.
"""

from __future__ import annotations

from czjax.models.initialisation import INITS, check_init, count_params, fan_in, init_params, torch_init
from czjax.models.layers import CONV_METHODS, NORM_METHODS, TORCH_EPS
from czjax.models.networks import MLP3, CNNMk4, ResNet, SimpleMLP, convolves, has_value_head, resnet_groups
from czjax.models.registry import (
    COMPUTE_DTYPES,
    MODELS,
    ModelEntry,
    ResNetOptions,
    SearchCost,
    get_model,
    is_model_name,
    model_names,
    model_options,
    same_network,
)
from czjax.players.network import apply_model, model_player

__all__ = [
    "COMPUTE_DTYPES",
    "CONV_METHODS",
    "INITS",
    "MLP3",
    "MODELS",
    "NORM_METHODS",
    "TORCH_EPS",
    "CNNMk4",
    "ModelEntry",
    "ResNet",
    "ResNetOptions",
    "SearchCost",
    "SimpleMLP",
    "apply_model",
    "check_init",
    "convolves",
    "count_params",
    "fan_in",
    "get_model",
    "has_value_head",
    "init_params",
    "is_model_name",
    "model_names",
    "model_options",
    "model_player",
    "resnet_groups",
    "same_network",
    "torch_init",
]
