"""play_games: determinism and invariants, every game replayed through the reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, models, players, rollout
from tests.reference import RefGame

NUM_GAMES = 301  # odd on purpose: A starts the first 151


def play(key, a=players.random_punisher, b=players.random_player, n=NUM_GAMES, temperature=1.0, **kw):
    traj, results = rollout.play_games(
        key, rollout.Side(a, None, temperature), rollout.Side(b, None, temperature), n, **kw
    )
    return jax.tree.map(np.asarray, traj), jax.tree.map(np.asarray, results), np.asarray(traj.boards())


@pytest.fixture(scope="module")
def games():
    return play(jax.random.key(42))


def test_same_key_same_games_other_key_other_games(games):
    traj, results, boards = games
    traj2, results2, boards2 = play(jax.random.key(42))
    np.testing.assert_array_equal(boards, boards2)
    np.testing.assert_array_equal(traj.actions, traj2.actions)
    np.testing.assert_array_equal(results.outcome, results2.outcome)
    traj3, _, _ = play(jax.random.key(43))
    assert (traj3.actions != traj.actions).any()


def test_half_the_games_with_each_player_first(games):
    traj, results, _ = games
    assert results.a_first.sum() == 151 and results.a_first[:151].all()
    np.testing.assert_array_equal(traj.player[0], np.where(results.a_first, 0, 1))


def test_trajectory_invariants(games):
    traj, results, boards = games
    T, B = traj.actions.shape
    t = np.arange(T)[:, None]
    # valid plies are exactly a prefix of each game's length
    np.testing.assert_array_equal(traj.valid, t < results.length[None, :])
    # players alternate, every ply
    assert (traj.player[1:] != traj.player[:-1]).all()
    # piece counts match plies: the mover has floor(t/2) pieces, the opponent ceil(t/2)
    mine = (boards == 1).sum((2, 3))
    theirs = (boards == -1).sum((2, 3))
    valid = traj.valid
    np.testing.assert_array_equal(mine[valid], np.broadcast_to(t // 2, (T, B))[valid])
    np.testing.assert_array_equal(theirs[valid], np.broadcast_to((t + 1) // 2, (T, B))[valid])
    # the column played was legal
    legal = boards[:, :, 0, :] == 0
    assert np.take_along_axis(legal, traj.actions[..., None].astype(int), -1)[..., 0][valid].all()
    assert (traj.actions[~valid] == 0).all()


def test_games_replay_identically_in_the_reference(games):
    traj, results, boards = games
    for i in range(NUM_GAMES):
        ref = RefGame()
        a_is_player = 1 if results.a_first[i] else 2
        for t in range(results.length[i]):
            assert boards[t, i].tolist() == ref.canonical(), (i, t)
            ref.play(int(traj.actions[t, i]))
        assert ref.over, i
        expected = 0 if ref.winner == 0 else (1 if ref.winner == a_is_player else -1)
        assert results.outcome[i] == expected, i
        # the recorded final position is the reference's final board
        assert np.asarray(game.unpack(jax.tree.map(lambda x: x[i], results.final))).tolist() == ref.canonical()


def test_punisher_beats_random_and_never_misses_a_win(games):
    traj, results, boards = games
    assert results.outcome.mean() > 0.7
    wins, _ = players.winning_columns(jnp.asarray(boards.reshape(-1, 6, 7)))
    wins = np.asarray(wins).reshape(boards.shape[:2] + (7,))
    punisher_to_move = traj.valid & (traj.player == 0) & wins.any(-1)
    played = np.take_along_axis(wins, traj.actions[..., None].astype(int), -1)[..., 0]
    assert punisher_to_move.sum() > 50
    assert played[punisher_to_move].all()


def test_players_with_broken_logits_still_play_legal_games():
    def nan_player(params, boards, key):
        return players.PlayerOutput(logits=jnp.full(boards.shape[:-2] + (7,), jnp.nan))

    traj, results, boards = play(jax.random.key(0), a=nan_player, b=players.random_player, n=64)
    legal = boards[:, :, 0, :] == 0
    assert np.take_along_axis(legal, traj.actions[..., None].astype(int), -1)[..., 0][traj.valid].all()
    assert (
        (boards != 0).sum((2, 3))[traj.valid] == np.broadcast_to(np.arange(42)[:, None], traj.valid.shape)[traj.valid]
    ).all()


def test_temperature_zero_makes_games_deterministic():
    def first_col_player(params, boards, key):
        return players.PlayerOutput(logits=jnp.broadcast_to(-jnp.arange(7.0), boards.shape[:-2] + (7,)))

    traj, results, _ = play(jax.random.key(1), a=first_col_player, b=first_col_player, n=4, temperature=0.0)
    # both sides always play the leftmost free column (0,0,0,0,0,0,1,...): every game is the same
    assert (traj.actions == traj.actions[:, :1]).all()
    ref = RefGame()
    for t in range(results.length[0]):
        ref.play(int(traj.actions[t, 0]))
    assert ref.over and list(ref.moves[:7]) == [0, 0, 0, 0, 0, 0, 1]


def test_moves_are_greedy_after_the_sampled_plies():
    """sample_plies=k: the first k plies of every game are sampled at the temperature, every
    later one is the player's most likely legal column."""
    model = models.get_model("mlp")
    params = models.init_params(model, jax.random.key(2))
    player = models.model_player(model)
    side = rollout.Side(player, params, temperature=1.0)
    traj, _ = rollout.play_games(jax.random.key(3), side, side, 64, record_targets=True, sample_plies=6)
    valid, actions = np.asarray(traj.valid), np.asarray(traj.actions)
    legal = np.asarray(traj.boards())[..., 0, :] == 0
    greedy = np.argmax(
        np.where(legal, np.asarray(traj.policy_targets), -1.0), axis=-1
    )  # softmax(logits) over legal columns
    assert (actions[6:][valid[6:]] == greedy[6:][valid[6:]]).all()
    assert (actions[:6][valid[:6]] != greedy[:6][valid[:6]]).mean() > 0.3  # sampled: often not the favourite


