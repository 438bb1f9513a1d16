"""Models, the compiled training iteration, checkpoints, resume, and `czjax train`."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import rollout
from czjax.jobs import loop
from czjax.learn.pool import PoolSettings
from czjax.learn.settings import HParams, PromotionSettings, TrainConfig
from czjax.learn.trainer import init_state, make_setup, make_trainer, record_batch
from czjax.util import checkpoint
from czjax.util.counts import WideCount

# One small config shared by every test here, so the chunk compiles once.
CONFIG = TrainConfig(
    model="mlp",
    games_per_batch=8,
    opponent="self",
    promotion=PromotionSettings(every_games=16, window_games=16),
    eval_games=4,
    batches_per_chunk=2,
)
HP = HParams.create(learning_rate=1e-3, entropy_bonus=0.05, value_weight=0.0, discount=0.9)


# CONFIG as czjax 1968a65 stored it: flat, without init (Flax's initialisation then) or ppo_kl_stop
OLD_STORED_CONFIG = {
    "model": "mlp",
    "games_per_batch": 8,
    "opponent": "self",
    "baseline": True,
    "weight_decay": 0.01,
    "promote_every_games": 16,
    "promote_window_games": 16,
    "promote_threshold": 0.52,
    "eval_games": 4,
    "batches_per_chunk": 2,
    "algorithm": "reinforce",
    "ppo_clip": 0.2,
    "ppo_epochs": 4,
    "target_kl": 0.01,
    "mirror": False,
    "pool": [],
    "pool_ema": 0.1,
    "league": False,
    "league_slots": 8,
    "league_threshold": 0.6,
}


def test_unknown_init_and_old_configs():
    with pytest.raises(ValueError, match="unknown init 'xavier'; choose one of torch, flax"):
        TrainConfig(init="xavier")
    assert TrainConfig().init == "torch"
    # configs stored before the init field existed: those runs started from Flax's initialisation,
    # and PPO stopped before the step; their flat settings go into the nested groups
    old = TrainConfig.from_dict(OLD_STORED_CONFIG)
    assert old == CONFIG.override({"init": "flax", "ppo.kl_stop": "before-step", "promotion.draws_count_half": False})
    assert TrainConfig.from_dict(CONFIG.to_dict()) == CONFIG and TrainConfig.from_dict(old.to_dict()) == old
    pooled = TrainConfig.from_dict(dict(OLD_STORED_CONFIG, opponent="pool", pool=["random"], league=True, pool_ema=0.2))
    assert pooled.pool == PoolSettings(members=("random",), ema=0.2, league=True)


@pytest.fixture(scope="module")
def trainer():
    return make_trainer(CONFIG)


def test_train_step_updates_params_and_counters(trainer):
    state = trainer.init(0)
    new, metrics = jax.jit(trainer.train_step)(state, HP, jax.random.key(5))
    assert int(new.step) == 1 and int(new.games) == CONFIG.games_per_batch
    assert not loop.params_equal(new.params, state.params)
    assert loop.params_equal(new.opponent_params, state.params)  # no promotion on the first batch
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert float(metrics["value_loss"]) == 0.0  # mlp has no value head: plain REINFORCE


def test_mixed_precision_trains_float32_parameters():
    """--precision mixed: bfloat16 operands in the products, float32 parameters and optimizer
    state; the same initial parameters as float32 training, a finite update that moves them."""
    mixed = make_trainer(dataclasses.replace(CONFIG, precision="mixed"))
    state = mixed.init(0)
    assert loop.params_equal(state.params, make_trainer(CONFIG).init(0).params)
    new, metrics = mixed.train_step(state, HP, jax.random.key(5))
    assert {x.dtype for x in jax.tree.leaves((new.params, new.opt_state)) if jnp.issubdtype(x.dtype, jnp.floating)} == {
        jnp.dtype("float32")
    }
    assert all(np.isfinite(float(v)) for v in metrics.values()) and not loop.params_equal(new.params, state.params)


def test_value_head_model_trains_with_baseline_and_without():
    for baseline in (True, False):
        cfg = TrainConfig(
            model="mlp3",
            games_per_batch=4,
            opponent="random-punisher",
            eval_games=2,
            batches_per_chunk=1,
            baseline=baseline,
        )
        tr = make_trainer(cfg)
        _, metrics = tr.train_step(tr.init(0), HP, jax.random.key(0))
        assert (float(metrics["value_loss"]) > 0) == baseline


def test_promotion_on_scripted_win_rates(trainer):
    """Promotion happens at a check batch iff the window's score (a draw half a win) exceeds 52%."""
    state = trainer.init(0)
    w = CONFIG.window_batches
    assert CONFIG.promote_every == 2 and w == 2
    step = jax.jit(trainer.train_step)
    for earlier_points, expect in ((16, True), (0, False)):
        # the previous batch of the window scored `earlier_points` of 16 half-points (8 games);
        # this batch is the check batch (step 2)
        s = state.replace(
            step=WideCount.of(1),
            window_wins=jnp.array([earlier_points, 0], jnp.int32),
            window_games=jnp.array([16, 0], jnp.int32),
        )
        new, metrics = step(s, HP, jax.random.key(2))
        batch_points = 2 * round(float(metrics["win_rate"]) * 8) + round(float(metrics["draw_rate"]) * 8)
        assert ((earlier_points + batch_points) / 32 > 0.52) == expect
        assert int(new.promotions) == int(expect)
        assert loop.params_equal(new.opponent_params, new.params) == expect
        if expect:
            assert int(new.window_games.sum()) == 0  # a new checkpoint starts a new window
    # not a check batch: no promotion even at 100%
    s = state.replace(
        step=WideCount.of(0), window_wins=jnp.array([8, 8], jnp.int32), window_games=jnp.array([8, 8], jnp.int32)
    )
    new, _ = step(s, HP, jax.random.key(2))
    assert int(new.promotions) == 0


