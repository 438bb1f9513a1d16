"""ONNX export with the contract of the PyTorch project's web applet.

Single-board model (the applet's): input ``board`` int8 ``(6, 7)`` (+1 = side to move), outputs
``logits`` float ``(7,)`` and ``value`` float ``()`` (0 for a model without a value head). The
batched variant takes ``board`` int8 ``(N, 6, 7)`` and returns ``logits (N, 7)``, ``value (N,)``.

Every model exports: the PyTorch project's three (``mlp``, ``mlp3``, ``cnn-mk4[-value]``) and
czjax's ResNet (``resnet[:blocks=B,channels=C]``, the shipped model ``czjax``).

Why the graph is built with ``onnx.helper`` directly rather than traced by a converter such as
``jax2onnx``: the models are a few dozen standard operators, so writing them out takes less
code than adapting a converter; the file depends only on ``onnx`` (no JAX, no PyTorch at export
time); the graph uses PyTorch's layouts (NCHW convolutions with ``(out, in, kh, kw)`` weights,
from :mod:`czjax.models.torch_layout`), so it reads like the PyTorch project's own export (and
the ResNet's like :mod:`czjax.interop.torch_models`); and it targets opset 17, which
onnxruntime-web runs. GroupNorm is written out (reshape, mean, variance) because ONNX's
GroupNormalization operator changed meaning between opsets 18 and 21.
"""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from czjax import models
from czjax.models import torch_layout
from czjax.players import random_player
from czjax.players.loading import load_params
from czjax.rollout import Side, play_games
from czjax.util import precision

OPSET = 17
EPS = 1e-5
MK4_GROUPS = 16  # Connect4CNN_Mk4's GroupNorm(16, 64)


def _import_onnx():
    try:
        import onnx
    except ImportError:
        raise ValueError("ONNX export needs the onnx package: pip install 'czjax[onnx]'") from None
    return onnx


