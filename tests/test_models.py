"""Models: PyTorch parameter counts, the players they make, the im2col convolution, Flax's initialisation."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.traverse_util import flatten_dict

from czjax import game, models, players, rollout
from czjax.jobs import loop
from czjax.models import layers
from czjax.util import compiling, platforms, precision

# A network applied as one compiled program: applied eagerly, op by op, a first run compiles each
# of its operations for each shape, which costs more than compiling the whole once
apply_compiled = jax.jit(models.apply_model, static_argnums=0)


@pytest.mark.parametrize(
    "name, count, value_head",
    [("mlp", 14_215, False), ("mlp3", 409_608, True), ("cnn-mk4", 323_527, False), ("cnn-mk4-value", 356_488, True)],
)
def test_models_have_the_pytorch_parameter_counts(name, count, value_head):
    model = models.get_model(name)
    params = models.init_params(model, jax.random.key(0))
    assert models.count_params(params) == count
    logits, value = apply_compiled(model, params, jnp.asarray(np.stack([np.zeros((6, 7), np.int8)] * 3)))
    assert logits.shape == (3, 7)
    assert (value is not None) == value_head
    if value_head:
        assert value.shape == (3,) and (np.abs(np.asarray(value)) <= 1).all()


@pytest.mark.parametrize("name", list(models.MODELS))
def test_flax_init_is_the_previous_initialisation(name):
    """``init="flax"`` is exactly what czjax drew before PyTorch's became the default:
    ``model.init``, i.e. LeCun-normal kernels (std 1/sqrt(fan_in)), zero biases, norms at 1 and 0."""
    model = models.get_model(name)
    params = models.init_params(model, jax.random.key(0), init="flax")
    assert loop.params_equal(params, model.init(jax.random.key(0), jnp.zeros((1, 6, 7), jnp.int8)))
    for path, x in flatten_dict(params).items():
        x = np.asarray(x, np.float64)
        if path[-1] == "kernel":
            # a sample std of n normal draws has relative error 1/sqrt(2n); 6 of those
            assert abs(x.std() / (1 / np.sqrt(models.fan_in(x.shape))) - 1) <= 6 / np.sqrt(2 * x.size), path
        else:
            assert np.array_equal(x, np.ones_like(x) if path[-1] == "scale" else np.zeros_like(x)), path
    torch_style = models.init_params(
        model, jax.random.key(0)
    )  # the default, PyTorch's: another tree of the same shapes
    assert jax.tree.structure(torch_style) == jax.tree.structure(params)
    assert jax.tree.map(np.shape, torch_style) == jax.tree.map(np.shape, params)


def test_the_table_knows_each_networks_value_head():
    """A config is checked against the table (``ModelEntry.value_head``) without making the
    network: the module each entry makes says the same, and so do its outputs."""
    for name, entry in models.MODELS.items():
        model = models.get_model(name)
        _, value = apply_compiled(model, models.init_params(model, jax.random.key(0)), game.new_boards(2))
        assert entry.value_head == models.has_value_head(model) == (value is not None), name


def test_unknown_model_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown model 'transformer'"):
        models.get_model("transformer")


def test_a_model_plays_as_a_player():
    model = models.get_model("mlp")
    params = models.init_params(model, jax.random.key(0))
    traj, results = rollout.play_games(
        jax.random.key(1), rollout.Side(models.model_player(model), params), rollout.Side(players.random_player), 16
    )
    assert (np.asarray(results.length) >= 7).all()
    assert models.model_player(model) is models.model_player(models.get_model("mlp"))


def test_im2col_conv_equals_flax_conv():
    x = jax.random.normal(jax.random.key(0), (5, 6, 7, 3))
    params = layers.Conv3x3(16).init(jax.random.key(1), x)
    reference = __import__("flax").linen.Conv(16, (3, 3), padding=1, use_bias=False)
    with precision.parity():  # two formulations compared: full float32 on every backend
        expected = reference.apply({"params": {"kernel": params["params"]["kernel"]}}, x)
        for method in models.CONV_METHODS:  # every Conv3x3 method, the same kernel
            got = layers.Conv3x3(16, method).apply(params, x)
            np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5, err_msg=method)


@pytest.mark.parametrize("chunk", [50, 3])
def test_canonical_conv_gradient_is_jax_own_gradient_of_lax_conv(monkeypatch, chunk):
    """conv3x3_canonical writes the convolution's gradient by hand (two convolutions in the NHWC
    layout); JAX's automatic gradient of the plain ``lax.conv`` is the reference, taken of a
    nonlinear loss (so the cotangent is not constant) and inside ``lax.scan`` (where the hand-written
    gradient is the point), for both the input and the kernel. With chunks of 3 boards the kernel's
    gradient of the 4 boards is summed over two chunks, the second padded."""
    monkeypatch.setattr(layers, "KERNEL_GRADIENT_CHUNK", chunk)
    x = jax.random.normal(jax.random.key(0), (4, 6, 7, 5))
    kernel = jax.random.normal(jax.random.key(1), (3, 3, 5, 8))
    target = jax.random.normal(jax.random.key(2), (4, 6, 7, 8))

    def plain(x, k):
        return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loss(conv):
        return lambda x, k: jnp.sum(jnp.sin(conv(x, k)) * target)

    def in_scan(conv):
        grad = jax.grad(loss(conv), argnums=(0, 1))
        return lambda x, k: jax.lax.scan(lambda c, _: (c, grad(x, k)), 0, None, length=2)[1]

    with precision.parity():
        np.testing.assert_allclose(
            np.asarray(layers.conv3x3_canonical(x, kernel)), np.asarray(plain(x, kernel)), rtol=1e-5, atol=1e-4
        )
        direct = (jax.grad(loss(plain), argnums=(0, 1)), jax.grad(loss(layers.conv3x3_canonical), argnums=(0, 1)))
        scanned = (in_scan(plain), in_scan(layers.conv3x3_canonical))
        for where, (reference, canonical) in (("direct", direct), ("in lax.scan", scanned)):
            for name, want, got in zip(("dx", "dkernel"), jax.jit(reference)(x, kernel), jax.jit(canonical)(x, kernel)):
                want, got = np.asarray(want), np.asarray(got)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=(where, name))


def test_every_norm_and_conv_method_computes_the_same_mk4():
    """--norm grouped and onepass and --conv xla are other computations of the same Mk4: the same parameter
    tree, and outputs equal within float32 rounding (random parameters, so the norms' scales and
    biases matter)."""
    boards = np.random.default_rng(1).integers(-1, 2, size=(32, 6, 7)).astype(np.int8)
    reference = models.get_model("cnn-mk4-value", conv="im2col", norm="flax")
    params = models.init_params(reference, jax.random.key(0))
    leaves, treedef = jax.tree.flatten(params)
    params = jax.tree.unflatten(
        treedef, [x + 0.3 * jax.random.normal(jax.random.key(i), x.shape) for i, x in enumerate(leaves)]
    )
    with precision.parity():
        expected = apply_compiled(reference, params, boards)
        for conv, norm in (("im2col", "grouped"), ("xla", "flax"), ("canonical", "flax"), ("im2col", "onepass")):
            model = models.get_model("cnn-mk4-value", conv=conv, norm=norm)
            assert jax.tree.structure(jax.eval_shape(lambda: models.init_params(model, jax.random.key(0)))) == treedef
            for e, g in zip(expected, apply_compiled(model, params, boards)):
                np.testing.assert_allclose(
                    np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4 * float(np.abs(e).max()), err_msg=(conv, norm)
                )
    with pytest.raises(ValueError, match="unknown norm 'batch'; choose one of auto, flax, grouped, onepass"):
        models.get_model("cnn-mk4", norm="batch")


def test_the_resnets_onepass_norm_computes_the_same_network():
    """The ResNet's GroupNorm layers (groups of 8 channels) computed by Flax (the CPU's) and in one
    pass (a GPU's, ``resnet_norm``): the same parameter tree and outputs within float32 rounding,
    on random parameters."""
    boards = np.random.default_rng(5).integers(-1, 2, size=(16, 6, 7)).astype(np.int8)
    reference = models.get_model("resnet:blocks=2,channels=16", norm="flax")
    one_pass = models.get_model("resnet:blocks=2,channels=16", norm="onepass")
    params = models.init_params(reference, jax.random.key(1))
    leaves, treedef = jax.tree.flatten(params)
    params = jax.tree.unflatten(
        treedef, [x + 0.3 * jax.random.normal(jax.random.key(i), x.shape) for i, x in enumerate(leaves)]
    )
    assert jax.tree.structure(models.init_params(one_pass, jax.random.key(1))) == treedef
    with precision.parity():
        for e, g in zip(apply_compiled(reference, params, boards), apply_compiled(one_pass, params, boards)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4 * float(np.abs(e).max()))


@pytest.mark.parametrize("one_pass", [False, True], ids=["grouped", "onepass"])
def test_group_norm_gradient_is_jax_own_gradient_of_flax_group_norm(one_pass):
    """group_norm_nhwc (GroupedNorm, --norm grouped, or onepass: each pair of sums one reduction)
    computes GroupNorm from per-channel sums with a
    hand-written gradient; Flax's nn.GroupNorm and JAX's automatic gradient of it are the
    reference: the output, and the gradients of a nonlinear loss for the input, the scale and the
    bias, directly and inside lax.scan, for groups of 1, 4 and 16 channels, on activations whose
    mean and spread are far from 0 and 1 (so every term of the gradient matters)."""
    import flax.linen as nn

    rng = np.random.default_rng(3)
    for groups, channels in ((16, 16), (16, 64), (2, 32)):
        x = jnp.asarray(rng.normal(1.5, 3.0, (5, 6, 7, channels)), jnp.float32)
        target = jnp.asarray(rng.normal(size=x.shape), jnp.float32)
        scale = jnp.asarray(rng.normal(1.0, 0.5, channels), jnp.float32)
        bias = jnp.asarray(rng.normal(0.0, 0.5, channels), jnp.float32)
        flax_norm = nn.GroupNorm(num_groups=groups, epsilon=models.TORCH_EPS)

        def reference(x, scale, bias):
            return flax_norm.apply({"params": {"scale": scale, "bias": bias}}, x)

        def grouped(x, scale, bias):
            return layers.group_norm_nhwc(x, scale, bias, groups, models.TORCH_EPS, one_pass)

        def gradient(norm):
            return jax.grad(lambda *a: jnp.sum(jnp.sin(norm(*a)) * target), argnums=(0, 1, 2))

        def in_scan(norm):
            return lambda *a: jax.lax.scan(lambda c, _: (c, gradient(norm)(*a)), 0, None, length=2)[1]

        np.testing.assert_allclose(
            np.asarray(grouped(x, scale, bias)), np.asarray(reference(x, scale, bias)), rtol=1e-5, atol=1e-5
        )
        for where, want, got in (
            ("direct", gradient(reference), gradient(grouped)),
            ("in lax.scan", in_scan(reference), in_scan(grouped)),
        ):
            for name, w, g in zip(
                ("dx", "dscale", "dbias"), jax.jit(want)(x, scale, bias), jax.jit(got)(x, scale, bias)
            ):
                w, g = np.asarray(w), np.asarray(g)
                np.testing.assert_allclose(
                    g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max(), err_msg=(groups, channels, where, name)
                )


def test_the_cpus_mk4_has_the_same_gradient():
    """The CPU's computation of Mk4 (canonical convolutions, grouped norms, each with a hand-written
    gradient, compiled with the options of a program that convolves) against im2col and Flax's
    GroupNorm differentiated by JAX and compiled by default: the parameters' gradient of a loss on
    both heads agrees within float32 rounding, layer by layer."""
    boards = np.random.default_rng(2).integers(-1, 2, size=(24, 6, 7)).astype(np.int8)
    reference = models.get_model("cnn-mk4-value", conv="im2col", norm="flax")
    params = models.init_params(reference, jax.random.key(0))

    def gradient(model, jit):
        def loss(p):
            logits, value = models.apply_model(model, p, boards)
            return jnp.sum(jax.nn.log_softmax(logits)[:, 3]) + jnp.sum(value**2)

        return jit(jax.grad(loss))(params)

    with precision.parity():
        want = gradient(reference, jax.jit)
        for conv, norm in (("canonical", "grouped"),):  # each alone: the two tests above
            model = models.get_model("cnn-mk4-value", conv=conv, norm=norm)
            got = gradient(model, functools.partial(compiling.jit, convolutions=models.convolves(model)))
            for (path, w), g in zip(jax.tree_util.tree_leaves_with_path(want), jax.tree.leaves(got)):
                w, g = np.asarray(w), np.asarray(g)
                np.testing.assert_allclose(
                    g, w, rtol=1e-3, atol=1e-4 * np.abs(w).max(), err_msg=(conv, norm, jax.tree_util.keystr(path))
                )


@pytest.mark.parametrize(
    "name, conv",
    [("mlp3", "auto"), ("cnn-mk4", "auto"), ("cnn-mk4", "im2col"), ("resnet:blocks=1,channels=8", "auto")]
    + [("resnet:blocks=1,channels=8", "canonical")],
)
def test_convolves_says_whether_the_program_holds_convolutions(name, conv):
    """models.convolves (how the trainer picks its compiler options) against the lowered program
    itself (how the benchmarks' compile_lowered picks them)."""
    model = models.get_model(name, conv=conv)
    params = jax.eval_shape(lambda: models.init_params(model, jax.random.key(0)))
    text = jax.jit(lambda p, b: models.apply_model(model, p, b)).lower(params, np.zeros((2, 6, 7), np.int8)).as_text()
    assert models.convolves(model) == ("stablehlo.convolution" in text)


def test_compiler_options_only_for_convolutions_and_never_against_the_users_flags(monkeypatch):
    """Options for programs with convolutions built for a platform that has them (the CPU); none
    for other programs or platforms; none where XLA_FLAGS already chooses (the user's choice wins)
    or where this machine's jaxlib refuses the option (its defaults, not an error)."""
    choose = compiling.compiler_options
    assert choose(False, "cpu") is None and choose(True, "gpu") is None
    if jax.default_backend() == "cpu":
        assert choose(True, "cpu") == dict(platforms.CHOICES["cpu"].convolution_options)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=")
    assert choose(True, "cpu") is None
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    refused = ((compiling.YNN_FUSIONS, "LIBRARY_FUSION_TYPE_NONE_SUCH"),)
    monkeypatch.setitem(
        platforms.CHOICES, "cpu", dataclasses.replace(platforms.CHOICES["cpu"], convolution_options=refused)
    )
    assert choose(True, "cpu") is None


def test_a_function_compiled_with_options_runs_inside_other_programs_too():
    """compiling.jit's function at the top level, inside another jit and under vmap (as a scan and
    the benchmarks call the trainer's chunk): JAX refuses compiler options on a nested jit, so
    the nested calls must trace it without them; the values agree."""
    kernel = jax.random.normal(jax.random.key(0), (3, 3, 4, 4))
    boards = jax.random.normal(jax.random.key(1), (2, 6, 7, 4))
    conv = compiling.jit(layers.conv3x3_canonical, convolutions=True)
    top = conv(boards, kernel)
    nested = jax.jit(lambda b, k: conv(b, k) * 1.0)(boards, kernel)
    mapped = jax.vmap(conv, in_axes=(0, None))(boards[:, None], kernel)[:, 0]
    np.testing.assert_allclose(np.asarray(nested), np.asarray(top), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(mapped), np.asarray(top), rtol=1e-5, atol=1e-5)
    assert "convolution" in conv.lower(boards, kernel).as_text()


# bfloat16's unit roundoff: 8 significant bits, a value rounded to it is within 2**-8 of itself
BF16_UNIT = 2.0**-8


def _rounded(a):
    """``a`` rounded to bfloat16 and back: the operands a mixed-precision product takes."""
    return jnp.asarray(a, jnp.float32).astype(jnp.bfloat16).astype(jnp.float32)


MIXED_LAYERS = {  # name -> (module, kernel shape, input shape, the float32 product of the same operands)
    "dense": (
        lambda: layers.dense(6, jnp.bfloat16, use_bias=False),
        (48, 6),
        (5, 48),
        lambda x, k: x @ k,
    ),
    **{
        f"conv3x3 {method}": (
            functools.partial(layers.Conv3x3, 8, method, jnp.bfloat16),
            (3, 3, 16, 8),
            (5, 6, 7, 16),
            layers._conv_nhwc,
        )
        for method in ("im2col", "xla", "canonical")
    },
    "column conv": (
        lambda: layers.ColumnConv(8, jnp.bfloat16),
        (6, 1, 16, 8),
        (5, 6, 7, 16),
        lambda x, k: jnp.einsum("brwc,rco->bwo", x, k[:, 0])[:, None],
    ),
}


@pytest.mark.parametrize("name", list(MIXED_LAYERS))
def test_a_mixed_layer_is_the_float32_product_of_bfloat16_operands(name):
    """Mixed precision's products take bfloat16 operands and accumulate in float32, forward and
    backward. The reference is the layer's float32 product of the operands rounded to bfloat16
    (full float32 on every backend): the products of two bfloat16 values are exact in float32, so
    only float32's summation order separates them (1e-5 of the sum of the terms' sizes, where a
    bfloat16 sum would be off by ~2**-8 of it). The gradients are those float32 products of the
    rounded operands and the rounded cotangent, rounded to bfloat16 on their way out (within one
    bfloat16 unit of the sum of its terms' sizes: im2col's gradient sums nine such pieces of each
    input, in float32). Everything comes back float32."""
    make, kernel_shape, input_shape, product = MIXED_LAYERS[name]
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=input_shape), jnp.float32)
    kernel = jnp.asarray(rng.normal(size=kernel_shape), jnp.float32)
    weights = jnp.asarray(rng.normal(size=product(x, kernel).shape), jnp.float32)
    layer, params = make(), {"params": {"kernel": kernel}}

    def loss(params, x):
        return jnp.sum(layer.apply(params, x) * weights)

    rounded_weights = _rounded(weights)

    def reference_loss(kernel, x, weights=rounded_weights):
        return jnp.sum(product(x, kernel) * weights)

    with precision.parity():
        got = layer.apply(params, x)
        sizes = product(jnp.abs(_rounded(x)), jnp.abs(_rounded(kernel)))
        want = product(_rounded(x), _rounded(kernel))
        grads = jax.grad(loss, argnums=(0, 1))(params, x)
        want_grads = jax.grad(reference_loss, argnums=(0, 1))(_rounded(kernel), _rounded(x))
        grad_sizes = jax.grad(reference_loss, argnums=(0, 1))(*(jnp.abs(_rounded(a)) for a in (kernel, x, weights)))
    assert got.dtype == jnp.float32 and {g.dtype for g in jax.tree.leaves(grads)} == {jnp.dtype(jnp.float32)}
    assert float(jnp.max(jnp.abs(got - want) - 1e-5 * sizes)) <= 0, name
    assert float(jnp.max(jnp.abs(got - product(x, kernel)) / sizes)) > 1e-4, name  # the operands were rounded
    for what, g, w, size in (
        ("dkernel", grads[0]["params"]["kernel"], want_grads[0], grad_sizes[0]),
        ("dx", grads[1], want_grads[1], grad_sizes[1]),
    ):
        assert float(jnp.max(jnp.abs(g - w) - BF16_UNIT * size)) <= 0, (name, what)


