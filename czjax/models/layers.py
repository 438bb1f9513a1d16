"""The layers the networks are built of, with the gradients written for them where JAX's own
are slow on XLA's CPU backend: the 3x3 convolution (:class:`Conv3x3`, computed by one of
:data:`CONV_METHODS`; :func:`conv3x3_canonical`, its gradient in the canonical layout), Mk4's
GroupNorm (:func:`group_norm`: Flax's, or :class:`GroupedNorm` with its own gradient,
:data:`NORM_METHODS`) and Mk4's column convolution as a matrix product (:class:`ColumnConv`).

Their parameters are the Flax layers' they stand for, whatever computes them, so checkpoints and
PyTorch's weights map the same way; "auto" picks the platform's method by measurement
(:mod:`czjax.util.platforms`).

Mixed precision (a model's ``dtype`` bfloat16, ``--precision mixed``): every product of a layer,
dense or convolution, takes bfloat16 operands and accumulates and returns float32
(``preferred_element_type``), and so do its gradient's products (:func:`mixed_einsum`); the
parameters, the activations between the products, the normalisations' statistics and outputs
stay float32. With ``dtype`` float32 every layer computes exactly as it did before mixed
precision existed.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from czjax.models import pallas_conv
from czjax.models.pallas_conv import conv3x3_pallas
from czjax.util import platforms

# PyTorch's normalisation epsilon (LayerNorm, GroupNorm), kept so that weights are exchanged both ways
TORCH_EPS = 1e-5

# How :class:`Conv3x3` computes: "im2col" (patches + one matmul), "xla" (lax.conv, cuDNN on an
# NVIDIA GPU) or "canonical" (lax.conv whose gradient's convolutions are written in the NHWC/HWIO
# layout, :func:`conv3x3_canonical`; with it Mk4's (6, 1) column convolution is a matrix product,
# :class:`ColumnConv`); "auto" the platform's choice for Mk4 (``mk4_conv`` in
# czjax.util.platforms), by measurement (czjax bench train --conv compares them; platforms not
# measured yet use im2col). On the CPU "canonical" is the choice
# since its kernel gradient is summed over chunks of boards and Mk4's GroupNorm has its own
# gradient (--norm grouped): Mk4's 50-game iteration is faster so than with im2col and Flax's
# GroupNorm, compiled with YNNPACK kept for matrix products (czjax.util.compiling: with jaxlib's
# default fusions YNNPACK runs a convolution on one thread, and canonical was no faster than
# im2col; docs/benchmarks.md, "Mk4 on the CPU", and docs/results/benchmarks/bench-mk4-cpu).
# "winograd" (:func:`conv3x3_winograd`) does the same sums with half the multiplications; on a
# CPU its transforms, passes bound by memory, cost it more than it saves against "xla"
# (docs/results/pons-protocol/yardstick-xla-conv-2026-11-27/pool-step.json).
# "pallas" (:mod:`czjax.models.pallas_conv`) is one Triton kernel a convolution that writes no
# patches, for a GPU (interpreted, slowly, on the CPU; none on a TPU; the ResNet and Mk4 evaluate
# their residual blocks as one kernel, :mod:`czjax.models.pallas_trunk`); a layer whose channels the
# kernel does not take (:func:`czjax.models.pallas_conv.fits`: the first, over the board's
# planes) uses im2col.
CONV_METHODS = ("auto", "im2col", "xla", "canonical", "winograd", "pallas")


def backend_method(method: str, by_backend: dict, unmeasured: str, platform: str | None = None) -> str:
    """``method``, or for "auto" the choice ``by_backend`` holds for ``platform`` (None: the
    platform being built for, :func:`czjax.util.platforms.target`; ``unmeasured`` if none yet)."""
    return by_backend.get(platform or platforms.target(), unmeasured) if method == "auto" else method


def conv_method(method: str, network: str = "mk4", platform: str | None = None) -> str:
    """How a 3x3 convolution of ``network`` ("mk4" or "resnet") computes: ``method``, or for "auto"
    the platform's measured choice (``mk4_conv``, ``resnet_conv``; None: the platform being built
    for)."""
    if method != "auto":
        return method
    choices = platforms.choices_for(platform)
    return choices.resnet_conv if network == "resnet" else choices.mk4_conv


def norm_method(method: str, network: str = "mk4", platform: str | None = None) -> str:
    """How the GroupNorm layers of ``network`` ("mk4" or "resnet") compute: ``method``, or for
    "auto" the platform's choice (``mk4_norm``, ``resnet_norm``; None: the platform being built
    for)."""
    if method != "auto":
        return method
    choices = platforms.choices_for(platform)
    return choices.resnet_norm if network == "resnet" else choices.mk4_norm


def one_hot_planes(boards):
    """int8 boards ``(B, 6, 7)`` -> float ``(B, 6, 7, 3)``: own, opponent, empty."""
    return jnp.stack([boards == 1, boards == -1, boards == 0], axis=-1).astype(jnp.float32)


def is_mixed(dtype) -> bool:
    """Whether a layer whose ``dtype`` this is computes its products from rounded operands."""
    return jnp.dtype(dtype) != jnp.float32


def _accumulation(operand):
    """The ``preferred_element_type`` of a product of ``operand``s: float32 when they are of a
    narrower dtype (the product accumulates and returns float32), else the default."""
    return jnp.float32 if is_mixed(operand.dtype) else None


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def mixed_einsum(spec: str, a, b):
    """``jnp.einsum(spec, a, b)`` of narrow operands (bfloat16), accumulated and returned in
    float32. Its gradient's two products take the float32 cotangent rounded to the operands'
    dtype, and accumulate in float32 too: every product, forward and backward, on bfloat16
    operands and none summed in bfloat16. ``spec`` names each index in two of its three terms
    (a product, not a trace): ``"...i,io->...o"``, ``"tbi,tio->tbo"``."""
    return jnp.einsum(spec, a, b, preferred_element_type=jnp.float32)


def _mixed_einsum_forward(spec, a, b):
    return mixed_einsum(spec, a, b), (a, b)


def _mixed_einsum_backward(spec, residuals, g):
    a, b = residuals
    inputs, out = spec.split("->")
    left, right = inputs.split(",")
    g = g.astype(a.dtype)
    da = jnp.einsum(f"{out},{right}->{left}", g, b, preferred_element_type=jnp.float32)
    db = jnp.einsum(f"{left},{out}->{right}", a, g, preferred_element_type=jnp.float32)
    return da.astype(a.dtype), db.astype(b.dtype)


mixed_einsum.defvjp(_mixed_einsum_forward, _mixed_einsum_backward)


def _mixed_dense_product(lhs, rhs, dimension_numbers, precision=None, **_):
    """``nn.Dense``'s product (``lax.dot_general`` over the input's last axis) as :func:`mixed_einsum`."""
    if dimension_numbers != (((lhs.ndim - 1,), (0,)), ((), ())):
        raise ValueError(f"a dense layer's product, not {dimension_numbers}")
    return mixed_einsum("...i,io->...o", lhs, rhs)


def _round_operands(operands):
    """``nn.Dense``'s ``promote_dtype`` under mixed precision: the input and kernel rounded to
    ``operands``, the bias left float32 (it is added to the float32 product)."""

    def promote(inputs, kernel, bias, dtype=None):
        return inputs.astype(operands), kernel.astype(operands), bias

    return promote


def dense(features: int, dtype=jnp.float32, **kwargs) -> nn.Dense:
    """``nn.Dense(features, **kwargs)``; with a narrow ``dtype`` its product is
    :func:`mixed_einsum` (bfloat16 operands, float32 accumulation and output, a float32 bias)."""
    if not is_mixed(dtype):
        return nn.Dense(features, dtype=dtype, **kwargs)
    return nn.Dense(
        features, dtype=jnp.float32, promote_dtype=_round_operands(dtype), dot_general=_mixed_dense_product, **kwargs
    )


_NHWC = ("NHWC", "HWIO", "NHWC")
_SAME = ((1, 1), (1, 1))


def _conv_nhwc(x, kernel, padding=_SAME):
    return lax.conv_general_dilated(
        x, kernel, (1, 1), padding, dimension_numbers=_NHWC, preferred_element_type=_accumulation(x)
    )


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
    dy = dy.astype(x.dtype)  # under mixed precision the gradient's convolutions take bfloat16 operands too
    # dx[b, r, s, c] = sum_{i, j, o} dy[b, r + 1 - i, s + 1 - j, o] kernel[i, j, c, o]: the
    # convolution of dy with the kernel flipped in space and its features swapped
    dx = _conv_nhwc(dy, jnp.transpose(kernel[::-1, ::-1], (0, 1, 3, 2)))
    return dx.astype(x.dtype), _conv3x3_kernel_gradient(x, dy).astype(kernel.dtype)


# Boards per convolution of the kernel's gradient: the games are that convolution's input
# features, and XLA's CPU kernels (YNNPACK) run it several times slower with 550 of them than in
# chunks of 50 summed (Mk4's update: docs/results/benchmarks/bench-mk4-cpu).
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

    zero = jnp.zeros((3, 3, x.shape[-1], dy.shape[-1]), _accumulation(x) or jnp.result_type(x, dy))
    return lax.scan(add, zero, (chunks(x), chunks(dy)))[0]


conv3x3_canonical.defvjp(_conv3x3_forward, _conv3x3_backward)


# Winograd's F(2x2, 3x3) (Lavin and Gray, 2015): each 2x2 block of outputs from a 4x4 tile of
# inputs with 16 products per pair of channels, where the direct sums take 36.
_WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)


def _winograd_input(d: list):
    """``B^T`` over four slices (4 -> 4): ``d0 - d2, d1 + d2, d2 - d1, d1 - d3``."""
    return [d[0] - d[2], d[1] + d[2], d[2] - d[1], d[1] - d[3]]


def _winograd_output(m: list):
    """``A^T`` over four slices (4 -> 2): ``m0 + m1 + m2, m1 - m2 - m3``."""
    return [m[0] + m[1] + m[2], m[1] - m[2] - m[3]]


def conv3x3_winograd(x, kernel, operands=jnp.float32):
    """The 3x3 'same' convolution of ``x (B, H, W, in)`` by Winograd's F(2x2, 3x3): the board
    padded to whole 2x2 output blocks, each block's 4x4 input tile transformed (``B^T d B``), 16
    matrix products of ``(tiles, in) @ (in, out)`` with the transformed kernel (``G g G^T``),
    and each block's outputs transformed back (``A^T m A``). The same sums as the direct
    convolution, rounded differently (about 1e-6 relative in float32); a 6x7 board takes
    12 blocks x 16 = 192 products per pair of channels where im2col takes 42 x 9 = 378.

    The input transform runs along the padded board's rows (strided slices), then its columns,
    never stacking the 16 tiles first. On a CPU a step of the protocol's search pool was slower so
    than with XLA's convolution compiled with czjax's options for convolutions
    (:mod:`czjax.util.compiling`; docs/results/pons-protocol/yardstick-xla-conv-2026-11-27/pool-step.json):
    the transforms' passes, bound by memory, cost more than the products they save.

    With narrow ``operands`` (mixed precision) the transforms stay float32 and the 16 products
    take their operands rounded to ``operands`` (:func:`mixed_einsum`)."""
    batch, height, width, _ = x.shape
    rows, cols = -(-height // 2), -(-width // 2)  # 2x2 output blocks
    padded = jnp.pad(x, ((0, 0), (1, 2 * rows + 1 - height), (1, 2 * cols + 1 - width), (0, 0)))
    by_rows = _winograd_input([padded[:, r : r + 2 * rows : 2] for r in range(4)])  # rows 2i + r
    v = jnp.stack(
        [t for part in by_rows for t in _winograd_input([part[:, :, s : s + 2 * cols : 2] for s in range(4)])]
    ).reshape(16, batch * rows * cols, x.shape[-1])
    g = jnp.asarray(_WINOGRAD_G, kernel.dtype)
    u = jnp.einsum("ur,rsio,vs->uvio", g, kernel, g).reshape(16, kernel.shape[2], kernel.shape[3])
    if is_mixed(operands):
        m = mixed_einsum("tbi,tio->tbo", v.astype(operands), u.astype(operands))
    else:
        m = lax.dot_general(v, u, (((2,), (1,)), ((0,), (0,))))
    m = m.reshape(4, 4, batch, rows, cols, -1)
    by_columns = [_winograd_output([m[r, s] for r in range(4)]) for s in range(4)]  # [s][p]
    y = jnp.stack([jnp.stack(_winograd_output([by_columns[s][p] for s in range(4)]), axis=3) for p in range(2)], axis=2)
    return y.reshape(batch, 2 * rows, 2 * cols, -1)[:, :height, :width]


def check_pallas_target() -> None:
    """``--conv pallas``'s kernels are a GPU's (interpreted on a CPU): a program built for a TPU
    has none, and says so in one line."""
    if platforms.target() == "tpu":
        raise ValueError("--conv pallas is a GPU kernel (interpreted on a CPU); a TPU has none: choose another")


class Conv3x3(nn.Module):
    """A bias-free 3x3 'same' convolution, computed by ``method`` (CONV_METHODS): im2col + one
    matmul (:func:`conv3x3_im2col`), ``lax.conv``, ``lax.conv`` with a gradient in the canonical
    layout (:func:`conv3x3_canonical`) or Winograd's (:func:`conv3x3_winograd`). ``dtype`` is
    its product's operands' (bfloat16 under mixed precision: accumulated in float32).

    The kernel has ``nn.Conv``'s layout and initialiser, ``(3, 3, in, out)``; only the
    computation differs.
    """

    features: int
    method: str = "auto"  # one of CONV_METHODS
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (3, 3, x.shape[-1], self.features))
        method = conv_method(self.method)
        if method == "pallas":
            check_pallas_target()
        if method == "pallas" and pallas_conv.fits(x.shape[-1], self.features):
            return conv3x3_pallas(x, kernel, self.dtype)
        if method == "winograd":
            return conv3x3_winograd(x, kernel, self.dtype)
        if method in ("im2col", "pallas"):
            return conv3x3_im2col(x, kernel, self.dtype)
        x, kernel = x.astype(self.dtype), kernel.astype(self.dtype)
        if method == "xla":
            return _conv_nhwc(x, kernel)
        return conv3x3_canonical(x, kernel)


def conv3x3_im2col(x, kernel, operands=jnp.float32):
    """The 3x3 'same' convolution of ``x (B, H, W, in)`` as one matrix product: the nine shifted
    copies of the padded board side by side (``(B, H, W, 9 in)``) times the kernel ``(9 in, out)``.
    With narrow ``operands`` (mixed precision) the copies are made in float32 and rounded just
    before the product, so the gradient's nine pieces of each input are summed in float32."""
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    rows, cols = x.shape[1], x.shape[2]
    patches = jnp.concatenate([padded[:, i : i + rows, j : j + cols, :] for i in range(3) for j in range(3)], axis=-1)
    kernel = kernel.reshape(-1, kernel.shape[-1])
    if is_mixed(operands):
        return mixed_einsum("...i,io->...o", patches.astype(operands), kernel.astype(operands))
    return patches @ kernel


