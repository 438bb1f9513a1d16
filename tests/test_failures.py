"""The system's failures get one line that says what to change, and leave nothing behind that
blocks the corrected command: an --out that is a file, a folder that cannot be written, a full
disk, an integer that does not fit, a device out of memory.

The disk and the device cannot be filled on purpose here (and CI runs as root, whom file modes
do not stop), so those failures are raised where the system raises them: by the file operation
or the compiled chunk, with the errno or the XLA status the system gives.
"""

import errno
import pathlib

import jax
import pytest

from czjax import cli
from czjax.run import loop, scan

TRAIN = [
    "train",
    "--preset",
    "default",
    "--games-per-batch",
    "4",
    "--batches-per-chunk",
    "1",
    "--eval-games",
    "2",
    "--batches",
    "2",
]
SCAN = [
    "scan",
    "--preset",
    "default",
    "--games-per-batch",
    "4",
    "--batches-per-chunk",
    "1",
    "--eval-games",
    "2",
    "--batches",
    "2",
    "--grid",
    "learning_rate=0.001,0.01",
]


def error_lines(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return [line for line in err if not line.startswith(("usage:", " "))]  # argparse's usage, then its one error line


def assert_not_blocked(out):
    """The same command would run again without --overwrite: no run (or scan) left in ``out``."""
    loop.guard_fresh(out, [*loop.RUN_FILES, "scan.json"], overwrite=False)


def test_out_naming_a_file_or_a_folder_inside_one(tmp_path, capsys):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    for out in (afile, afile / "run"):
        assert cli.main([*TRAIN, "--out", str(out)]) == 2
        [line] = error_lines(capsys)
        assert f"{afile} is a file, not a folder: choose another --out" in line
        assert cli.main([*SCAN, "--out", str(out)]) == 2
        [line] = error_lines(capsys)
        assert "is a file, not a folder" in line
    assert afile.read_text() == "mine"


@pytest.mark.parametrize("code, fix", [(errno.EROFS, "read-only"), (errno.EACCES, "choose another --out")])
def test_a_folder_that_cannot_be_written(tmp_path, capsys, monkeypatch, code, fix):
    refused = tmp_path / "mounted"

    def mkdir(self, *args, **kwargs):
        raise OSError(code, __import__("os").strerror(code), str(self))

    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)
    assert cli.main([*TRAIN, "--out", str(refused / "run")]) == 1
    [*_, line] = error_lines(capsys)
    assert line.startswith("czjax: error: ") and fix in line and str(refused / "run") in line


def fail_chunk(error):
    def run_chunk_once(*args, **kwargs):
        raise error

    return run_chunk_once


OOM = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.20TiB.\nmore detail")
FULL = OSError(errno.ENOSPC, "No space left on device", "metrics.jsonl")


@pytest.mark.parametrize(
    "error, says",
    [
        (OOM, "out of memory (Out of memory while trying to allocate 1.20TiB.): play fewer games"),
        (FULL, "No space left on device (metrics.jsonl): free some space"),
    ],
)
def test_a_run_failing_before_its_first_checkpoint_leaves_nothing_behind(tmp_path, capsys, monkeypatch, error, says):
    monkeypatch.setattr(loop, "run_chunk_once", fail_chunk(error))
    out = tmp_path / "run"
    assert cli.main([*TRAIN, "--out", str(out)]) == 1
    lines = error_lines(capsys)
    assert len(lines) == 1 and says in lines[0], lines
    assert not out.exists()  # the folder it created is gone: the corrected command needs no --overwrite
    kept = tmp_path / "kept"  # an existing folder stays, emptied of the failed run's files
    kept.mkdir()
    (kept / "mine.txt").write_text("mine")
    assert cli.main([*TRAIN, "--out", str(kept)]) == 1
    assert sorted(p.name for p in kept.iterdir()) == [".lock", "mine.txt"]
    assert_not_blocked(kept)


def test_a_scan_failing_before_its_first_checkpoint_leaves_nothing_behind(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(scan, "run_chunk_once", fail_chunk(OOM))
    out = tmp_path / "scan"
    assert cli.main([*SCAN, "--out", str(out)]) == 1
    [*_, line] = error_lines(capsys)
    assert "out of memory" in line
    assert not out.exists()


def test_a_resumed_run_keeps_its_files_when_it_fails(tmp_path, capsys, monkeypatch):
    """Only a run with nothing saved is cleared: a resumed one keeps its checkpoint and rows."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(
        '{"config": {}, "hparams": {}, "run": {"seed": 0, "batches": 2, "time_budget_s": null}}'
    )
    (out / "checkpoint.msgpack").write_bytes(b"not really")
    discard = []
    with pytest.raises(OSError), loop.discarded_on_failure(out, loop.RUN_FILES, lambda: bool(discard)):
        raise FULL
    assert (out / "run.json").exists() and (out / "checkpoint.msgpack").exists()


@pytest.mark.parametrize("flag", ["--seed", "--games-per-batch", "--batches", "--eval-games"])
def test_an_integer_that_does_not_fit(tmp_path, capsys, flag):
    with pytest.raises(SystemExit) as stop:
        cli.main([*TRAIN, flag, str(2**40), "--out", str(tmp_path / "run")])
    assert stop.value.code == 2
    [line] = error_lines(capsys)
    assert f"{2**40} does not fit in a 32-bit integer" in line
    assert not (tmp_path / "run").exists()


def test_a_port_that_does_not_exist(capsys):
    with pytest.raises(SystemExit):
        cli.main(["serve", "random", "--port", "70000"])
    [line] = error_lines(capsys)
    assert "expected a port from 0 to 65535" in line


def test_outputs_are_checked_before_the_work(tmp_path, capsys):
    """A bad output path costs nothing: refused before the teacher plays or the puzzles are made."""
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    assert cli.main(["distill", "random", "--out", str(afile), "--games", "4"]) == 2
    out = capsys.readouterr()
    assert "plays" not in out.out + out.err and f"--out {afile}: {afile} is a file, not a folder" in out.err
    assert cli.main(["eval", "make-puzzles", "--out", str(afile / "puzzles.jsonl"), "--per-kind", "2"]) == 2
    out = capsys.readouterr()
    assert "generating" not in out.err and "is a file, not a folder" in out.err
    assert cli.main(["eval", "make-puzzles", "--out", str(tmp_path), "--per-kind", "2"]) == 2
    assert "is a folder: name the file to write" in capsys.readouterr().err
    assert cli.main([*SCAN, "--resume", "--out", str(tmp_path / "never")]) == 2
    out = capsys.readouterr()
    assert "scan of" not in out.out and "nothing to resume" in out.err and not (tmp_path / "never").exists()
