"""The PyTorch project's (Connect-Zero's) parameter layout, and its ``.pth`` files.

The PyTorch project saves ``torch.save({"model_state_dict": sd, "optimizer_state_dict": ...})``.
A state dict maps its module names (``layers.1.weight``, ``feature_extractor.0.weight``, ...) to
tensors; :func:`to_state_dict` and :func:`from_state_dict` map them to and from czjax's Flax
parameters with NumPy only (Linear weights are ``(out, in)``, Flax kernels ``(in, out)``; Conv
weights ``(out, in, kh, kw)``, Flax kernels ``(kh, kw, in, out)``). Only reading and writing
``.pth`` files needs PyTorch (``pip install 'czjax[torch]'``), imported by those two functions.

czjax's own ResNet (``resnet[:blocks=B,channels=C]``, the shipped model) has no counterpart in
the PyTorch project: its layout (:func:`resnet_table`) is that of the PyTorch module
:func:`czjax.interop.torch_models.resnet`, for any number of blocks and channels.

The optimizer state is not exchanged: an imported checkpoint starts a fresh AdamW state, and an
exported file holds ``model_state_dict`` alone (what ``load_state_dict`` needs). The jobs that
read and write whole checkpoints are in :mod:`czjax.interop.torch_io`.
"""

from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from pathlib import Path

import jax
import numpy as np
from flax.traverse_util import flatten_dict, unflatten_dict

from czjax import models

# How a tensor is laid out on each side: a Linear weight (out, in) is a Flax kernel (in, out); a
# Conv2d weight (out, in, kh, kw) a kernel (kh, kw, in, out); a 1x1 Conv2d weight (out, in, 1, 1)
# a Dense kernel (in, out) applied to every cell (czjax's ResNet heads); vectors are the same.
DENSE, CONV, POINTWISE, VECTOR = "dense", "conv", "pointwise", "vector"


def _norm(flax: str, torch: str) -> list[tuple[str, str, str]]:
    """A LayerNorm's or GroupNorm's rows: Flax's ``scale`` and ``bias`` are PyTorch's ``weight`` and ``bias``."""
    return [(f"{flax}/scale", f"{torch}.weight", VECTOR), (f"{flax}/bias", f"{torch}.bias", VECTOR)]


def _mlp_table() -> list[tuple[str, str, str]]:
    table = []
    for i, t in enumerate((1, 3, 5)):
        table += [(f"Dense_{i}/kernel", f"layers.{t}.weight", DENSE), (f"Dense_{i}/bias", f"layers.{t}.bias", VECTOR)]
    return table


def _mlp3_table() -> list[tuple[str, str, str]]:
    table = []
    for i in range(7):  # Linear at 3i+1, LayerNorm at 3i+2, ReLU at 3i+3
        table += [
            (f"Dense_{i}/kernel", f"layers.{3 * i + 1}.weight", DENSE),
            (f"LayerNorm_{i}/scale", f"layers.{3 * i + 2}.weight", VECTOR),
            (f"LayerNorm_{i}/bias", f"layers.{3 * i + 2}.bias", VECTOR),
        ]
    return table + [("Dense_7/kernel", "layers.22.weight", DENSE), ("Dense_7/bias", "layers.22.bias", VECTOR)]


def _mk4_table(value_head: bool) -> list[tuple[str, str, str]]:
    table = [("Conv3x3_0/kernel", "feature_extractor.0.weight", CONV), *_norm("GroupNorm_0", "feature_extractor.1")]
    for b in range(3):
        block, res = f"ResBlock_{b}", f"resblock{b + 1}"
        table += [(f"{block}/Conv3x3_0/kernel", f"{res}.0.weight", CONV), *_norm(f"{block}/GroupNorm_0", f"{res}.1")]
        table += [(f"{block}/Conv3x3_1/kernel", f"{res}.3.weight", CONV), *_norm(f"{block}/GroupNorm_1", f"{res}.4")]
    table += [("Conv_0/kernel", "downsample.weight", CONV)]
    table += [("Dense_0/kernel", "fc_layers.0.weight", DENSE), *_norm("LayerNorm_0", "fc_layers.1")]
    table += [("Dense_1/kernel", "fc_layers.3.weight", DENSE), *_norm("LayerNorm_1", "fc_layers.4")]
    table += [("Dense_2/kernel", "fc_layers.6.weight", DENSE), ("Dense_2/bias", "fc_layers.6.bias", VECTOR)]
    if value_head:
        for i, t in enumerate((0, 2, 4)):
            table += [
                (f"value_{i}/kernel", f"value_head.{t}.weight", DENSE),
                (f"value_{i}/bias", f"value_head.{t}.bias", VECTOR),
            ]
    return table


