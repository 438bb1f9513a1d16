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
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.traverse_util import flatten_dict, unflatten_dict
from jax import lax

from czjax import game
from czjax.players import PlayerOutput
from czjax.util.options import make_settings
from czjax.util.specs import PlayerSpec

TORCH_EPS = 1e-5

# Activation dtypes (``dtype`` of every model): parameters, gradients and the optimizer state stay
# float32 in every case; "bfloat16" computes the layers' activations and products in bfloat16
# (``--precision mixed``), and the outputs come back as float32.
COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}

# How :class:`Conv3x3` computes: "im2col" (patches + one matmul), "xla" (lax.conv, cuDNN on an
# NVIDIA GPU) or "canonical" (lax.conv whose gradient's convolutions are written in the NHWC/HWIO
# layout, :func:`conv3x3_canonical`; with it Mk4's (6, 1) column convolution is a matrix product,
# :class:`ColumnConv`); "auto" by backend, chosen by measurement (czjax bench train --conv
# compares them; backends not measured yet use im2col). On the CPU "canonical" is the choice
# since its kernel gradient is summed over chunks of boards and Mk4's GroupNorm has its own
# gradient (--norm grouped): Mk4's 50-game iteration on one core 64 games/s against 43 with
# im2col and Flax's GroupNorm; on both cores of the quiet 2-core CPU 90 games/s, compiled with
# YNNPACK kept for matrix products (czjax.util.compiling: with jaxlib's default fusions YNNPACK
# runs a convolution on one thread, and canonical was no faster than im2col, 61 against 63).
CONV_METHODS = ("auto", "im2col", "xla", "canonical")
BACKEND_CONV = {"cpu": "canonical"}
# ResNet keeps im2col on the CPU whatever BACKEND_CONV says: a ResNet run is recorded bit for bit
# on the development CPU (tests/data/old-run), and another convolution changes its last bits.
RESNET_BACKEND_CONV = {"cpu": "im2col"}


def _method(method: str, by_backend: dict, unmeasured: str) -> str:
    """``method``, or for "auto" this backend's measured choice (``unmeasured`` if none yet)."""
    return by_backend.get(jax.default_backend(), unmeasured) if method == "auto" else method


class SimpleMLP(nn.Module):
    """42 -> 128 -> 64 -> 7 with ReLU."""

    dtype: Any = jnp.float32
    has_value_head = False

    @nn.compact
    def __call__(self, boards):
        x = boards.reshape(boards.shape[0], -1).astype(self.dtype)
        x = nn.relu(nn.Dense(128, dtype=self.dtype)(x))
        x = nn.relu(nn.Dense(64, dtype=self.dtype)(x))
        return nn.Dense(game.COLS, dtype=self.dtype)(x).astype(jnp.float32)


class MLP3(nn.Module):
    """Seven bias-free layers of 256 with LayerNorm and ReLU; 8 outputs: 7 logits and a value."""

    dtype: Any = jnp.float32
    has_value_head = True

    @nn.compact
    def __call__(self, boards):
        x = boards.reshape(boards.shape[0], -1).astype(self.dtype)
        for _ in range(7):
            x = nn.Dense(256, use_bias=False, dtype=self.dtype)(x)
            x = nn.relu(nn.LayerNorm(epsilon=TORCH_EPS, dtype=self.dtype)(x))
        out = nn.Dense(game.COLS + 1, dtype=self.dtype)(x).astype(jnp.float32)
        return out[:, : game.COLS], jnp.tanh(out[:, game.COLS])


def one_hot_planes(boards):
    """int8 boards ``(B, 6, 7)`` -> float ``(B, 6, 7, 3)``: own, opponent, empty."""
    return jnp.stack([boards == 1, boards == -1, boards == 0], axis=-1).astype(jnp.float32)


_NHWC = ("NHWC", "HWIO", "NHWC")
_SAME = ((1, 1), (1, 1))


def _conv_nhwc(x, kernel, padding=_SAME):
    return lax.conv_general_dilated(x, kernel, (1, 1), padding, dimension_numbers=_NHWC)


@jax.custom_vjp
def conv3x3_canonical(x, kernel):
    """``lax.conv`` of ``x (B, H, W, in)`` with a 3x3 ``kernel (3, 3, in, out)``, 'same' padding,
    whose gradient is computed by two convolutions in the canonical NHWC/HWIO layout.

    JAX's own gradient of a convolution is a pair of convolutions in other layouts (features
    first, a reversed kernel). XLA's CPU backend rewrites those into the canonical layout, which
    it hands to its fast kernels (YNNPACK), only in a program's entry computation: inside a loop
    or a conditional, where the training iteration computes every gradient, they stay in XLA's
    generic convolution loop, about 7x slower. Written here in the canonical layout they get the
    fast kernels everywhere. The forward pass is ``lax.conv``'s; the gradient is the same sums.
    """
    return _conv_nhwc(x, kernel)