def test_mixed_winograd_rounds_its_transformed_tiles_once():
    """Winograd's transforms stay float32 under mixed precision and its 16 products take the
    transformed tiles and kernel rounded to bfloat16: within two bfloat16 units of the sum of the
    terms' sizes of the float32 convolution (each operand rounded once; measured: 0.7 of one)."""
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(5, 6, 7, 16)), jnp.float32)
    kernel = jnp.asarray(rng.normal(size=(3, 3, 16, 8)), jnp.float32)
    with precision.parity():
        got = layers.Conv3x3(8, "winograd", jnp.bfloat16).apply({"params": {"kernel": kernel}}, x)
        want, sizes = layers._conv_nhwc(x, kernel), layers._conv_nhwc(jnp.abs(x), jnp.abs(kernel))
    assert got.dtype == jnp.float32
    assert 1e-4 < float(jnp.max(jnp.abs(got - want) / sizes)) <= 2 * BF16_UNIT


@pytest.mark.parametrize("name", ["mlp", "mlp3", "cnn-mk4-value", "resnet:blocks=2,channels=16"])
def test_a_mixed_network_is_the_float32_network_within_bfloat16_rounding(name):
    """--precision mixed: the same parameters (float32) and float32 outputs, its products on
    bfloat16 operands: within bfloat16's rounding, compounded over the network's layers (at
    most 12 of them, each within a few units of 2**-8 of its scale: 5% of the outputs' largest
    value), of the float32 network, and not equal to it."""
    boards = np.random.default_rng(0).integers(-1, 2, size=(64, 6, 7)).astype(np.int8)
    for conv in ("auto", "xla", "im2col"):
        full, mixed = models.get_model(name, conv=conv), models.get_model(name, dtype="bfloat16", conv=conv)
        params = models.init_params(full, jax.random.key(0))
        assert jax.tree.map(lambda x: x.dtype, models.init_params(mixed, jax.random.key(0))) == jax.tree.map(
            lambda x: x.dtype, params
        )
        with precision.parity():
            expected, got = apply_compiled(full, params, boards), apply_compiled(mixed, params, boards)
        for e, g in zip(expected, got):
            if e is None:
                continue
            assert g.dtype == jnp.float32
            scale = float(np.abs(np.asarray(e)).max())
            error = float(np.abs(np.asarray(g) - np.asarray(e)).max())
            assert 0 < error <= 0.05 * scale, (name, conv, error, scale)
    with pytest.raises(ValueError, match="unknown conv 'fft'; choose one of auto, im2col, xla"):
        models.get_model("cnn-mk4", conv="fft")


