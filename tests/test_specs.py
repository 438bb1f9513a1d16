"""Player specs (``NAME[:OPTIONS][:BASE]``) are split in one place, czjax.util.specs, and every
consumer reads the parts from the typed value; a config only describes, and the trainer's
set-up builds what it describes."""

from __future__ import annotations

import dataclasses
import itertools

import jax
import numpy as np
import pytest

from czjax import cli, models, search
from czjax.cli import flags
from czjax.learn import migration, pool, trainer
from czjax.learn.pool import PoolSettings
from czjax.learn.settings import TrainConfig
from czjax.players import minimax, searched
from czjax.players.loading import load_agent
from czjax.players.searched import search_player
from czjax.search.base import MAX_SIZE
from czjax.util.specs import PlayerSpec


def test_every_text_round_trips():
    """Every text over the grammar's characters (up to 6 of them, empty parts and trailing
    colons included) is some spec, and gives back exactly its text: a path with colons reads as
    it was written."""
    for length in range(7):
        for chars in itertools.product("a:=,", repeat=length):
            text = "".join(chars)
            assert str(PlayerSpec.parse(text)) == text, text


@pytest.mark.parametrize(
    "text, name, options, base",
    [
        ("random", "random", "", None),
        ("runs/ex3", "runs/ex3", "", None),
        ("minimax:depth=5,ties=random", "minimax", "depth=5,ties=random", None),
        ("mcts:sims=64:runs/ex3", "mcts", "sims=64", "runs/ex3"),
        ("gumbel:runs/ex3", "gumbel", "", "runs/ex3"),  # no "=": the search's defaults over runs/ex3
        ("mcts:sims=8:untrained:mlp3", "mcts", "sims=8", "untrained:mlp3"),
        ("untrained:resnet:blocks=2,channels=32:1", "untrained", "", "resnet:blocks=2,channels=32:1"),
        ("resnet:blocks=2,channels=32", "resnet", "blocks=2,channels=32", None),
        ("gumbel:sims=8", "gumbel", "sims=8", None),  # a training search: no player after it
        ("mcts:sims=8:", "mcts", "sims=8", ""),
    ],
)
def test_the_parts_of_a_spec(text, name, options, base):
    spec = PlayerSpec.parse(text)
    assert (spec.name, spec.options, None if spec.base is None else str(spec.base)) == (name, options, base)
    assert spec.head == PlayerSpec(name, options) and spec.plain == (not options and base is None)


def test_the_command_line_parses_a_player_once(monkeypatch):
    """`czjax play`'s way: the flag's type parses the text, and loading the player reads the
    typed value (the search's options and its base) without splitting the text again."""
    text = "mcts:sims=3,c=1.5:random"
    parsed = []
    parse = PlayerSpec.parse.__func__

    def counting(cls, given):
        parsed.append(given)
        return parse(cls, given)

    monkeypatch.setattr(PlayerSpec, "parse", classmethod(counting))
    args = cli.build_parser().parse_args(["play", text])
    agent = flags.load_player(args.player)
    assert parsed.count(text) == 1 and args.player == PlayerSpec("mcts", "sims=3,c=1.5", PlayerSpec("random"))
    assert agent.name == text and agent.search == search.PUCT(sims=3, c=1.5)


def test_each_consumer_reads_the_same_parts():
    """A search's spec as a player, as training's --search and as a pool member: the same search."""
    expected = search.PUCT(sims=4, c=1.5)  # the dataclass itself, not parsed from text
    assert load_agent("mcts:sims=4,c=1.5:random").search == expected
    assert (
        trainer.build_search(TrainConfig(model="mlp3", algorithm="alphazero-hard", search="mcts:sims=4,c=1.5"))
        == expected
    )
    assert search.split_search(PlayerSpec.parse("mcts:sims=4,c=1.5:random")) == (expected, PlayerSpec("random"))
    assert search.search_of(PlayerSpec.parse("mcts:sims=4,c=1.5")) == expected
    # minimax's options, as a player and as the evaluation games' opponent
    assert load_agent("minimax:depth=2,ties=random").player is minimax.Minimax(2, "random").player()
    assert trainer.eval_opponent("minimax:depth=2,ties=random") is minimax.Minimax(2, "random").player()
    # a network's options, as a model and inside untrained:MODEL:SEED
    untrained = load_agent("untrained:resnet:blocks=1,channels=8:3")
    assert untrained.model_name == "resnet:blocks=1,channels=8"
    assert models.get_model(untrained.model_name) == models.ResNet(blocks=1, channels=8)
    reference = models.init_params(models.ResNet(blocks=1, channels=8), jax.random.key(3))  # seed 3
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(untrained.params), jax.tree.leaves(reference)))