def _conv3x3_forward(x, kernel):
    return _conv_nhwc(x, kernel), (x, kernel)


def _conv3x3_backward(residuals, dy):
    x, kernel = residuals
    # dx[b, r, s, c] = sum_{i, j, o} dy[b, r + 1 - i, s + 1 - j, o] kernel[i, j, c, o]: the
    # convolution of dy with the kernel flipped in space and its features swapped
    dx = _conv_nhwc(dy, jnp.transpose(kernel[::-1, ::-1], (0, 1, 3, 2)))
    return dx, _conv3x3_kernel_gradient(x, dy)


# Boards per convolution of the kernel's gradient: the games are that convolution's input
# features, and XLA's CPU kernels (YNNPACK) run it 2.5x slower with 550 of them than in chunks
# of 50 summed (37 against 91 GFLOP/s on one core of the 2-core CPU, Mk4's update).
KERNEL_GRADIENT_CHUNK = 50


def _kernel_gradient_conv(x, dy):
    # dkernel[i, j, c, o] = sum_{b, r, s} x[b, r + i - 1, s + j - 1, c] dy[b, r, s, o]: a
    # convolution with the input's channels as its batch, the games as its features, and dy as
    # an (H, W) kernel; the output (in, 3, 3, out) is the kernel's layout after a transpose
    dkernel = _conv_nhwc(jnp.transpose(x, (3, 1, 2, 0)), jnp.transpose(dy, (1, 2, 0, 3)))
    return jnp.transpose(dkernel, (1, 2, 0, 3))


def _conv3x3_kernel_gradient(x, dy):
    """The 3x3 kernel's gradient, summed over chunks of :data:`KERNEL_GRADIENT_CHUNK` boards
    (the last padded with zero boards, which add nothing)."""
    chunk = KERNEL_GRADIENT_CHUNK
    if x.shape[0] <= chunk:
        return _kernel_gradient_conv(x, dy)
    count = -(-x.shape[0] // chunk)
    pad = ((0, count * chunk - x.shape[0]),) + ((0, 0),) * (x.ndim - 1)

    def chunks(a):
        return jnp.pad(a, pad).reshape((count, chunk) + a.shape[1:])

    def add(total, pair):
        return total + _kernel_gradient_conv(*pair), None

    zero = jnp.zeros((3, 3, x.shape[-1], dy.shape[-1]), jnp.result_type(x, dy))
    return lax.scan(add, zero, (chunks(x), chunks(dy)))[0]


conv3x3_canonical.defvjp(_conv3x3_forward, _conv3x3_backward)


class Conv3x3(nn.Module):
    """A bias-free 3x3 'same' convolution, computed by ``method`` (CONV_METHODS): im2col + one
    matmul, ``lax.conv``, or ``lax.conv`` with a gradient in the canonical layout
    (:func:`conv3x3_canonical`).

    The kernel has ``nn.Conv``'s layout and initialiser, ``(3, 3, in, out)``; only the
    computation differs.
    """

    features: int
    method: str = "auto"  # one of CONV_METHODS
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (3, 3, x.shape[-1], self.features))
        x, kernel = x.astype(self.dtype), kernel.astype(self.dtype)
        method = _method(self.method, BACKEND_CONV, "im2col")
        if method == "xla":
            return _conv_nhwc(x, kernel)
        if method == "canonical":
            return conv3x3_canonical(x, kernel)
        padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        rows, cols = x.shape[1], x.shape[2]
        patches = jnp.concatenate(
            [padded[:, i : i + rows, j : j + cols, :] for i in range(3) for j in range(3)], axis=-1
        )
        return patches @ kernel.reshape(-1, self.features)


def _channel_sums(x):
    """``(B, H, W, C)`` -> ``(B, C)``: each channel summed over the board."""
    return x.reshape(x.shape[0], -1, x.shape[-1]).sum(1)


def _group_sums(per_channel, groups: int):
    """``(B, C)`` -> ``(B, G)``: summed over each group's channels."""
    return per_channel.reshape(per_channel.shape[0], groups, -1).sum(-1)


