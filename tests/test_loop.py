"""The host-side training loop: run folders, checkpoints, resume after Ctrl-C and kill -9, progress, `czjax train`."""

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
import numpy as np
import pytest

from czjax import cli
from czjax.jobs import loop
from czjax.learn.settings import HParams, PromotionSettings, TrainConfig
from czjax.learn.trainer import make_trainer
from czjax.util import checkpoint, progress
from tests import agreement
from tests.test_train import OLD_STORED_CONFIG

# One small config shared by every test here (and by test_train.py), so the chunk compiles once.
CONFIG = TrainConfig(
    model="mlp",
    games_per_batch=8,
    opponent="self",
    promotion=PromotionSettings(every_games=16, window_games=16),
    eval_games=4,
    batches_per_chunk=2,
)
HP = HParams.create(learning_rate=1e-3, entropy_bonus=0.05, value_weight=0.0, discount=0.9)


def run(tmp_path, name, **kw):
    return loop.run_training(CONFIG, HP, tmp_path / name, seed=3, log=lambda m: None, **kw)


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
    for field in (
        "params",
        "opt_state",
        "opponent_params",
        "step",
        "games",
        "window_wins",
        "window_games",
        "promotions",
    ):
        assert loop.params_equal(getattr(a, field), getattr(b, field)), field
    np.testing.assert_array_equal(jax.random.key_data(a.key), jax.random.key_data(b.key))


