"""The update table (czjax.learn.algorithms): PPO's epochs and KL stop, mirror augmentation, the sparse gradient."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, models, players, rollout
from czjax.learn import losses
from czjax.learn.replay import ReplaySettings
from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import make_trainer
from czjax.util import precision
from tests import agreement
from tests.reference import replay

GAMMA = 0.9


@pytest.fixture(scope="module")
def ppo_games():
    config = TrainConfig(model="mlp3", games_per_batch=8, opponent="random-punisher", algorithm="ppo", eval_games=2)
    trainer = make_trainer(config)
    state = trainer.init(0)
    traj, results = rollout.play_games(
        jax.random.key(4), rollout.Side(trainer.learner, state.params), rollout.Side(players.random_punisher), 8
    )
    return config, state, traj, results


@functools.cache
def trainer_of(config):
    """One trainer, so one compiled update, per configuration: tests that take the same update
    share its program."""
    return make_trainer(config)


def ppo_update(config, state, traj, results, lr, **changes):
    trainer = trainer_of(config.override({f"ppo.{k}": v for k, v in changes.items()}))
    hp = HParams.create(learning_rate=lr, entropy_bonus=0.05, value_weight=1.5, discount=GAMMA)
    with precision.parity():  # full float32 on every backend
        return jax.device_get(trainer.update(state.params, state.opt_state, traj, results.outcome, hp))


def same_update(a, b, lr=1e-3):
    """Whether two ``(params, opt_state, metrics)`` updates from two different compiled programs
    took the same steps (tests.agreement) and Adam counted the same steps."""
    count = int(a[1][0].count)
    return agreement.took_the_same_steps(a[0], b[0], lr, count) and count == int(b[1][0].count)


def test_ppo_kl_early_stop(ppo_games):
    """The first epoch measures KL 0 and never stops; epoch 1 measures a KL above 0. As in the
    PyTorch project, the epoch whose KL exceeds the target still takes its step, then PPO stops:
    a target of 1e-6, which any step at lr 1e-3 exceeds, gives exactly two epochs.
    ``kl_stop="before-step"`` skips that step: one epoch. (The target is the next test's, so
    both take one compiled update; that test shows that without a step PPO runs all 4 epochs.)"""
    config, state, traj, results = ppo_games
    no_stop = dict(target_kl=1e9)
    one = ppo_update(config, state, traj, results, 1e-3, epochs=1, **no_stop)
    two = ppo_update(config, state, traj, results, 1e-3, epochs=2, **no_stop)
    assert one[2]["ppo_epochs"] == 1 and two[2]["ppo_epochs"] == 2 and not same_update(one, two)
    stopped = ppo_update(config, state, traj, results, 1e-3, target_kl=1e-6)  # 4 epochs, stopped by KL
    assert stopped[2]["ppo_epochs"] == 2 and same_update(stopped, two)
    assert (
        stopped[2]["ppo_kl"] == pytest.approx(two[2]["ppo_kl"], rel=1e-4) and two[2]["ppo_kl"] > 1e-6
    )  # epoch 1's KL, after one step
    before = ppo_update(config, state, traj, results, 1e-3, target_kl=1e-6, kl_stop="before-step")
    assert before[2]["ppo_epochs"] == 1 and same_update(before, one)
    assert before[2]["ppo_kl"] == pytest.approx(stopped[2]["ppo_kl"], rel=1e-4)  # the same measurement stopped it
    # the loss metrics are the starting policy's in every case
    for update in (two, stopped, before):
        assert float(update[2]["loss"]) == pytest.approx(float(one[2]["loss"]), rel=1e-5)
    with pytest.raises(ValueError, match="kl_stop"):
        config.override({"ppo.kl_stop": "never"})


def test_ppo_kl_stop_in_a_vmapped_scan(ppo_games):
    """In a scan, configurations that stop at different epochs each get their own update: the
    epochs run while any configuration still steps, and a stopped one takes no further step."""
    config, state, traj, results = ppo_games
    config = config.override({"ppo.target_kl": 1e-6})
    trainer = make_trainer(config, axis_name="config")
    # lr 0 never moves the policy (KL 0: all 4 epochs); lr 1e-3 stops after epoch 1's step
    hps = [HParams.create(learning_rate=lr, entropy_bonus=0.05, value_weight=1.5, discount=GAMMA) for lr in (1e-3, 0.0)]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *hps)
    vmapped = jax.vmap(trainer.update, in_axes=(None, None, None, None, 0), axis_name="config")
    with precision.parity():  # as ppo_update: full float32 on every backend
        got = jax.device_get(vmapped(state.params, state.opt_state, traj, results.outcome, stacked))
    for i, lr in enumerate((1e-3, 0.0)):
        alone = ppo_update(config, state, traj, results, lr, target_kl=1e-6)
        params, opt_state, metrics = jax.tree.map(lambda x: x[i], got)
        assert metrics["ppo_epochs"] == alone[2]["ppo_epochs"] == (2 if lr else 4)
        assert int(opt_state[0].count) == int(alone[1][0].count) == (2 if lr else 4)  # Adam's steps
        # with lr 0 both KLs are float noise around 0 (up to ~1e-8 on a GPU), far below the 1e-6 target
        assert metrics["ppo_kl"] == pytest.approx(alone[2]["ppo_kl"], rel=1e-4, abs=1e-7)
        # batched and alone are different programs: the same steps up to summation order
        assert agreement.took_the_same_steps(params, alone[0], lr, 1)
        if not lr:  # and lr 0 left the parameters exactly as they were
            assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(state.params)))


def test_mirror_is_the_mirrored_game():
    moves = [3, 3, 4, 2, 0, 6, 6, 5, 1]  # a hand-built game, columns 0-based
    mirrored_moves = [6 - c for c in moves]
    boards = np.stack([np.array(replay(moves[:t]).canonical(), np.int8) for t in range(len(moves))])
    mirror_boards = np.stack([np.array(replay(mirrored_moves[:t]).canonical(), np.int8) for t in range(len(moves))])
    legal = boards[:, 0, :] == 0
    batch = losses.LossInputs(
        legal=jnp.asarray(legal),
        actions=jnp.asarray(moves, jnp.int32),
        returns=jnp.linspace(-1, 1, len(moves)),
        valid=jnp.asarray(np.arange(len(moves)) < 7),
    )
    out_boards, out = losses.mirror(jnp.asarray(boards), batch)
    n = len(moves)
    np.testing.assert_array_equal(np.asarray(out_boards[:n]), boards)
    np.testing.assert_array_equal(np.asarray(out_boards[n:]), mirror_boards)
    np.testing.assert_array_equal(np.asarray(out.actions[n:]), mirrored_moves)
    np.testing.assert_array_equal(np.asarray(out.legal[n:]), mirror_boards[:, 0, :] == 0)
    np.testing.assert_array_equal(np.asarray(out.returns[n:]), np.asarray(batch.returns))
    np.testing.assert_array_equal(np.asarray(out.valid[n:]), np.asarray(batch.valid))
    # the rules agree: the mirrored move is legal exactly when the move is
    assert all(game.legal_mask(jnp.asarray(mirror_boards))[np.arange(n), mirrored_moves])


def test_mirror_doubles_the_training_positions():
    config = TrainConfig(
        model="mlp3", games_per_batch=4, opponent="random-punisher", algorithm="a2c", mirror=True, eval_games=2
    )
    trainer = make_trainer(config)
    state = trainer.init(0)
    plain = make_trainer(dataclasses.replace(config, mirror=False))
    hp = HParams.create(learning_rate=1e-3, value_weight=1.5)
    _, with_mirror = trainer.train_step(state, hp, jax.random.key(1))
    _, without = plain.train_step(state, hp, jax.random.key(1))  # same key: the same games
    assert float(with_mirror["positions"]) == 2 * float(without["positions"])


# --------------------------------------------------------------------------------------------
# Opponent pools and leagues


def test_sparse_gradient_equals_the_dense_gradient():
    from czjax.learn.algorithms import sparse_value_and_grad
    from czjax.learn.losses import LossInputs, policy_gradient_sums

    model = models.get_model("mlp3")
    params = models.init_params(model, jax.random.key(0))
    traj, results = rollout.play_games(
        jax.random.key(4), rollout.Side(players.random_player), rollout.Side(players.random_player), 10
    )
    rng = np.random.default_rng(0)
    n = 210
    boards = np.asarray(traj.boards()).reshape(-1, 6, 7)[:n]
    valid = rng.random(n) < 0.4
    batch = LossInputs(
        legal=jnp.asarray(boards[:, 0, :] == 0),
        actions=jnp.asarray(np.argmax(boards[:, 0, :] == 0, 1)),
        returns=jnp.asarray(rng.choice([-1.0, 0.0, 0.81, 1.0], n).astype(np.float32)),
        valid=jnp.asarray(valid),
    )

    def loss(p, b, bt):
        logits, values = models.apply_model(model, p, b)
        return policy_gradient_sums(logits, values, bt, 0.05, 0.5)

    with precision.parity():  # two formulations compared: full float32 on every backend
        (_, dense_sums), dense = jax.jit(jax.value_and_grad(loss, has_aux=True))(params, jnp.asarray(boards), batch)
    for num_chunks in (1, 3, 8):  # 1: the plain gradient; 3 and 8: compacted, 8 with padding
        with precision.parity():
            grads, sums = jax.jit(lambda p, b, bt: sparse_value_and_grad(loss, p, b, bt, num_chunks))(
                params, jnp.asarray(boards), batch
            )
        for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(dense)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-5)  # summation order
        for key in dense_sums:
            np.testing.assert_allclose(float(sums[key]), float(dense_sums[key]), rtol=1e-4, atol=1e-5)


def test_ppo_with_bootstrap_takes_a2cs_targets(ppo_games):
    """``ppo.bootstrap`` (the PyTorch project's example 5): the value target is A2C's one-step TD
    target ``y`` (checked against NumPy in test_losses) and the advantage ``y - V``; without it,
    the Monte-Carlo return ``G`` and ``G - V``."""
    from czjax.learn import algorithms
    from czjax.learn.trainer import make_setup

    config, state, traj, results = ppo_games
    hp = HParams.create(learning_rate=1e-3, entropy_bonus=0.05, value_weight=1.5, discount=GAMMA)
    for bootstrap in (False, True):
        setup = make_setup(config.override({"ppo.bootstrap": bootstrap}), None)
        boards, batch = algorithms.learner_batch(setup.ctx, traj, results.outcome, hp.discount)
        got = algorithms.ppo_targets(setup.ctx, state.params, boards, batch, results.outcome, hp)
        _, values = models.apply_model(setup.model, state.params, boards)
        want = (
            algorithms.td_targets(setup.ctx, state.params, boards, batch, results.outcome, hp).returns
            if bootstrap
            else batch.returns
        )
        np.testing.assert_array_equal(np.asarray(got.returns), np.asarray(want))
        np.testing.assert_allclose(np.asarray(got.advantages), np.asarray(want - values), rtol=1e-6, atol=1e-6)
    assert not np.array_equal(np.asarray(want), np.asarray(batch.returns))  # the two targets differ
    from czjax.jobs import presets

    assert presets.get_preset("ex5-ppo").config.settings_of("ppo").bootstrap  # example 5 runs as the PyTorch project's


# --------------------------------------------------------------------------------------------
# Training with search


def test_value_mix_takes_the_recorded_values_into_the_returns(ppo_games):
    """--value-mix m: the value target is (1 - m) G + m V with V the mover's recorded value
    (here mlp3's own value head, which the rollout records like a search's root value)."""
    from czjax.learn import algorithms
    from czjax.learn.trainer import make_setup

    config, state, _, _ = ppo_games
    setup = make_setup(config, None)
    with precision.parity():  # the recorded values and the recomputed ones at the same (full) precision
        traj, results = rollout.play_games(
            jax.random.key(6),
            rollout.Side(setup.learner, state.params),
            rollout.Side(players.random_punisher),
            8,
            record_targets=True,
        )
    plain = traj.replace(values=None, policy_targets=None)
    _, expected = algorithms.learner_batch(setup.ctx, plain, results.outcome, GAMMA)
    boards, mixed = algorithms.learner_batch(setup.ctx, traj, results.outcome, GAMMA, 1.0)
    _, none = algorithms.learner_batch(setup.ctx, traj, results.outcome, GAMMA, 0.0)
    valid = np.asarray(expected.valid)
    np.testing.assert_array_equal(np.asarray(none.returns), np.asarray(expected.returns))  # m = 0: the return alone
    with precision.parity():
        _, values = models.apply_model(setup.model, state.params, boards)
    np.testing.assert_allclose(
        np.asarray(mixed.returns)[valid], np.asarray(values)[valid], atol=1e-5
    )  # m = 1: the value alone
    assert (np.asarray(mixed.returns)[~valid] == 0).all()


def test_search_training_settings_are_checked():
    with pytest.raises(ValueError, match="give a search"):
        TrainConfig(model="mlp3", algorithm="alphazero")
    with pytest.raises(ValueError, match="not reinforce"):
        TrainConfig(model="mlp3", search="mcts:sims=8")
    with pytest.raises(ValueError, match="sims must be at least 1"):
        TrainConfig(model="mlp3", algorithm="alphazero-hard", search="mcts:sims=0")
    with pytest.raises(ValueError, match="unknown search"):
        TrainConfig(model="mlp3", algorithm="alphazero-hard", search="minimax:depth=3")
    with pytest.raises(ValueError, match="value head"):
        TrainConfig(model="mlp", algorithm="alphazero-hard", search="mcts:sims=8")


def test_the_rollout_records_the_searchs_policy_targets():
    """Self-play between two PUCT searches (no root noise, so each search is a function of its
    board): the recorded target of every ply is that search's visit distribution on the ply's
    board, zero on plies that did not happen; the move played is legal there."""
    from czjax import search
    from czjax.players.searched import search_player

    model = models.get_model("mlp3")
    params = models.init_params(model, jax.random.key(3))
    searched = search_player(search.PUCT(sims=6), models.model_player(model))
    with precision.parity():  # two programs compute the same values: full float32 on every backend
        side = rollout.Side(searched, params)
        traj, _ = rollout.play_games(jax.random.key(0), side, side, 4, record_targets=True)
        valid = np.asarray(traj.valid)
        boards = np.asarray(traj.boards())[valid]
        want = jax.jit(lambda b: search.PUCT(sims=6).run(models.model_player(model), params, b, jax.random.key(9)))(
            jnp.asarray(boards)
        )
    got = np.asarray(traj.policy_targets)
    np.testing.assert_allclose(got[valid], np.asarray(want.policy), atol=1e-6)
    assert (got[~valid] == 0).all()
    np.testing.assert_allclose(got[valid].sum(-1), 1.0, atol=1e-6)
    # and the root's value of every ply (what --value-mix mixes into the value target)
    np.testing.assert_allclose(np.asarray(traj.values)[valid], np.asarray(want.value), atol=1e-5)
    assert (np.asarray(traj.values)[~valid] == 0).all()
    plain, _ = rollout.play_games(jax.random.key(0), rollout.Side(searched, params), rollout.Side(searched, params), 4)
    assert plain.policy_targets is None and plain.values is None


def test_search_based_training_steps():
    """A few batches of alphazero on mlp3, from a replay buffer, greedy after 4 plies, the root's
    value mixed into the value target: the loss is finite, the parameters move, the visit targets
    have positive entropy, and the buffer holds the learner's positions with their targets;
    alphazero-hard's targets are the moves played."""
    config = TrainConfig(
        model="mlp3",
        games_per_batch=4,
        algorithm="alphazero",
        search="mcts:sims=4,noise=0.25",
        eval_games=2,
        batches_per_chunk=2,
        opponent="current",
        sample_plies=4,
        replay=ReplaySettings(capacity=512, batch=32),
        solver_eval="network",
    )
    trainer = make_trainer(config)
    state = trainer.init(0)
    new, metrics = trainer.run_chunk(
        state,
        HParams.create(learning_rate=1e-3, value_weight=1.5, discount=1.0, value_mix=0.5),
        2,
        trainer.solver_bench,
    )
    assert (
        np.isfinite(float(metrics["loss"])) and float(metrics["positions"]) > 0 and float(metrics["target_entropy"]) > 0
    )
    # --solver-eval network: the network's move scored on Pons' sets and the public positions (czjax.learn.solver_metrics)
    pons = [float(metrics[f"pons_{s}_error"]) for s in ("L1R1", "L2R1", "L3R1", "L1R2", "L2R2", "L1R3")]
    assert all(0 < e < 100 for e in pons) and float(metrics["pons_mean_error"]) == pytest.approx(
        np.mean(pons), rel=1e-5
    )
    assert 0 < float(metrics["public_optimal"]) <= float(metrics["public_keeps"]) < 1
    # the benchmark is an argument of the chunk: its scores are the final network's on
    # the benchmark, scored alone by a function that closes over it (the way the chunk did before)
    from czjax.learn import solver_metrics

    alone = jax.jit(lambda p: solver_metrics.metrics(trainer.learner, p, solver_metrics.load()))(new.params)
    assert {k: float(v) for k, v in alone.items()} == {k: float(metrics[k]) for k in alone}
    moved = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), new.params, state.params)
    assert max(jax.tree.leaves(moved)) > 0
    buffer = jax.device_get(new.replay)
    filled = int(buffer.filled)
    assert 2 * 4 * 3 <= filled <= 2 * 4 * 21 and int(buffer.cursor) == filled  # 2 batches of 4 games, no wrap yet
    rows = buffer.inputs
    assert rows.valid[:filled].all() and not rows.valid[filled:].any()
    np.testing.assert_allclose(rows.policy_targets[:filled].sum(-1), 1.0, atol=1e-5)
    assert (np.abs(rows.returns[:filled]) <= 1).all()
    np.testing.assert_array_equal(rows.legal[:filled], buffer.boards[:filled, 0, :] == 0)  # each row's own board
    assert rows.legal[np.arange(filled), rows.actions[:filled]].all()
    with pytest.raises(ValueError, match="replay buffer serves search-based training"):
        TrainConfig(replay=ReplaySettings(capacity=10))
    from czjax.learn import algorithms

    batch = losses.LossInputs(
        legal=jnp.ones((3, 7), bool), actions=jnp.asarray([4, 0, 6]), returns=jnp.zeros(3), valid=jnp.ones(3, bool)
    )
    hard = algorithms.played_move_targets(None, None, None, batch, None, None).policy_targets
    np.testing.assert_array_equal(np.asarray(hard), np.eye(7)[[4, 0, 6]])


