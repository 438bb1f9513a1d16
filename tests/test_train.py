"""Models, the compiled training iteration, checkpoints, resume, and `czjax train`."""

import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.traverse_util import flatten_dict

from czjax import checkpoint, cli, loop, models, players, rollout
from czjax.train import HParams, TrainConfig, make_trainer

# One small config shared by every test here, so the chunk compiles once.
CONFIG = TrainConfig(
    model="mlp", games_per_batch=8, opponent="self", promote_every_games=16, promote_window_games=16, eval_games=4, batches_per_chunk=2
)
HP = HParams.create(learning_rate=1e-3, entropy_bonus=0.05, value_weight=0.0, discount=0.9)


@pytest.mark.parametrize(
    "name, count, value_head",
    [("mlp", 14_215, False), ("mlp3", 409_608, True), ("cnn-mk4", 323_527, False), ("cnn-mk4-value", 356_488, True)],
)
def test_models_have_the_pytorch_parameter_counts(name, count, value_head):
    model = models.get_model(name)
    params = models.init_params(model, jax.random.key(0))
    assert models.count_params(params) == count
    logits, value = models.apply_model(model, params, jnp.asarray(np.stack([np.zeros((6, 7), np.int8)] * 3)))
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
    torch_style = models.init_params(model, jax.random.key(0))  # the default, PyTorch's: another tree of the same shapes
    assert jax.tree.structure(torch_style) == jax.tree.structure(params)
    assert jax.tree.map(np.shape, torch_style) == jax.tree.map(np.shape, params)


def test_unknown_init_and_old_configs():
    with pytest.raises(ValueError, match="unknown init 'xavier'; choose one of torch, flax"):
        TrainConfig(init="xavier")
    assert TrainConfig().init == "torch"
    # configs stored before the init field existed: those runs started from Flax's initialisation
    stored = {k: v for k, v in CONFIG.to_dict().items() if k != "init"}
    assert TrainConfig.from_dict(stored) == dataclasses.replace(CONFIG, init="flax")
    assert TrainConfig.from_dict(CONFIG.to_dict()) == CONFIG


def test_unknown_model_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown model 'resnet'"):
        models.get_model("resnet")


def test_a_model_plays_as_a_player():
    model = models.get_model("mlp")
    params = models.init_params(model, jax.random.key(0))
    traj, results = rollout.play_games(jax.random.key(1), models.model_player(model), params, players.random_player, None, 16)
    assert (np.asarray(results.length) >= 7).all()
    assert models.model_player(model) is models.model_player(models.get_model("mlp"))


@pytest.fixture(scope="module")
def trainer():
    return make_trainer(CONFIG)


def test_train_step_updates_params_and_counters(trainer):
    state = trainer.init(0)
    new, metrics = jax.jit(trainer.train_step)(state, HP, jax.random.key(5))
    assert int(new.step) == 1 and int(new.games) == CONFIG.games_per_batch
    assert not loop.params_equal(new.params, state.params)
    assert loop.params_equal(new.opponent_params, state.params)  # no promotion on the first batch
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert float(metrics["value_loss"]) == 0.0  # mlp has no value head: plain REINFORCE


def test_value_head_model_trains_with_baseline_and_without():
    for baseline in (True, False):
        cfg = TrainConfig(model="mlp3", games_per_batch=4, opponent="random-punisher", eval_games=2, batches_per_chunk=1, baseline=baseline)
        tr = make_trainer(cfg)
        _, metrics = tr.train_step(tr.init(0), HP, jax.random.key(0))
        assert (float(metrics["value_loss"]) > 0) == baseline


def test_promotion_on_scripted_win_rates(trainer):
    """Promotion happens at a check batch iff the window's win rate exceeds 52%."""
    state = trainer.init(0)
    w = CONFIG.window_batches
    assert CONFIG.promote_every == 2 and w == 2
    step = jax.jit(trainer.train_step)
    for earlier_wins, expect in ((8, True), (0, False)):
        # the previous batch of the window had `earlier_wins` of 8; this batch is the check batch (step 2)
        s = state.replace(step=jnp.int32(1), window_wins=jnp.array([earlier_wins, 0], jnp.int32), window_games=jnp.array([8, 0], jnp.int32))
        new, metrics = step(s, HP, jax.random.key(2))
        batch_wins = round(float(metrics["win_rate"]) * 8)
        assert ((earlier_wins + batch_wins) / 16 > 0.52) == expect
        assert int(new.promotions) == int(expect)
        assert loop.params_equal(new.opponent_params, new.params) == expect
        if expect:
            assert int(new.window_games.sum()) == 0  # a new checkpoint starts a new window
    # not a check batch: no promotion even at 100%
    s = state.replace(step=jnp.int32(0), window_wins=jnp.array([8, 8], jnp.int32), window_games=jnp.array([8, 8], jnp.int32))
    new, _ = step(s, HP, jax.random.key(2))
    assert int(new.promotions) == 0


