"""The suite ends without a stray KeyboardInterrupt from a pytest-xdist worker whose end is slow
(tests/worker_end.py: execnet sends a worker a SIGINT 5 s after telling it to end)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A worker whose end outlasts execnet's 5 s, spent as a worker's end is: in gc callbacks (JAX's
# _xla_gc_callback runs in each collection), where the SIGINT then lands.
SLOW_END = """
import gc
import time


def in_each_collection(phase, info):
    time.sleep(0.001)


def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):
        gc.callbacks.append(in_each_collection)
        end = time.monotonic() + 6.5
        while time.monotonic() < end:
            gc.collect()
        gc.callbacks.remove(in_each_collection)
"""


def start_session(folder: Path, *options: str) -> subprocess.Popen:
    """A pytest session of one quick test in one pytest-xdist worker whose end is slow."""
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "conftest.py").write_text(SLOW_END)
    (folder / "test_quick.py").write_text("def test_quick():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", *options, "test_quick.py"]
    return subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_slow_worker_end_is_not_interrupted(tmp_path):
    # both at once, about 10 s: without the hook (what the suite did) and with it (tests/conftest.py)
    sessions = {
        "without": start_session(tmp_path / "without"),
        "with": start_session(tmp_path / "with", "-p", "tests.worker_end"),
    }
    output = {name: session.communicate(timeout=120)[0] for name, session in sessions.items()}
    assert "KeyboardInterrupt" in output["without"], output["without"]  # the slow end does bring the SIGINT
    assert sessions["with"].returncode == 0, output["with"]
    assert "1 passed" in output["with"] and "KeyboardInterrupt" not in output["with"], output["with"]
