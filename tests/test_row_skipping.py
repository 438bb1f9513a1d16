"""The one compaction helper and the one cost estimate, against plain computations and hand counts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import models, players, rollout, row_skipping


def test_valid_first_is_the_stable_partition():
    rng = np.random.default_rng(0)
    for n, p in [(1, 0.5), (7, 0.0), (7, 1.0), (300, 0.3), (1050, 0.55)]:
        valid = rng.random(n) < p
        order, destination = row_skipping.valid_first(jnp.asarray(valid))
        np.testing.assert_array_equal(np.asarray(order), np.argsort(~valid, kind="stable"))
        np.testing.assert_array_equal(np.asarray(order)[np.asarray(destination)], np.arange(n))


@pytest.mark.parametrize("p_valid", [0.0, 0.3, 1.0])
def test_over_valid_chunks_computes_valid_rows_only_and_skips_empty_chunks(p_valid):
    rng = np.random.default_rng(1)
    n, num_chunks = 23, 4  # chunks of 6, the last one padded
    x = rng.normal(size=(n, 3)).astype(np.float32)
    valid = rng.random(n) < p_valid
    calls = []

    def row_sums(index, chunk):
        jax.debug.callback(lambda i: calls.append(int(i)), index)  # which chunks ran
        return chunk.sum(-1)

    out, destination = jax.jit(lambda x, v: row_skipping.over_valid_chunks(row_sums, x, v, num_chunks))(x, valid)
    per_row = np.asarray(out.reshape(-1)[destination])
    np.testing.assert_allclose(per_row[valid], x[valid].sum(-1), rtol=1e-6)
    assert sorted(calls) == list(range(-(-valid.sum() // 6)))  # only chunks holding valid rows ran

    total = jax.jit(
        lambda x, v: row_skipping.over_valid_chunks(
            lambda i, c: c.sum(0) * 0 + (c * c).sum(), x, jnp.asarray(v), num_chunks, accumulate=True
        )
    )
    # accumulated: the padding rows are zeros, so the sum over chunks is the sum over valid rows
    masked = np.where(valid[:, None], x, 0.0)
    np.testing.assert_allclose(np.asarray(total(jnp.asarray(masked), valid)), np.full(3, (masked**2).sum()), rtol=1e-5)


def test_flops_are_counted_from_the_program_the_same_on_every_backend():
    def flops(name):
        model = models.get_model(name)
        return row_skipping.flops_per_board(
            models.model_player(model), jax.eval_shape(lambda: models.init_params(model, jax.random.key(0)))
        )

    # SimpleMLP 42-128-64-7: one multiply-add per weight
    assert flops("mlp") == 2 * (42 * 128 + 128 * 64 + 64 * 7)
    # Mk4: seven 3x3 convolutions at 42 cells (3 -> 64, then 64 -> 64), the (6, 1) column conv at 7 columns,
    # the policy MLP 448-128-128-7; the value head adds 448-64-64-1
    convs = 42 * 9 * (3 * 64 + 6 * 64 * 64) + 7 * 6 * 64 * 64
    policy = 448 * 128 + 128 * 128 + 128 * 7
    assert flops("cnn-mk4") == 2 * (convs + policy)
    assert flops("cnn-mk4-value") == 2 * (convs + policy + 448 * 64 + 64 * 64 + 64)
    assert row_skipping.flops_per_board(players.random_punisher, None) == 0  # no matrix products: cheap
    # the decisions that follow
    assert row_skipping.rollout_chunks(flops("mlp"), 25) == 1  # 28 kFLOP: compaction costs more than it saves
    assert row_skipping.rollout_chunks(flops("cnn-mk4"), 25) == row_skipping.ROLLOUT_CHUNKS
    assert row_skipping.rollout_chunks(flops("cnn-mk4"), 3) == 1  # too few boards to split
    assert (
        row_skipping.loss_chunks(flops("mlp"), 21 * 50) == 1 and row_skipping.loss_chunks(flops("mlp"), 21 * 4096) > 1
    )
    assert row_skipping.loss_chunks(flops("cnn-mk4-value"), 21 * 50) > 1
    model = models.get_model("cnn-mk4")
    params = jax.eval_shape(lambda: models.init_params(model, jax.random.key(0)))
    assert rollout.default_chunks(models.model_player(model), params, 25) == row_skipping.ROLLOUT_CHUNKS


def test_a_gpus_gradient_chunks_each_hold_its_fewest_flops():
    """On a GPU a chunk's branch costs launches, so each chunk holds at least the platform's
    ``loss_min_flops`` (5e10) of forward FLOPs, the chunks a power of two up to 8; a CPU cuts
    any batch past its threshold into 8."""
    per_board = 1e7
    by_positions = {4_000: 1, 10_000: 2, 16_000: 2, 20_000: 4, 39_000: 4, 40_000: 8, 1_000_000: 8}
    for positions, chunks in by_positions.items():
        assert row_skipping.loss_chunks(per_board, positions, "gpu") == chunks, positions
    assert row_skipping.loss_chunks(per_board, 16_000, "cpu") == row_skipping.LOSS_CHUNKS == 8
    assert row_skipping.loss_chunks(per_board, 5, "cpu") == 1


def test_compaction_modes_per_platform():
    """--compaction: on (both places), loss (the gradient only), off (neither); auto is on, except
    that a GPU's rollouts below 2,048 boards per player call evaluate every board (measured) and
    its gradient is chunked only from 5e10 FLOPs (counted: czjax.util.platforms)."""
    from czjax.learn.settings import TrainConfig
    from czjax.learn.trainer import make_setup

    def chunks(mode, games=50, model="cnn-mk4", platform="cpu"):
        config = TrainConfig(model=model, games_per_batch=games, eval_games=100, compaction=mode)
        setup = make_setup(config, None, platform=platform)
        return setup.rollout_chunks, setup.eval_chunks, setup.ctx.num_chunks

    rule = None  # the FLOP rule decides (czjax.row_skipping.rollout_chunks)
    assert chunks("on") == (rule, rule, row_skipping.LOSS_CHUNKS)  # built for a CPU, wherever the suite runs
    assert chunks("loss") == (1, 1, row_skipping.LOSS_CHUNKS)
    assert chunks("off") == (1, 1, 1)
    assert chunks("auto") == chunks("on")  # on a CPU
    # a GPU's gradient is one plain gradient below 5e10 FLOPs of the learner's batch (Mk4's 1,050
    # positions at 50 games: 2e10), chunked above it (4,096 games: 1.7e12)
    assert chunks("auto", platform="gpu") == (1, 1, 1)
    # the evaluation's 100 games: every board
    assert chunks("auto", games=4096, platform="gpu") == (rule, 1, row_skipping.LOSS_CHUNKS)
    assert chunks("on", platform="gpu") == (rule, rule, 1)
    with pytest.raises(ValueError, match="unknown compaction 'some'; choose one of auto, on, loss, off"):
        TrainConfig(compaction="some")


# --control-flow static: the training iteration without a data-dependent branch, the same run.
CONTROL_FLOW_CONFIGS = {
    "reinforce": dict(model="mlp", games_per_batch=6, opponent="self", compaction="off"),
    "ppo": dict(model="mlp3", games_per_batch=4, opponent="random-punisher", algorithm="ppo", compaction="off"),
}


@pytest.mark.parametrize("name", list(CONTROL_FLOW_CONFIGS))
def test_static_control_flow_runs_the_same_iteration_without_branches(name):
    """cond and static give the same parameters and metrics (same seed, two chunks); the
    static chunk's compiled program holds no conditional, the cond one does."""
    from czjax.learn.algorithms import PPOSettings
    from czjax.learn.settings import HParams, TrainConfig
    from czjax.learn.trainer import make_trainer
    from czjax.util import precision

    hp = HParams.create(learning_rate=3e-3, discount=0.9, value_weight=1.0)
    results, programs = {}, {}
    for flow in ("cond", "static"):
        config = TrainConfig(
            **CONTROL_FLOW_CONFIGS[name],
            eval_games=2,
            batches_per_chunk=2,
            control_flow=flow,
            algorithm_settings={"ppo": PPOSettings(epochs=3, target_kl=1e-6)},
        )
        trainer = make_trainer(config)
        state = trainer.init(0)
        with precision.parity():
            programs[flow] = trainer.run_chunk.lower(state, hp, 2).as_text()
            for _ in range(2):
                state, metrics = trainer.run_chunk(state, hp, 2)
        results[flow] = jax.device_get((state.params, metrics))
    (params_cond, metrics_cond), (params_static, metrics_static) = results["cond"], results["static"]
    for a, b in zip(jax.tree.leaves(params_cond), jax.tree.leaves(params_static)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    for key in metrics_cond:
        np.testing.assert_allclose(metrics_cond[key], metrics_static[key], rtol=1e-5, atol=1e-6, err_msg=key)
    assert "stablehlo.case" in programs["cond"] or "stablehlo.if" in programs["cond"]
    assert "stablehlo.case" not in programs["static"] and "stablehlo.if" not in programs["static"]


def test_auto_control_flow_follows_the_measured_table():
    """auto is cond on the CPU; on a GPU static for the SimpleMLP alone (the network measured
    faster so), cond for Mk4 and for the networks not measured; an explicit choice is kept."""
    from czjax.learn.settings import TrainConfig
    from czjax.learn.trainer import static_control_flow

    def static(model, flow="auto", platform="cpu"):
        return static_control_flow(TrainConfig(model=model, control_flow=flow), platform)

    assert not static("mlp") and not static("cnn-mk4") and static("cnn-mk4", "static")
    assert static("mlp", platform="gpu") and not static("cnn-mk4", platform="gpu")
    assert not static("cnn-mk4-value", platform="gpu") and not static("mlp3", platform="gpu")
    assert not static("mlp", "cond", "gpu") and static("cnn-mk4", "static", "gpu")
