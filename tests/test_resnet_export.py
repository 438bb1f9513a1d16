"""czjax's ResNet (the shipped model) leaves czjax: its PyTorch module (czjax.interop.torch_models)
and layout, .pth files both ways, and ONNX. The PyTorch module is run by torch and the ONNX files
by onnxruntime; each is compared with czjax's own forward pass, never with values copied from
the code under test."""

import functools

import jax
import numpy as np
import onnxruntime as ort
import pytest
import torch  # the test extra installs it: pip install -e ".[test]"

from czjax import cli, models
from czjax.interop import onnx_export, torch_models
from czjax.models import torch_layout
from czjax.players.loading import SHIPPED_MODEL, load_params, load_weights, shipped_path
from czjax.util import precision
from tests.test_onnx import io_signature
from tests.test_torch import random_boards
from tests.torch_reference import SimpleMLPModel

# Small sizes: 16 channels are GroupNorms of 2 groups, 8 channels of 1 (the shipped 64: 8 groups).
SIZES = ["resnet:blocks=2,channels=16", "resnet:blocks=1,channels=8"]
BOARDS = random_boards(48, seed=7)


@pytest.fixture(autouse=True)
def full_float32():
    """Every comparison here is a parity path: full float32 matrix products on every backend."""
    with precision.parity():
        yield


@functools.cache
def czjax_forward(name):
    """czjax's ``(logits, values)`` of model ``name`` as one compiled function, reused by every test."""
    model = models.get_model(name)
    return jax.jit(lambda params, boards: models.apply_model(model, params, boards))


def czjax_outputs(name, params, boards=BOARDS):
    return tuple(np.asarray(x) for x in czjax_forward(name)(params, boards))


def random_resnet(name, seed=0):
    """A PyTorch ResNet of model ``name``'s size with every parameter moved off its default (norm
    scales and biases too), in eval mode."""
    network = models.get_model(name)
    torch.manual_seed(seed)
    model = torch_models.ResNet(network.blocks, network.channels)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def torch_outputs(model, boards=BOARDS):
    with torch.no_grad():
        logits, values = model(torch.from_numpy(np.array(boards)))
    return logits.numpy(), values.numpy()


def numpy_state_dict(model):
    return {k: v.numpy() for k, v in model.state_dict().items()}


def shipped():
    return load_params(SHIPPED_MODEL)[1]


@pytest.mark.parametrize("name", SIZES)
def test_pytorch_module_computes_czjax_outputs(name):
    """The module's weights, read through czjax's layout, give czjax the module's outputs; the
    layout covers every czjax parameter and maps back exactly, in the module's key order."""
    model = random_resnet(name)
    state_dict = numpy_state_dict(model)
    assert torch_layout.detect_model(state_dict) == name  # blocks and channels found from the file
    template = jax.eval_shape(lambda k: models.init_params(models.get_model(name), k), jax.random.key(0))
    assert sum(v.size for v in state_dict.values()) == models.count_params(template)
    params = torch_layout.from_state_dict(name, state_dict)
    logits, values = czjax_outputs(name, params)
    want_logits, want_values = torch_outputs(model)
    np.testing.assert_allclose(logits, want_logits, atol=1e-5)
    np.testing.assert_allclose(values, want_values, atol=1e-5)
    back = torch_layout.to_state_dict(name, params)
    assert list(back) == list(state_dict) and all(np.array_equal(back[k], state_dict[k]) for k in back)