def _channel_sums(x):
    """``(B, H, W, C)`` -> ``(B, C)``: each channel summed over the board."""
    return x.reshape(x.shape[0], -1, x.shape[-1]).sum(1)


def _group_sums(per_channel, groups: int):
    """``(B, C)`` -> ``(B, G)``: summed over each group's channels."""
    return per_channel.reshape(per_channel.shape[0], groups, -1).sum(-1)


def _group_stats(x, groups: int, epsilon: float, one_pass: bool = False):
    """Per board and group of ``x (B, H, W, C)``: the mean and 1/sqrt(variance + epsilon), ``(B, G)``,
    from per-channel sums (the variance as E[x^2] - E[x]^2, as Flax computes it); with
    ``one_pass``, ``x`` and ``x^2`` summed over each group's elements in one reduction."""
    size = x.size // (x.shape[0] * groups)
    if one_pass:
        batch, cells = x.shape[0], x.shape[1] * x.shape[2]
        grouped = x.reshape(batch, cells, groups, -1).transpose(0, 2, 1, 3).reshape(batch, groups, -1)
        total, total_squares = paired_sums(grouped, grouped * grouped, (2,))
    else:
        total, total_squares = _group_sums(_channel_sums(x), groups), _group_sums(_channel_sums(x * x), groups)
    mean = total / size
    var = jnp.maximum(total_squares / size - mean * mean, 0.0)
    return mean, lax.rsqrt(var + epsilon)