def _group_stats(x, groups: int, epsilon: float):
    """Per board and group of ``x (B, H, W, C)``: the mean and 1/sqrt(variance + epsilon), ``(B, G)``,
    from per-channel sums (the variance as E[x^2] - E[x]^2, as Flax computes it)."""
    size = x.size // (x.shape[0] * groups)
    mean = _group_sums(_channel_sums(x), groups) / size
    var = jnp.maximum(_group_sums(_channel_sums(x * x), groups) / size - mean * mean, 0.0)
    return mean, lax.rsqrt(var + epsilon)


def _per_channel(values, channels: int):
    """``(B, G)`` -> ``(B, C)``: each group's value on its channels."""
    return jnp.repeat(values, channels // values.shape[1], axis=1)


def _on_board(per_channel):
    """``(B, C)`` -> ``(B, 1, 1, C)``, to broadcast over the board."""
    return per_channel[:, None, None, :]


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def group_norm_nhwc(x, scale, bias, groups: int, epsilon: float):
    """GroupNorm of ``x (B, H, W, C)`` (float32) over ``(H, W, C/G)``, then ``* scale + bias``.

    Computed from per-channel sums over the board, with a hand-written gradient of the same
    shape (one pass over ``dy`` and ``dy * x`` for per-channel sums, one elementwise pass):
    XLA's CPU backend runs Flax's GroupNorm, and the gradient JAX derives for it, as several
    passes of reductions and broadcasts, 4-6x slower (Mk4's 550-position update on one core of
    the 2-core CPU: 3.1 against 0.7 ms forward, 12.0 against 2.1 ms with the gradient)."""
    return _group_norm_forward(x, scale, bias, groups, epsilon)[0]


def _group_norm_forward(x, scale, bias, groups, epsilon):
    mean, rstd = _group_stats(x, groups, epsilon)
    gain = _per_channel(rstd, x.shape[-1]) * scale
    shift = bias - _per_channel(mean, x.shape[-1]) * gain
    return x * _on_board(gain) + _on_board(shift), (x, scale, mean, rstd)


def _group_norm_backward(groups, epsilon, residuals, dy):
    x, scale, mean, rstd = residuals
    channels = x.shape[-1]
    size = x.size // (x.shape[0] * groups)
    sum_dy, sum_dy_x = _channel_sums(dy), _channel_sums(dy * x)  # (B, C)
    mean_c, rstd_c = _per_channel(mean, channels), _per_channel(rstd, channels)
    dscale = (rstd_c * (sum_dy_x - mean_c * sum_dy)).sum(0)
    dbias = sum_dy.sum(0)
    # With g = dy * scale and xhat the normalised x, dx = rstd (g - mean(g) - xhat mean(g xhat)),
    # the means over each group; written as dy * a + x * b + c with a per channel, b and c per group.
    sum_g = _group_sums(scale * sum_dy, groups)
    mean_g_xhat = rstd * (_group_sums(scale * sum_dy_x, groups) - mean * sum_g) / size
    coef_x = -rstd * rstd * mean_g_xhat
    coef_1 = -rstd * sum_g / size - mean * coef_x
    dx = dy * _on_board(rstd_c * scale) + x * _on_board(_per_channel(coef_x, channels))
    return dx + _on_board(_per_channel(coef_1, channels)), dscale, dbias


group_norm_nhwc.defvjp(_group_norm_forward, _group_norm_backward)


class GroupedNorm(nn.Module):
    """``nn.GroupNorm`` of NHWC activations computed by :func:`group_norm_nhwc` (per-channel sums,
    a hand-written gradient). The same parameters (``scale``, ``bias``) and the same result up to
    rounding; statistics in float32 whatever ``dtype``."""

    num_groups: int
    epsilon: float = TORCH_EPS
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        channels = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (channels,))
        bias = self.param("bias", nn.initializers.zeros, (channels,))
        out = group_norm_nhwc(x.astype(jnp.float32), scale, bias, self.num_groups, self.epsilon)
        return out.astype(self.dtype)


# How Mk4's GroupNorm layers are computed: "flax" (nn.GroupNorm) or "grouped" (GroupedNorm, its
# own gradient); "auto" by backend, by measurement: on the CPU grouped (Mk4's 50-game iteration on
# one core 64 games/s against flax's 56, with canonical convolutions); GPUs not measured since.
NORM_METHODS = ("auto", "flax", "grouped")
BACKEND_NORM: dict[str, str] = {"cpu": "grouped"}  # backends not listed: flax


def group_norm(method: str, dtype, name: str):
    """Mk4's GroupNorm(16) computed by ``method``, named as Flax names it (``GroupNorm_i``), so
    checkpoints and PyTorch's weights map the same way whichever computes it."""
    if _method(method, BACKEND_NORM, "flax") == "grouped":
        return GroupedNorm(16, TORCH_EPS, dtype, name=name)
    return nn.GroupNorm(num_groups=16, epsilon=TORCH_EPS, dtype=dtype, name=name)