@pytest.mark.parametrize(
    "spec, message",
    [
        ("gumbel:sims=8", "names no player"),
        ("mcts:sims=8:", "names no player"),
        ("mcts:sims=8:gumbel:random", "cannot search a search"),
        ("mcts:simz=8:random", "has no option 'simz'"),
        ("minimax:depth=3:random", "minimax takes options only"),
        ("minimax:depth", "minimax takes options only"),
        ("untrained:mlp3:x", "unknown model 'mlp3:x'"),
        ("untrained:x=1:mlp3", "untrained:MODEL[:SEED]"),
        ("alphabeta:depth=3:random", "unknown search 'alphabeta'"),
        ("mcts:sims=3000000000:random", "sims=3,000,000,000 does not fit"),
    ],
)
def test_bad_player_specs_are_refused_in_one_line(spec, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")) as refused:
        load_agent(spec)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"search": "mcts:sims=8:runs/x"}, "plays with the learner's network"),
        ({"search": "gumbel:sims=3000000000"}, "does not fit"),
        ({"eval_opponent": "minimax:depth=3:random"}, "minimax takes options only"),
        ({"eval_opponent": "random:x=1"}, "unknown evaluation opponent"),
        ({"model": "resnet:blocks=2:1"}, "unknown model"),
        ({"model": "mlp3:blocks=2"}, "takes no options"),
    ],
)
def test_bad_specs_in_a_config_are_refused_in_one_line(settings, message):
    base = {"model": "mlp3", "algorithm": "alphazero-hard", "search": "mcts:sims=8"}
    with pytest.raises(ValueError, match=message) as refused:
        TrainConfig(**{**base, **settings})
    assert "\n" not in str(refused.value)


def test_a_pool_members_search_is_checked_with_the_config():
    with pytest.raises(ValueError, match="does not fit"):
        TrainConfig(opponent="pool", pool=PoolSettings(members=("random", "mcts:sims=3000000000:random")))


def test_a_searchs_sizes_are_its_own_check():
    """A tree of sims + 1 nodes is indexed by int32: sims up to int32's largest minus one."""
    largest = int(np.iinfo(np.int32).max) - 1
    assert largest == MAX_SIZE
    search.PUCT(sims=largest).check()
    search.make_search("playouts", {"width": largest})
    for name, option in (("mcts", "sims"), ("gumbel", "sims"), ("playouts", "width"), ("azjl", "sims")):
        with pytest.raises(ValueError, match=f"{option}={largest + 1:,} does not fit.*32-bit"):
            search.make_search(name, {option: largest + 1})


def test_a_config_describes_and_the_set_up_builds(monkeypatch):
    """Making a config builds nothing: no network, parameters, search player or opponent player
    (each of those refuses here); the trainer's set-up then builds what the config names."""

    def refused(*args, **kwargs):
        raise AssertionError("a config built something")

    settings = dict(
        model="resnet:blocks=1,channels=8",
        algorithm="alphazero-hard",
        search="mcts:sims=4",
        eval_opponent="minimax:depth=1",
        games_per_batch=4,
        eval_games=2,
    )
    with monkeypatch.context() as patch:
        for module, name in (
            (models, "get_model"),
            (models, "init_params"),
            (models, "model_player"),
            (searched, "search_player"),
            (minimax.Minimax, "player"),
            (pool, "load_member"),
        ):
            patch.setattr(module, name, refused)
        for network in models.MODELS:  # nor is a network made by its table's entry
            patch.setitem(models.MODELS, network, dataclasses.replace(models.MODELS[network], build=refused))
        config = TrainConfig(**settings)
        assert TrainConfig.from_dict(config.to_dict()) == config
    setup = trainer.make_setup(config, None)
    assert setup.model == models.ResNet(
        blocks=1, channels=8, conv="im2col", norm="flax"
    )  # "auto" resolved for the platform
    assert setup.learner is models.model_player(setup.model)
    assert setup.actor is search_player(search.PUCT(sims=4), setup.learner)
    assert setup.eval_opponent is minimax.Minimax(depth=1).player()


def test_an_old_flat_config_reads_in_todays_form():
    """The migration on its own: flat names into their groups, and what runs before a setting did."""
    stored = {"model": "mlp", "ppo_clip": 0.3, "pool": ["random"], "promote_threshold": 0.6}
    assert migration.current_form(stored, ("ppo", "pool", "promotion", "replay")) == {
        "model": "mlp",
        "init": "flax",
        "ppo": {"clip": 0.3, "kl_stop": "before-step", "bootstrap": False},
        "pool": {"members": ["random"]},
        "promotion": {"threshold": 0.6, "draws_count_half": False},
    }
    today = {"model": "mlp", "init": "torch", "pool": {"members": []}}
    assert migration.current_form(today, ("ppo", "pool")) == today
