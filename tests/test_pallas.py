"""The Pallas kernels of ``--conv pallas``, interpreted on the CPU: the convolution
(czjax.models.pallas_conv) against ``lax.conv`` at the highest precision and JAX's own gradient
of it: forward, both gradients, under ``vmap`` (each configuration its own kernel, or one
shared), in mixed precision; the ResNet's residual trunk (czjax.models.pallas_trunk) against the
same blocks written with ``lax.conv`` and GroupNorm by hand; and both inside the networks, whose
outputs and gradients match im2col's from the same weights. A batch whose cells do not fill a
kernel's last block (or boards its last program) is in every case."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from czjax.models import get_model, pallas_head, pallas_trunk
from czjax.models.pallas_conv import BLOCK, CELLS, conv3x3_pallas, fits
from czjax.util import precision


@pytest.fixture(autouse=True)
def full_float32():
    """Full float32 products in the kernels and in what they are compared with, on every
    backend: on a GPU a kernel's float32 products are otherwise TF32's (about 1e-3 relative),
    interpreted on a CPU they are float32's either way."""
    with precision.parity():
        yield


def reference(x, kernel):
    """lax.conv's 'same' 3x3 convolution, NHWC / HWIO, in full float32."""
    return lax.conv_general_dilated(
        x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), precision=lax.Precision.HIGHEST
    )


def operands(boards: int, channels: int, features: int, seed: int = 0, lead: tuple[int, ...] = ()):
    kx, kk, ky = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(kx, (*lead, boards, 6, 7, channels))
    kernel = jax.random.normal(kk, (*lead, 3, 3, channels, features)) / np.sqrt(9 * channels)
    dy = jax.random.normal(ky, (*lead, boards, 6, 7, features))
    return x, kernel, dy


def close(got, want, scale=None):
    """Equal within float32 rounding of sums of a few hundred products, relative to the
    largest value."""
    scale = float(jnp.abs(want).max()) if scale is None else scale
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5 * scale, rtol=0)


def test_the_cells_do_not_fill_the_last_block_and_triton_takes_powers_of_two():
    assert (5 * CELLS) % BLOCK != 0
    assert fits(64, 64) and fits(16, 32) and not fits(3, 64) and not fits(64, 48) and not fits(8, 8)


@pytest.mark.parametrize("boards,channels,features", [(5, 64, 64), (5, 32, 16), (1, 16, 32)])
def test_forward_and_both_gradients_match_lax_conv(boards, channels, features):
    x, kernel, dy = operands(boards, channels, features)
    close(jax.jit(conv3x3_pallas)(x, kernel), reference(x, kernel))

    def loss(conv):
        return lambda x, kernel: (conv(x, kernel) * dy).sum()

    got = jax.jit(jax.grad(loss(conv3x3_pallas), (0, 1)))(x, kernel)
    want = jax.grad(loss(reference), (0, 1))(x, kernel)
    for g, w in zip(got, want):
        close(g, w)


def test_vmapped_configurations_each_with_its_kernel_or_one_shared():
    x, kernel, dy = operands(5, 32, 32, seed=1, lead=(3,))
    close(jax.jit(jax.vmap(conv3x3_pallas))(x, kernel), jax.vmap(reference)(x, kernel))
    close(jax.jit(jax.vmap(conv3x3_pallas, (0, None)))(x, kernel[0]), jax.vmap(reference, (0, None))(x, kernel[0]))

    def gradients(conv):
        return jax.vmap(jax.grad(lambda x, k, dy: (conv(x, k) * dy).sum(), (0, 1)))

    for g, w in zip(jax.jit(gradients(conv3x3_pallas))(x, kernel, dy), gradients(reference)(x, kernel, dy)):
        close(g, w)


def test_mixed_precision_rounds_the_operands_and_sums_in_float32():
    x, kernel, _ = operands(5, 64, 32, seed=2)
    got = jax.jit(lambda x, k: conv3x3_pallas(x, k, jnp.bfloat16))(x, kernel)
    assert got.dtype == jnp.float32
    rounded = [a.astype(jnp.bfloat16).astype(jnp.float32) for a in (x, kernel)]
    close(got, reference(*rounded))
    # and not the float32 result: the rounding is there
    assert float(jnp.abs(got - reference(x, kernel)).max()) > 1e-4