def test_unrolling_the_ply_loop_plays_the_same_games():
    """unroll is a speed choice: 3 pairs of plies per loop step (21 pairs: 7 steps) give the
    same games as 1 (a network against RandomPunisher)."""
    model = models.get_model("mlp")
    params = models.init_params(model, jax.random.key(2))
    player = models.model_player(model)
    a, b = rollout.Side(player, params), rollout.Side(players.random_punisher)
    plain = rollout.play_games(jax.random.key(4), a, b, 16)
    unrolled = rollout.play_games(jax.random.key(4), a, b, 16, unroll=3)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(unrolled)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_play_games_rejects_tiny_batches():
    with pytest.raises(ValueError, match="at least 2"):
        rollout.play_games(
            jax.random.key(0), rollout.Side(players.random_player), rollout.Side(players.random_player), 1
        )


@pytest.fixture(scope="module")
def mlp_pair():
    from czjax import models

    model = models.get_model("mlp")
    return (
        models.model_player(model),
        models.init_params(model, jax.random.key(0)),
        models.init_params(model, jax.random.key(1)),
    )


def test_evaluating_only_running_games_plays_the_same_games(mlp_pair):
    """Chunked evaluation (finished games skipped) is a speed choice: the games are identical,
    alone and in a vmapped scan where a chunk is skipped only when idle in every configuration."""
    player, params_a, params_b = mlp_pair
    n = 21

    def games(key, pa, pb, chunks, axis_name=None):
        a, b = rollout.Side(player, pa), rollout.Side(player, pb)
        traj, results = rollout.play_games(key, a, b, n, chunks=chunks, axis_name=axis_name)
        return traj.actions, traj.valid, results.outcome, results.length

    keys = jax.random.split(jax.random.key(7), 2)
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), params_a, params_b)
    vmapped = jax.vmap(lambda k, p: games(k, p, params_b, 3, "c"), axis_name="c")(keys, stacked)
    for i, pa in enumerate((params_a, params_b)):
        whole = games(keys[i], pa, params_b, 1)
        for got in (games(keys[i], pa, params_b, 3), jax.tree.map(lambda x: x[i], vmapped)):
            for a, b in zip(got, whole):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert (np.asarray(whole[3]) < 42).any()  # some games ended early: chunks were skipped