@pytest.fixture(scope="module")
def both_sides_games():
    """Self-play of a 3-simulation Gumbel search over the current mlp3 (both sides), from random
    openings, trained on both sides' positions from a replay buffer, 2 steps per batch."""
    config = TrainConfig(
        model="mlp3",
        games_per_batch=6,
        algorithm="alphazero",
        search="gumbel:sims=3,considered=2,move=policy,rescale=0",
        eval_games=2,
        batches_per_chunk=1,
        opponent="current",
        both_sides=True,
        openings=2,
        mirror=True,
        replay=ReplaySettings(capacity=256, batch=16, steps=2),
    )
    trainer = make_trainer(config)
    state = trainer.init(0)
    setup = __import__("czjax.learn.trainer", fromlist=["make_setup"]).make_setup(config, None)
    hp = HParams.create(learning_rate=1e-3, value_weight=1.0, discount=1.0)
    with precision.parity():
        traj, results, _ = jax.jit(
            lambda s, k: __import__("czjax.learn.trainer", fromlist=["play_batch"]).play_batch(setup, s, hp, k)
        )(state, jax.random.key(2))
    return config, setup, state, hp, jax.device_get(traj), jax.device_get(results)


def test_both_sides_trains_on_every_position_with_its_movers_outcome(both_sides_games):
    """The training batch holds every ply that happened, each with its mover's board, the
    search's target recorded there, and the game's result for the mover (a NumPy walk over the
    plies), once as played and once mirrored."""
    from czjax.learn import algorithms

    config, setup, state, hp, traj, results = both_sides_games
    batch_of = jax.jit(lambda t, o: algorithms.learner_batch(setup.ctx, t, o, 1.0))  # one program, not op by op
    boards, batch = jax.device_get(batch_of(traj, results.outcome))
    all_boards = np.asarray(traj.boards())
    expected = []
    for t, g in zip(*np.nonzero(traj.valid)):
        mover_is_a = traj.player[t, g] == 0
        result = results.outcome[g] if mover_is_a else -results.outcome[g]
        expected.append((all_boards[t, g].tobytes(), np.round(traj.policy_targets[t, g], 6).tobytes(), float(result)))
    valid = np.asarray(batch.valid)
    half = len(valid) // 2  # the second half is the mirror image
    got = [
        (
            np.asarray(boards)[i].tobytes(),
            np.round(np.asarray(batch.policy_targets)[i], 6).tobytes(),
            float(batch.returns[i]),
        )
        for i in np.flatnonzero(valid[:half])
    ]
    assert sorted(got) == sorted(expected)
    np.testing.assert_array_equal(np.asarray(boards)[half:], np.asarray(boards)[:half, :, ::-1])
    assert (np.abs(np.asarray(results.outcome)) <= 1).all() and not (all_boards[0] == 0).all()  # started from openings


