"""The PyTorch project's (Connect-Zero's) parameter layout, and its ``.pth`` files.

The PyTorch project saves ``torch.save({"model_state_dict": sd, "optimizer_state_dict": ...})``.
A state dict maps its module names (``layers.1.weight``, ``feature_extractor.0.weight``, ...) to
tensors; :func:`to_state_dict` and :func:`from_state_dict` map them to and from czjax's Flax
parameters with NumPy only (Linear weights are ``(out, in)``, Flax kernels ``(in, out)``; Conv
weights ``(out, in, kh, kw)``, Flax kernels ``(kh, kw, in, out)``). Only reading and writing
``.pth`` files needs PyTorch (``pip install 'czjax[torch]'``), imported by those two functions.

The optimizer state is not exchanged: an imported checkpoint starts a fresh AdamW state, and an
exported file holds ``model_state_dict`` alone (what ``load_state_dict`` needs). The jobs that
read and write whole checkpoints are in :mod:`czjax.interop.torch_io`.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import jax
import numpy as np
from flax.traverse_util import flatten_dict, unflatten_dict

from czjax import models

DENSE, CONV, VECTOR = "dense", "conv", "vector"


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
    def norm(flax, torch):
        return [(f"{flax}/scale", f"{torch}.weight", VECTOR), (f"{flax}/bias", f"{torch}.bias", VECTOR)]

    table = [("Conv3x3_0/kernel", "feature_extractor.0.weight", CONV), *norm("GroupNorm_0", "feature_extractor.1")]
    for b in range(3):
        block, res = f"ResBlock_{b}", f"resblock{b + 1}"
        table += [(f"{block}/Conv3x3_0/kernel", f"{res}.0.weight", CONV), *norm(f"{block}/GroupNorm_0", f"{res}.1")]
        table += [(f"{block}/Conv3x3_1/kernel", f"{res}.3.weight", CONV), *norm(f"{block}/GroupNorm_1", f"{res}.4")]
    table += [("Conv_0/kernel", "downsample.weight", CONV)]
    table += [("Dense_0/kernel", "fc_layers.0.weight", DENSE), *norm("LayerNorm_0", "fc_layers.1")]
    table += [("Dense_1/kernel", "fc_layers.3.weight", DENSE), *norm("LayerNorm_1", "fc_layers.4")]
    table += [("Dense_2/kernel", "fc_layers.6.weight", DENSE), ("Dense_2/bias", "fc_layers.6.bias", VECTOR)]
    if value_head:
        for i, t in enumerate((0, 2, 4)):
            table += [
                (f"value_{i}/kernel", f"value_head.{t}.weight", DENSE),
                (f"value_{i}/bias", f"value_head.{t}.bias", VECTOR),
            ]
    return table


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
}


def _to_torch(array: np.ndarray, kind: str) -> np.ndarray:
    if kind == DENSE:
        return array.T
    if kind == CONV:
        return array.transpose(3, 2, 0, 1)
    return array


def _to_flax(array: np.ndarray, kind: str) -> np.ndarray:
    if kind == DENSE:
        return array.T
    if kind == CONV:
        return array.transpose(2, 3, 1, 0)
    return array


def to_state_dict(model_name: str, params) -> dict[str, np.ndarray]:
    """czjax parameters -> a PyTorch state dict of NumPy float32 arrays (same key order as PyTorch);
    ValueError for a model the PyTorch project has no layout of (czjax's own ResNet)."""
    if model_name not in TABLES:
        raise ValueError(
            f"{model_name} has no PyTorch layout (the PyTorch project's models only: {', '.join(TABLES)}), "
            "so it exports neither to .pth nor to ONNX"
        )
    flat = {"/".join(k[1:]): np.asarray(v, np.float32) for k, v in flatten_dict(params).items()}
    return {
        torch_key: np.ascontiguousarray(_to_torch(flat[flax_key], kind))
        for flax_key, torch_key, kind in TABLES[model_name]
    }


def detect_model(state_dict: dict) -> str:
    """The czjax model whose PyTorch state dict has exactly these keys; ValueError otherwise."""
    keys = set(state_dict)
    for name, table in TABLES.items():
        if keys == {torch_key for _, torch_key, _ in table}:
            return name
    raise ValueError(
        f"the state dict ({len(keys)} tensors, e.g. {sorted(keys)[:2]}) matches none of "
        + ", ".join(f"{TORCH_CLASSES[n]} ({n})" for n in TABLES)
    )


def from_state_dict(model_name: str, state_dict: dict):
    """A PyTorch state dict (arrays or tensors) -> czjax parameters; ValueError naming the first
    missing, extra or misshapen tensor."""
    if model_name not in TABLES:
        raise ValueError(f"unknown model {model_name!r}; choose one of {', '.join(TABLES)}")
    table = TABLES[model_name]
    template = flatten_dict(
        jax.eval_shape(lambda k: models.init_params(models.get_model(model_name), k), jax.random.key(0))
    )
    expected = {torch_key for _, torch_key, _ in table}
    missing, extra = sorted(expected - set(state_dict)), sorted(set(state_dict) - expected)
    if missing or extra:
        what = f"lacks {missing[0]}" if missing else f"has an unexpected {extra[0]}"
        raise ValueError(f"this is not a {TORCH_CLASSES[model_name]} state dict ({model_name}): it {what}")
    flat = {}
    for flax_key, torch_key, kind in table:
        array = _to_flax(np.asarray(state_dict[torch_key], np.float32), kind)
        path = ("params", *flax_key.split("/"))
        if array.shape != template[path].shape:
            given, needed = (tuple(_to_torch(a, kind).shape) for a in (array, np.zeros(template[path].shape)))
            raise ValueError(f"{torch_key} has shape {given}, {TORCH_CLASSES[model_name]} needs {needed}")
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
    """``(model name, czjax parameters)`` of a PyTorch project file; the model is found from
    the keys, and a ValueError says so when it is not ``model_name`` (if given)."""
    state_dict = read_pth(pth_path)
    detected = detect_model(state_dict)
    if model_name is not None and model_name != detected:
        raise ValueError(f"{pth_path} holds a {TORCH_CLASSES[detected]} ({detected}), not {model_name}")
    return detected, from_state_dict(detected, state_dict)
