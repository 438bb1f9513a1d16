"""Shared fixtures: checkpoints of untrained models, written once per test session."""

import os
import tempfile
from pathlib import Path

# Several pytest-xdist workers share one GPU: each takes memory as it needs it, not JAX's default
# 75% of the card up front (set before JAX starts, as this file is read before any test module)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# Many tests start `czjax` in subprocesses that compile the same programs again: a persistent
# compilation cache, which the subprocesses inherit, saves CI the repeats (the subprocess-heavy
# files: 157 s without it, 131 s with it, on one core). One folder for every run of the suite on
# this machine, kept under 1 GB (least recently used entries go first); a hit is the program a
# miss would compile, so results do not depend on it.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(tempfile.gettempdir()) / "czjax-tests-jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2**30))

import pytest  # noqa: E402

from czjax.learn.settings import HParams, TrainConfig  # noqa: E402
from czjax.learn.trainer import make_trainer  # noqa: E402
from czjax.util import checkpoint  # noqa: E402


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


def pytest_configure(config):
    """``CZJAX_TEST_COMPILE_LOG=PATH``: record where the suite compiles (``tests/compile_log.py``)."""
    path = os.environ.get("CZJAX_TEST_COMPILE_LOG")
    if path:
        from tests.compile_log import CompileLog

        config.pluginmanager.register(CompileLog(Path(path)), "czjax-compile-log")
