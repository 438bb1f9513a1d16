"""The networks: the PyTorch project's (``SimpleMLPModel``, ``Connect4MLP3``,
``Connect4CNN_Mk4``) as Flax modules with its layers and parameter counts, and czjax's own
:class:`ResNet`, built of :mod:`czjax.models.layers`.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from czjax import game
from czjax.models import pallas_head, pallas_trunk
from czjax.models.layers import (
    TORCH_EPS,
    ColumnConv,
    Conv3x3,
    check_pallas_target,
    conv_method,
    dense,
    group_norm,
    is_mixed,
    norm_method,
    one_hot_planes,
)

# ResNet's "auto" convolution is its own choice per platform (``resnet_conv`` in
# czjax.util.platforms): im2col on the CPU whatever Mk4's is, since a ResNet run is recorded bit
# for bit on the development CPU (tests/data/old-run) and another convolution changes its last bits.


class SimpleMLP(nn.Module):
    """42 -> 128 -> 64 -> 7 with ReLU."""

    dtype: Any = jnp.float32
    has_value_head = False

    @nn.compact
    def __call__(self, boards):
        x = boards.reshape(boards.shape[0], -1).astype(jnp.float32)
        x = nn.relu(dense(128, self.dtype)(x))
        x = nn.relu(dense(64, self.dtype)(x))
        return dense(game.COLS, self.dtype)(x).astype(jnp.float32)


class MLP3(nn.Module):
    """Seven bias-free layers of 256 with LayerNorm and ReLU; 8 outputs: 7 logits and a value."""

    dtype: Any = jnp.float32
    has_value_head = True

    @nn.compact
    def __call__(self, boards):
        x = boards.reshape(boards.shape[0], -1).astype(jnp.float32)
        for _ in range(7):
            x = dense(256, self.dtype, use_bias=False)(x)
            x = nn.relu(nn.LayerNorm(epsilon=TORCH_EPS, dtype=jnp.float32)(x))
        out = dense(game.COLS + 1, self.dtype)(x).astype(jnp.float32)
        return out[:, : game.COLS], jnp.tanh(out[:, game.COLS])


def fused_trunk(boards, layers: list, groups: int, dtype):
    """The stem and the residual blocks evaluated as one Pallas kernel
    (:mod:`czjax.models.pallas_trunk`) from the boards and the layers' parameters, ``layers`` a
    ``(convolution's, norm's)`` pair of each layer in order, the stem's first; each parameter
    passed as it lies (stacked or cast here, they would be copied at every call). ``init`` makes
    them through the layers themselves, as the networks' other paths run."""
    check_pallas_target()
    kernels = [conv["kernel"] for conv, _ in layers]
    scales = [norm["scale"] for _, norm in layers]
    biases = [norm["bias"] for _, norm in layers]
    stem = (kernels.pop(0), scales.pop(0), biases.pop(0))
    return pallas_trunk.trunk(boards, stem, kernels, scales, biases, groups, dtype)


