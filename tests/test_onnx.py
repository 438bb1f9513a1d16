"""ONNX export: the applet's contract (names, types, shapes) and czjax's outputs in onnxruntime.
czjax's ResNet at small sizes: tests/test_resnet_export.py."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from czjax import cli, models
from czjax.interop import onnx_export
from czjax.models import torch_layout
from czjax.util import precision
from tests.test_torch import random_boards

BOARDS = random_boards(48, seed=3)


@pytest.fixture(autouse=True)
def full_float32():
    """Every comparison here is a parity path: full float32 matrix products on every backend
    (a GPU's default is TF32-class, about 1e-3 relative)."""
    with precision.parity():
        yield


def perturbed_params(name):
    """Parameters with every entry moved off its initial value (norm scales and biases too)."""
    params = models.init_params(models.get_model(name), jax.random.key(1))
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(2), len(leaves))
    return jax.tree.unflatten(tree, [x + 0.03 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])


def io_signature(model_proto):
    def sig(value_info):
        t = value_info.type.tensor_type
        dims = [d.dim_param or d.dim_value for d in t.shape.dim]
        return value_info.name, onnx.TensorProto.DataType.Name(t.elem_type), dims

    return [sig(v) for v in model_proto.graph.input], [sig(v) for v in model_proto.graph.output]


@pytest.mark.parametrize("name", list(torch_layout.TABLES))  # the networks with a PyTorch layout
def test_exported_models_compute_czjax_outputs(name, tmp_path):
    params = perturbed_params(name)
    logits, values = models.apply_model(models.get_model(name), params, jnp.asarray(BOARDS))
    values = np.zeros(len(BOARDS)) if values is None else np.asarray(values)  # no value head: value 0

    single = onnx_export.build_model(name, params, batched=False)
    assert io_signature(single) == ([("board", "INT8", [6, 7])], [("logits", "FLOAT", [7]), ("value", "FLOAT", [])])
    path = tmp_path / "single.onnx"
    onnx.save(single, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for board, want_logits, want_value in zip(BOARDS[:12], np.asarray(logits), values):
        got_logits, got_value = session.run(["logits", "value"], {"board": board})
        assert got_logits.shape == (7,) and got_value.shape == () and got_logits.dtype == np.float32
        np.testing.assert_allclose(got_logits, want_logits, atol=1e-5)
        np.testing.assert_allclose(got_value, want_value, atol=1e-5)

    batched = onnx_export.build_model(name, params, batched=True)
    assert io_signature(batched) == (
        [("board", "INT8", ["batch", 6, 7])],
        [("logits", "FLOAT", ["batch", 7]), ("value", "FLOAT", ["batch"])],
    )
    session = ort.InferenceSession(batched.SerializeToString(), providers=["CPUExecutionProvider"])
    got_logits, got_values = session.run(["logits", "value"], {"board": BOARDS})
    np.testing.assert_allclose(got_logits, np.asarray(logits), atol=1e-5)
    np.testing.assert_allclose(got_values, values, atol=1e-5)


def test_export_onnx_command(model_checkpoints, tmp_path, capsys):
    out = tmp_path / "model.onnx"
    assert cli.main(["export-onnx", str(model_checkpoints["cnn-mk4-value"]), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "largest difference from czjax" in printed
    assert float(printed.rsplit(" ", 1)[1]) <= 1e-5
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type, i.shape) for i in session.get_inputs()] == [("board", "tensor(int8)", [6, 7])]
    assert [(o.name, o.type) for o in session.get_outputs()] == [
        ("logits", "tensor(float)"),
        ("value", "tensor(float)"),
    ]
    assert cli.main(["export-onnx", str(tmp_path / "missing"), "-o", str(out)]) == 2
    assert "no checkpoint at" in capsys.readouterr().err


def test_export_onnx_of_the_shipped_models(tmp_path, capsys):
    """``czjax@N`` names a shipped model here too, as for every player; the command checks the file
    against it in onnxruntime. The newest, ``czjax`` (a 5 x 64 ResNet), exports single-board and
    batched, and onnxruntime gives czjax's outputs on other positions too."""
    from czjax.players.loading import SHIPPED_MODEL, SHIPPED_MODELS, load_params

    out = tmp_path / "czjax3.onnx"
    assert cli.main(["export-onnx", "czjax@3", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"exported {load_params(SHIPPED_MODELS['czjax@3'])[0]} to {out}" in printed
    assert "largest difference from czjax" in printed and float(printed.rsplit(" ", 1)[1]) <= 1e-5

    name, params, _ = load_params(SHIPPED_MODEL)
    logits, values = jax.jit(functools.partial(models.apply_model, models.get_model(name)))(params, BOARDS)
    for flags in ([], ["--batch"]):
        out = tmp_path / f"czjax{''.join(flags)}.onnx"
        assert cli.main(["export-onnx", "czjax", "-o", str(out), *flags]) == 0
        printed = capsys.readouterr().out
        assert f"exported resnet to {out}" in printed
        assert "largest difference from czjax" in printed and float(printed.rsplit(" ", 1)[1]) <= 1e-4
        session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        if flags:
            got_logits, got_values = session.run(["logits", "value"], {"board": BOARDS})
        else:
            outs = [session.run(["logits", "value"], {"board": board}) for board in BOARDS]
            got_logits, got_values = np.stack([o[0] for o in outs]), np.stack([o[1] for o in outs])
        np.testing.assert_allclose(got_logits, np.asarray(logits), atol=1e-4)
        np.testing.assert_allclose(got_values, np.asarray(values), atol=1e-4)