def test_a_mixed_network_plays_only_legal_moves_and_its_outputs_stay_finite():
    """Mixed Mk4 and ResNet play 16 whole games against each other: every move they play is
    legal on the board before it (checked in plain Python over the decoded trajectory), and
    their logits and values over every board they saw are finite."""
    sides = []
    for name in ("cnn-mk4-value", "resnet:blocks=2,channels=16"):
        model = models.get_model(name, dtype="bfloat16")
        sides.append((model, models.init_params(model, jax.random.key(len(sides)))))
    (mk4, mk4_params), (resnet, resnet_params) = sides
    traj, results = rollout.play_games(
        jax.random.key(3),
        rollout.Side(models.model_player(mk4), mk4_params),
        rollout.Side(models.model_player(resnet), resnet_params),
        16,
    )
    boards, actions, valid = np.asarray(traj.boards()), np.asarray(traj.actions), np.asarray(traj.valid)
    assert valid.any(axis=0).all() and (valid.sum(axis=0) == np.asarray(results.length)).all()
    for ply, game_index in zip(*np.nonzero(valid)):
        assert boards[ply, game_index, 0, actions[ply, game_index]] == 0, (ply, game_index)
    seen = boards[valid]
    for model, params in sides:
        for out in apply_compiled(model, params, seen):
            assert out is None or np.isfinite(np.asarray(out)).all()