def resnet_table(blocks: int) -> list[tuple[str, str, str]]:
    """czjax's ``ResNet`` with ``blocks`` residual blocks (any width: the table names tensors, the
    model's template gives their shapes), in the order of the PyTorch module's state dict
    (:func:`czjax.interop.torch_models.resnet`): the stem, each block's two convolutions and
    norms, then the policy head and the value head."""
    table = [("stem/kernel", "stem.weight", CONV), *_norm("stem_norm", "stem_norm")]
    for i in range(blocks):
        for j in (0, 1):
            table += [(f"block{i}_conv{j}/kernel", f"blocks.{i}.conv{j}.weight", CONV)]
            table += _norm(f"block{i}_norm{j}", f"blocks.{i}.norm{j}")
    for layer, kind in (
        ("policy_conv", POINTWISE),
        ("policy", DENSE),
        ("value_conv", POINTWISE),
        ("value_hidden", DENSE),
        ("value", DENSE),
    ):
        table += [(f"{layer}/kernel", f"{layer}.weight", kind), (f"{layer}/bias", f"{layer}.bias", VECTOR)]
    return table


# The PyTorch project's models, whose layouts are fixed; czjax's ResNet's depends on its options
# (:func:`table`).
TABLES = {
    "mlp": _mlp_table(),
    "mlp3": _mlp3_table(),
    "cnn-mk4": _mk4_table(False),
    "cnn-mk4-value": _mk4_table(True),
}
TORCH_CLASSES = {
    "mlp": "SimpleMLPModel",
    "mlp3": "Connect4MLP3",
    "cnn-mk4": "Connect4CNN_Mk4(value_head=False)",
    "cnn-mk4-value": "Connect4CNN_Mk4(value_head=True)",
    "resnet": "czjax.interop.torch_models.ResNet",
}


def _resnet(model_name: str) -> models.ResNet | None:
    """The ResNet that ``model_name`` names, None for another model; one-line ValueError for an
    unknown name or option."""
    module = models.get_model(model_name)
    return module if isinstance(module, models.ResNet) else None


def table(model_name: str) -> list[tuple[str, str, str]]:
    """``(Flax path, PyTorch key, kind)`` of every tensor of ``model_name``, in PyTorch's order:
    a name of :data:`TABLES`, or ``resnet`` with its options; ValueError for any other."""
    if model_name in TABLES:
        return TABLES[model_name]
    resnet = _resnet(model_name)
    if resnet is None:
        raise ValueError(f"{model_name} has no PyTorch layout")
    return resnet_table(resnet.blocks)


def torch_class(model_name: str) -> str:
    """The PyTorch class whose state dict ``model_name``'s layout is, as a user would construct it."""
    resnet = _resnet(model_name)
    if resnet is None:
        return TORCH_CLASSES[model_name]
    return f"{TORCH_CLASSES['resnet']}(blocks={resnet.blocks}, channels={resnet.channels})"


def resnet_name(blocks: int, channels: int) -> str:
    """The model spec of a ResNet, with the options that differ from the defaults (``resnet`` for
    5 x 64, the shipped model's name; ``resnet:blocks=2,channels=16``)."""
    given = {"blocks": blocks, "channels": channels}
    options = [
        f"{f.name}={given[f.name]}" for f in dataclasses.fields(models.ResNetOptions) if given[f.name] != f.default
    ]
    return f"resnet:{','.join(options)}" if options else "resnet"


def _to_torch(array: np.ndarray, kind: str) -> np.ndarray:
    if kind == DENSE:
        return array.T
    if kind == CONV:
        return array.transpose(3, 2, 0, 1)
    if kind == POINTWISE:
        return array.T[:, :, None, None]
    return array


def _to_flax(array: np.ndarray, kind: str) -> np.ndarray:
    if kind == DENSE:
        return array.T
    if kind == CONV:
        return array.transpose(2, 3, 1, 0)
    if kind == POINTWISE:
        return array[:, :, 0, 0].T
    return array


def to_state_dict(model_name: str, params) -> dict[str, np.ndarray]:
    """czjax parameters -> a PyTorch state dict of NumPy float32 arrays (same key order as PyTorch);
    ValueError for an unknown model."""
    flat = {"/".join(k[1:]): np.asarray(v, np.float32) for k, v in flatten_dict(params).items()}
    return {
        torch_key: np.ascontiguousarray(_to_torch(flat[flax_key], kind))
        for flax_key, torch_key, kind in table(model_name)
    }


