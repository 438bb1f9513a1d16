"""Old checkpoints keep loading: a run folder written by czjax before the package was
reshaped (tests/data/old-run: ex5-ppo over a one-block ResNet, 2 batches; run.json with the
settings as they were stored then) loads as a player and resumes under today's code to the old
code's own result (expected.json: per machine, the old code's resume of that folder to 4 batches),
compared as tests/records.py says: bit for bit on a recorded machine, at the record's XLA_FLAGS,
and within float noise of the nearest record elsewhere. A checkpoint stores no module path
(msgpack arrays and JSON), so there is nothing to map."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from czjax import cli
from czjax.jobs import loop
from czjax.players.loading import load_agent
from tests import records

OLD_RUN = Path(__file__).parent / "data" / "old-run"


def copy_of_old_run(folder: Path) -> Path:
    shutil.copytree(OLD_RUN, folder, ignore=shutil.ignore_patterns("expected.json"))
    return folder


def test_an_old_run_loads_as_a_player(tmp_path):
    run = copy_of_old_run(tmp_path / "run")
    agent = load_agent(str(run))
    assert agent.model_name == "resnet:blocks=1,channels=8" and agent.has_value
    stored = json.loads((run / "run.json").read_text())["config"]
    assert stored["algorithm"] == "ppo" and "ppo" in stored  # the settings as they were stored then


def test_an_old_run_resumes_to_the_old_codes_result(tmp_path, recorded, capsys):
    expected = json.loads((OLD_RUN / "expected.json").read_text())["records"]
    choice = records.nearest(expected, records.platform())
    run = copy_of_old_run(tmp_path / "run")
    stored = json.loads((run / "run.json").read_text())["config"]
    resume = ["train", "--resume", "--out", str(run), "--batches", "4"]
    if choice is None:  # no record of this backend: it resumes, in this process
        assert cli.main(resume) == 0
        said = capsys.readouterr().out
    else:  # at the record's XLA_FLAGS, whatever the suite compiles with
        said = records.run_at_flags("czjax", resume, choice.flags)
    assert "done: 4 batches" in said
    rows = [loop.deterministic(r) for r in loop.read_metrics(run / loop.METRICS)]
    assert [r["batches"] for r in rows] == [1, 2, 3, 4]
    old = [loop.deterministic(r) for r in loop.read_metrics(OLD_RUN / loop.METRICS)]
    assert rows[:2] == old  # the stored rows are kept as they were
    assert json.loads((run / "run.json").read_text())["config"]["ppo"] == stored["ppo"]
    if choice is None:
        recorded.said("old run resumed", "no record for this backend: resumed to 4 batches, not compared")
    elif choice.exact:
        assert rows == choice.record["rows_after_4_batches"]
        recorded.said("old run resumed", choice.describe())
    else:
        records.assert_metrics_close(rows, choice.record["rows_after_4_batches"], "the old run")
        recorded.said("old run resumed", choice.describe())
