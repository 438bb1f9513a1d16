"""A 3x3 'same' convolution over Connect 4 boards as one Pallas kernel that writes no patches.

im2col (:func:`czjax.models.layers.conv3x3_im2col`) writes nine shifted copies of every board
before its one matrix product: on a GPU those bytes, not the arithmetic, are most of a large
batch's time by the cost model of ``czjax bench kernels`` (the ResNet's and Mk4's). Here the
boards' cells are rows of one ``(boards x 42, channels)`` array; a block of rows is read nine
times, each shifted by a neighbour's offset (``dr * 7 + dc`` rows) with the rows whose neighbour
lies off the board masked to zero, and each read is multiplied by its tap of the kernel and summed
in float32, in registers. A block of :data:`BLOCK` rows is a Triton program on a GPU; on the CPU
the same kernel is interpreted (for tests: it is slow there). The gradient: the input's is the
same kernel over the output's cotangent with the kernel turned (taps mirrored, in and out
swapped); the kernel's a second kernel, each tap's ``(in, out)`` product of the shifted inputs and
the cotangents summed over blocks of cells. Triton's blocks ask for channels in powers of two, at
least 16 (:func:`fits`); a layer that has other counts (the first, over the board's planes) is left
to im2col by its caller.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from czjax import game

CELLS = game.ROWS * game.COLS
BLOCK = 128  # rows (cells) a program computes: a power of two, as Triton's blocks are
# Zero rows before and after the boards where the kernel is interpreted (every shifted read of a
# block in bounds)
HALO = game.COLS + 1
# The kernels' names, which czjax bench kernels reads their FLOPs by
# A kernel's products' type as XLA prints types, for a name that says it (typed_name)
_TYPE_NAMES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
KERNEL_NAME = "conv3x3_rows"
GRADIENT_KERNEL_NAME = "conv3x3_taps_gradient"
# The kernel gradient's programs a tap: each sums every GRADIENT_GROUPS-th block of rows (9 x 16
# programs fill an H100's 132 multiprocessors); their partial sums are added after
GRADIENT_GROUPS = 16


def fits(channels: int, features: int) -> bool:
    """Whether a convolution from ``channels`` to ``features`` runs as these kernels: both powers
    of two, at least 16 (Triton's shortest product)."""
    return all(n >= 16 and n & (n - 1) == 0 for n in (channels, features))


def _rows_in_block(start, rows: int):
    """A block's cell indices from ``start``, each cell's row and column on its board, and
    whether it is a cell at all (the last block runs past the last board)."""
    index = start + jax.lax.broadcasted_iota(jnp.int32, (BLOCK,), 0)
    return (index % CELLS) // game.COLS, index % game.COLS, index < rows


def neighbour(tap):
    """The (row, column) offset of the kernel's ``tap`` (its ``(3, 3)`` taps in order; a number
    or a traced one) and the rows between a cell and that neighbour."""
    dr, dc = tap // 3 - 1, tap % 3 - 1
    return dr, dc, dr * game.COLS + dc


def on_board(row, col, dr, dc):
    """Whether the neighbour ``(dr, dc)`` of cells at ``(row, col)`` lies on their board."""
    return (row + dr >= 0) & (row + dr < game.ROWS) & (col + dc >= 0) & (col + dc < game.COLS)


def _shifted(x_ref, start, tap, rows: int, halo: int):
    """The inputs of a block's cells' neighbours at ``tap`` (a number or a traced one),
    ``(BLOCK, in)``: zeros where the neighbour lies off its board, or the cell past the last
    board."""
    from jax.experimental.pallas import triton

    dr, dc, offset = neighbour(tap)
    row, col, real = _rows_in_block(start, rows)
    at = x_ref.at[pl.ds(halo + start + offset, BLOCK), :]
    return triton.load(at, mask=(on_board(row, col, dr, dc) & real)[:, None], other=0.0)


def conv3x3_rows(x_ref, w_ref, o_ref, *, rows: int, halo: int):
    """One block of output rows: the sum over the nine taps of the shifted input rows times the
    tap's ``(in, out)`` kernel. ``x_ref``: the ``rows`` cells' inputs after ``halo`` rows."""
    start = pl.program_id(0) * BLOCK
    total = jnp.zeros((BLOCK, o_ref.shape[-1]), jnp.float32)
    for tap in range(9):
        total += jnp.dot(_shifted(x_ref, start, tap, rows, halo), w_ref[tap], preferred_element_type=jnp.float32)
    o_ref[...] = total


def conv3x3_taps_gradient(x_ref, dy_ref, o_ref, *, rows: int, halo: int, groups: int):
    """One tap's kernel gradient, ``(in, out)``, summed over one of ``groups`` interleaved sets
    of row blocks: the shifted inputs' transpose times the output's cotangent, block by block."""
    from jax.experimental.pallas import triton

    tap, group = pl.program_id(0), pl.program_id(1)
    blocks = -(-rows // BLOCK)

    def add_block(step, total):
        start = (group + step * groups) * BLOCK
        x = _shifted(x_ref, start, tap, rows, halo)
        real = _rows_in_block(start, rows)[2]
        dy = triton.load(dy_ref.at[pl.ds(halo + start, BLOCK), :], mask=real[:, None], other=0.0)
        return total + jax.lax.dot_general(x, dy, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)

    steps = (blocks - group + groups - 1) // groups
    o_ref[...] = jax.lax.fori_loop(0, steps, add_block, jnp.zeros(o_ref.shape, jnp.float32))


def typed_name(name: str, operands) -> str:
    """``name`` with the type a kernel's products take (``resnet_trunk_bf16`` under mixed
    precision): a kernel whose float32 parameters are rounded inside it has operands whose
    types do not say it, and ``czjax bench kernels`` counts its FLOPs by this."""
    return f"{name}_{_TYPE_NAMES[jnp.dtype(operands).name]}"


def on_each_platform(kernel_call, *args):
    """``kernel_call(*args)``: its Triton kernel where the program is lowered for a GPU, the same
    kernel interpreted (``interpret=True``) where for the CPU."""
    return jax.lax.platform_dependent(*args, cpu=functools.partial(kernel_call, interpret=True), default=kernel_call)


def _call(x, kernel):
    """``x (B, 6, 7, in)`` convolved with ``kernel (3, 3, in, out)``, in float32."""
    return on_each_platform(_kernel_call, x, kernel)


def _taps_gradient(x, dy):
    """The kernel's gradient, ``(3, 3, in, out)`` in float32, of ``x (B, 6, 7, in)`` and the
    output's cotangent ``dy (B, 6, 7, out)``."""
    return on_each_platform(_taps_gradient_call, x, dy)


def _as_rows(x, interpret: bool):
    """``x (B, 6, 7, C)`` as the kernels read it: one row a cell, ``(B x 42, C)``, and the rows a
    read starts after. On a GPU the kernel reads ``x`` where it lies (a masked read is not made);
    interpreted, a read is a slice, which would be moved back into bounds, so ``x`` is given zero
    rows around it (:data:`HALO`)."""
    rows = x.shape[0] * CELLS
    flat = x.reshape(rows, x.shape[-1])
    if not interpret:
        return flat, 0
    return jnp.pad(flat, ((HALO, -(-rows // BLOCK) * BLOCK - rows + HALO), (0, 0))), HALO


def _estimate(rows: int, channels: int, features: int, dtype) -> pl.CostEstimate:
    """What a kernel computes over ``rows`` cells: nine taps' products over the channels, and its
    operands read and result written once (:func:`czjax.row_skipping.flops_per_board` counts it)."""
    size = jnp.dtype(dtype).itemsize
    return pl.CostEstimate(
        flops=2 * rows * 9 * channels * features,
        transcendentals=0,
        bytes_accessed=size * (rows * channels + 9 * channels * features) + 4 * rows * features,
    )


def compiler_params():
    """Triton's settings for these kernels (and :mod:`czjax.models.pallas_trunk`'s), untuned."""
    from jax.experimental.pallas import triton

    return triton.CompilerParams(num_warps=4, num_stages=1)


def _kernel_call(x, kernel, interpret: bool = False):
    batch, channels, features = x.shape[0], x.shape[-1], kernel.shape[-1]
    rows = batch * CELLS
    blocks = -(-rows // BLOCK)
    flat, halo = _as_rows(x, interpret)
    taps = kernel.reshape(9, channels, features)
    out = pl.pallas_call(
        functools.partial(conv3x3_rows, rows=rows, halo=halo),
        out_shape=jax.ShapeDtypeStruct((blocks * BLOCK, features), jnp.float32),
        grid=(blocks,),
        in_specs=[pl.BlockSpec(flat.shape, lambda i: (0, 0)), pl.BlockSpec(taps.shape, lambda i: (0, 0, 0))],
        out_specs=pl.BlockSpec((BLOCK, features), lambda i: (i, 0)),
        compiler_params=compiler_params(),
        interpret=interpret,
        name=KERNEL_NAME,
        cost_estimate=_estimate(rows, channels, features, x.dtype),
    )(flat, taps)
    return out[:rows].reshape(batch, game.ROWS, game.COLS, features)


def _taps_gradient_call(x, dy, interpret: bool = False):
    channels, features = x.shape[-1], dy.shape[-1]
    rows = x.shape[0] * CELLS
    groups = min(GRADIENT_GROUPS, -(-rows // BLOCK))
    (flat, halo), (flat_dy, _) = _as_rows(x, interpret), _as_rows(dy, interpret)
    parts = pl.pallas_call(
        functools.partial(conv3x3_taps_gradient, rows=rows, halo=halo, groups=groups),
        out_shape=jax.ShapeDtypeStruct((9, groups, channels, features), jnp.float32),
        grid=(9, groups),
        in_specs=[pl.BlockSpec(flat.shape, lambda t, g: (0, 0)), pl.BlockSpec(flat_dy.shape, lambda t, g: (0, 0))],
        out_specs=pl.BlockSpec((None, None, channels, features), lambda t, g: (t, g, 0, 0)),
        compiler_params=compiler_params(),
        interpret=interpret,
        name=GRADIENT_KERNEL_NAME,
        cost_estimate=_estimate(rows, channels, features, x.dtype),
    )(flat, flat_dy)
    return parts.sum(1).reshape(3, 3, channels, features)


def _turned(kernel):
    """The kernel whose convolution is the transpose of ``kernel``'s: taps mirrored, in and out
    swapped (the input's gradient)."""
    return jnp.transpose(kernel[::-1, ::-1], (0, 1, 3, 2))


@jax.custom_vjp
def _conv(x, kernel):
    return _call(x, kernel)


def _conv_forward(x, kernel):
    return _conv(x, kernel), (x, kernel)


def _conv_backward(saved, dy):
    x, kernel = saved
    narrow = dy.astype(x.dtype)
    dx = _call(narrow, _turned(kernel)).astype(x.dtype)
    return dx, _taps_gradient(x, narrow).astype(kernel.dtype)


_conv.defvjp(_conv_forward, _conv_backward)


def conv3x3_pallas(x, kernel, operands=jnp.float32):
    """The 3x3 'same' convolution of ``x (B, 6, 7, in)`` by ``kernel (3, 3, in, out)``, float32
    out, its products on ``operands`` (bfloat16 under mixed precision): a Triton kernel on a GPU,
    interpreted on the CPU (a TPU has none)."""
    return _conv(x.astype(operands), kernel.astype(operands))