def _detect_resnet(state_dict: dict) -> str | None:
    """The ResNet whose keys these are, its blocks counted from the keys and its channels read
    from the stem's shape; None when the keys are not exactly a ResNet's."""
    stem = state_dict.get("stem.weight")
    if stem is None or len(np.shape(stem)) != 4:
        return None
    blocks = sum(1 for key in state_dict if re.fullmatch(r"blocks\.\d+\.conv0\.weight", key))
    if set(state_dict) != {torch_key for _, torch_key, _ in resnet_table(blocks)}:
        return None
    return resnet_name(blocks, int(np.shape(stem)[0]))


def detect_model(state_dict: dict) -> str:
    """The czjax model whose PyTorch state dict has exactly these keys (a ResNet's blocks and
    channels found from its keys and shapes); ValueError otherwise."""
    keys = set(state_dict)
    for name, rows in TABLES.items():
        if keys == {torch_key for _, torch_key, _ in rows}:
            return name
    resnet = _detect_resnet(state_dict)
    if resnet is not None:
        return resnet
    raise ValueError(
        f"the state dict ({len(keys)} tensors, e.g. {sorted(keys)[:2]}) matches none of "
        + ", ".join(f"{TORCH_CLASSES[n]} ({n})" for n in TORCH_CLASSES)
    )


def from_state_dict(model_name: str, state_dict: dict):
    """A PyTorch state dict (arrays or tensors) -> czjax parameters; ValueError naming the first
    missing, extra or misshapen tensor."""
    rows = table(model_name)
    template = flatten_dict(
        jax.eval_shape(lambda k: models.init_params(models.get_model(model_name), k), jax.random.key(0))
    )
    expected = {torch_key for _, torch_key, _ in rows}
    missing, extra = sorted(expected - set(state_dict)), sorted(set(state_dict) - expected)
    if missing or extra:
        what = f"lacks {missing[0]}" if missing else f"has an unexpected {extra[0]}"
        raise ValueError(f"this is not a {torch_class(model_name)} state dict ({model_name}): it {what}")
    flat = {}
    for flax_key, torch_key, kind in rows:  # shapes checked in PyTorch's layout, before any transpose
        given = np.asarray(state_dict[torch_key], np.float32)
        path = ("params", *flax_key.split("/"))
        needed = _to_torch(np.zeros(template[path].shape, np.float32), kind).shape
        if given.shape != needed:
            raise ValueError(
                f"{torch_key} has shape {tuple(given.shape)}, {torch_class(model_name)} needs {tuple(needed)}"
            )
        array = _to_flax(given, kind)
        flat[path] = jax.numpy.asarray(array)
    return unflatten_dict(flat)


def _import_torch():
    try:
        import torch
    except ImportError:
        raise ValueError(
            "this command needs PyTorch: pip install 'czjax[torch]' (the CPU build: pip install torch==2.13.0)"
        ) from None
    return torch


def read_pth(path) -> dict[str, np.ndarray]:
    """The model state dict in a PyTorch project ``.pth`` file (or a bare state dict) as NumPy."""
    torch = _import_torch()
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no file at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several kinds on damaged or foreign files
        raise ValueError(f"{path} is not a readable PyTorch file ({type(err).__name__})") from None
    state_dict = payload.get("model_state_dict", payload) if isinstance(payload, dict) else None
    if not isinstance(state_dict, dict) or not all(hasattr(v, "shape") for v in state_dict.values()):
        raise ValueError(f"{path} holds no model state dict")
    return {k: v.detach().cpu().float().numpy() for k, v in state_dict.items()}


def write_pth(path, state_dict: dict[str, np.ndarray]) -> None:
    torch = _import_torch()

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(
        {"model_state_dict": OrderedDict((k, torch.from_numpy(np.array(v))) for k, v in state_dict.items())}, tmp
    )
    tmp.replace(path)


def read_params(pth_path, model_name: str | None = None):
    """``(model name, czjax parameters)`` of a PyTorch project file (or of czjax's ResNet, as
    ``czjax export-torch`` writes it); the model is found from the keys (a ResNet's options from
    its shapes), and a ValueError says so when it is not ``model_name`` (if given; ``resnet`` and
    ``resnet:blocks=5,channels=64`` name the same network)."""
    state_dict = read_pth(pth_path)
    detected = detect_model(state_dict)
    if model_name is not None and not models.same_network(model_name, detected):
        raise ValueError(f"{pth_path} holds a {torch_class(detected)} ({detected}), not {model_name}")
    return detected, from_state_dict(detected, state_dict)
