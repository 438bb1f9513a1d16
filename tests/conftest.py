"""Shared fixtures: checkpoints of untrained models, written once per test session."""

import importlib.metadata
import os
import tempfile
from pathlib import Path

# a hook, found here by pytest: pytest-xdist's workers ignore SIGINT once their session has finished
from tests.worker_end import pytest_sessionfinish  # noqa: F401  (tests/worker_end.py says why)

# Several pytest-xdist workers share one GPU: each takes memory as it needs it, not JAX's default
# 75% of the card up front (set before JAX starts, as this file is read before any test module)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# Many tests start `czjax` in subprocesses that compile the same programs again: a persistent
# compilation cache, which the subprocesses inherit, saves CI the repeats (the subprocess-heavy
# files: 157 s without it, 131 s with it, on one core). One folder for every run of the suite on
# this machine; a hit is the program a miss would compile, so results do not depend on it. Every
# program is kept, however quick to compile: nine in ten of the suite's take under half a second,
# and together they are most of what a second run would compile again. JAX's own size limit is
# off: under one, each write lists the folder and reads every entry's access time, which over
# the suite's thousands of entries cost a cold run minutes. The folder is kept under 1 GB here
# instead, once a session (prune_cache).
CACHE_LIMIT_BYTES = 2**30
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(tempfile.gettempdir()) / "czjax-tests-jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", "-1")


def prune_cache(folder: Path, limit: int = CACHE_LIMIT_BYTES) -> list[Path]:
    """Where the files in ``folder`` (a compilation cache) hold more than ``limit`` bytes, deletes
    the oldest-written until they hold at most half of it; returns the deleted files. Hidden
    files (a lock) stay."""
    files = [path for path in folder.glob("*") if path.is_file() and not path.name.startswith(".")]
    stats = {path: path.stat() for path in files}
    total = sum(stat.st_size for stat in stats.values())
    deleted = []
    if total > limit:
        for path in sorted(files, key=lambda path: stats[path].st_mtime):
            if total <= limit // 2:
                break
            path.unlink(missing_ok=True)
            total -= stats[path].st_size
            deleted.append(path)
    return deleted


def _cpu_only() -> bool:
    """Whether JAX can run only on the CPU here: ``JAX_PLATFORMS=cpu``, or no accelerator plugin
    installed (jax's CUDA and ROCm plugins, libtpu)."""
    if os.environ.get("JAX_PLATFORMS", "").strip() == "cpu":
        return True
    names = {(dist.metadata["Name"] or "").lower().replace("_", "-") for dist in importlib.metadata.distributions()}
    return not any(name.startswith(("jax-cuda", "jax-rocm", "libtpu")) for name in names)


# On the CPU, LLVM's optimisation of each program is most of a cold suite's compile time (a fresh
# clone's first run: 673 s with it, 552 s without, on 2 cores), while the suite's programs are
# small and most run a few times: off for the suite and its subprocesses, which inherit
# XLA_FLAGS. It may change the last bits of a float (LLVM orders arithmetic otherwise), so a test
# that compares bits with a record makes its run at the record's flags (tests/records.py). A
# test whose time is running its programs turns it back on for them (``optimised_programs``
# below); a level the caller chose in XLA_FLAGS wins.
TEST_OPTIMISATION = "xla_backend_optimization_level"
if TEST_OPTIMISATION not in os.environ.get("XLA_FLAGS", "") and _cpu_only():  # workers: set by the controller
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --{TEST_OPTIMISATION}=0".strip()

import pytest  # noqa: E402

from czjax.learn.settings import HParams, TrainConfig  # noqa: E402
from czjax.learn.trainer import make_trainer  # noqa: E402
from czjax.util import checkpoint, compiling  # noqa: E402


@pytest.fixture(scope="session")
def model_checkpoints(tmp_path_factory):
    """``{model name: checkpoint path}`` for an untrained ``mlp`` and ``cnn-mk4-value``."""
    folder = tmp_path_factory.mktemp("checkpoints")
    paths = {}
    for model in ("mlp", "cnn-mk4-value"):
        config = TrainConfig(model=model, games_per_batch=4)
        state = make_trainer(config).init(7)
        paths[model] = folder / f"{model}.msgpack"
        checkpoint.save(paths[model], state, config.to_dict(), HParams.create().to_dict(), {"seed": 7})
    return paths


@pytest.fixture
def optimised_programs(monkeypatch):
    """The programs czjax compiles through :mod:`czjax.util.compiling` in this test, with XLA's
    backend optimisation on (``xla_backend_optimization_level=3``), where the suite has it off:
    for a test whose time is running them (a calibration of a thousand searches). The protocol's
    search program, made once per process, is made again inside the test and after it."""
    from czjax.search import azjl_stream

    default = compiling.compiler_options

    def optimised(convolutions: bool, platform: str | None = None):
        return {**(default(convolutions, platform) or {}), TEST_OPTIMISATION: 3}

    monkeypatch.setattr(compiling, "compiler_options", optimised)
    azjl_stream.compiled_advance.cache_clear()
    yield
    azjl_stream.compiled_advance.cache_clear()


RECORDED = "recorded comparison"  # the user property each comparison with a record is kept under


class RecordedComparisons:
    """What a test compared with records (tests/records.py): each comparison said once, by
    :meth:`said`, which the suite's summary prints; a test that made none fails."""

    def __init__(self, record_property):
        self.record_property, self.lines = record_property, []

    def said(self, what: str, line: str) -> None:
        self.lines.append(f"{what}: {line}")
        self.record_property(RECORDED, f"{what}: {line}")

    def check_said(self) -> None:
        if not self.lines:
            pytest.fail("this test compares with recorded results but compared with none")


@pytest.fixture
def recorded(record_property):
    """For a test that compares results with records: it says with :meth:`said` which record it
    compared with and how; one that ends without saying so fails, so no recorded comparison is
    skipped in silence on the machine running the suite."""
    comparisons = RecordedComparisons(record_property)
    yield comparisons
    comparisons.check_said()


def pytest_terminal_summary(terminalreporter):
    """Which record each comparison used on this machine (exact, or the nearest within float
    noise), from every worker's reports."""
    lines = [
        f"{report.nodeid.split('::')[0]}: {value}"
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == RECORDED
    ]
    if lines:
        terminalreporter.write_sep("-", "results compared with records")
        for line in sorted(set(lines)):
            terminalreporter.write_line(line)


def pytest_configure(config):
    """The compilation cache pruned, once a session (not in each pytest-xdist worker);
    ``CZJAX_TEST_COMPILE_LOG=PATH``: record where the suite compiles (``tests/compile_log.py``)."""
    if not hasattr(config, "workerinput"):
        prune_cache(Path(os.environ["JAX_COMPILATION_CACHE_DIR"]))
    path = os.environ.get("CZJAX_TEST_COMPILE_LOG")
    if path:
        from tests.compile_log import CompileLog

        config.pluginmanager.register(CompileLog(Path(path)), "czjax-compile-log")