def run(tmp_path, name, **kw):
    return loop.run(CONFIG, HP, tmp_path / name, seed=3, log=lambda m: None, **kw)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    run(out, "run", batches=8, checkpoint_every=1)
    return out / "run"


def final_params(out, config=CONFIG):
    state, _ = checkpoint.load(out / loop.CHECKPOINT, make_trainer(config).init(0), config.model)
    return state


def test_resume_after_kill_equals_an_uninterrupted_run(tmp_path, uninterrupted):
    full_rows = loop.read_metrics(uninterrupted / loop.METRICS)
    assert [r["batches"] for r in full_rows] == [2, 4, 6, 8]
    run(tmp_path, "run", batches=4)
    # a run killed after its last checkpoint has logged rows the checkpoint does not have
    with (tmp_path / "run" / loop.METRICS).open("a") as f:
        f.write(json.dumps(full_rows[2]) + "\n")
    run(tmp_path, "run", batches=8, resume=True)
    rows = loop.read_metrics(tmp_path / "run" / loop.METRICS)
    assert [loop.deterministic(r) for r in rows] == [loop.deterministic(r) for r in full_rows]
    a, b = final_params(tmp_path / "run"), final_params(uninterrupted)
    for field in ("params", "opt_state", "opponent_params", "step", "games", "window_wins", "window_games", "promotions"):
        assert loop.params_equal(getattr(a, field), getattr(b, field)), field
    np.testing.assert_array_equal(jax.random.key_data(a.key), jax.random.key_data(b.key))


def test_interrupt_saves_the_last_chunk_and_resumes_identically(tmp_path, uninterrupted):
    def interrupt_after_first_chunk(message):
        if message.startswith("batch 2"):
            raise KeyboardInterrupt

    summary = loop.run(CONFIG, HP, tmp_path / "run", seed=3, batches=8, log=interrupt_after_first_chunk)
    assert summary["interrupted"] and summary["batches"] == 2
    run(tmp_path, "run", batches=8, resume=True)
    assert loop.params_equal(final_params(tmp_path / "run").params, final_params(uninterrupted).params)


def test_progress_while_a_chunk_or_a_compile_runs(tmp_path, monkeypatch):
    beats = []
    with loop.heartbeat(beats.append, lambda: "alive", every_s=0.02):
        time.sleep(0.3)
    assert 5 <= len(beats) <= 15 and set(beats) == {"alive"}
    time.sleep(0.1)
    assert len(beats) <= 15  # the thread stops with the body
    monkeypatch.setattr(loop, "HEARTBEAT_S", 0.0005)  # every chunk is "slow" now
    messages = []
    loop.run(CONFIG, HP, tmp_path / "run", seed=3, batches=4, log=messages.append)
    assert any(m.startswith("  ... batches 1-2 running") for m in messages)
    assert any(m.startswith("  ... batches 3-4 running") for m in messages)