def paired_sums(a, b, axes: tuple[int, ...]):
    """``(a.sum(axes), b.sum(axes))`` as one reduction of the pair: on a GPU one kernel reads both,
    where XLA gives two sums (and a reduction over axes that are not adjacent in memory) a kernel
    each."""
    zero = jnp.zeros((), a.dtype)
    return lax.reduce((a, b), (zero, zero), lambda x, y: (x[0] + y[0], x[1] + y[1]), axes)


def _per_channel(values, channels: int):
    """``(B, G)`` -> ``(B, C)``: each group's value on its channels."""
    return jnp.repeat(values, channels // values.shape[1], axis=1)


def _on_board(per_channel):
    """``(B, C)`` -> ``(B, 1, 1, C)``, to broadcast over the board."""
    return per_channel[:, None, None, :]


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def group_norm_nhwc(x, scale, bias, groups: int, epsilon: float, one_pass: bool = False):
    """GroupNorm of ``x (B, H, W, C)`` (float32) over ``(H, W, C/G)``, then ``* scale + bias``.

    Computed from per-channel sums over the board, with a hand-written gradient of the same
    shape (one pass over ``dy`` and ``dy * x`` for per-channel sums, one elementwise pass):
    XLA's CPU backend runs Flax's GroupNorm, and the gradient JAX derives for it, as several
    passes of reductions and broadcasts, several times slower in Mk4's update (``czjax bench
    train --model cnn-mk4 --norm flax grouped`` compares them). With ``one_pass`` each pair of
    sums (``x`` and ``x^2`` forward, ``dy`` and ``dy * x`` backward) is one reduction
    (:func:`paired_sums`; ``--norm onepass``): on a GPU, where each reduction is a kernel
    launched, a third of the forward's kernels; the same results up to rounding."""
    return _group_norm_forward(x, scale, bias, groups, epsilon, one_pass)[0]


def _group_norm_forward(x, scale, bias, groups, epsilon, one_pass):
    mean, rstd = _group_stats(x, groups, epsilon, one_pass)
    channels = x.shape[-1]
    if one_pass:
        # The group statistics applied where they are used, each element ``(x - mean) * rstd *
        # scale + bias``: on a GPU the statistics are the reduction's own output and the rest
        # fuses into the next kernel, where a per-channel gain and shift were a kernel of their own.
        stats = (x.shape[0], 1, 1, groups, 1)
        xhat = (x.reshape(x.shape[:3] + (groups, channels // groups)) - mean.reshape(stats)) * rstd.reshape(stats)
        return xhat.reshape(x.shape) * scale + bias, (x, scale, mean, rstd)
    gain = _per_channel(rstd, channels) * scale
    shift = bias - _per_channel(mean, channels) * gain
    return x * _on_board(gain) + _on_board(shift), (x, scale, mean, rstd)


def _group_norm_backward(groups, epsilon, one_pass, residuals, dy):
    x, scale, mean, rstd = residuals
    channels = x.shape[-1]
    size = x.size // (x.shape[0] * groups)
    if one_pass:
        on_cells = (x.shape[0], -1, channels)
        sum_dy, sum_dy_x = paired_sums(dy.reshape(on_cells), (dy * x).reshape(on_cells), (1,))  # (B, C)
    else:
        sum_dy, sum_dy_x = _channel_sums(dy), _channel_sums(dy * x)
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
    a hand-written gradient; ``one_pass``: each pair of sums one reduction). The same parameters
    (``scale``, ``bias``) and the same result up to rounding; statistics in float32 whatever
    ``dtype``."""

    num_groups: int
    epsilon: float = TORCH_EPS
    dtype: Any = jnp.float32
    one_pass: bool = False

    @nn.compact
    def __call__(self, x):
        channels = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (channels,))
        bias = self.param("bias", nn.initializers.zeros, (channels,))
        out = group_norm_nhwc(x.astype(jnp.float32), scale, bias, self.num_groups, self.epsilon, self.one_pass)
        return out.astype(self.dtype)


# How Mk4's GroupNorm layers are computed: "flax" (nn.GroupNorm), "grouped" (GroupedNorm, its
# own gradient) or "onepass" (GroupedNorm, each pair of sums one reduction); "auto" the platform's
# choice (``mk4_norm`` in czjax.util.platforms): on the CPU grouped, by measurement (Mk4's 50-game
# iteration on one core 64 games/s against flax's 56, with canonical convolutions); on a GPU
# onepass, by count (czjax bench kernels: Mk4's forward at 50 boards 40 kernels against flax's 52).
NORM_METHODS = ("auto", "flax", "grouped", "onepass")


def group_norm(method: str, dtype, name: str, groups: int = 16, network: str = "mk4"):
    """A GroupNorm of ``groups`` groups (Mk4's 16) computed by ``method`` (:data:`NORM_METHODS`,
    "auto" as :func:`norm_method` resolves it for ``network``), named ``name`` (as Flax names it,
    ``GroupNorm_i`` in Mk4), so checkpoints and PyTorch's weights map the same way whichever
    computes it."""
    method = norm_method(method, network)
    if method in ("grouped", "onepass"):
        return GroupedNorm(groups, TORCH_EPS, dtype, one_pass=method == "onepass", name=name)
    return nn.GroupNorm(num_groups=groups, epsilon=TORCH_EPS, dtype=dtype, name=name)


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
        if is_mixed(self.dtype):
            return mixed_einsum("brwc,rco->bwo", x, kernel[:, 0])[:, None]
        return jnp.einsum("brwc,rco->bwo", x, kernel[:, 0])[:, None]