class ResBlock(nn.Module):
    conv: str = "auto"
    dtype: Any = jnp.float32
    norm: str = "auto"

    @nn.compact
    def __call__(self, x):
        y = Conv3x3(64, self.conv, self.dtype)(x)
        y = nn.relu(group_norm(self.norm, jnp.float32, "GroupNorm_0")(y))
        y = Conv3x3(64, self.conv, self.dtype)(y)
        y = group_norm(self.norm, jnp.float32, "GroupNorm_1")(y)
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
        # --conv pallas evaluates the trunk and the policy MLP as kernels from the parameters
        # (init makes those through the layers below, as every other path runs)
        fused = conv_method(self.conv) == "pallas" and not self.is_initializing()
        params = self.variables["params"] if fused else {}
        if fused:
            layers = [(params["Conv3x3_0"], params["GroupNorm_0"])] + [
                (params[f"ResBlock_{i}"][f"Conv3x3_{j}"], params[f"ResBlock_{i}"][f"GroupNorm_{j}"])
                for i in range(3)
                for j in (0, 1)
            ]
            x = fused_trunk(boards, layers, 16, dtype)
        else:
            x = Conv3x3(64, self.conv, dtype)(one_hot_planes(boards))
            x = nn.relu(group_norm(self.norm, jnp.float32, "GroupNorm_0")(x))
            for _ in range(3):
                x = ResBlock(self.conv, dtype, self.norm)(x)
        # The (6, 1) column convolution as a matrix product (ColumnConv) unless the 3x3s are XLA's
        # convolutions: on a CPU its gradient's convolutions run in XLA's generic loop; on a GPU
        # each cuDNN call costs ~28 us by the cost model (czjax bench kernels), a cuBLAS one its
        # arithmetic.
        if conv_method(self.conv) != "xla" or is_mixed(dtype):
            x = ColumnConv(64, dtype, name="Conv_0")(x)  # (B, 1, 7, 64)
        else:
            x = nn.Conv(64, (game.ROWS, 1), padding="VALID", use_bias=False, dtype=dtype)(x)
        features = jnp.transpose(x[:, 0], (0, 2, 1)).reshape(x.shape[0], -1)  # index = channel * 7 + col
        if fused:
            layers = [params["Dense_0"]["kernel"], params["LayerNorm_0"]["scale"], params["LayerNorm_0"]["bias"]]
            layers += [params["Dense_1"]["kernel"], params["LayerNorm_1"]["scale"], params["LayerNorm_1"]["bias"]]
            p = pallas_head.policy_mlp(x[:, 0], layers, dtype)  # one kernel, from the columns as they lie
        else:
            p = dense(128, dtype, use_bias=False, name="Dense_0")(features)
            p = nn.relu(nn.LayerNorm(epsilon=TORCH_EPS, dtype=jnp.float32, name="LayerNorm_0")(p))
            p = dense(128, dtype, use_bias=False, name="Dense_1")(p)
            p = nn.relu(nn.LayerNorm(epsilon=TORCH_EPS, dtype=jnp.float32, name="LayerNorm_1")(p))
        logits = dense(game.COLS, dtype, name="Dense_2")(p).astype(jnp.float32)
        if not self.value_head:
            return logits
        v = nn.relu(dense(64, dtype, name="value_0")(features))
        v = nn.relu(dense(64, dtype, name="value_1")(v))
        return logits, jnp.tanh(dense(1, dtype, name="value_2")(v)[:, 0].astype(jnp.float32))


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
    norm: str = "auto"  # the GroupNorm layers' method (NORM_METHODS)
    has_value_head = True

    @nn.compact
    def __call__(self, boards):
        dtype, width = self.dtype, self.channels
        conv = conv_method(self.conv, "resnet")
        groups = resnet_groups(width)

        def norm(name):
            return group_norm(self.norm, jnp.float32, name, groups, "resnet")

        if conv == "pallas" and pallas_trunk.fits(width, self.blocks) and not self.is_initializing():
            params = self.variables["params"]
            layers = [(params["stem"], params["stem_norm"])] + [
                (params[f"block{i}_conv{j}"], params[f"block{i}_norm{j}"]) for i in range(self.blocks) for j in (0, 1)
            ]
            x = fused_trunk(boards, layers, groups, dtype)
        else:
            x = nn.relu(norm("stem_norm")(Conv3x3(width, conv, dtype, name="stem")(one_hot_planes(boards))))
            for i in range(self.blocks):
                y = nn.relu(norm(f"block{i}_norm0")(Conv3x3(width, conv, dtype, name=f"block{i}_conv0")(x)))
                y = norm(f"block{i}_norm1")(Conv3x3(width, conv, dtype, name=f"block{i}_conv1")(y))
                x = nn.relu(x + y)
        batch = x.shape[0]
        p = nn.relu(dense(2, dtype, name="policy_conv")(x)).reshape(batch, -1)  # a 1x1 conv is a Dense per cell
        logits = dense(game.COLS, dtype, name="policy")(p).astype(jnp.float32)
        v = nn.relu(dense(1, dtype, name="value_conv")(x)).reshape(batch, -1)
        v = nn.relu(dense(width, dtype, name="value_hidden")(v))
        return logits, jnp.tanh(dense(1, dtype, name="value")(v)[:, 0].astype(jnp.float32))


def for_platform(model: nn.Module, platform: str) -> nn.Module:
    """``model`` with its "auto" methods resolved to ``platform``'s choices
    (:mod:`czjax.util.platforms`): the same network and parameters, computed as that platform's
    program computes them wherever it is traced."""
    if isinstance(model, CNNMk4):
        return model.clone(conv=conv_method(model.conv, "mk4", platform), norm=norm_method(model.norm, "mk4", platform))
    if isinstance(model, ResNet):
        return model.clone(
            conv=conv_method(model.conv, "resnet", platform), norm=norm_method(model.norm, "resnet", platform)
        )
    return model


def convolves(model: nn.Module) -> bool:
    """Whether ``model``'s program on this backend holds convolution ops (im2col and winograd
    compute theirs as matrix products, pallas in a kernel of its own): :mod:`czjax.util.compiling`
    compiles such programs with their own options."""
    if isinstance(model, (CNNMk4, ResNet)):  # Mk4's (6, 1) column convolution follows its 3x3s
        network = "mk4" if isinstance(model, CNNMk4) else "resnet"
        return conv_method(model.conv, network) not in ("im2col", "winograd", "pallas")
    return False


def has_value_head(model: nn.Module) -> bool:
    return bool(model.has_value_head)
