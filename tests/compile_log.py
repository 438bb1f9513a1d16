"""Where a cold suite spends its compiling: with ``CZJAX_TEST_COMPILE_LOG=PATH`` set, each pytest
worker appends one JSON line a test to ``PATH.<worker>``: the test, its wall time, and per
compiled program (JAX's name for it) how many times it was traced, lowered and compiled by XLA
and the seconds each took, with the persistent cache's hits. Tests in subprocesses are not
seen (their time is the wall time less what is listed). Read the lines with
``python tests/compile_log.py PATH``; nothing is recorded without the variable."""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from pathlib import Path

import pytest

EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}


class CompileLog:
    """A pytest plugin: JAX's compile events summed per test and program."""

    def __init__(self, path: Path):
        import jax.monitoring

        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.path = path.with_name(f"{path.name}.{worker}")
        self.programs: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
        jax.monitoring.register_event_duration_secs_listener(self.on_duration)
        jax.monitoring.register_event_listener(self.on_event)

    def on_duration(self, event: str, duration: float, **kwargs) -> None:
        stage = EVENTS.get(event)
        if stage is not None:
            program = self.programs[str(kwargs.get("fun_name", "?"))]
            program[stage] += duration
            program[stage + "s"] += 1

    def on_event(self, event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self.programs["(persistent cache)"]["hits"] += 1

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):  # runs where the test runs (a worker)
        self.programs.clear()
        start = time.perf_counter()
        yield
        row = {"test": item.nodeid, "wall": time.perf_counter() - start, "programs": self.programs}
        with self.path.open("a") as file:
            file.write(json.dumps(row) + "\n")


def summary(path: Path, top: int = 40) -> None:
    """Per test file and per program: seconds compiling (trace + lower + XLA) and counts."""
    rows = [json.loads(line) for file in path.parent.glob(path.name + ".*") for line in file.read_text().splitlines()]
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    by_program: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for row in rows:
        file = row["test"].split("::")[0]
        by_file[file][0] += row["wall"]
        for name, stages in row["programs"].items():
            seconds = stages.get("trace", 0) + stages.get("lower", 0) + stages.get("compile", 0)
            by_file[file][1] += seconds
            by_file[file][2] += stages.get("compiles", 0)
            by_program[name][0] += seconds
            by_program[name][1] += stages.get("compiles", 0)
    print(f"{'file':55} {'wall s':>8} {'compile s':>10} {'compiles':>9}")
    for file, (wall, seconds, count) in sorted(by_file.items(), key=lambda kv: -kv[1][0]):
        print(f"{file:55} {wall:8.1f} {seconds:10.1f} {int(count):9d}")
    print(f"\n{'program':55} {'compile s':>10} {'compiles':>9}")
    for name, (seconds, count) in sorted(by_program.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{name[:55]:55} {seconds:10.1f} {int(count):9d}")


if __name__ == "__main__":
    summary(Path(sys.argv[1]))