def test_the_counters_run_past_2_31_batches_and_2_32_games(tmp_path):
    """A run's counters are wide (czjax.util.counts). From just below 2**31 batches and
    2**32 games, the win-rate window's slot and the promotion check follow the batch count as
    Python counts it (an int32 count wrapped to -2**31, whose remainder by 3 is 1, not 2), the
    metrics rows say the exact numbers, and a run resumed from such a checkpoint continues and
    saves them exactly."""
    # 3 batches per window; a promotion check every 125,000 batches (a modulus past 2**16)
    config = CONFIG.override({"promotion.window_games": 24, "promotion.every_games": 1_000_000})
    assert config.window_batches == 3 and config.promote_every == 125_000
    trainer = make_trainer(config)
    batches, games = 2**31 - 1, 2**32 - 8
    state = dataclasses.replace(trainer.init(0), step=WideCount.of(batches), games=WideCount.of(games))
    step = jax.jit(trainer.train_step)
    slots = []
    for i in range(3):
        before = np.asarray(state.window_games)
        state, _ = step(state, HP, jax.random.key(i))
        slots.append(int(np.flatnonzero(np.asarray(state.window_games) != before)[0]))
        assert int(state.step) == batches + i + 1 and int(state.games) == games + 8 * (i + 1)
    assert slots == [(batches + i) % 3 for i in range(3)] == [1, 2, 0]
    assert int(state.promotions) == 0  # no batch here is a check batch: (2**31 + i) % 125,000 != 0

    # through the run loop: resumed from a checkpoint at that point, two more batches
    out = tmp_path / "run"
    description = {"seed": 0, "batches": batches + 5, "time_budget_s": None, "title": ""}
    checkpoint.save(out / loop.CHECKPOINT, state, config.to_dict(), HP.to_dict(), description)
    summary = loop.run_training(config, HP, out, batches=batches + 5, resume=True, log=lambda m: None)
    assert summary["batches"] == 2**31 + 4 and summary["games"] == 2**32 + 32
    rows = loop.read_metrics(out / loop.METRICS)
    assert [(r["batches"], r["games"]) for r in rows] == [(2**31 + 4, 2**32 + 32)]
    assert 0 < rows[0]["positions"] <= 2 * 8 * 21 and isinstance(rows[0]["positions"], int)
    loaded, _ = checkpoint.load(out / loop.CHECKPOINT, trainer.init(0), config.model)
    assert int(loaded.step) == 2**31 + 4 and int(loaded.games) == 2**32 + 32
    _, raw = checkpoint.read_meta(out / loop.CHECKPOINT)  # what reads a run's progress without loading it
    assert checkpoint.stored_count(raw["step"]) == 2**31 + 4 and checkpoint.stored_count(raw["games"]) == 2**32 + 32


def test_the_solver_benchmark_is_an_argument_of_the_chunk_not_a_constant():
    """With --solver-eval the chunk takes the benchmark (7,000 positions and their labels)
    as an argument: its program holds no large literal for XLA to fold at every compile, where a
    function closing over the benchmark holds its boards as one (2 hex digits a cell). A chunk
    lowered without it is refused. (That its metrics are the benchmark's scored alone:
    test_algorithms.test_search_based_training_steps.)"""
    import re

    from czjax.learn import solver_metrics

    def largest_literal(text: str) -> int:
        return max((len(m) for m in re.findall(r'dense<"0x[0-9A-Fa-f]*">', text)), default=0)

    config = TrainConfig(model="mlp3", games_per_batch=4, eval_games=2, batches_per_chunk=2, solver_eval="network")
    trainer = make_trainer(config)
    state = trainer.init(0)
    bench = trainer.solver_bench
    assert bench is solver_metrics.load() and bench.boards.shape == (7000, 6, 7)
    assert largest_literal(trainer.run_chunk.lower(state, HP, 2, bench).as_text()) < 1000
    closed = jax.jit(lambda p: solver_metrics.metrics(trainer.learner, p, bench)).lower(state.params).as_text()
    assert largest_literal(closed) > 2 * bench.boards.size
    with pytest.raises(ValueError, match="solver_bench"):
        trainer.run_chunk.lower(state, HP, 2)
    assert make_trainer(CONFIG).solver_bench is None  # solver_eval off: nothing to pass


