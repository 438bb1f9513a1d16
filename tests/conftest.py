"""Shared fixtures: checkpoints of untrained models, written once per test session."""

import os

# Several pytest-xdist workers share one GPU: each takes memory as it needs it, not JAX's default
# 75% of the card up front (set before JAX starts, as this file is read before any test module)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

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
