"""run.json files written before a config stored only the groups it was given (tests/data/run-json:
written by the code at c1060ff, when a config held the settings of every algorithm of the table,
its defaults filled in at construction) load to the configs that wrote them, and read back as
they were stored. RECIPES are the configs they were written from (``TrainConfig().override``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from czjax.jobs import folders, scan
from czjax.learn import migration
from czjax.learn.settings import HParams, TrainConfig

STORED = Path(__file__).parent / "data" / "run-json"

RECIPES = {
    "defaults": ({}, {}),
    "self-play-cnn": (
        {"model": "cnn-mk4-value", "games_per_batch": 50, "opponent": "self", "promotion.every_games": 5000},
        {"learning_rate": 1e-4, "value_weight": 0.5},
    ),
    "ppo": (
        {
            "model": "cnn-mk4-value",
            "games_per_batch": 50,
            "opponent": "random-punisher",
            "algorithm": "ppo",
            "ppo.clip": 0.2,
            "ppo.epochs": 4,
            "ppo.target_kl": 0.01,
            "ppo.bootstrap": True,
        },
        {"value_weight": 1.5},
    ),
    "ppo-settings-on-reinforce": ({"ppo.clip": 0.3, "ppo.kl_stop": "before-step"}, {}),
    "league": (
        {
            "opponent": "pool",
            "pool.members": ("random", "random-punisher"),
            "pool.league": True,
            "pool.league_slots": 4,
            "lr_decay_games": 10000,
        },
        {"entropy_bonus": 0.01},
    ),
    "gumbel-replay": (
        {
            "model": "mlp3",
            "games_per_batch": 128,
            "opponent": "current",
            "algorithm": "alphazero",
            "search": "gumbel:sims=16,considered=4,move=policy,rescale=0",
            "mirror": True,
            "openings": 2,
            "both_sides": True,
            "replay.capacity": 50000,
            "replay.batch": 512,
            "replay.steps": 4,
            "batches_per_chunk": 10,
            "solver_eval": "network",
        },
        {"learning_rate": 1e-3, "entropy_bonus": 0.0, "value_weight": 1.0, "discount": 1.0, "value_mix": 0.25},
    ),
    "alpha-mcts": (
        {
            "model": "mlp3",
            "opponent": "current",
            "algorithm": "alphazero-hard",
            "search": "mcts:sims=8,noise=0.25",
            "init": "flax",
            "sample_plies": 8,
            "eval_opponent": "minimax:depth=2",
        },
        {"discount": 1.0},
    ),
}


def assert_written_back(written: dict, stored: dict, defaults: dict, where: str = "config"):
    """``written`` holds every key of ``stored`` with its value (groups compared key by key), and
    any other key with the default value of a setting added since."""
    assert stored.keys() <= written.keys(), (where, stored.keys() - written.keys())
    for key, value in written.items():
        if key not in stored:
            assert value == defaults[key], (where, key, value)
        elif isinstance(value, dict) and isinstance(stored[key], dict):
            assert_written_back(value, stored[key], defaults.get(key, {}), f"{where}.{key}")
        elif key in migration.RENAMED_VALUES:  # written with its name today ("alpha": "alphazero-hard")
            assert value == migration.RENAMED_VALUES[key].get(stored[key], stored[key]), (where, key, value)
        else:
            assert value == stored[key], (where, key, value, stored[key])


def test_every_stored_run_has_its_recipe():
    assert sorted(p.name for p in STORED.iterdir()) == sorted(RECIPES)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_an_old_run_json_loads_to_the_config_that_wrote_it(name):
    settings, hparams = RECIPES[name]
    stored = folders.read_run(STORED / name)
    config = TrainConfig.from_dict(stored["config"])
    written = TrainConfig().override(settings)
    assert config == written and hash(config) == hash(written)
    # written back as it was stored, every group with it; a setting added since the file was
    # written comes back too, at its default
    assert_written_back(config.to_dict(), stored["config"], TrainConfig().to_dict())
    assert_written_back(written.to_dict(), stored["config"], TrainConfig().to_dict())
    assert HParams.create(**stored["hparams"]).to_dict() == HParams.create(**hparams).to_dict() == stored["hparams"]
    assert stored["run"]["title"] == f"run.json of {name}"
    # a scan resumed with the config as it is made today finds nothing changed
    assert scan.differences(TrainConfig.from_dict(stored["config"]).to_dict(), written.to_dict()) == []
    # the config keeps the groups the file holds (those it ran with), the defaults of any
    # algorithm added since come from the table
    assert dict(config.algorithm_settings).keys() == {k for k in stored["config"] if k == "ppo"}
