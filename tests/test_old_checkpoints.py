"""Old checkpoints keep loading (issue 27): a run folder written by czjax before the package was
reshaped (tests/data/old-run: ex5-ppo over a one-block ResNet, 2 batches; run.json with the
settings as they were stored then) loads as a player and resumes under today's code. On the
platform it was made on, the resumed run is bit for bit the old code's run of 4 batches
(expected.json); anywhere, it continues from the stored batch with the stored settings.
A checkpoint stores no module path (msgpack arrays and JSON), so there is nothing to map."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from czjax import agents, cli
from czjax.run import loop
from tests.test_unchanged import assert_metrics_close, platform

OLD_RUN = Path(__file__).parent / "data" / "old-run"
# expected.json was made with both cores of the 2-core development CPU: XLA's CPU backend splits
# a reduction by its threads, so with another number of cores the last bits of PPO's KL differ
RECORDED_CORES = 2


def test_an_old_run_loads_and_resumes_to_the_old_codes_result(tmp_path, capsys):
    expected = json.loads((OLD_RUN / "expected.json").read_text())
    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run, ignore=shutil.ignore_patterns("expected.json"))
    agent = agents.load_agent(str(run))
    assert agent.model_name == "resnet:blocks=1,channels=8" and agent.has_value
    stored = json.loads((run / "run.json").read_text())["config"]
    assert stored["algorithm"] == "ppo" and "ppo" in stored  # the settings as they were stored then

    assert cli.main(["train", "--resume", "--out", str(run), "--batches", "4"]) == 0
    rows = [loop.deterministic(r) for r in loop.read_metrics(run / loop.METRICS)]
    assert [r["batches"] for r in rows] == [1, 2, 3, 4]
    old = [loop.deterministic(r) for r in loop.read_metrics(OLD_RUN / loop.METRICS)]
    assert rows[:2] == old  # the stored rows are kept as they were
    if expected["platform"] == platform():  # where it was made: the old code's own 4 batches
        if len(os.sched_getaffinity(0)) == RECORDED_CORES:
            assert rows == expected["rows_after_4_batches"]
        else:
            assert_metrics_close(rows, expected["rows_after_4_batches"], "the old run")
    assert json.loads((run / "run.json").read_text())["config"]["ppo"] == stored["ppo"]
    assert "done: 4 batches" in capsys.readouterr().out
