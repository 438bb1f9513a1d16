"""A network's residual blocks (the ResNet's, Mk4's three) as one Pallas kernel: every block's two
3x3 convolutions, their GroupNorms, ReLUs and the residual sums, for a block of boards, without
leaving the kernel.

Per 3x3 convolution (:mod:`czjax.models.pallas_conv`) each layer is still a kernel of its own
with its activations written and read again by the norm's reduction and its application: on a
GPU by the cost model of ``czjax bench kernels`` the strength recipe's evaluations are then
about equal parts launches and those bytes. Here one Triton program takes :data:`BOARDS` whole
boards (126 of its 128 rows), so that a cell's neighbours and a board's GroupNorm statistics are
its own: a layer's input is written to the program's rows of the output (which serves as its
scratch), read back nine times shifted by a neighbour's offset (masked off the board), the taps'
products summed in float32; a board's group sums are products with the rows' one-hot board
(exact float32), then applied in place. Only the trunk's input and its result cross memory.
The stem (the boards' one-hot planes convolved to the trunk's width, its norm and ReLU) can run
in the same kernel, its input then the boards themselves.

Differentiated (a gradient step) the trunk runs layer by layer (:func:`layered_trunk`: the
per-convolution kernels and GroupNorm in one pass, the same arithmetic), whose activations its
gradient needs: the kernel is for evaluations, which take none. On the CPU the
kernel is interpreted (for tests); a TPU has none.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from czjax import game
from czjax.models.layers import TORCH_EPS, conv3x3_im2col, group_norm_nhwc, one_hot_planes
from czjax.models.pallas_conv import (
    BLOCK,
    CELLS,
    compiler_params,
    conv3x3_pallas,
    neighbour,
    on_board,
    on_each_platform,
    typed_name,
)

BOARDS = 3  # boards a program: 126 of its BLOCK rows
SLOTS = 16  # the one-hot boards' width (a Triton product's shortest dimension; BOARDS used)
EDGE = 8  # rows of the output before the first program's (>= COLS + 1: shifted reads in bounds)
KERNEL_NAME = "resnet_trunk"  # which czjax bench kernels reads its FLOPs by (kernel_name)
_EXACT = lax.Precision.HIGHEST  # the norm's sums: float32, not TF32


def kernel_name(operands) -> str:
    """The kernel's name with the type its products take (its float32 parameters are rounded
    inside it)."""
    return typed_name(KERNEL_NAME, operands)


def fits(channels: int, blocks: int) -> bool:
    """Whether a trunk of ``blocks`` blocks of ``channels`` runs as this kernel: channels a power
    of two from 16 to 128 (a program holds a block of rows of them)."""
    return blocks > 0 and 16 <= channels <= 128 and channels & (channels - 1) == 0


def _sums(onehot, y):
    """Each board's column sums of ``y (BLOCK, ch)``: ``(SLOTS, ch)``."""
    return lax.dot_general(onehot, y, (((0,), (0,)), ((), ())), precision=_EXACT, preferred_element_type=jnp.float32)


def _exact(a, b):
    return jnp.dot(a, b, precision=_EXACT, preferred_element_type=jnp.float32)


@dataclasses.dataclass(frozen=True)
class TrunkCall:
    """What a call of the kernel fixes: its boards, layers (the blocks' two each), the norms'
    groups, the products' operands (float32, or bfloat16 under mixed precision), whether it
    begins with the stem (its input the boards) and whether it is interpreted (on the CPU, where
    Triton's barrier has no meaning)."""

    boards: int
    layers: int
    groups: int
    operands: Any
    stem: bool
    interpret: bool


class _Rows(NamedTuple):
    """A program's rows: which are its boards' cells (``real``), each one's cell (``row``,
    ``col``), its board as a one-hot column (``onehot``, for the norm's sums), a channel's group
    as a matrix (``same_group``), the values a group's statistics are over (``group_size``), and
    where its scratch rows begin (``base``)."""

    real: jax.Array
    row: jax.Array
    col: jax.Array
    onehot: jax.Array
    same_group: jax.Array
    group_size: int
    base: jax.Array


def _rows(program, call: TrunkCall, channels: int) -> _Rows:
    local = lax.broadcasted_iota(jnp.int32, (BLOCK,), 0)
    board = local // CELLS
    real = (local < BOARDS * CELLS) & (program * BOARDS + board < call.boards)
    onehot = jnp.where(real[:, None], board[:, None] == lax.broadcasted_iota(jnp.int32, (BLOCK, SLOTS), 1), False)
    group = channels // call.groups
    same_group = lax.broadcasted_iota(jnp.int32, (channels, channels), 0) // group
    same_group = same_group == lax.broadcasted_iota(jnp.int32, (channels, channels), 1) // group
    row, col = (local % CELLS) // game.COLS, local % game.COLS
    onehot, same_group = onehot.astype(jnp.float32), same_group.astype(jnp.float32)
    return _Rows(real, row, col, onehot, same_group, CELLS * group, EDGE + program * BLOCK)