@pytest.mark.parametrize("network", ["resnet:blocks=2,channels=32", "cnn-mk4"])
def test_a_network_with_pallas_convolutions_matches_im2col(network):
    boards = jax.random.randint(jax.random.key(3), (5, 6, 7), -1, 2).astype(jnp.int8)
    with_im2col, with_pallas = get_model(network, conv="im2col"), get_model(network, conv="pallas")
    params = with_im2col.init(jax.random.key(4), boards)
    want, got = with_im2col.apply(params, boards), jax.jit(with_pallas.apply)(params, boards)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        close(g, w, scale=max(1.0, float(jnp.abs(w).max())))
    grads = [
        jax.grad(lambda p, m=m: sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(m.apply(p, boards))))(params)
        for m in (with_im2col, with_pallas)
    ]
    for g, w in zip(jax.tree.leaves(grads[1]), jax.tree.leaves(grads[0])):
        close(g, w, scale=max(1.0, float(jnp.abs(w).max())))


def test_a_pallas_network_counts_the_flops_of_its_im2col_twin():
    """The FLOP rules that choose compaction and gradient chunks (row_skipping.flops_per_board)
    read a Pallas kernel's own estimate, which must be the arithmetic im2col's products do."""
    from czjax import game, row_skipping
    from czjax.players.network import model_player

    counts = []
    for conv in ("im2col", "pallas"):
        model = get_model("cnn-mk4", conv=conv)
        params = model.init(jax.random.key(0), game.new_boards(1))
        counts.append(row_skipping.flops_per_board(model_player(model), params))
    assert counts[1] == counts[0] > 1e7