def test_interrupt_saves_the_last_chunk_and_resumes_identically(tmp_path, uninterrupted):
    def interrupt_after_first_chunk(message):
        if message.startswith("batch 2"):
            raise KeyboardInterrupt

    summary = loop.run_training(CONFIG, HP, tmp_path / "run", seed=3, batches=8, log=interrupt_after_first_chunk)
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
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.01)
    fetch = jax.device_get
    monkeypatch.setattr(jax, "device_get", lambda x: (time.sleep(0.1), fetch(x))[1])  # every chunk takes 0.1 s more
    messages = []
    loop.run_training(CONFIG, HP, tmp_path / "run", seed=3, batches=4, log=messages.append)
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
        assert loop.params_equal(state.params, trained.params) and loop.params_equal(
            state.opponent_params, trained.params
        )
        assert loop.params_equal(state.opt_state, fresh.opt_state)  # zero moments, count 0
        np.testing.assert_array_equal(
            jax.random.key_data(state.key), jax.random.key_data(fresh.key)
        )  # the seed's games
        meta, _ = checkpoint.read_meta(tmp_path / "from" / loop.CHECKPOINT)
        assert meta["extra"]["seed"] == 3 and meta["extra"]["init_from"] == str(spec)
        assert json.loads((tmp_path / "from" / "run.json").read_text())["run"]["init_from"] == str(spec)
    # another model's checkpoint, or no checkpoint: one-line errors through the CLI
    for args, message in (
        (["--model", "mlp3", "--init-from", str(uninterrupted)], "holds weights of model 'mlp', not 'mlp3'"),
        (["--init-from", str(tmp_path / "missing")], "no checkpoint at"),
        (["--init-from", str(tmp_path / "from" / "run.json")], "damaged or not a czjax checkpoint"),
    ):
        assert cli.main(["train", "--out", str(tmp_path / "new"), "--batches", "1", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("czjax: error:") and message in err and len(err.splitlines()) == 1


def test_resume_of_a_checkpoint_without_init_field(tmp_path, uninterrupted):
    """A checkpoint written before ``init`` existed (and with flat settings) resumes, and its run
    keeps saying it started from Flax's initialisation."""
    state, meta = checkpoint.load(uninterrupted / loop.CHECKPOINT, make_trainer(CONFIG).init(0), CONFIG.model)
    checkpoint.save(tmp_path / loop.CHECKPOINT, state, OLD_STORED_CONFIG, meta["hparams"], {"seed": 3})
    shutil.copy(uninterrupted / loop.METRICS, tmp_path / loop.METRICS)
    # one chunk more (at its target, batch 8, a resumed run says it has finished and writes nothing)
    assert cli.main(["train", "--resume", "--out", str(tmp_path), "--batches", "10"]) == 0
    meta, _ = checkpoint.read_meta(tmp_path / loop.CHECKPOINT)
    assert (
        meta["config"]
        == CONFIG.override(
            {"init": "flax", "ppo.kl_stop": "before-step", "promotion.draws_count_half": False}
        ).to_dict()
    )
    assert json.loads((tmp_path / "run.json").read_text())["config"]["init"] == "flax"


CLI_ARGS = [
    "--preset",
    "ex2-entropy",
    "--games-per-batch",
    "8",
    "--eval-every",
    "2",
    "--eval-games",
    "4",
    "--learning-rate",
    "1e-3",
    "--entropy-bonus",
    "0.05",
    "--value-weight",
    "0",
    "--seed",
    "3",
]


CLI_CONFIG = cli.train_spec(cli.build_parser().parse_args(["train", *CLI_ARGS])).config


def cli_train(tmp_path, *extra):
    return cli.main(["train", *CLI_ARGS, "--out", str(tmp_path), *extra])


def test_cli_train_runs_resumes_and_reports(tmp_path, capsys):
    assert cli_train(tmp_path, "--batches", "2") == 0
    out = capsys.readouterr().out
    assert "outputs:" in out and "dashboard.png" in out and (tmp_path / "dashboard.png").stat().st_size > 1000
    assert cli.main(["train", "--resume", "--out", str(tmp_path), "--batches", "4"]) == 0
    rows = loop.read_metrics(tmp_path / loop.METRICS)
    assert [r["batches"] for r in rows] == [2, 4]
    assert {
        "win_rate",
        "eval_win_rate",
        "entropy",
        "policy_loss",
        "value_loss",
        "returns_std",
        "advantage_std",
        "game_length",
        "games",
        "promotions",
        "games_per_s",
    } <= set(rows[-1])


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


def printed_resume_command(err: str) -> list[str]:
    line = [line for line in err.splitlines() if line.startswith("continue with: ")][-1]
    command = shlex.split(line.removeprefix("continue with: "))
    assert command[0] == "czjax"
    return command[1:]


def test_ctrl_c_then_the_printed_command_equals_an_uninterrupted_run(tmp_path, capsys, monkeypatch):
    assert cli_train(tmp_path / "straight", "--batches", "8") == 0
    progress = loop.format_progress

    def ctrl_c_after_the_first_chunk(row, *args):
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends; Python raises KeyboardInterrupt from it
        return progress(row, *args)

    monkeypatch.setattr(loop, "format_progress", ctrl_c_after_the_first_chunk)
    # Python's own Ctrl-C handler, whatever this process inherited (a job started with `&` by a
    # non-interactive shell ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    capsys.readouterr()
    try:
        assert cli_train(tmp_path / "stopped", "--batches", "8") == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    printed = capsys.readouterr()
    assert "stopped: 2 batches" in printed.out
    monkeypatch.setattr(loop, "format_progress", progress)
    assert cli.main(printed_resume_command(printed.err)) == 0
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
    command = [
        sys.executable,
        "-m",
        "czjax.cli",
        "train",
        *CLI_ARGS,
        "--out",
        str(out),
        "--batches",
        "1000000",
        "--checkpoint-every",
        "1000000",
        "--checkpoint-seconds",
        "0.2",
    ]
    env = dict(os.environ, PYTHONPATH=str(Path(cli.__file__).parents[2]))  # the repository (czjax/cli/__init__.py)
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
    if agreement.on_cpu():
        assert loop.params_equal(a.params, b.params) and loop.params_equal(a.opt_state, b.opt_state)
    else:  # the first batches were compiled and run in the killed process: another program
        assert agreement.took_the_same_steps(a.params, b.params, 1e-3, int(a.step))


def test_the_readmes_snippet_run_again_says_the_run_is_finished(tmp_path, capsys, monkeypatch):
    """README.md's ``run_training(..., resume=True)`` a second time: the command line's words for
    a finished run, in the API's spelling, and nothing trained or written."""
    import czjax

    monkeypatch.chdir(tmp_path)
    first = czjax.run_training(CONFIG, HP, "runs/ex2", seed=0, batches=2, resume=True)
    saved = (tmp_path / "runs/ex2" / loop.CHECKPOINT).read_bytes()
    capsys.readouterr()
    again = czjax.run_training(CONFIG, HP, "runs/ex2", seed=0, batches=2, resume=True)
    assert capsys.readouterr().out == (
        "runs/ex2 holds a finished run: its target (until 2 batches) is reached, nothing to continue. Train it "
        "further with run_training(..., resume=True) and a larger batches or time_budget_s, or start it again "
        "with overwrite=True\n"
    )
    assert (tmp_path / "runs/ex2" / loop.CHECKPOINT).read_bytes() == saved
    assert {k: again[k] for k in ("batches", "games", "last", "interrupted")} == {
        k: first[k] for k in ("batches", "games", "last", "interrupted")
    }


def test_resume_before_the_first_checkpoint_and_with_a_stored_time_budget(tmp_path, capsys):
    assert cli_train(tmp_path / "a", "--batches", "4") == 0
    (tmp_path / "a" / loop.CHECKPOINT).unlink()  # as if killed before its first checkpoint: run.json is there
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "a")]) == 0
    assert "no checkpoint yet: starting its run from the beginning" in capsys.readouterr().out
    assert [r["batches"] for r in loop.read_metrics(tmp_path / "a" / loop.METRICS)] == [2, 4]
    # a stored time budget, spent in the first chunk: resuming says the run has finished and trains nothing
    assert cli_train(tmp_path / "b", "--time-budget", "0.001") == 0
    saved = (tmp_path / "b" / loop.CHECKPOINT).read_bytes()
    capsys.readouterr()
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "holds a finished run: its target (for 0.001 s of training) is reached" in out and "--overwrite" in out
    assert (tmp_path / "b" / loop.CHECKPOINT).read_bytes() == saved
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "b"), "--batches", "4"]) == 0  # a new target
    assert [r["batches"] for r in loop.read_metrics(tmp_path / "b" / loop.METRICS)] == [2, 4]
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "b"), "--seed", "0"]) == 2
    assert "drop --seed" in capsys.readouterr().err


def test_the_dashboard_leaves_out_panels_that_do_not_apply():
    """No value loss without a value head (the metric is NaN), no promotions against a fixed
    opponent (the count stays 0): hand-made rows, as a REINFORCE run against RandomPunisher logs."""
    from czjax.jobs import plots

    rows = [
        {
            "games": 50 * i,
            "win_rate": 0.5,
            "eval_win_rate": 0.1,
            "entropy": 1.9,
            "returns_std": 0.9,
            "game_length": 20.0,
            "policy_loss": 0.1,
            "value_loss": float("nan"),
            "advantage_std": float("nan"),
            "promotions": 0,
        }
        for i in range(1, 4)
    ]
    fixed = [panel for panel, _ in plots.dashboard_panels(rows, promotes=False)]
    assert fixed == ["win rate", "entropy", "returns std", "game length", "policy loss"]
    assert [panel for panel, _ in plots.dashboard_panels(rows, promotes=True)][-1] == "checkpoint promotions"