def test_damaged_and_mismatched_checkpoints_give_one_line_errors(tmp_path, uninterrupted):
    template = make_trainer(CONFIG).init(0)
    damaged = tmp_path / "damaged.msgpack"
    data = (uninterrupted / loop.CHECKPOINT).read_bytes()
    damaged.write_bytes(data[: len(data) // 2])
    with pytest.raises(checkpoint.CheckpointError, match="damaged"):
        checkpoint.load(damaged, template, CONFIG.model)
    (tmp_path / "text.msgpack").write_text("hello")
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.load(tmp_path / "text.msgpack", template, CONFIG.model)
    with pytest.raises(checkpoint.CheckpointError, match="written for model 'mlp', not 'mlp3'"):
        checkpoint.load(uninterrupted / loop.CHECKPOINT, template, "mlp3")
    other = make_trainer(TrainConfig(model="mlp3", games_per_batch=4, eval_games=2)).init(0)
    with pytest.raises(checkpoint.CheckpointError, match="does not match"):
        checkpoint.load(uninterrupted / loop.CHECKPOINT, other)
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint"):
        checkpoint.load(tmp_path / "missing.msgpack", template)


def test_a_run_starts_from_a_czjax_checkpoint(tmp_path, uninterrupted, capsys):
    """init_from a run folder or checkpoint file: its learner's parameters, for the learner and
    the frozen opponent, with a fresh optimizer state; recorded in run.json and the checkpoint."""
    trained = final_params(uninterrupted)
    fresh = make_trainer(CONFIG).init(3)
    for spec in (uninterrupted, uninterrupted / loop.CHECKPOINT):
        run(tmp_path, "from", batches=0, init_from=str(spec), overwrite=True)  # no batch: the step-0 state
        state = final_params(tmp_path / "from")
        assert int(state.step) == 0 and int(state.games) == 0
        assert loop.params_equal(state.params, trained.params) and loop.params_equal(state.opponent_params, trained.params)
        assert loop.params_equal(state.opt_state, fresh.opt_state)  # zero moments, count 0
        np.testing.assert_array_equal(jax.random.key_data(state.key), jax.random.key_data(fresh.key))  # the seed's games
        meta, _ = checkpoint.read_meta(tmp_path / "from" / loop.CHECKPOINT)
        assert meta["extra"]["seed"] == 3 and meta["extra"]["init_from"] == str(spec)
        assert json.loads((tmp_path / "from" / "run.json").read_text())["run"]["init_from"] == str(spec)
    # another model's checkpoint, or no checkpoint: one-line errors through the CLI
    for args, message in ((["--model", "mlp3", "--init-from", str(uninterrupted)], "holds weights of model 'mlp', not 'mlp3'"),
                          (["--init-from", str(tmp_path / "missing")], "no checkpoint at"),
                          (["--init-from", str(tmp_path / "from" / "run.json")], "damaged or not a czjax checkpoint")):
        assert cli.main(["train", "--out", str(tmp_path / "new"), "--batches", "1", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("czjax: error:") and message in err and len(err.splitlines()) == 1


def test_resume_of_a_checkpoint_without_init_field(tmp_path, uninterrupted):
    """A checkpoint written before ``init`` existed resumes, and its run keeps saying it started
    from Flax's initialisation."""
    state, meta = checkpoint.load(uninterrupted / loop.CHECKPOINT, make_trainer(CONFIG).init(0), CONFIG.model)
    old_config = {k: v for k, v in meta["config"].items() if k not in ("init", "ppo_kl_stop")}
    checkpoint.save(tmp_path / loop.CHECKPOINT, state, old_config, meta["hparams"], meta["extra"])
    shutil.copy(uninterrupted / loop.METRICS, tmp_path / loop.METRICS)
    assert cli.main(["train", "--resume", "--out", str(tmp_path), "--batches", "8"]) == 0  # already there: no batch to run
    meta, _ = checkpoint.read_meta(tmp_path / loop.CHECKPOINT)
    assert meta["config"] == dict(old_config, init="flax", ppo_kl_stop="before-step")
    assert json.loads((tmp_path / "run.json").read_text())["config"]["init"] == "flax"


CLI_ARGS = ["--preset", "ex2-entropy", "--games-per-batch", "8", "--eval-every", "2", "--eval-games", "4",
            "--learning-rate", "1e-3", "--entropy-bonus", "0.05", "--value-weight", "0", "--seed", "3"]
CLI_CONFIG = cli.train_settings(cli.build_parser().parse_args(["train", *CLI_ARGS]))[0]


def cli_train(tmp_path, *extra):
    return cli.main(["train", *CLI_ARGS, "--out", str(tmp_path), *extra])


def test_cli_train_runs_resumes_and_reports(tmp_path, capsys):
    assert cli_train(tmp_path, "--batches", "2") == 0
    out = capsys.readouterr().out
    assert "outputs:" in out and "dashboard.png" in out and (tmp_path / "dashboard.png").stat().st_size > 1000
    assert cli.main(["train", "--resume", "--out", str(tmp_path), "--batches", "4"]) == 0
    rows = loop.read_metrics(tmp_path / loop.METRICS)
    assert [r["batches"] for r in rows] == [2, 4]
    assert {"win_rate", "eval_win_rate", "entropy", "policy_loss", "value_loss", "returns_std", "advantage_std",
            "game_length", "games", "promotions", "games_per_s"} <= set(rows[-1])


def test_a_folder_that_holds_a_run_is_never_overwritten(tmp_path, capsys):
    assert cli_train(tmp_path, "--batches", "4") == 0
    before = (tmp_path / loop.METRICS).read_text()
    capsys.readouterr()
    assert cli_train(tmp_path, "--batches", "2") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert (tmp_path / loop.METRICS).read_text() == before
    assert cli_train(tmp_path, "--batches", "2", "--overwrite") == 0
    assert [r["batches"] for r in loop.read_metrics(tmp_path / loop.METRICS)] == [2]


def printed_resume_command(out: str) -> list[str]:
    line = [line for line in out.splitlines() if line.startswith("continue with: ")][-1]
    command = shlex.split(line.removeprefix("continue with: "))
    assert command[0] == "czjax"
    return command[1:]


def test_ctrl_c_then_the_printed_command_equals_an_uninterrupted_run(tmp_path, capsys, monkeypatch):
    assert cli_train(tmp_path / "straight", "--batches", "8") == 0
    progress = loop.format_progress

    def ctrl_c_after_the_first_chunk(row, total):
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends; Python raises KeyboardInterrupt from it
        return progress(row, total)

    monkeypatch.setattr(loop, "format_progress", ctrl_c_after_the_first_chunk)
    capsys.readouterr()
    assert cli_train(tmp_path / "stopped", "--batches", "8") == 130
    out = capsys.readouterr().out
    assert "stopped: 2 batches" in out
    monkeypatch.setattr(loop, "format_progress", progress)
    assert cli.main(printed_resume_command(out)) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "games per batch, until 8 batches; hyperparameters" in header
    straight, resumed = (loop.read_metrics(tmp_path / name / loop.METRICS) for name in ("straight", "stopped"))
    assert [loop.deterministic(r) for r in resumed] == [loop.deterministic(r) for r in straight]
    a, b = final_params(tmp_path / "stopped", CLI_CONFIG), final_params(tmp_path / "straight", CLI_CONFIG)
    assert loop.params_equal(a.params, b.params) and loop.params_equal(a.opt_state, b.opt_state)


def test_kill_9_mid_run_loses_at_most_the_checkpoint_interval(tmp_path):
    """A real ``kill -9`` of a running ``czjax train``, then ``--resume``: nothing before the
    last time-based checkpoint is lost, and the continuation equals an uninterrupted run."""
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "czjax.cli", "train", *CLI_ARGS, "--out", str(out), "--batches", "1000000",
               "--checkpoint-every", "1000000", "--checkpoint-seconds", "0.2"]
    env = dict(os.environ, PYTHONPATH=str(Path(cli.__file__).parents[1]))
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not ((out / loop.CHECKPOINT).exists() and len(loop.read_metrics(out / loop.METRICS)) >= 6):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the run made no checkpoint"
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL: no handler runs, nothing is saved on the way out
        proc.wait()
    meta, _ = checkpoint.read_meta(out / loop.CHECKPOINT)
    assert meta["extra"]["batches"] == 1000000  # the target is stored with the run
    done = int(checkpoint.load(out / loop.CHECKPOINT, make_trainer(CLI_CONFIG).init(0))[0].step)
    rows = loop.read_metrics(out / loop.METRICS)
    saved = next(r for r in rows if r["batches"] == done)
    # what the kill lost: the rows after the checkpoint, at most the 0.2 s interval of training (plus writing a checkpoint)
    assert rows[-1]["elapsed_s"] - saved["elapsed_s"] < 1.0
    target = str(done + 4)
    assert cli.main(["train", "--resume", "--out", str(out), "--batches", target]) == 0
    assert cli_train(tmp_path / "straight", "--batches", target) == 0
    killed, straight = (loop.read_metrics(tmp_path / name / loop.METRICS) for name in ("killed", "straight"))
    assert [loop.deterministic(r) for r in killed] == [loop.deterministic(r) for r in straight]
    a, b = final_params(out, CLI_CONFIG), final_params(tmp_path / "straight", CLI_CONFIG)
    assert loop.params_equal(a.params, b.params) and loop.params_equal(a.opt_state, b.opt_state)


def test_resume_before_the_first_checkpoint_and_with_a_stored_time_budget(tmp_path, capsys):
    assert cli_train(tmp_path / "a", "--batches", "4") == 0
    (tmp_path / "a" / loop.CHECKPOINT).unlink()  # as if killed before its first checkpoint: run.json is there
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "a")]) == 0
    assert "no checkpoint yet: starting its run from the beginning" in capsys.readouterr().out
    assert [r["batches"] for r in loop.read_metrics(tmp_path / "a" / loop.METRICS)] == [2, 4]
    assert cli_train(tmp_path / "b", "--time-budget", "0") == 0  # a spent budget trains nothing, before or after resume
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "for 0 s of training" in out and "done: 0 batches" in out
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "b"), "--batches", "2"]) == 0  # a new target
    assert [r["batches"] for r in loop.read_metrics(tmp_path / "b" / loop.METRICS)] == [2]
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "b"), "--seed", "0"]) == 2
    assert "drop --seed" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--preset", "ex9"], "unknown preset 'ex9'"),
        (["--model", "resnet"], "unknown model 'resnet'"),
        (["--opponent", "god"], "unknown opponent 'god'"),
    ],
)
def test_cli_train_bad_settings_are_one_line_errors(tmp_path, capsys, args, message):
    assert cli.main(["train", "--out", str(tmp_path), "--batches", "1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_train_rejects_bad_numbers_and_checkpoints(tmp_path, capsys):
    for bad in (["--games-per-batch", "0"], ["--games-per-batch", "-5"], ["--batches", "0"], ["--learning-rate", "nan"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(["train", *bad])
        assert exc.value.code == 2
    (tmp_path / loop.CHECKPOINT).write_bytes(b"\x00garbage")
    assert cli.main(["train", "--resume", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "czjax: error:" in err and "checkpoint" in err


def test_im2col_conv_equals_flax_conv():
    x = jax.random.normal(jax.random.key(0), (5, 6, 7, 3))
    conv = models.Conv3x3(16)
    params = conv.init(jax.random.key(1), x)
    reference = __import__("flax").linen.Conv(16, (3, 3), padding=1, use_bias=False)
    expected = reference.apply({"params": {"kernel": params["params"]["kernel"]}}, x)
    np.testing.assert_allclose(np.asarray(conv.apply(params, x)), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_sparse_gradient_equals_the_dense_gradient():
    from czjax.losses import LossInputs, policy_gradient_sums
    from czjax.train import sparse_value_and_grad

    model = models.get_model("mlp3")
    params = models.init_params(model, jax.random.key(0))
    traj, results = rollout.play_games(jax.random.key(4), players.random_player, None, players.random_player, None, 10)
    rng = np.random.default_rng(0)
    n = 210
    boards = np.asarray(traj.boards()).reshape(-1, 6, 7)[:n]
    valid = rng.random(n) < 0.4
    batch = LossInputs(
        legal=jnp.asarray(boards[:, 0, :] == 0), actions=jnp.asarray(np.argmax(boards[:, 0, :] == 0, 1)),
        returns=jnp.asarray(rng.choice([-1.0, 0.0, 0.81, 1.0], n).astype(np.float32)), valid=jnp.asarray(valid),
    )

    def loss(p, b, bt):
        logits, values = models.apply_model(model, p, b)
        return policy_gradient_sums(logits, values, bt, 0.05, 0.5)

    (_, dense_sums), dense = jax.value_and_grad(loss, has_aux=True)(params, jnp.asarray(boards), batch)
    for num_chunks in (1, 3, 8):  # 1: the plain gradient; 3 and 8: compacted, 8 with padding
        grads, sums = jax.jit(lambda p, b, bt: sparse_value_and_grad(loss, p, b, bt, num_chunks))(params, jnp.asarray(boards), batch)
        for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(dense)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-5)  # summation order
        for key in dense_sums:
            np.testing.assert_allclose(float(sums[key]), float(dense_sums[key]), rtol=1e-4, atol=1e-5)