class _Graph:
    """A small builder: each method adds one node and returns its output name."""

    def __init__(self, onnx):
        self.onnx, self.h = onnx, onnx.helper
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, array, hint="c") -> str:
        name = self.name(hint)
        self.inits.append(self.onnx.numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs) -> str:
        out = out or self.name(op_type.lower())
        self.nodes.append(self.h.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def relu(self, x: str) -> str:
        return self.op("Relu", x)

    def columns(self, x: str, start: int, stop: int) -> str:
        """Columns ``start:stop`` of a 2-d ``x``."""
        return self.op(
            "Slice",
            x,
            self.const(np.array([start], np.int64)),
            self.const(np.array([stop], np.int64)),
            self.const(np.array([1], np.int64)),
        )

    def dense(self, x: str, weight: np.ndarray, bias: np.ndarray | None = None) -> str:
        """x @ weight.T (+ bias), with a PyTorch ``(out, in)`` weight."""
        y = self.op("MatMul", x, self.const(np.ascontiguousarray(weight.T), "w"))
        return self.op("Add", y, self.const(bias, "b")) if bias is not None else y

    def flatten_cells(self, x: str) -> str:
        """NCHW ``(N, C, 6, 7)`` -> ``(N, 42 * C)`` in czjax's NHWC order, index (row * 7 + col) * C
        + channel, as czjax's ResNet flattens its heads."""
        return self.op("Flatten", self.op("Transpose", x, perm=[0, 2, 3, 1]), axis=1)

    def scalar_value(self, x: str) -> str:
        """A value head's ``(N, 1)`` output -> tanh, ``(N,)``."""
        return self.op("Tanh", self.op("Reshape", x, self.const(np.array([-1], np.int64))))

    def layer_norm(self, x: str, scale: np.ndarray, bias: np.ndarray) -> str:
        return self.op(
            "LayerNormalization", x, self.const(scale, "scale"), self.const(bias, "bias"), axis=-1, epsilon=EPS
        )

    def conv(self, x: str, weight: np.ndarray, pad: int, bias: np.ndarray | None = None) -> str:
        """An NCHW convolution with a PyTorch ``(out, in, kh, kw)`` weight (+ bias)."""
        inputs = [x, self.const(weight, "conv")] + ([self.const(bias, "b")] if bias is not None else [])
        return self.op("Conv", *inputs, pads=[pad] * 4)

    def group_norm(self, x: str, scale: np.ndarray, bias: np.ndarray, groups: int) -> str:
        """GroupNorm of NCHW ``x``: ``(N, C, H, W)`` reshaped to ``(N, groups, C / groups * H * W)``
        holds each group's channels, which NCHW keeps contiguous, in one row; normalised over that
        row, reshaped back, then scaled and shifted per channel."""
        shape = self.op("Shape", x)
        grouped = self.op("Reshape", x, self.const(np.array([0, groups, -1], np.int64)))
        mean = self.op("ReduceMean", grouped, axes=[2], keepdims=1)
        centred = self.op("Sub", grouped, mean)
        var = self.op("ReduceMean", self.op("Mul", centred, centred), axes=[2], keepdims=1)
        normed = self.op("Div", centred, self.op("Sqrt", self.op("Add", var, self.const(np.float32(EPS)))))
        y = self.op("Reshape", normed, shape)
        per_channel = (1, -1, 1, 1)
        return self.op(
            "Add", self.op("Mul", y, self.const(scale.reshape(per_channel))), self.const(bias.reshape(per_channel))
        )


def _body(g: _Graph, model_name: str, sd: dict[str, np.ndarray], boards: str) -> tuple[str, str | None]:
    """``(logits (N, 7), value (N,) or None)`` from int8 ``boards (N, 6, 7)``."""
    if model_name in ("mlp", "mlp3"):
        x = g.op("Reshape", g.op("Cast", boards, to=g.onnx.TensorProto.FLOAT), g.const(np.array([-1, 42], np.int64)))
        return _mlp(g, sd, x) if model_name == "mlp" else _mlp3(g, sd, x)
    network = models.get_model(model_name)
    if isinstance(network, models.ResNet):
        return _resnet(g, sd, boards, network.blocks, models.resnet_groups(network.channels))
    features = _mk4_features(g, sd, boards)
    logits = _mk4_policy(g, sd, features)
    if "value_head.0.weight" not in sd:
        return logits, None
    return logits, _mk4_value(g, sd, features)


def _mlp(g: _Graph, sd: dict[str, np.ndarray], x: str) -> tuple[str, None]:
    """``SimpleMLPModel``'s logits from the flat boards ``x (N, 42)``; no value."""
    for t in (1, 3):
        x = g.relu(g.dense(x, sd[f"layers.{t}.weight"], sd[f"layers.{t}.bias"]))
    return g.dense(x, sd["layers.5.weight"], sd["layers.5.bias"]), None


def _mlp3(g: _Graph, sd: dict[str, np.ndarray], x: str) -> tuple[str, str]:
    """``Connect4MLP3``'s ``(logits, value)`` from the flat boards ``x (N, 42)``: the last layer's
    first 7 outputs, and the tanh of its 8th."""
    for i in range(7):
        x = g.dense(x, sd[f"layers.{3 * i + 1}.weight"])
        x = g.relu(g.layer_norm(x, sd[f"layers.{3 * i + 2}.weight"], sd[f"layers.{3 * i + 2}.bias"]))
    out = g.dense(x, sd["layers.22.weight"], sd["layers.22.bias"])
    logits = g.columns(out, 0, 7)
    return logits, g.scalar_value(g.columns(out, 7, 8))


def _one_hot_planes(g: _Graph, boards: str) -> str:
    """int8 ``boards (N, 6, 7)`` -> float ``(N, 3, 6, 7)``: own, opponent, empty (Mk4's and the ResNet's input)."""
    planes = []
    for piece in (1, -1, 0):
        is_piece = g.op("Cast", g.op("Equal", boards, g.const(np.int8(piece))), to=g.onnx.TensorProto.FLOAT)
        planes.append(g.op("Unsqueeze", is_piece, g.const(np.array([1], np.int64))))
    return g.op("Concat", *planes, axis=1)


def _conv_norm(g: _Graph, sd: dict[str, np.ndarray], x: str, conv: str, norm: str, groups: int) -> str:
    """A bias-free 3x3 convolution (weight ``sd[conv]``) then GroupNorm (``sd[norm + ".weight"]``, ``.bias``)."""
    return g.group_norm(g.conv(x, sd[conv], 1), sd[f"{norm}.weight"], sd[f"{norm}.bias"], groups)


def _residual_block(
    g: _Graph, sd: dict[str, np.ndarray], x: str, convs: tuple[str, str], norms: tuple[str, str], groups: int
) -> str:
    """relu(x + norm1(conv1(relu(norm0(conv0(x)))))), Mk4's and the ResNet's block alike."""
    y = g.relu(_conv_norm(g, sd, x, convs[0], norms[0], groups))
    return g.relu(g.op("Add", x, _conv_norm(g, sd, y, convs[1], norms[1], groups)))


def _mk4_features(g: _Graph, sd: dict[str, np.ndarray], boards: str) -> str:
    """``Connect4CNN_Mk4``'s features ``(N, 448)`` (channel * 7 + col): one-hot planes (own,
    opponent, empty) in NCHW, the stem, three residual blocks and the downsampling convolution."""
    stem = ("feature_extractor.0.weight", "feature_extractor.1")
    x = g.relu(_conv_norm(g, sd, _one_hot_planes(g, boards), *stem, MK4_GROUPS))
    for b in (1, 2, 3):
        p = f"resblock{b}"
        x = _residual_block(g, sd, x, (f"{p}.0.weight", f"{p}.3.weight"), (f"{p}.1", f"{p}.4"), MK4_GROUPS)
    return g.op("Reshape", g.conv(x, sd["downsample.weight"], 0), g.const(np.array([-1, 448], np.int64)))


def _mk4_policy(g: _Graph, sd: dict[str, np.ndarray], features: str) -> str:
    """``Connect4CNN_Mk4``'s logits ``(N, 7)`` from its features."""
    p = g.relu(
        g.layer_norm(g.dense(features, sd["fc_layers.0.weight"]), sd["fc_layers.1.weight"], sd["fc_layers.1.bias"])
    )
    p = g.relu(g.layer_norm(g.dense(p, sd["fc_layers.3.weight"]), sd["fc_layers.4.weight"], sd["fc_layers.4.bias"]))
    return g.dense(p, sd["fc_layers.6.weight"], sd["fc_layers.6.bias"])


def _mk4_value(g: _Graph, sd: dict[str, np.ndarray], features: str) -> str:
    """``Connect4CNN_Mk4``'s value head ``(N,)`` from its features (``cnn-mk4-value``)."""
    v = g.relu(g.dense(features, sd["value_head.0.weight"], sd["value_head.0.bias"]))
    v = g.relu(g.dense(v, sd["value_head.2.weight"], sd["value_head.2.bias"]))
    return g.scalar_value(g.dense(v, sd["value_head.4.weight"], sd["value_head.4.bias"]))


def _resnet(g: _Graph, sd: dict[str, np.ndarray], boards: str, blocks: int, groups: int) -> tuple[str, str]:
    """czjax's ``ResNet`` (:mod:`czjax.interop.torch_models`) of ``blocks`` residual blocks and
    GroupNorms of ``groups`` groups: ``(logits, value)``. Each head is a 1x1 convolution with
    bias, flattened in czjax's (row, col, channel) order."""
    x = g.relu(_conv_norm(g, sd, _one_hot_planes(g, boards), "stem.weight", "stem_norm", groups))
    for i in range(blocks):
        p = f"blocks.{i}"
        x = _residual_block(g, sd, x, (f"{p}.conv0.weight", f"{p}.conv1.weight"), (f"{p}.norm0", f"{p}.norm1"), groups)
    p = g.relu(g.conv(x, sd["policy_conv.weight"], 0, sd["policy_conv.bias"]))
    logits = g.dense(g.flatten_cells(p), sd["policy.weight"], sd["policy.bias"])
    v = g.relu(g.conv(x, sd["value_conv.weight"], 0, sd["value_conv.bias"]))
    v = g.relu(g.dense(g.flatten_cells(v), sd["value_hidden.weight"], sd["value_hidden.bias"]))
    return logits, g.scalar_value(g.dense(v, sd["value.weight"], sd["value.bias"]))


def build_model(model_name: str, params, batched: bool = False):
    """An ``onnx.ModelProto`` computing ``model_name`` with ``params`` (czjax parameters)."""
    onnx = _import_onnx()
    sd = torch_layout.to_state_dict(model_name, params)
    g = _Graph(onnx)
    T = onnx.TensorProto
    if batched:
        board_in = onnx.helper.make_tensor_value_info("board", T.INT8, ["batch", 6, 7])
        boards = "board"
    else:
        board_in = onnx.helper.make_tensor_value_info("board", T.INT8, [6, 7])
        boards = g.op("Unsqueeze", "board", g.const(np.array([0], np.int64)))
    logits, value = _body(g, model_name, sd, boards)
    if value is None:  # the applet reads a value: 0 for a model without a value head
        n = g.op("Slice", g.op("Shape", boards), g.const(np.array([0], np.int64)), g.const(np.array([1], np.int64)))
        value = g.op("ConstantOfShape", n, value=onnx.helper.make_tensor("zero", T.FLOAT, [1], [0.0]))
    if batched:
        g.op("Identity", logits, out="logits")
        g.op("Identity", value, out="value")
        outputs = [
            onnx.helper.make_tensor_value_info("logits", T.FLOAT, ["batch", 7]),
            onnx.helper.make_tensor_value_info("value", T.FLOAT, ["batch"]),
        ]
    else:
        g.op("Reshape", logits, g.const(np.array([7], np.int64)), out="logits")
        g.op("Reshape", value, g.const(np.zeros((0,), np.int64)), out="value")
        outputs = [
            onnx.helper.make_tensor_value_info("logits", T.FLOAT, [7]),
            onnx.helper.make_tensor_value_info("value", T.FLOAT, []),
        ]
    graph = onnx.helper.make_graph(
        g.nodes, "czjax_" + re.sub(r"\W", "_", model_name), [board_in], outputs, initializer=g.inits
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)], producer_name="czjax")
    model.ir_version = 8  # readable by onnxruntime 1.14+ and onnxruntime-web
    onnx.checker.check_model(model, full_check=True)
    return model