@pytest.mark.parametrize("draws_count_half, expect", [(True, True), (False, False)])
def test_a_draw_counts_half_a_win_for_promotion(draws_count_half, expect):
    """As the PyTorch project scores the window: 4 wins and 4 draws in each of 8-game batches
    score 0.75 (promoted), but only 0.5 on wins alone (not promoted, the earlier rule)."""
    config = CONFIG.override({"promotion.draws_count_half": draws_count_half})
    setup = make_setup(config, None)
    state = init_state(setup, 0)
    results = rollout.GameResults(
        outcome=jnp.array([1, 1, 1, 1, 0, 0, 0, 0], jnp.int8),
        length=jnp.full((8,), 42, jnp.int32),
        a_first=jnp.arange(8) < 4,
        final=None,
    )
    state, _ = record_batch(setup, state, state.params, state.opt_state, results, None)  # batch 1 of the window
    assert int(state.promotions) == 0  # not a check batch
    state, _ = record_batch(setup, state, state.params, state.opt_state, results, None)  # batch 2: the check
    assert int(state.promotions) == int(expect)


def test_ppo_settings_stored_flat_or_nested_read_back():
    """PPO's settings live with its table entry (algorithms.PPOSettings, TrainConfig.algorithm_settings);
    a config stored with them flat (before nesting) or as the group "ppo" reads as it ran."""
    from czjax.learn.algorithms import PPOSettings

    flat = dict(OLD_STORED_CONFIG, algorithm="ppo", model="mlp3", ppo_clip=0.3, ppo_epochs=2, target_kl=0.05)
    config = TrainConfig.from_dict(flat)
    ppo = PPOSettings(clip=0.3, epochs=2, target_kl=0.05, kl_stop="before-step", bootstrap=False)
    assert config.settings_of("ppo") == ppo and config.settings_of("reinforce") is None
    stored = config.to_dict()
    assert stored["ppo"] == {"clip": 0.3, "epochs": 2, "target_kl": 0.05, "kl_stop": "before-step", "bootstrap": False}
    assert "algorithm_settings" not in stored and TrainConfig.from_dict(stored) == config
    given = TrainConfig(algorithm_settings=(("ppo", PPOSettings(clip=0.3)),))
    assert (
        given
        == TrainConfig().override({"ppo.clip": 0.3})
        == TrainConfig(algorithm_settings={"ppo": PPOSettings(clip=0.3)})
    )
    # a group given with its defaults is the group not given: equal configs, one hash, one trainer
    assert TrainConfig(algorithm_settings={"ppo": PPOSettings()}) == TrainConfig()
    assert hash(TrainConfig(algorithm_settings={"ppo": PPOSettings()})) == hash(TrainConfig())
    assert TrainConfig().algorithm_settings == () and TrainConfig().settings_of("ppo") == PPOSettings()
    with pytest.raises(ValueError, match="unknown setting 'nothing.x'"):
        TrainConfig().override({"nothing.x": 1})
    with pytest.raises(ValueError, match="'reinforce' is no algorithm with settings"):
        TrainConfig(algorithm_settings={"reinforce": PPOSettings()})
    with pytest.raises(TypeError):
        TrainConfig(ppo=PPOSettings())  # the group's name is no field of its own


def test_a_new_algorithm_with_settings_is_its_table_row(monkeypatch):
    """An algorithm's settings need nothing outside its entry: TrainConfig's group, the override
    names, the stored form and the CLI's flags follow from ALGORITHMS. A config keeps only the
    groups it was given, so one made while the table held an algorithm does not hold on to its
    settings once the table has changed."""
    from czjax import cli
    from czjax.cli import flags
    from czjax.learn import algorithms
    from czjax.util.fields import setting

    @dataclasses.dataclass(frozen=True)
    class SlowSettings:
        slowness: float = setting(2.0, "how slow")
        careful: bool = setting(False, "whether careful")

    slow = dataclasses.replace(algorithms.ALGORITHMS["reinforce"], description="slow", settings=SlowSettings)
    with monkeypatch.context() as patch:
        patch.setitem(algorithms.ALGORITHMS, "slow", slow)
        config = TrainConfig(algorithm="slow").override({"slow.slowness": 3.0})
        assert config.settings_of("slow") == SlowSettings(slowness=3.0)
        assert config.settings_of("ppo") == algorithms.PPOSettings()
        assert config.to_dict()["slow"] == {"slowness": 3.0, "careful": False}
        assert TrainConfig.from_dict(config.to_dict()) == config
        assert "slow.slowness" in flags.setting_flags()
        args = cli.build_parser().parse_args(["train", "--slow-slowness", "4", "--slow-careful"])
        assert cli.train_spec(args).config.settings_of("slow") == SlowSettings(slowness=4.0, careful=True)
        made_meanwhile = TrainConfig(games_per_batch=8)
    assert "slow" not in made_meanwhile.to_dict() and made_meanwhile == TrainConfig(games_per_batch=8)
    assert made_meanwhile.to_dict() == TrainConfig(games_per_batch=8).to_dict()