def test_shipped_model_exports_to_pytorch_and_back(tmp_path, capsys):
    """``czjax export-torch czjax``: a .pth that the PyTorch module loads strictly (as its docstring
    says, and by load_resnet) and that computes the shipped model's outputs; ``import-torch``
    reads it back as the same network with exactly the same parameters."""
    pth = tmp_path / "czjax.pth"
    assert cli.main(["export-torch", "czjax", "-o", str(pth)]) == 0
    assert "as a czjax.interop.torch_models.ResNet(blocks=5, channels=64) state dict" in capsys.readouterr().out
    model = torch_models.ResNet(blocks=5, channels=64)
    model.load_state_dict(torch.load(pth, weights_only=True)["model_state_dict"])  # strict: same keys and shapes
    loaded = torch_models.load_resnet(pth)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    logits, values = czjax_outputs("resnet", shipped())
    want_logits, want_values = torch_outputs(loaded.eval())
    np.testing.assert_allclose(logits, want_logits, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(values, want_values, atol=1e-5)

    ckpt = tmp_path / "imported.msgpack"
    assert cli.main(["import-torch", str(pth), "-o", str(ckpt)]) == 0
    name, params, _ = load_params(ckpt)
    assert name == "resnet"  # the shipped model's own name
    assert jax.tree.all(jax.tree.map(np.array_equal, params, shipped()))


def test_a_resnets_size_survives_the_round_trip(tmp_path, capsys):
    """A ResNet of another size: PyTorch -> czjax checkpoint -> .pth keeps its options and every
    weight; ``--model`` accepts any spelling of the same network and refuses another."""
    name = SIZES[0]
    model = random_resnet(name, seed=1)
    start = tmp_path / "start.pth"
    torch.save({"model_state_dict": model.state_dict()}, start)
    ckpt = tmp_path / "run.msgpack"
    assert cli.main(["import-torch", str(start), "--model", "resnet:channels=16,blocks=2", "-o", str(ckpt)]) == 0
    assert load_params(ckpt)[0] == name
    out = tmp_path / "out.pth"
    assert cli.main(["export-torch", str(ckpt), "-o", str(out)]) == 0
    fresh = torch_models.ResNet(2, 16)
    fresh.load_state_dict(torch.load(out, weights_only=True)["model_state_dict"])
    for (key, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), key
    capsys.readouterr()
    assert cli.main(["import-torch", str(start), "--model", "resnet", "-o", str(tmp_path / "x.msgpack")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds a czjax.interop.torch_models.ResNet(blocks=2, channels=16)" in err[0]


def one_line_error(call) -> str:
    with pytest.raises(ValueError) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_wrong_resnet_state_dicts_give_one_line_errors(tmp_path):
    name = SIZES[0]
    good = numpy_state_dict(random_resnet(name))

    lacking = {k: v for k, v in good.items() if k != "blocks.1.norm1.bias"}
    assert "matches none of" in one_line_error(lambda: torch_layout.detect_model(lacking))
    assert "it lacks blocks.1.norm1.bias" in one_line_error(lambda: torch_layout.from_state_dict(name, lacking))

    narrow = {**good, "blocks.1.conv0.weight": np.zeros((16, 8, 3, 3), np.float32)}
    assert torch_layout.detect_model(narrow) == name  # the keys are a ResNet's; the shape is named on reading
    message = one_line_error(lambda: torch_layout.from_state_dict(name, narrow))
    assert message == (
        "blocks.1.conv0.weight has shape (16, 8, 3, 3), czjax.interop.torch_models.ResNet(blocks=2, channels=16) "
        "needs (16, 16, 3, 3)"
    )
    linear_head = {**good, "policy_conv.weight": np.zeros((2, 16), np.float32)}  # a Linear, not a 1x1 conv
    assert "policy_conv.weight has shape (2, 16)" in one_line_error(
        lambda: torch_layout.from_state_dict(name, linear_head)
    )

    pth = tmp_path / "resnet.pth"
    torch_layout.write_pth(pth, good)
    assert "not resnet:blocks=3,channels=16" in one_line_error(
        lambda: torch_layout.read_params(pth, "resnet:blocks=3,channels=16")
    )
    mlp = tmp_path / "mlp.pth"
    torch_layout.write_pth(mlp, numpy_state_dict(SimpleMLPModel()))
    assert "holds a SimpleMLPModel (mlp), not a ResNet" in one_line_error(lambda: torch_models.load_resnet(mlp))


def run_onnx(model_proto, boards, batched):
    """``(logits, values)`` of an ONNX model in onnxruntime, board by board unless ``batched``."""
    session = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    if batched:
        return session.run(["logits", "value"], {"board": boards})
    outs = [session.run(["logits", "value"], {"board": board}) for board in boards]
    assert all(o[0].shape == (7,) and o[1].shape == () for o in outs)
    return np.stack([o[0] for o in outs]), np.stack([o[1] for o in outs])


@pytest.mark.parametrize("name", SIZES)
def test_onnx_export_computes_czjax_outputs(name):
    """Single-board and batched files with the applet's contract, in onnxruntime, give czjax's outputs."""
    params = torch_layout.from_state_dict(name, numpy_state_dict(random_resnet(name, seed=2)))
    logits, values = czjax_outputs(name, params)
    for batched in (False, True):
        proto = onnx_export.build_model(name, params, batched)
        board = [("board", "INT8", ["batch", 6, 7] if batched else [6, 7])]
        outputs = [
            ("logits", "FLOAT", ["batch", 7] if batched else [7]),
            ("value", "FLOAT", ["batch"] if batched else []),
        ]
        assert io_signature(proto) == (board, outputs)
        got_logits, got_values = run_onnx(proto, BOARDS, batched)
        np.testing.assert_allclose(got_logits, logits, atol=1e-5)
        np.testing.assert_allclose(got_values, values, atol=1e-5)


def test_weights_are_found_under_any_spelling_of_their_network():
    """``--init-from czjax`` with the ResNet spelt out (its defaults written) takes the shipped
    weights; another size is refused in one line."""
    path = shipped_path("czjax")
    params = load_weights(path, "resnet:blocks=5,channels=64")
    assert load_weights(path, "resnet") is not None and len(jax.tree.leaves(params)) > 0
    with pytest.raises(ValueError, match="holds weights of model 'resnet', not 'resnet:blocks=2'"):
        load_weights(path, "resnet:blocks=2")