class ColumnConv(nn.Module):
    """Mk4's (6, 1) 'valid' convolution, each column of the board reduced to ``features``, as one
    matrix product over (row, channel). ``nn.Conv``'s parameter (``kernel (6, 1, in, out)``, its
    initialiser) and output ``(B, 1, 7, out)``; its gradient is two matrix products where
    ``lax.conv``'s is two convolutions that XLA's CPU backend runs in its generic loop."""

    features: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (x.shape[1], 1, x.shape[-1], self.features))
        x, kernel = x.astype(self.dtype), kernel.astype(self.dtype)
        return jnp.einsum("brwc,rco->bwo", x, kernel[:, 0])[:, None]


class ResBlock(nn.Module):
    conv: str = "auto"
    dtype: Any = jnp.float32
    norm: str = "auto"

    @nn.compact
    def __call__(self, x):
        y = Conv3x3(64, self.conv, self.dtype)(x)
        y = nn.relu(group_norm(self.norm, self.dtype, "GroupNorm_0")(y))
        y = Conv3x3(64, self.conv, self.dtype)(y)
        y = group_norm(self.norm, self.dtype, "GroupNorm_1")(y)
        return nn.relu(y + x)


class CNNMk4(nn.Module):
    """Residual CNN: 3x3 conv 64 + GroupNorm(16) + ReLU, three residual blocks, a (6, 1) conv
    reducing each column to 64 features (448, flattened channel-major as PyTorch does), policy
    MLP 448-128-128-7 with LayerNorm, optional value MLP 448-64-64-1 with tanh."""

    value_head: bool = False
    conv: str = "auto"  # Conv3x3's method (CONV_METHODS)
    dtype: Any = jnp.float32
    norm: str = "auto"  # the GroupNorm layers' method (NORM_METHODS)

    @property
    def has_value_head(self) -> bool:
        return self.value_head

    @nn.compact
    def __call__(self, boards):
        dtype = self.dtype
        x = one_hot_planes(boards).astype(dtype)
        x = Conv3x3(64, self.conv, dtype)(x)
        x = nn.relu(group_norm(self.norm, dtype, "GroupNorm_0")(x))
        for _ in range(3):
            x = ResBlock(self.conv, dtype, self.norm)(x)
        if _method(self.conv, BACKEND_CONV, "im2col") == "canonical":
            x = ColumnConv(64, dtype, name="Conv_0")(x)  # (B, 1, 7, 64)
        else:
            x = nn.Conv(64, (game.ROWS, 1), padding="VALID", use_bias=False, dtype=dtype)(x)
        features = jnp.transpose(x[:, 0], (0, 2, 1)).reshape(x.shape[0], -1)  # index = channel * 7 + col
        p = nn.Dense(128, use_bias=False, dtype=dtype)(features)
        p = nn.relu(nn.LayerNorm(epsilon=TORCH_EPS, dtype=dtype)(p))
        p = nn.Dense(128, use_bias=False, dtype=dtype)(p)
        p = nn.relu(nn.LayerNorm(epsilon=TORCH_EPS, dtype=dtype)(p))
        logits = nn.Dense(game.COLS, dtype=dtype)(p).astype(jnp.float32)
        if not self.value_head:
            return logits
        v = nn.relu(nn.Dense(64, name="value_0", dtype=dtype)(features))
        v = nn.relu(nn.Dense(64, name="value_1", dtype=dtype)(v))
        return logits, jnp.tanh(nn.Dense(1, name="value_2", dtype=dtype)(v)[:, 0].astype(jnp.float32))