def numpy_resnet(p, boards, blocks, groups, eps=1e-5):
    """models.ResNet written again in NumPy, float64, from its description."""
    x = np.stack([boards == 1, boards == -1, boards == 0], -1).astype(np.float64)

    def conv(x, kernel):  # 3x3, 'same', kernel (3, 3, in, out)
        padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        return sum(padded[:, i : i + 6, j : j + 7, :] @ kernel[i, j] for i in range(3) for j in range(3))

    def norm(x, q):
        b, h, w, c = x.shape
        g = x.reshape(b, h, w, groups, c // groups)
        mean, var = g.mean((1, 2, 4), keepdims=True), g.var((1, 2, 4), keepdims=True)
        return ((g - mean) / np.sqrt(var + eps)).reshape(x.shape) * q["scale"] + q["bias"]

    def dense(x, q):
        return x @ q["kernel"] + q["bias"]

    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    x = relu(norm(conv(x, p["stem"]["kernel"]), p["stem_norm"]))
    for i in range(blocks):
        y = relu(norm(conv(x, p[f"block{i}_conv0"]["kernel"]), p[f"block{i}_norm0"]))
        x = relu(x + norm(conv(y, p[f"block{i}_conv1"]["kernel"]), p[f"block{i}_norm1"]))
    logits = dense(relu(dense(x, p["policy_conv"])).reshape(len(x), -1), p["policy"])
    v = relu(dense(relu(dense(x, p["value_conv"])).reshape(len(x), -1), p["value_hidden"]))
    return logits, np.tanh(dense(v, p["value"])[:, 0])


def test_resnet_against_numpy_and_its_parameter_count():
    """resnet:blocks=2,channels=16 against a float64 NumPy transcription, on random boards with
    PyTorch-initialised parameters; the parameter count by hand; settings in the name."""
    model = models.get_model("resnet:blocks=2,channels=16")
    params = models.init_params(model, jax.random.key(3))
    rng = np.random.default_rng(0)
    boards = rng.integers(-1, 2, size=(5, 6, 7)).astype(np.int8)
    with jax.default_matmul_precision("highest"):
        logits, value = apply_compiled(model, params, jnp.asarray(boards))
    ref_logits, ref_value = numpy_resnet(
        jax.tree.map(lambda a: np.asarray(a, np.float64), params["params"]), boards, 2, 2
    )
    np.testing.assert_allclose(np.asarray(logits), ref_logits, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(value), ref_value, atol=1e-4)
    # stem 3*9*16 + norm 32; per block 2 * (16*9*16 + 32); policy 1x1 conv 16*2+2, Dense 84*7+7;
    # value 1x1 conv 16+1, Dense 42*16+16, Dense 16+1
    assert models.count_params(params) == 432 + 32 + 2 * 2 * (2304 + 32) + 34 + 595 + 17 + 688 + 17
    assert models.get_model("resnet").blocks == 5 and models.has_value_head(model)
    for bad in ("resnet:blocks=x", "resnet:width=3", "resnet:channels=0"):
        with pytest.raises(ValueError, match="resnet"):
            models.get_model(bad)
