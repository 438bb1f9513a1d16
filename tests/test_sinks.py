"""TensorBoard and Weights & Biases get the rows metrics.jsonl gets: read back from their own
files with readers written here (the TFRecord framing of TensorBoard's event files, the
LevelDB-log framing of W&B's offline ``.wandb`` file), never through the writers, and no
network (W&B offline)."""

import json
import struct
import sys
from pathlib import Path

import pytest

from czjax import cli

TINY = [
    "--preset",
    "default",
    "--games-per-batch",
    "4",
    "--batches-per-chunk",
    "1",
    "--eval-games",
    "2",
    "--batches",
    "3",
]


def tfrecords(path: Path):
    """The records of a TFRecord file: u64 length, u32 crc, data, u32 crc."""
    data, pos = path.read_bytes(), 0
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos : pos + 8])
        yield data[pos + 12 : pos + 12 + length]
        pos += 12 + length + 4


def tensorboard_scalars(folder: Path) -> dict[tuple[str, int], float]:
    """What TensorBoard shows: the files in name order, a session's start (SessionLog.START) at
    step T hiding what earlier files logged at T and after."""
    from tensorboardX.proto.event_pb2 import Event, SessionLog

    found = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for record in tfrecords(path):
            event = Event.FromString(record)
            if event.HasField("session_log") and event.session_log.status == SessionLog.START:
                found = {(tag, step): v for (tag, step), v in found.items() if step < event.step}
            for value in event.summary.value:
                found[(value.tag, event.step)] = value.simple_value
    return found


def logged_metrics(row: dict) -> dict:
    return {
        k: v
        for k, v in row.items()
        if k not in ("batches", "config", "setting", "seed") and isinstance(v, (int, float))
    }


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_same(rows: list[dict], scalars: dict):
    expected = {(k, r["batches"]): float(v) for r in rows for k, v in logged_metrics(r).items()}
    assert set(scalars) == set(expected)
    for key, value in expected.items():
        assert scalars[key] == pytest.approx(value, rel=1e-6, abs=1e-6, nan_ok=True)  # float32 in the event file


def test_tensorboard_gets_the_rows_of_each_scan_configuration(tmp_path):
    assert (
        cli.main(
            [
                "scan",
                *TINY,
                "--grid",
                "learning_rate=0.001,0.01",
                "--out",
                str(tmp_path / "scan"),
                "--tensorboard",
                str(tmp_path / "tb-scan"),
            ]
        )
        == 0
    )
    rows = read_rows(tmp_path / "scan" / "metrics.jsonl")
    configs = sorted({r["config"] for r in rows})
    assert sorted(p.name for p in (tmp_path / "tb-scan").iterdir()) == [f"config-{c:03d}" for c in configs]
    for c in configs:
        assert_same(
            [r for r in rows if r["config"] == c], tensorboard_scalars(tmp_path / "tb-scan" / f"config-{c:03d}")
        )


def test_tensorboard_shows_a_resumed_run_once(tmp_path):
    """A run resumed from its checkpoint at batch 1 logs batch 2 again (and is stopped again):
    batch 3 of the first session must be gone, batch 2 the second session's."""
    from czjax.jobs.sinks import TensorBoardSink

    first, second = TensorBoardSink(tmp_path), TensorBoardSink(tmp_path)
    for batches in (1, 2, 3):
        first.log({"batches": batches, "win_rate": batches / 10})
    first.close()
    second.log({"batches": 2, "win_rate": 0.5})
    second.close()
    assert tensorboard_scalars(tmp_path) == pytest.approx({("win_rate", 1): 0.1, ("win_rate", 2): 0.5})


def wandb_records(path: Path):
    """The records of a W&B ``.wandb`` file: a 7-byte header, then LevelDB log blocks of 32 KiB,
    each record a 7-byte header (crc, u16 length, type: 1 whole, 2 first, 3 middle, 4 last)."""
    data, pos, pending = path.read_bytes(), 7, b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            yield chunk
        elif kind in (2, 3):
            pending = (pending if kind == 3 else b"") + chunk
        elif kind == 4:
            yield pending + chunk


