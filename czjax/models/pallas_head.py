"""Mk4's policy MLP up to its last layer as one Pallas kernel: from the column convolution's
output, the product with Dense_0 (448 -> 128), LayerNorm and ReLU, the product with Dense_1
(128 -> 128), LayerNorm and ReLU, for a block of boards, without leaving the kernel.

Evaluated by XLA, these are about nine kernels a network call (the features' transpose, two
products, two norms' reductions and their applications with the ReLUs), each a launch at every
ply of a self-play batch or simulation of a search. Here a Triton program takes
:data:`BOARDS` boards: the features are the column convolution's output as it lies, read a
column at a time against that column's rows of Dense_0 (the features are channel-major, a
feature ``c * 7 + column``), so nothing is transposed; the norms' statistics are each row's own.
The last layer (128 -> 7) stays XLA's (a width of 7 is not a Triton block's).

Differentiated (a gradient step) the same layers run as XLA's (:func:`policy_mlp_reference`),
whose gradient is the kernel's. On the CPU the kernel is interpreted (for tests); a TPU has none.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from czjax import game
from czjax.models.layers import TORCH_EPS
from czjax.models.pallas_conv import compiler_params, on_each_platform, typed_name

BOARDS = 16  # boards a program (a Triton product's shortest dimension)
KERNEL_NAME = "mk4_policy_mlp"  # which czjax bench kernels reads its FLOPs by (kernel_name)


def kernel_name(operands) -> str:
    """The kernel's name with the type its products take (its float32 parameters are rounded
    inside it)."""
    return typed_name(KERNEL_NAME, operands)


@dataclasses.dataclass(frozen=True)
class HeadCall:
    """What a call of the kernel fixes: its boards, the products' operands and whether it is
    interpreted (on the CPU)."""

    boards: int
    operands: Any
    interpret: bool


def _layer_norm(x, scale, bias):
    """Flax's LayerNorm of each row (its fast variance, E[x^2] - E[x]^2), then ``* scale + bias``."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.maximum(jnp.mean(x * x, axis=-1, keepdims=True) - mean * mean, 0.0)
    return (x - mean) * lax.rsqrt(variance + TORCH_EPS) * scale + bias


def policy_mlp_kernel(col_ref, *refs, call: HeadCall):
    """One program's boards: ``col_ref (B, 7 x 64)`` the column convolution's output, a board a
    row (column-major: column ``w``'s 64 features at ``w x 64``); then ``w0_ref (64, 7, 128)``
    Dense_0's kernel by (channel, column), the first norm's scale and bias, ``w1_ref (128, 128)``,
    the second norm's scale and bias, and the result ``(B, 128)``."""
    from jax.experimental.pallas import triton

    w0_ref, s0_ref, b0_ref, w1_ref, s1_ref, b1_ref, out_ref = refs
    first = pl.program_id(0) * BOARDS
    real = first + lax.broadcasted_iota(jnp.int32, (BOARDS,), 0) < call.boards
    channels = w0_ref.shape[0]
    hidden = jnp.zeros((BOARDS, w0_ref.shape[-1]), jnp.float32)
    for column in range(game.COLS):
        at = col_ref.at[pl.ds(first, BOARDS), pl.ds(column * channels, channels)]
        features = triton.load(at, mask=real[:, None], other=0.0).astype(call.operands)
        weights = w0_ref[:, column, :].astype(call.operands)
        hidden += jnp.dot(features, weights, preferred_element_type=jnp.float32)
    hidden = jnp.maximum(_layer_norm(hidden, s0_ref[...], b0_ref[...]), 0.0)
    narrow = call.operands
    hidden = jnp.dot(hidden.astype(narrow), w1_ref[...].astype(narrow), preferred_element_type=jnp.float32)
    hidden = jnp.maximum(_layer_norm(hidden, s1_ref[...], b1_ref[...]), 0.0)
    triton.store(out_ref.at[pl.ds(first, BOARDS), :], hidden, mask=real[:, None])


def _kernel_call(col, layers, operands, interpret: bool = False):
    """Interpreted, a read is a slice, which would be moved back into bounds: the boards are
    given a program's rows more."""
    boards = col.shape[0]
    w0, s0, b0, w1, s1, b1 = layers
    channels, width = col.shape[-1], w1.shape[-1]
    flat = col.reshape(boards, -1)
    flat = jnp.pad(flat, ((0, BOARDS), (0, 0))) if interpret else flat
    operands_ = [flat, w0.reshape(channels, game.COLS, width), s0, b0, w1, s1, b1]
    programs = -(-boards // BOARDS)
    rows = boards + (BOARDS if interpret else 0)
    out = pl.pallas_call(
        functools.partial(policy_mlp_kernel, call=HeadCall(boards, operands, interpret)),
        out_shape=jax.ShapeDtypeStruct((rows, width), jnp.float32),
        grid=(programs,),
        in_specs=[pl.BlockSpec(a.shape, lambda i, n=a.ndim: (0,) * n) for a in operands_],
        out_specs=pl.BlockSpec((rows, width), lambda i: (0, 0)),
        compiler_params=compiler_params(),
        interpret=interpret,
        name=kernel_name(operands),
        cost_estimate=pl.CostEstimate(
            flops=2 * boards * (w0.size + w1.size),
            transcendentals=2 * boards,
            bytes_accessed=4 * (flat.size + w0.size + w1.size + boards * width),
        ),
    )(*operands_)
    return out[:boards]


def policy_mlp_reference(col, layers, operands=jnp.float32):
    """The same layers as XLA's: the features channel-major, then each product on ``operands``
    accumulated in float32, each LayerNorm in float32."""
    w0, s0, b0, w1, s1, b1 = layers
    features = jnp.transpose(col, (0, 2, 1)).reshape(col.shape[0], -1)  # index = channel * 7 + col

    def product(x, w):
        return jnp.dot(x.astype(operands), w.astype(operands), preferred_element_type=jnp.float32)

    hidden = jax.nn.relu(_layer_norm(product(features, w0), s0, b0))
    return jax.nn.relu(_layer_norm(product(hidden, w1), s1, b1))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def policy_mlp(col, layers, operands=jnp.float32):
    """``col (B, 7, 64)``, Mk4's column convolution's output, through Dense_0, LayerNorm_0, ReLU,
    Dense_1, LayerNorm_1, ReLU: ``(B, 128)``. ``layers``: Dense_0's kernel ``(448, 128)``, the
    first norm's scale and bias, Dense_1's kernel ``(128, 128)``, the second norm's scale and
    bias; the products on ``operands`` (bfloat16 under mixed precision). A Triton kernel on a
    GPU, interpreted on the CPU."""
    return on_each_platform(functools.partial(_kernel_call, operands=operands), col, tuple(layers))


def _policy_mlp_forward(col, layers, operands):
    # Differentiated, the layers run as XLA's: their gradient is the kernel's
    return jax.vjp(functools.partial(policy_mlp_reference, operands=operands), col, layers)


def _policy_mlp_backward(operands, pullback, dy):
    return pullback(dy)


policy_mlp.defvjp(_policy_mlp_forward, _policy_mlp_backward)