def by_hand_trunk(x, stem, kernels, scales, biases, groups):
    """The ResNet's blocks with lax.conv and GroupNorm over (cells, group) written out; with a
    ``stem``, ``x`` the boards and first their planes (own, opponent, empty) convolved."""

    def norm(y, scale, bias):
        g = y.reshape(y.shape[0], CELLS, groups, -1)
        mean = g.mean((1, 3), keepdims=True)
        variance = ((g - mean) ** 2).mean((1, 3), keepdims=True)
        return ((g - mean) / jnp.sqrt(variance + 1e-5)).reshape(y.shape) * scale + bias

    if stem:
        planes = jnp.stack([x == 1, x == -1, x == 0], axis=-1).astype(jnp.float32)
        x = jax.nn.relu(norm(reference(planes, stem[0]), stem[1], stem[2]))

    for i in range(len(kernels) // 2):
        y = jax.nn.relu(norm(reference(x, kernels[2 * i]), scales[2 * i], biases[2 * i]))
        x = jax.nn.relu(x + norm(reference(y, kernels[2 * i + 1]), scales[2 * i + 1], biases[2 * i + 1]))
    return x


def trunk_operands(boards: int, channels: int, layers: int, seed: int = 5, stem: bool = False):
    """An input, no stem, then each layer's kernel, norm scale and bias (a list of ``layers``
    each); with ``stem`` the input is boards (each cell -1, 0 or 1) and the stem's kernel, scale
    and bias come before the layers'."""
    kx, kk, ks, kb = jax.random.split(jax.random.key(seed), 4)
    x = jax.nn.relu(jax.random.normal(kx, (boards, 6, 7, channels)))
    kernels = jax.random.normal(kk, (layers, 3, 3, channels, channels)) / np.sqrt(9 * channels)
    scales = 1 + 0.1 * jax.random.normal(ks, (layers + 1, channels))
    biases = 0.1 * jax.random.normal(kb, (layers + 1, channels))
    if not stem:
        return x, (), list(kernels), list(scales[1:]), list(biases[1:])
    boards_ = jax.random.randint(kx, (boards, 6, 7), -1, 2).astype(jnp.int8)
    stem_kernel = jax.random.normal(kk, (3, 3, 3, channels)) / 3.0
    return boards_, (stem_kernel, scales[0], biases[0]), list(kernels), list(scales[1:]), list(biases[1:])


def test_the_trunk_kernel_is_the_blocks_by_hand():
    """7 boards: three programs of 3, the last with one; 4 layers (two blocks) of 32 channels in
    4 groups, then the ResNet's 64 in 8."""
    for channels, groups in ((32, 4), (64, 8)):
        operands_ = trunk_operands(7, channels, 4)
        got = jax.jit(pallas_trunk.trunk, static_argnums=(5, 6))(*operands_, groups)
        close(got, by_hand_trunk(*operands_, groups))
    operands_ = trunk_operands(7, 32, 4, stem=True)  # the stem in the kernel: the boards in
    close(jax.jit(pallas_trunk.trunk, static_argnums=(5, 6))(*operands_, 4), by_hand_trunk(*operands_, 4))


def test_the_trunk_differentiated_runs_layer_by_layer_with_the_same_gradient():
    dy = jax.random.normal(jax.random.key(6), (4, 6, 7, 32))
    for stem, wrt in ((False, (0, 2, 3, 4)), (True, (1, 2, 3, 4))):  # the boards have none
        operands_ = trunk_operands(4, 32, 2, stem=stem)
        got = jax.jit(jax.grad(lambda *a: (pallas_trunk.trunk(*a, 4) * dy).sum(), wrt))(*operands_)
        want = jax.grad(lambda *a: (by_hand_trunk(*a, 4) * dy).sum(), wrt)(*operands_)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            close(g, w)


def test_the_trunk_vmapped_and_in_mixed_precision():
    operands_ = trunk_operands(4, 32, 2, stem=True)
    stacked = jax.tree.map(lambda a: jnp.stack([a, a if a.dtype == jnp.int8 else a * 0.5]), operands_)
    got = jax.jit(jax.vmap(lambda *a: pallas_trunk.trunk(*a, 4)))(*stacked)
    close(got, jax.vmap(lambda *a: by_hand_trunk(*a, 4))(*stacked))
    mixed = jax.jit(pallas_trunk.trunk, static_argnums=(5, 6))(*operands_, 4, jnp.bfloat16)
    layered = pallas_trunk.layered_trunk(*operands_, 4, jnp.bfloat16)
    close(mixed, layered, scale=10 * float(jnp.abs(layered).max()))  # both round each layer's operands
    assert float(jnp.abs(mixed - by_hand_trunk(*operands_, 4)).max()) > 1e-4


def head_operands(boards: int, seed: int = 7):
    """Mk4's column convolution's output ``(boards, 7, 64)`` and its policy MLP's layers:
    Dense_0's kernel (448, 128), a norm's scale and bias, Dense_1's kernel (128, 128), a norm's."""
    keys = jax.random.split(jax.random.key(seed), 7)
    col = jax.random.normal(keys[0], (boards, 7, 64))
    w0 = jax.random.normal(keys[1], (448, 128)) / np.sqrt(448)
    w1 = jax.random.normal(keys[2], (128, 128)) / np.sqrt(128)
    norms = [0.1 * jax.random.normal(k, (128,)) for k in keys[3:]]
    return col, [w0, 1 + norms[0], norms[1], w1, 1 + norms[2], norms[3]]


def by_flax_head(col, layers):
    """The same layers as Flax's Dense and LayerNorm, the features channel-major."""
    import flax.linen as nn

    w0, s0, b0, w1, s1, b1 = layers
    features = jnp.transpose(col, (0, 2, 1)).reshape(col.shape[0], -1)
    norm = nn.LayerNorm(epsilon=1e-5)
    h = jax.nn.relu(norm.apply({"params": {"scale": s0, "bias": b0}}, features @ w0))
    return jax.nn.relu(norm.apply({"params": {"scale": s1, "bias": b1}}, h @ w1))


def test_mk4s_policy_mlp_kernel_is_flaxs_layers():
    """21 boards: two programs of 16, the second with 5; its gradient (the layers as XLA's),
    vmapped, and in mixed precision rounding each product's operands."""
    col, layers = head_operands(21)
    close(jax.jit(pallas_head.policy_mlp)(col, layers), by_flax_head(col, layers))
    dy = jax.random.normal(jax.random.key(8), (21, 128))
    got = jax.grad(lambda c, ls: (pallas_head.policy_mlp(c, ls) * dy).sum(), (0, 1))(col, layers)
    want = jax.grad(lambda c, ls: (by_flax_head(c, ls) * dy).sum(), (0, 1))(col, layers)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        close(g, w)
    stacked = jax.tree.map(lambda a: jnp.stack([a, a * 0.5]), (col, layers))
    close(jax.jit(jax.vmap(pallas_head.policy_mlp))(*stacked), jax.vmap(by_flax_head)(*stacked))
    mixed = jax.jit(pallas_head.policy_mlp, static_argnums=2)(col, layers, jnp.bfloat16)
    close(mixed, pallas_head.policy_mlp_reference(col, layers, jnp.bfloat16), scale=10.0)
    assert float(jnp.abs(mixed - by_flax_head(col, layers)).max()) > 1e-4


def test_a_tpu_has_no_pallas_convolution():
    from czjax import game
    from czjax.util import platforms

    model = get_model("resnet:blocks=1,channels=16", conv="pallas")
    with platforms.building_for("tpu"), pytest.raises(ValueError, match="--conv pallas is a GPU kernel"):
        model.init(jax.random.key(0), game.new_boards(1))
    params = model.init(jax.random.key(0), game.new_boards(1))  # a model made elsewhere, applied for a TPU
    with platforms.building_for("tpu"), pytest.raises(ValueError, match="--conv pallas is a GPU kernel"):
        model.apply(params, game.new_boards(1))