def export(checkpoint_path, out_path, batched: bool = False) -> str:
    """Write the learner of a czjax checkpoint as ONNX; returns the model name."""

    onnx = _import_onnx()
    model_name, params, _ = load_params(checkpoint_path)
    model = build_model(model_name, params, batched)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    onnx.save(model, str(tmp))
    tmp.replace(out_path)
    return model_name


def sample_boards(n: int, seed: int = 0) -> np.ndarray:
    """``n`` positions (int8, canonical) from random games, for checking an export."""

    traj, _ = play_games(jax.random.key(seed), Side(random_player), Side(random_player), max(2, n // 8))
    boards = np.asarray(traj.boards())[np.asarray(traj.valid)]
    return boards[np.random.default_rng(seed).permutation(len(boards))[:n]]


def max_difference(onnx_path, checkpoint_path, boards: np.ndarray) -> float | None:
    """The largest difference between the ONNX file's outputs and czjax's on ``boards``, or
    None when onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None

    model_name, params, _ = load_params(checkpoint_path)
    with precision.parity():  # a parity path: full float32 on every backend
        logits, values = models.apply_model(models.get_model(model_name), params, jnp.asarray(boards))
    values = np.zeros(len(boards), np.float32) if values is None else np.asarray(values)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    batched = len(session.get_inputs()[0].shape) == 3
    if batched:
        got_logits, got_values = session.run(["logits", "value"], {"board": boards.astype(np.int8)})
    else:
        outs = [session.run(["logits", "value"], {"board": b.astype(np.int8)}) for b in boards]
        got_logits, got_values = np.stack([o[0] for o in outs]), np.stack([o[1] for o in outs])
    return float(max(np.abs(got_logits - np.asarray(logits)).max(), np.abs(got_values - values).max()))