def resnet_groups(channels: int) -> int:
    """GroupNorm's groups in :class:`ResNet`: groups of 8 channels, at least one group."""
    return max(1, channels // 8)


class ResNet(nn.Module):
    """A residual policy-value network in AlphaZero's shape (AlphaZero.jl plays Connect Four with
    5 blocks of 128): a 3x3 conv stem, ``blocks`` residual blocks of two 3x3 convs, each
    followed by GroupNorm (stateless, unlike BatchNorm's running statistics, so one function
    serves training, search and vmapped scans alike) and ReLU; a policy head (1x1 conv to 2
    channels, Dense 7) and a value head (1x1 conv to 1 channel, Dense ``channels``, Dense 1,
    tanh). GroupNorm uses groups of 8 channels (``channels // 8`` groups, at least 1)."""

    blocks: int = 5
    channels: int = 64
    conv: str = "auto"
    dtype: Any = jnp.float32
    has_value_head = True

    @nn.compact
    def __call__(self, boards):
        dtype, width = self.dtype, self.channels
        conv = _method(self.conv, RESNET_BACKEND_CONV, "im2col")
        groups = resnet_groups(width)

        def norm(name):
            return nn.GroupNorm(num_groups=groups, epsilon=TORCH_EPS, dtype=dtype, name=name)

        x = nn.relu(norm("stem_norm")(Conv3x3(width, conv, dtype, name="stem")(one_hot_planes(boards).astype(dtype))))
        for i in range(self.blocks):
            y = nn.relu(norm(f"block{i}_norm0")(Conv3x3(width, conv, dtype, name=f"block{i}_conv0")(x)))
            y = norm(f"block{i}_norm1")(Conv3x3(width, conv, dtype, name=f"block{i}_conv1")(y))
            x = nn.relu(x + y)
        batch = x.shape[0]
        p = nn.relu(nn.Dense(2, dtype=dtype, name="policy_conv")(x)).reshape(
            batch, -1
        )  # a 1x1 conv is a Dense per cell
        logits = nn.Dense(game.COLS, dtype=dtype, name="policy")(p).astype(jnp.float32)
        v = nn.relu(nn.Dense(1, dtype=dtype, name="value_conv")(x)).reshape(batch, -1)
        v = nn.relu(nn.Dense(width, dtype=dtype, name="value_hidden")(v))
        return logits, jnp.tanh(nn.Dense(1, dtype=dtype, name="value")(v)[:, 0].astype(jnp.float32))


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
class ModelEntry:
    """A network in :data:`MODELS`: ``build(options, dtype, conv, norm)`` makes the module;
    ``options`` is its options' dataclass (read from ``NAME:key=value,...`` by
    :func:`czjax.util.options.make_settings`), None for a network without options;
    ``value_head`` says whether the module it makes has a value head, so that a config naming
    the network is checked without making it (the modules' own ``has_value_head`` agrees, tested)."""

    build: Callable[[Any, Any, str, str], nn.Module]
    options: type | None = None
    value_head: bool = False


MODELS: dict[str, ModelEntry] = {
    "mlp": ModelEntry(lambda options, dtype, conv, norm: SimpleMLP(dtype=dtype)),
    "mlp3": ModelEntry(lambda options, dtype, conv, norm: MLP3(dtype=dtype), value_head=True),
    "cnn-mk4": ModelEntry(
        lambda options, dtype, conv, norm: CNNMk4(value_head=False, conv=conv, dtype=dtype, norm=norm)
    ),
    "cnn-mk4-value": ModelEntry(
        lambda options, dtype, conv, norm: CNNMk4(value_head=True, conv=conv, dtype=dtype, norm=norm),
        value_head=True,
    ),
    "resnet": ModelEntry(
        lambda options, dtype, conv, norm: ResNet(
            blocks=options.blocks, channels=options.channels, conv=conv, dtype=dtype
        ),
        ResNetOptions,
        value_head=True,
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
        dtype: the activations' dtype (:data:`COMPUTE_DTYPES`); the parameters stay float32.
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


def convolves(model: nn.Module) -> bool:
    """Whether ``model``'s program on this backend holds convolution ops (im2col computes its
    convolutions as matrix products): :mod:`czjax.util.compiling` compiles such programs with
    their own options."""
    if isinstance(model, CNNMk4):
        return True  # its (6, 1) column convolution whatever the 3x3 method
    if isinstance(model, ResNet):
        return _method(model.conv, RESNET_BACKEND_CONV, "im2col") != "im2col"
    return False


def count_params(params) -> int:
    return sum(x.size for x in jax.tree.leaves(params))


def has_value_head(model: nn.Module) -> bool:
    return bool(model.has_value_head)


def model_player(model: nn.Module):
    """The model as a player ``(params, boards, key) -> PlayerOutput`` (logits, and the value
    when it has a value head).

    Cached per model (flax modules compare by their fields), so the same model gives the same
    function and jitted callers are not recompiled.
    """
    return _model_player(model)


_PLAYERS: dict = {}


def _model_player(model):
    if model not in _PLAYERS:

        def player(params, boards, key):
            del key
            logits, value = apply_model(model, params, boards)
            return PlayerOutput(logits=logits, value=value)

        player.__name__ = f"{type(model).__name__}_player"
        _PLAYERS[model] = player
    return _PLAYERS[model]


def apply_model(model: nn.Module, params, boards):
    """``(logits, value)``; ``value`` is None for a model without a value head."""
    with jax.named_scope("network"):
        out = model.apply(params, boards)
    if isinstance(out, tuple):
        return out
    return out, None