def test_both_halves_evaluated_as_one_vmapped_call_play_the_same_games(mlp_pair):
    """Where both sides are one player (a GPU's choice, ``merged_halves``; built for a GPU here),
    each ply evaluates the two halves' movers as one call vmapped over the halves, each with its
    side's parameters and key: the same games and the same recorded targets as two calls, for a
    network with two sets of parameters (self-play against a frozen copy), for a search over it
    (its Gumbel noise from each half's key) and for a built-in player without parameters."""
    from czjax import search
    from czjax.players.searched import search_player

    player, params_a, params_b = mlp_pair
    searched = search_player(search.make_search("gumbel", "sims=4"), player)
    cases = [(player, params_a, params_b), (searched, params_a, params_a), (players.random_punisher, None, None)]

    def games(side_player, pa, pb, platform):
        a, b = rollout.Side(side_player, pa), rollout.Side(side_player, pb, 0.5)
        options = dict(chunks=1, record_targets=True, platform=platform)
        return jax.jit(lambda: rollout.play_games(jax.random.key(5), a, b, 12, **options))()

    def merged(sides, num_games):
        return rollout._match(
            sides, num_games, "gpu", chunks=1, sample_plies=None, axis_name=None, record_targets=False
        ).merged

    for case in cases:
        two_calls = games(*case, "cpu")
        assert merged((rollout.Side(case[0], case[1]), rollout.Side(case[0], case[2])), 12)
        one_call = games(*case, "gpu")
        for a, b in zip(jax.tree.leaves(one_call), jax.tree.leaves(two_calls)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    assert not merged((rollout.Side(player, params_a), rollout.Side(players.random_punisher)), 12)
    assert not merged((rollout.Side(player, params_a), rollout.Side(player, params_b)), 13)


def test_merged_halves_compacted_play_the_same_games(mlp_pair):
    """Merged halves compact as each half would alone (its running games first, in chunks): a
    chunk runs while either half has a game in it, so the games, the recorded targets and the
    chunks' keys are those of two compacted calls; alone and in a vmapped scan, where a chunk is
    skipped only when idle in both halves of every configuration."""
    player, params_a, params_b = mlp_pair
    n = 22

    def games(key, pa, platform, axis_name=None):
        a, b = rollout.Side(player, pa), rollout.Side(player, params_b, 0.7)
        options = dict(chunks=3, record_targets=True, platform=platform, axis_name=axis_name)
        traj, results = rollout.play_games(key, a, b, n, **options)
        return traj.actions, traj.valid, traj.policy_targets, traj.values, results.outcome, results.length

    match = rollout._match(
        (rollout.Side(player, params_a), rollout.Side(player, params_b)), n, "gpu", 3, None, None, False
    )
    assert match.merged and match.chunks == [3, 3]
    keys = jax.random.split(jax.random.key(3), 2)
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), params_a, params_b)
    vmapped = jax.vmap(lambda k, p: games(k, p, "gpu", "c"), axis_name="c")(keys, stacked)
    for i, pa in enumerate((params_a, params_b)):
        two_calls = games(keys[i], pa, "cpu")
        for got in (games(keys[i], pa, "gpu"), jax.tree.map(lambda x: x[i], vmapped)):
            for a, b in zip(got, two_calls):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    assert (np.asarray(two_calls[5]) < 36).any()  # some games ended early: chunks were skipped


# Distinct Connect 4 positions after exactly n plies, n = 0..4 (OEIS A212693): the table of
# openings holds every position up to n plies deep, each once.
POSITIONS_AFTER_PLIES = (1, 7, 49, 238, 1120)


@pytest.mark.parametrize("max_plies", [0, 1, 2, 3, 4])
def test_openings_are_every_distinct_position_once(max_plies):
    table = rollout.opening_positions(max_plies)
    assert len(table) == sum(POSITIONS_AFTER_PLIES[: max_plies + 1])
    assert len({b.tobytes() for b in table}) == len(table)
    stones = (table != 0).sum((1, 2))
    assert stones.max() == max_plies and (np.bincount(stones) == POSITIONS_AFTER_PLIES[: max_plies + 1]).all()
    # canonical: the side to move has as many stones as the opponent, or one fewer
    assert (((table == -1).sum((1, 2)) - (table == 1).sum((1, 2))) == stones % 2).all()


def test_games_start_from_openings_drawn_uniformly():
    traj, results, boards = play(jax.random.key(5), n=2000, openings=2)
    table = rollout.opening_positions(2)
    index = {b.tobytes(): i for i, b in enumerate(table)}
    drawn = np.bincount([index[b.tobytes()] for b in boards[0]], minlength=len(table))  # every start is in the table
    expected = 2000 / len(table)
    assert ((drawn - expected) ** 2 / expected).sum() < 100  # chi-square, 56 degrees of freedom (p ~ 1e-4)
    # the games go on from there by the rules: each ply adds one stone, the valid plies a prefix
    ply_stones = (boards != 0).sum((2, 3))
    grows = ply_stones[1:] - ply_stones[:-1]
    assert (grows[traj.valid[1:]] == 1).all()
    # and without openings every game starts empty, as before (the openings draw a stream of their own)
    plain, _, plain_boards = play(jax.random.key(5), n=2000)
    assert (plain_boards[0] == 0).all()


def test_a_side_s_parameters_and_temperature_are_traced_its_player_static(mlp_pair):
    """New parameters or temperatures play without compiling again (they are traced); another
    player is another program. The games follow the temperatures: at 0 the same key plays the
    most likely columns, elsewhere samples."""
    player, params_a, params_b = mlp_pair
    key = jax.random.key(11)
    before = rollout.play_games._cache_size()
    greedy, _ = rollout.play_games(key, rollout.Side(player, params_a, 0.0), rollout.Side(player, params_b, 0.0), 6)
    sampled, _ = rollout.play_games(key, rollout.Side(player, params_b, 1.5), rollout.Side(player, params_a, 0.7), 6)
    assert rollout.play_games._cache_size() == before + 1
    assert not np.array_equal(np.asarray(greedy.actions), np.asarray(sampled.actions))
    rollout.play_games(key, rollout.Side(players.random_player), rollout.Side(player, params_a, 0.0), 6)
    assert rollout.play_games._cache_size() == before + 2