def _group_norm(y, scale, bias, at: _Rows):
    """GroupNorm of a program's rows ``at``, each board and group its own statistics (the
    variance as E[y^2] - E[y]^2), then ``* scale + bias``."""
    mean = _exact(_sums(at.onehot, y), at.same_group) / at.group_size
    variance = _exact(_sums(at.onehot, y * y), at.same_group) / at.group_size - mean * mean
    rstd = lax.rsqrt(variance + TORCH_EPS)
    return (y - _exact(at.onehot, mean)) * _exact(at.onehot, rstd) * scale[None, :] + bias[None, :]


def _neighbours(o_ref, at: _Rows, tap: int):
    """Each of the program's rows' neighbour at ``tap`` in its scratch rows, zero off the board
    and past its boards (a masked read, not made), with where it is on the board."""
    from jax.experimental.pallas import triton

    dr, dc, offset = neighbour(tap)
    inside = (on_board(at.row, at.col, dr, dc) & at.real)[:, None]
    return inside, triton.load(o_ref.at[pl.ds(at.base + offset, BLOCK), :], mask=inside, other=0.0)


def _barrier(call: TrunkCall):
    from jax.experimental.pallas import triton

    if not call.interpret:  # a program's rows all written (or read) before any is read (written)
        triton.debug_barrier()


def _stem(values, stem_refs, o_ref, at: _Rows, call: TrunkCall):
    """The stem's 3x3 convolution of the one-hot planes (own, opponent, empty) of the board
    ``values (BLOCK,)``: each tap adds its weights' row of the neighbour's plane, ``(9, 3, ch)``
    (zero off the board, as the planes' zero padding), products of exact one-hots in float32;
    then its norm and ReLU. The values go through the scratch rows, read back shifted."""
    taps, scale, bias = stem_refs
    channels = o_ref.shape[-1]
    o_ref[pl.ds(at.base, BLOCK), :] = jnp.broadcast_to(values[:, None], (BLOCK, channels))
    _barrier(call)
    total = jnp.zeros((BLOCK, channels), jnp.float32)
    for tap in range(9):
        inside, shifted = _neighbours(o_ref, at, tap)
        weights = [taps[tap, plane].astype(call.operands).astype(jnp.float32)[None, :] for plane in range(3)]
        by_plane = jnp.where(shifted == 1, weights[0], jnp.where(shifted == -1, weights[1], weights[2]))
        total += jnp.where(inside, by_plane, 0.0)
    _barrier(call)
    return jnp.maximum(_group_norm(total, scale[...], bias[...], at), 0.0)


