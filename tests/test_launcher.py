"""Sweeps beyond one machine with submitit's local executor (the SLURM executor takes the same
jobs): a scan as an array of shard jobs, one preempted mid-run and requeued by submitit, merges
into the one-machine scan's table value for value; a launched tune's workers share one study."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from czjax import cli
from czjax.jobs import folders, launch, scan, tune
from czjax.jobs.presets import get_preset
from czjax.jobs.spec import ScanSpec
from tests.test_scan import assert_rows_match

pytest.importorskip("submitit", reason="the launcher's tests need submitit (pip install 'czjax[cluster]')")

SMALL = ["--games-per-batch", "8", "--batches-per-chunk", "2", "--eval-games", "4", "--solver-eval", "off"]
GRID = ["entropy_bonus=0,0.1", "learning_rate=0.001"]
BATCHES = 160  # 80 chunks, each checkpointed: time for a preemption to land mid-run


def quiet(message):
    pass


def test_shards_split_settings_then_seeds():
    plan = launch.plan_shards(settings=5, seeds=3, shards=2)
    assert [(s.settings, s.seeds) for s in plan] == [((0, 2), (0, 3)), ((2, 5), (0, 3))]
    plan = launch.plan_shards(settings=2, seeds=4, shards=4)
    assert [(s.settings, s.seeds) for s in plan] == [
        ((0, 1), (0, 2)),
        ((0, 1), (2, 4)),
        ((1, 2), (0, 2)),
        ((1, 2), (2, 4)),
    ]
    assert len(launch.plan_shards(settings=1, seeds=2, shards=8)) == 2  # at most one a configuration
    for settings, seeds, shards in [(3, 2, 5), (7, 1, 3), (2, 5, 3)]:
        covered = sorted(
            (a, b)
            for s in launch.plan_shards(settings, seeds, shards)
            for a in range(*s.settings)
            for b in range(*s.seeds)
        )
        assert covered == [(a, b) for a in range(settings) for b in range(seeds)]  # every configuration once


def small_scan(out: Path, log=quiet) -> ScanSpec:
    preset = get_preset("ex2-entropy")
    config = preset.config.override(dict(games_per_batch=8, batches_per_chunk=2, eval_games=4, solver_eval="off"))
    settings = scan.grid_settings(scan.parse_grid(GRID))
    return ScanSpec(config, dict(preset.hparams), settings, [0, 1], out, BATCHES, log=log)


def test_a_launched_scan_preempted_and_requeued_merges_to_the_one_machine_scan(tmp_path, capsys):
    out = tmp_path / "launched"
    jobs = launch.launch(small_scan(out, log=print), launch.Launcher("local"), shards=2)  # logs in the jobs' output
    stored = json.loads((out / launch.SHARDS).read_text())
    assert [s["name"] for s in stored["shards"]] == ["shard-00", "shard-01"] and len(jobs) == 2
    shard = out / "shard-00"
    deadline = time.monotonic() + 300
    while not (shard / "checkpoint-group0.msgpack").exists():
        assert jobs[0].state not in ("FINISHED", "FAILED"), jobs[0].stderr()
        assert time.monotonic() < deadline, "the shard saved no chunk"
        time.sleep(0.02)
    # SLURM's signal before a preemption or the time limit, to the process training the shard
    # (the pid its folder's lock holds): submitit checkpoints the job and requeues it
    os.kill(int((shard / folders.LOCK).read_text()), signal.SIGUSR2)
    launch.wait(jobs, log=quiet)
    assert "Requeued" in jobs[0].stdout() and "resuming at batch" in jobs[0].stdout()  # from its checkpoint
    assert "Requeued" not in jobs[1].stdout()
    assert cli.main(["scan", "--merge", str(out)]) == 0
    assert "outputs:" in capsys.readouterr().out
    merged = scan.deterministic_rows(folders.read_metrics(out / folders.METRICS))
    alone = scan.deterministic_rows(scan.train_scan(small_scan(tmp_path / "one")).rows)
    assert merged.keys() == alone.keys() and len(merged) == 4 * BATCHES // 2
    for key in alone:  # every row of every configuration: the same games, losses to float32 rounding
        assert_rows_match(merged[key], alone[key], key)  # (a vmapped program of another width sums otherwise)
    scan.write_report(list(alone.values()), tmp_path / "one", ["entropy_bonus", "learning_rate"])
    table, table_alone = (json.loads((folder / "summary.json").read_text()) for folder in (out, tmp_path / "one"))
    assert [row["setting"] for row in table] == [row["setting"] for row in table_alone]
    for row, row_alone in zip(table, table_alone):
        assert row.keys() == row_alone.keys()
        for key in row:
            np.testing.assert_allclose(row[key], row_alone[key], rtol=1e-5, atol=1e-7, err_msg=key)
    capsys.readouterr()
    assert cli.main(["scan", "--merge", str(out)]) == 0  # merging again changes nothing
    assert scan.deterministic_rows(folders.read_metrics(out / folders.METRICS)) == merged


def test_merging_an_unfinished_launch_is_one_line(tmp_path, capsys):
    assert cli.main(["scan", "--merge", str(tmp_path)]) == 2
    assert "holds no launched scan" in capsys.readouterr().err


def test_launcher_options_without_a_launcher_are_one_line(tmp_path, capsys):
    assert cli.main(["scan", "--grid", *GRID, "--partition", "gpu", "--out", str(tmp_path / "x"), *SMALL]) == 2
    assert "go with --launcher" in capsys.readouterr().err
    assert cli.main(["scan", "--launcher", "local", "--partition", "gpu", "--out", str(tmp_path / "y"), *SMALL]) == 2
    assert "SLURM's" in capsys.readouterr().err


def test_a_launched_tune_shares_one_study_between_its_workers(tmp_path, capsys):
    pytest.importorskip("optuna")
    out = tmp_path / "tune"
    argv = ["tune", "--param", "entropy_bonus=0:0.2", "--trials", "4", "--batch", "1", "--batches", "4"]
    assert cli.main([*argv, *SMALL, "--out", str(out), "--launcher", "local", "--workers", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    trials = sorted(row["trial"] for row in report["trials"])
    assert len(trials) >= 4 and trials == list(range(len(trials)))  # each trial told once, none lost
    batches = [p.name for p in out.glob("batch-*")]
    assert len(batches) == len(trials)  # a batch of one each, run by one worker or the other
    assert (out / tune.TRIALS_TABLE).exists()


def test_a_campaign_step_launched_runs_in_calls_until_done(tmp_path, capsys):
    """Example 1 at 1% of its length with a time limit of one chunk a call: the launched job calls
    the step again while it says it is not done (exit 3), as after a requeue."""
    import campaign

    results, work = tmp_path / "results", tmp_path / "work"
    argv = ["--results", str(results), "--work", str(work), "run", "ex1-8seeds", "--max-seconds", "0.1"]
    assert campaign.main([*argv, "--scale", "0.01", "--launcher", "local"]) == 0
    assert "submitted as job" in capsys.readouterr().out
    summary = json.loads((campaign.results_folder(results, "ex1-8seeds") / "summary.json").read_text())
    assert summary["done"] and summary["calls"] == 2 and summary["batches_done"] == 40


def test_processes_sharing_a_folder_wait_their_turn_for_its_lock(tmp_path):
    """A tune's workers each hold the tune folder's lock a moment to open the study: one that
    finds it held waits (wait_s), where a run or a scan is refused at once."""
    import fcntl
    import threading

    tmp_path.joinpath(folders.LOCK).touch()
    other = open(tmp_path / folders.LOCK, "a+")  # another open file: as another process's lock
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with pytest.raises(ValueError, match="in use by another czjax tune"):
        with folders.locked(tmp_path, "tune"):
            pass
    threading.Timer(0.3, lambda: fcntl.flock(other, fcntl.LOCK_UN)).start()
    start = time.monotonic()
    with folders.locked(tmp_path, "tune", wait_s=10):
        assert time.monotonic() - start >= 0.25  # it waited for the other to let go
    other.close()
