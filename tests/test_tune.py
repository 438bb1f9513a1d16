"""`czjax tune`: trials asked in batches, each batch one compiled scan; a killed tune resumes with no
trial lost or run twice, to the uninterrupted tune's table; the best trial's printed command
trains the same metric; bad input is one line."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from czjax import cli
from czjax.jobs import folders, loop, tune

pytest.importorskip(
    "optuna", reason="czjax tune's tests need Optuna (pip install 'czjax[tune]'; the test extras have it)"
)

SMALL = ["--games-per-batch", "8", "--batches-per-chunk", "2", "--eval-games", "4", "--solver-eval", "off"]
TUNE = [
    "tune",
    "--preset",
    "ex2-entropy",
    "--param",
    "entropy_bonus=0:0.2",
    "--param",
    "learning_rate=1e-4:1e-2:log",
    "--trials",
    "8",
    "--batch",
    "4",
    "--batches",
    "4",
    "--objective",
    "entropy:max",
    "--seed",
    "5",
    *SMALL,
]
REPO = Path(cli.__file__).parents[2]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted tune of 8 trials in 2 batches: its folder and its JSON report."""
    out = tmp_path_factory.mktemp("tune") / "straight"
    report = run_cli([*TUNE, "--out", str(out), "--json"])
    return out, report


def run_cli(argv: list[str]) -> dict:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert cli.main(argv) == 0
    return json.loads(buffer.getvalue())


def study_trials(out: Path):
    optuna = tune.import_optuna()
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(out / tune.STUDY)))
    return optuna.load_study(study_name=tune.STUDY_NAME, storage=storage).get_trials()


def test_a_tune_runs_its_trials_in_batches_of_one_scan(straight):
    out, report = straight
    trials = study_trials(out)
    assert [t.number for t in trials] == list(range(8)) and all(t.state.name == "COMPLETE" for t in trials)
    batches = sorted(p.name for p in out.glob("batch-*"))
    assert batches == ["batch-0000", "batch-0004"]
    for name in batches:  # each batch: one scan of its 4 trials, one row per trial per chunk
        rows = folders.read_metrics(out / name / folders.METRICS)
        assert sorted((r["config"], r["batches"]) for r in rows) == [(c, b) for c in range(4) for b in (2, 4)]
        listed = json.loads((out / name / tune.BATCH_TRIALS).read_text())
        for r in rows:  # the scan trained each trial's own values
            assert r["entropy_bonus"] == listed[r["setting"]]["entropy_bonus"]
    values = [row["entropy"] for row in report["trials"]]
    assert values == sorted(values, reverse=True) and len(set(values)) > 1  # best first; the trials differ
    for path in report["outputs"]:
        assert Path(path).exists()
    assert {tune.TRIALS_TABLE, tune.BEST, *tune.FIGURES} <= {Path(p).name for p in report["outputs"]}


def test_the_best_trials_command_trains_the_same_metric(straight, tmp_path):
    out, report = straight
    best = report["trials"][0]
    words = shlex.split(report["best_command"])
    assert words[:2] == ["czjax", "train"]
    assert cli.main([*words[1:], "--out", str(tmp_path / "best")]) == 0
    rows = [dict(r, seed=0) for r in loop.read_metrics(tmp_path / "best" / loop.METRICS)]
    (again,) = tune.Objective("entropy").per_seed(rows)
    np.testing.assert_allclose(again, best["entropy"], rtol=1e-4)  # a run alone against the vmapped scan


def test_a_killed_tune_resumes_with_no_trial_lost_or_run_twice(straight, tmp_path):
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "czjax.cli", *TUNE, "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:  # killed once the second batch's trials are asked and written, before they are told
        deadline = time.monotonic() + 300
        while not (out / "batch-0004" / tune.BATCH_TRIALS).exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the tune never reached its second batch"
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL: nothing is saved on the way out
        proc.wait()
    assert [t.state.name for t in study_trials(out)] == ["COMPLETE"] * 4 + ["RUNNING"] * 4
    report = run_cli([*TUNE, "--out", str(out), "--resume", "--json"])
    trials = study_trials(out)
    assert [t.number for t in trials] == list(range(8)) and all(t.state.name == "COMPLETE" for t in trials)
    rows = folders.read_metrics(out / "batch-0004" / folders.METRICS)
    assert sorted((r["config"], r["batches"]) for r in rows) == [(c, b) for c in range(4) for b in (2, 4)]
    assert report["trials"] == straight[1]["trials"]  # the uninterrupted tune's table, value for value


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--param", "gamma=0.9:1"], "cannot tune 'gamma': not a traced hyperparameter"),
        (["--param", "entropy_bonus=0.1"], "expected NAME=LOW:HIGH"),
        (["--param", "entropy_bonus=0.2:0.1"], "LOW must be below HIGH"),
        (["--param", "learning_rate=0:1:log"], "a log range must start above 0"),
        (["--param", "entropy_bonus=0:1", "--objective", "elo"], "cannot optimise 'elo': a run of these settings logs"),
        (["--param", "entropy_bonus=0:1", "--objective", "entropy:up"], "expected METRIC, METRIC:max"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    assert cli.main(["tune", *flags, "--out", str(out), *SMALL]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_folder_that_holds_a_tune_is_never_overwritten(straight, capsys):
    out, _ = straight
    assert cli.main([*TUNE, "--out", str(out)]) == 2
    assert "already holds a run (study.journal)" in capsys.readouterr().err


def test_a_tune_stopped_between_batches_says_so(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the next batch's trials are asked (no scan running to report it) stops the
    tune as a stop, not as a finish: exit 130 and the line to continue."""
    asked = tune.ask_batch

    def interrupted_second_ask(spec, study, optuna, count):
        if (spec.out_dir / "batch-0000" / tune.BATCH_TRIALS).exists():
            raise KeyboardInterrupt
        return asked(spec, study, optuna, count)

    monkeypatch.setattr(tune, "ask_batch", interrupted_second_ask)
    assert cli.main([*TUNE, "--out", str(tmp_path / "stopped")]) == 130
    assert "continue with: czjax tune --resume" in capsys.readouterr().err


def test_a_resumed_tune_must_keep_its_settings(straight, capsys):
    out, _ = straight
    other = [
        ("16" if word == "8" and previous == "--games-per-batch" else word) for previous, word in zip(["", *TUNE], TUNE)
    ]
    assert cli.main([*other, "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "must use the settings of the tune in the folder: config.games_per_batch was 8, now 16" in err
    assert len(err.strip().splitlines()) == 1