def wandb_history(out: Path) -> dict[str, list[dict]]:
    """The history rows (W&B's own ``_`` keys left out) of each offline W&B run under the run
    folder ``out``, by run id, its sessions in order. W&B's service process writes the ``.wandb``
    files after ``run.finish()`` returns: it is shut down first (as a CLI's exit does), or a busy
    machine reads the files too early."""
    import wandb
    from wandb.proto import wandb_internal_pb2

    wandb.teardown()
    history: dict[str, list[dict]] = {}

    # one folder per session, offline-run-DATE_TIME-ID ("-1" added for a second session in the
    # same second), each holding run-ID.wandb: sorted by time, then that number
    def session_order(path: Path) -> tuple[str, int]:
        _, _, when, _, *again = path.parent.name.split("-")
        return when, int(again[0]) if again else 0

    for path in sorted(out.glob("wandb/offline-run-*/run-*.wandb"), key=session_order):
        rows = history.setdefault(path.stem.removeprefix("run-"), [])
        for data in wandb_records(path):
            record = wandb_internal_pb2.Record.FromString(data)
            if record.WhichOneof("record_type") == "history":
                items = {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item
                }
                rows.append({k: v for k, v in items.items() if not k.startswith("_")})
    return history


def test_a_run_logs_its_rows_to_tensorboard_and_to_wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    assert (
        cli.main(["train", *TINY, "--out", str(out), "--wandb", "czjax-test", "--tensorboard", str(tmp_path / "tb")])
        == 0
    )
    assert_same(read_rows(out / "metrics.jsonl"), tensorboard_scalars(tmp_path / "tb"))
    [history] = wandb_history(out).values()
    rows = read_rows(out / "metrics.jsonl")
    assert len(history) == len(rows)
    for logged, row in zip(history, rows):
        assert logged["batches"] == row["batches"]
        for key, value in logged_metrics(row).items():
            assert logged[key] == pytest.approx(value, nan_ok=True)


def test_a_missing_package_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # as if it were not installed
    assert cli.main(["train", *TINY, "--out", str(tmp_path / "run"), "--tensorboard", str(tmp_path / "tb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["czjax: error: --tensorboard needs the tensorboardX package: pip install 'czjax[tensorboard]'"]
    assert not (tmp_path / "run" / "run.json").exists()


def test_wandb_without_a_login_or_offline_mode_is_one_line(tmp_path):
    """No API key anywhere wandb looks (environment, ~/.netrc, its settings) and not offline: one
    line saying what to do, before the run's folder exists (a fresh process, as a user runs it:
    wandb reads its settings once per process)."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), NETRC=str(tmp_path / "no-netrc"))
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "czjax", "train", *TINY, "--out", str(out), "--wandb", "czjax-test"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("czjax: error: --wandb needs a W&B login") and "WANDB_MODE=offline" in line
    assert not out.exists() and proc.stdout == ""  # refused before the header: nothing written, nothing trained


def test_a_refused_run_opens_no_wandb_run(tmp_path, monkeypatch, capsys):
    """Refused once the run opens (its starting weights are missing): no W&B run, no folder left."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    assert cli.main(["train", *TINY, "--out", str(out), "--wandb", "czjax-test", "--init-from", "none.pth"]) == 2
    assert "no file at none.pth" in capsys.readouterr().err
    assert not out.exists()


def test_a_resumed_run_logs_to_its_own_wandb_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    assert cli.main(["train", *TINY, "--out", str(out), "--wandb", "czjax-test"]) == 0
    [first] = wandb_history(out)
    assert cli.main(["train", "--resume", "--out", str(out), "--batches", "5", "--wandb", "czjax-test"]) == 0
    history = wandb_history(out)
    assert list(history) == [first]  # the same W&B run, continued: batches 1-3, then 4-5
    assert [row["batches"] for row in history[first]] == [1, 2, 3, 4, 5]
    assert json.loads((out / "wandb-run.json").read_text()) == {"project": "czjax-test", "id": first}
    assert cli.main(["train", *TINY, "--out", str(out), "--overwrite", "--wandb", "czjax-test"]) == 0
    history = wandb_history(out)
    [again] = set(history) - {first}  # a run started again is a new W&B run
    assert [row["batches"] for row in history[again]] == [1, 2, 3]