def test_replay_steps_are_successive_steps_on_fresh_draws(both_sides_games):
    """replay.steps = 2: the update equals two of the algorithm's steps, each on its own draw
    (split keys) from the buffer that holds the batch. The steps' gradient is compacted in 8
    chunks here; where the replay steps take the plain gradient instead (a GPU's choice,
    ``replay_plain_gradient``; the set-up built for a GPU here) they are the same steps."""
    from czjax.learn import algorithms, replay
    from czjax.learn.trainer import replay_update

    config, setup, state, hp, traj, results = both_sides_games
    setup = setup._replace(ctx=setup.ctx._replace(num_chunks=8))
    key = jax.random.key(5)
    with precision.parity():
        boards, batch = jax.jit(lambda p, t, o: algorithms.training_batch(setup.ctx, setup.algorithm, p, t, o, hp))(
            state.params, traj, results.outcome
        )
        expected_buffer = jax.jit(replay.add)(state.replay, boards, batch)
        step = jax.jit(lambda p, o, b, inputs: setup.algorithm.step(setup.ctx, p, o, b, inputs, hp))
        want, opt_state = state.params, state.opt_state
        for step_key in jax.random.split(key, 2):
            want, opt_state, _ = step(want, opt_state, *replay.sample(expected_buffer, step_key, 16))
        for platform in ("cpu", "gpu"):  # the chunked gradient, the plain one
            built = setup._replace(platform=platform)
            params, _, metrics, buffer = jax.jit(lambda s, t, o, k: replay_update(built, s, t, o, hp, k))(
                state, traj, results.outcome, key
            )
            # two compiled programs (one jitted update, the steps one by one): they may sum in other
            # orders (on an AVX-512 CPU too), so the same steps within float noise (tests/agreement.py)
            assert agreement.took_the_same_steps(params, want, float(hp.learning_rate), 2), platform
    assert float(metrics["replay_reuse"]) == pytest.approx(2 * 16 / float(np.asarray(batch.valid).sum()))
    with pytest.raises(ValueError, match="both_sides"):
        TrainConfig(model="mlp3", algorithm="alphazero", search="gumbel:sims=4", both_sides=True)  # opponent self
    with pytest.raises(ValueError, match="openings must be between 0 and 6"):
        TrainConfig(openings=7)


def test_the_old_name_of_alphazero_hard_still_reads_with_a_warning():
    """The algorithm ``alpha`` (Connect-Zero's alpha mode) is ``alphazero-hard`` now: given to the
    config or typed as a flag it reads as the new name with a FutureWarning; a stored config that
    says ``alpha`` reads silently (tests/test_stored_settings.py); anything else is still refused."""
    import warnings

    from czjax import cli

    with pytest.warns(FutureWarning, match="the algorithm 'alpha' is called 'alphazero-hard' now"):
        config = TrainConfig(model="mlp3", algorithm="alpha", search="mcts:sims=8")
    assert config.algorithm == "alphazero-hard" and config == config.override({"algorithm": "alphazero-hard"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TrainConfig.from_dict({**config.to_dict(), "algorithm": "alpha"}) == config
    parser = cli.build_parser()
    with pytest.warns(FutureWarning, match="'alpha' goes in the next release"):
        args = parser.parse_args(["train", "--model", "mlp3", "--algorithm", "alpha", "--search", "mcts:sims=8"])
    assert cli.train_spec(args).config.algorithm == "alphazero-hard"
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--algorithm", "alphago"])