def resnet_trunk(x_ref, *refs, call: TrunkCall):
    """One program's boards through every block: ``x_ref`` the stem's output, a row a cell (or,
    with ``call.stem``, the boards' values, a cell each, and then the stem's taps ``(9, 3, ch)``,
    norm scale and bias); then each layer's taps ``(9, ch, ch)``, each layer's norm scale and
    each one's bias ``(ch,)``, each a parameter as it lies (a layer an operand: nothing stacked or
    cast before the call, which would be a copy a call in a loop of plies or simulations);
    ``y_ref`` the result, a row a cell; ``o_ref`` the programs' scratch rows, 128 a program after
    :data:`EDGE`."""
    from jax.experimental.pallas import triton

    stem_refs, refs = (refs[:3], refs[3:]) if call.stem else ((), refs)
    taps, scales, biases = (refs[i * call.layers : (i + 1) * call.layers] for i in range(3))
    y_ref, o_ref = refs[3 * call.layers :]
    channels = o_ref.shape[-1]
    at = _rows(pl.program_id(0), call, channels)
    cells = pl.ds(pl.program_id(0) * BOARDS * CELLS, BLOCK)  # the program's boards (and past them)

    def of_block(refs, i, second: int, *index):
        """Block ``i``'s first or ``second`` layer's parameter, ``refs[layer][index]``: a branch
        a block (its parameters are operands of their own; a loop unrolled over the blocks
        instead compiles several times slower)."""
        return lax.switch(i, [functools.partial(lambda r: r[index], r) for r in refs[second::2]])

    def layer(act, i, second: int):
        o_ref[pl.ds(at.base, BLOCK), :] = act
        _barrier(call)
        total = jnp.zeros((BLOCK, channels), jnp.float32)
        for tap in range(9):
            _, shifted = _neighbours(o_ref, at, tap)
            weights = of_block(taps, i, second, tap).astype(call.operands)
            total += jnp.dot(shifted.astype(call.operands), weights, preferred_element_type=jnp.float32)
        _barrier(call)
        return _group_norm(total, of_block(scales, i, second, ...), of_block(biases, i, second, ...), at)

    def block(i, act):
        return jnp.maximum(act + layer(jnp.maximum(layer(act, i, 0), 0.0), i, 1), 0.0)

    if call.stem:
        values = triton.load(x_ref.at[cells], mask=at.real, other=0).astype(jnp.float32)
        first = _stem(values, stem_refs, o_ref, at, call)
    else:
        first = triton.load(x_ref.at[cells, :], mask=at.real[:, None], other=0.0)
    last = lax.fori_loop(0, call.layers // 2, block, first)
    triton.store(y_ref.at[cells, :], last, mask=at.real[:, None])


def _estimate(boards: int, layers: int, channels: int, stem: bool) -> pl.CostEstimate:
    """The trunk's convolutions' arithmetic over ``boards`` (:func:`czjax.row_skipping.flops_per_board`
    counts it; the stem's as im2col's product of 27 patch columns), its input read and result
    written once."""
    cells = boards * CELLS
    per_cell = layers * 9 * channels * channels + (27 * channels if stem else 0)
    return pl.CostEstimate(
        flops=2 * cells * per_cell,
        transcendentals=boards * (layers + stem) * channels,
        bytes_accessed=4 * (2 * cells * channels + per_cell),
    )


def _kernel_call(x, stem, kernels, scales, biases, groups: int, operands, interpret: bool = False):
    """On a GPU the kernel reads and writes the cells where they lie (a masked access is not
    made); interpreted, an access is a slice, which would be moved back into bounds, so both
    get a block of rows more. ``x`` the stem's output, or with a ``stem`` (its kernel, scale
    and bias) the boards."""
    boards, channels, layers = x.shape[0], kernels[0].shape[-1], len(kernels)
    programs = -(-boards // BOARDS)
    cells = boards * CELLS
    spare = BLOCK if interpret else 0
    if stem:
        flat = jnp.pad(x.reshape(cells), (0, spare))
        stem = (stem[0].reshape(9, -1, channels), *stem[1:])
    else:
        flat = jnp.pad(x.reshape(cells, channels), ((0, spare), (0, 0)))
    taps = [kernel.reshape(9, channels, channels) for kernel in kernels]
    scratch = EDGE + programs * BLOCK + EDGE
    operands_ = [flat, *stem, *taps, *scales, *biases]
    out, _ = pl.pallas_call(
        functools.partial(resnet_trunk, call=TrunkCall(boards, layers, groups, operands, bool(stem), interpret)),
        out_shape=(
            jax.ShapeDtypeStruct((cells + spare, channels), jnp.float32),
            jax.ShapeDtypeStruct((scratch, channels), jnp.float32),
        ),
        grid=(programs,),
        in_specs=[pl.BlockSpec(a.shape, lambda i, n=a.ndim: (0,) * n) for a in operands_],
        out_specs=(
            pl.BlockSpec((cells + spare, channels), lambda i: (0, 0)),
            pl.BlockSpec((scratch, channels), lambda i: (0, 0)),
        ),
        compiler_params=compiler_params(),
        interpret=interpret,
        name=kernel_name(operands),
        cost_estimate=_estimate(boards, layers, channels, bool(stem)),
    )(*operands_)
    return out[:cells].reshape(boards, game.ROWS, game.COLS, channels)


def layered_trunk(x, stem, kernels, scales, biases, groups: int, operands=jnp.float32):
    """The same trunk layer by layer (the stem as im2col's product, the blocks'
    :func:`czjax.models.pallas_conv.conv3x3_pallas`, GroupNorm in one pass): what runs where the
    trunk is differentiated (a gradient step), its gradient the trunk's."""

    def norm(y, scale, bias):
        return group_norm_nhwc(y, scale, bias, groups, TORCH_EPS, one_pass=True)

    def layer(x, index: int):
        return norm(conv3x3_pallas(x, kernels[index], operands), scales[index], biases[index])

    if stem:
        x = jax.nn.relu(norm(conv3x3_im2col(one_hot_planes(x), stem[0], operands), *stem[1:]))
    for i in range(len(kernels) // 2):
        x = jax.nn.relu(x + layer(jax.nn.relu(layer(x, 2 * i)), 2 * i + 1))
    return x


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def trunk(x, stem, kernels, scales, biases, groups: int, operands=jnp.float32):
    """``x (B, 6, 7, ch)`` (float32, the stem's output) through the blocks whose convolutions'
    kernels are ``kernels`` (a sequence, ``(3, 3, ch, ch)`` a layer, two layers a block) and
    norms' ``scales``, ``biases`` (``(ch,)`` a layer) in ``groups`` groups, the products on
    ``operands`` (bfloat16 under mixed precision): a Triton kernel on a GPU, interpreted on
    the CPU. With a ``stem`` (its kernel ``(3, 3, 3, ch)``, its norm's scale and bias; else
    ``()``), ``x`` is the boards ``(B, 6, 7)`` and the stem, its norm and ReLU run first, in the
    same kernel."""
    call = functools.partial(_kernel_call, groups=groups, operands=operands)
    return on_each_platform(call, x, tuple(stem), tuple(kernels), tuple(scales), tuple(biases))


def _trunk_forward(x, stem, kernels, scales, biases, groups, operands):
    # Differentiated, the trunk runs layer by layer: its gradient needs each layer's activations
    layered = functools.partial(layered_trunk, groups=groups, operands=operands)
    return jax.vjp(layered, x, stem, kernels, scales, biases)


def _trunk_backward(groups, operands, pullback, dy):
    return pullback(dy)


trunk.defvjp(_trunk_forward, _trunk_backward)
