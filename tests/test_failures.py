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
from czjax.jobs import folders, loop, scan

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
    # a usage error: its one line and where to read more ("see czjax train --help"), no usage block
    assert not any(line.startswith("usage:") for line in err)
    return [line for line in err if not line.startswith("see czjax")]


def assert_not_blocked(out):
    """The same command would run again without --overwrite: no run (or scan) left in ``out``."""
    folders.guard_fresh(out, [*folders.RUN_FILES, folders.SCAN], overwrite=False)


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
    real_mkdir = pathlib.Path.mkdir

    def mkdir(self, *args, **kwargs):  # refused under the mount only (JAX's compilation cache makes folders too)
        if self == refused or refused in self.parents:
            raise OSError(code, __import__("os").strerror(code), str(self))
        return real_mkdir(self, *args, **kwargs)

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
    with pytest.raises(OSError), folders.discarded_on_failure(out, folders.RUN_FILES, lambda: bool(discard)):
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


@pytest.mark.parametrize(
    "command",
    [
        ["eval", "accuracy", "mcts:sims=3000000000:czjax"],
        ["tournament", "random", "playouts:width=3000000000:random", "--games", "2"],
        ["train", "--preset", "gumbel-az", "--search", "gumbel:sims=3000000000"],
    ],
)
def test_a_search_size_beyond_32_bits(tmp_path, capsys, command):
    """A tree of sims + 1 nodes is indexed by the device's 32-bit integers: one line naming the
    option, before anything is loaded or written (not JAX's OverflowError from inside the search)."""
    out = tmp_path / "run"
    assert cli.main([*command, *(["--out", str(out)] if command[0] == "train" else [])]) == 2
    [line] = error_lines(capsys)
    assert line.startswith("czjax: error: ") and "=3,000,000,000 does not fit" in line and "32-bit" in line
    assert not out.exists()


def test_resume_and_overwrite_contradict(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main([*TRAIN, "--out", str(out)]) == 0
    saved = (out / "checkpoint.msgpack").read_bytes(), (out / "metrics.jsonl").read_text()
    capsys.readouterr()
    for command in (["train", "--resume", "--overwrite", "--out", str(out)], [*SCAN, "--resume", "--overwrite"]):
        assert cli.main([*command, *(["--out", str(tmp_path / "scan")] if command[0] == "scan" else [])]) == 2
        [line] = error_lines(capsys)
        assert "--resume" in line and "--overwrite" in line and "not both" in line
    assert ((out / "checkpoint.msgpack").read_bytes(), (out / "metrics.jsonl").read_text()) == saved
    assert not (tmp_path / "scan").exists()


def test_a_time_budget_of_zero_is_refused(tmp_path, capsys):
    for budget in ("0", "-1"):
        with pytest.raises(SystemExit) as stop:
            cli.main([*TRAIN[:-2], "--time-budget", budget, "--out", str(tmp_path / "run")])
        assert stop.value.code == 2
        [line] = error_lines(capsys)
        assert "--time-budget" in line and f"got {budget}" in line
    assert not (tmp_path / "run").exists()


def test_a_stop_says_on_stderr_how_to_continue_and_lists_only_written_files(tmp_path, capsys, monkeypatch):
    """Ctrl-C during the first chunk: the step-0 state is saved, no metrics row or dashboard exists
    yet, and the lines to read after a stop are on stderr (stdout may be a pipe into `head`)."""

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "run_chunk_once", ctrl_c)
    out = tmp_path / "run"
    assert cli.main([*TRAIN, "--out", str(out)]) == 130
    printed = capsys.readouterr()
    assert "stopped: 0 batches" in printed.out and "nan" not in printed.out
    [outputs] = [line for line in printed.out.splitlines() if line.startswith("outputs: ")]
    listed = outputs.removeprefix("outputs: ").split(", ")
    assert sorted(listed) == sorted(str(p) for p in out.iterdir() if not p.name.startswith("."))
    assert not (out / "metrics.jsonl").exists() and not (out / "dashboard.png").exists()
    assert "interrupt: saved the last completed chunk (batch 0)" in printed.err
    assert f"continue with: czjax train --resume --out {out}" in printed.err
    assert "saved the last" not in printed.out and "continue with" not in printed.out


def test_eval_accuracy_refuses_a_finished_game_and_a_file_that_is_not_text(tmp_path, capsys):
    good = '{"moves": "4", "scores": [0,0,0,0,0,0,0]}'
    positions = tmp_path / "positions.jsonl"
    positions.write_text(good + "\n" + '{"moves": "1212121", "scores": [0,0,0,0,0,0,0]}\n')  # X has four in column 1
    assert cli.main(["eval", "accuracy", "random", "--positions", str(positions)]) == 2
    [line] = error_lines(capsys)
    assert f"{positions}:2: the game is already over" in line
    binary = tmp_path / "positions.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert cli.main(["eval", "accuracy", "random", "--positions", str(binary)]) == 2
    [line] = error_lines(capsys)
    assert str(binary) in line and "not a text file" in line
    gz = tmp_path / "positions.jsonl.gz"
    gz.write_bytes(b"not gzip at all")
    assert cli.main(["eval", "accuracy", "random", "--positions", str(gz)]) == 2
    [line] = error_lines(capsys)
    assert str(gz) in line and "gzip" in line


def test_a_scan_stops_as_a_run_does(tmp_path, capsys, monkeypatch):
    """Ctrl-C in a scan: the same lines on stderr as a run's (what was saved, how to continue) and
    the same exit status; its scan.json stays, for --resume."""

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(scan, "run_chunk_once", ctrl_c)
    out = tmp_path / "scan"
    assert cli.main([*SCAN, "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "interrupt: saved the last completed chunk (group 1/1, batch 0)" in err and "continue with: " in err
    assert (out / "scan.json").exists()
