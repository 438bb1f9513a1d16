"""A run is never lost to a signal, a broken pipe or a second process: real processes."""

import os
import signal
import subprocess
import sys
import time

from czjax.util import checkpoint

TRAIN = [
    sys.executable,
    "-m",
    "czjax.cli",
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
    "1000000",
]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def start(args):
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def wait_for(proc, text, limit=240):
    """Lines of ``proc``'s stdout up to the first that contains ``text``."""
    deadline, seen = time.monotonic() + limit, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return seen
    proc.kill()
    raise AssertionError(f"no {text!r} in {''.join(seen)}{proc.stderr.read()}")


def steps(out):
    meta, raw = checkpoint.read_meta(out / "checkpoint.msgpack")
    return checkpoint.stored_count(raw["step"])


def test_sigterm_saves_a_second_process_is_refused_and_a_broken_pipe_saves(tmp_path):
    out = tmp_path / "run"
    first = start([*TRAIN, "--out", str(out)])
    wait_for(first, "batch 2")
    # a second process on the same folder: one line naming the first, the run's files untouched
    second = subprocess.run(
        [sys.executable, "-m", "czjax.cli", "train", "--resume", "--out", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert second.returncode == 2 and f"in use by another czjax run (process {first.pid})" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    # SIGTERM: saved, told how to continue (on stderr: stdout may be a pipe whose reader is gone), exit 143
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=120)
    assert (
        first.returncode == 143
        and "SIGTERM: saved the last completed chunk" in err
        and "continue with: czjax train --resume" in err
    )
    saved = steps(out)
    assert saved >= 2
    # the output's reader goes away (| head, or killed by the same Ctrl-C): the run saves and stops, 141
    third = start([sys.executable, "-m", "czjax.cli", "train", "--resume", "--out", str(out)])
    wait_for(third, "resuming")
    third.stdout.close()
    assert third.wait(timeout=120) == 141
    assert steps(out) > saved
