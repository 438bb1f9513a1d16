"""Masking, sampling, entropy and the built-in players, against NumPy and the reference."""

import json
import math
import random
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, players
from tests.reference import COLS, random_game, replay

CHI2_CRITICAL_P001 = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46}

sample_jit = jax.jit(players.sample_masked)
punisher_jit = jax.jit(lambda boards: players.random_punisher(None, boards, None).logits)


def chi2(counts, probs):
    counts = np.asarray(counts, float)
    expected = counts.sum() * np.asarray(probs, float)
    keep = expected > 0
    assert (counts[~keep] == 0).all(), "a column with probability 0 was sampled"
    return float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()), int(keep.sum()) - 1


def random_legal(rng, n):
    legal = rng.random((n, COLS)) < 0.6
    legal[np.arange(n), rng.integers(0, COLS, n)] = True  # at least one legal column
    return legal


def test_sampling_follows_the_masked_softmax():
    rng = np.random.default_rng(0)
    legal = random_legal(rng, 6)
    logits = rng.normal(size=(6, COLS)).astype(np.float32) * 2
    reps = 20000
    for temperature in (1.0, 0.5, 2.0):
        cols = sample_jit(
            jax.random.key(1),
            jnp.repeat(jnp.asarray(legal), reps, 0),
            jnp.repeat(jnp.asarray(logits), reps, 0),
            temperature,
        )
        cols = np.asarray(cols).reshape(6, reps)
        for i in range(6):
            z = np.where(legal[i], logits[i] / temperature, -np.inf)
            p = np.exp(z - z.max())
            p /= p.sum()
            stat, dof = chi2(np.bincount(cols[i], minlength=COLS), p)
            if dof:
                assert stat < CHI2_CRITICAL_P001[dof], (temperature, i, stat)


def test_sampling_never_picks_illegal_columns_even_with_broken_logits():
    rng = np.random.default_rng(1)
    legal = random_legal(rng, 3000)
    logits = rng.normal(size=(3000, COLS)).astype(np.float32) * 30
    logits[:1000] = -np.inf  # a player with no preference left
    logits[1000:2000, :3] = np.nan
    cols = np.asarray(sample_jit(jax.random.key(2), jnp.asarray(legal), jnp.asarray(logits), 1.0))
    assert legal[np.arange(3000), cols].all()
    greedy = np.asarray(sample_jit(jax.random.key(2), jnp.asarray(legal), jnp.asarray(logits), 0.0))
    assert legal[np.arange(3000), greedy].all()


def test_a_gpus_sampling_by_columns_draws_the_cpus_moves():
    """A GPU samples column by column (``column_sampling``: one kernel a ply, not five), a CPU by
    reductions over rows: the same uniforms give the same columns, bit for bit, on rows with
    broken logits (-inf, NaN), rows with one legal column or none, ties, and per-row temperatures
    including 0 (greedy)."""
    from czjax.util import platforms

    rng = np.random.default_rng(4)
    n = 4000
    legal = rng.random((n, COLS)) < 0.6
    legal[:100] = False  # no legal column
    logits = (rng.normal(size=(n, COLS)) * 4).astype(np.float32)
    logits[100:600] = -np.inf
    logits[600:1100, :3] = np.nan
    logits[1100:1600] = np.round(logits[1100:1600])  # ties
    temperature = rng.choice([0.0, 0.25, 1.0, 3.0], n).astype(np.float32)
    uniform = rng.random(n).astype(np.float32)
    drawn = {}
    for platform in ("cpu", "gpu"):
        with platforms.building_for(platform):
            sample = jax.jit(lambda u, lg, lo, t: players.sample_masked_uniform(u, lg, lo, t))
            drawn[platform] = np.asarray(sample(uniform, legal, logits, temperature))
    np.testing.assert_array_equal(drawn["gpu"], drawn["cpu"])
    assert legal[np.arange(100, n), drawn["gpu"][100:]][legal[100:].any(1)].all()


def test_temperature_zero_is_greedy_over_legal_columns():
    rng = np.random.default_rng(2)
    legal = random_legal(rng, 500)
    logits = rng.normal(size=(500, COLS)).astype(np.float32)
    cols = np.asarray(sample_jit(jax.random.key(3), jnp.asarray(legal), jnp.asarray(logits), 0.0))
    np.testing.assert_array_equal(cols, np.where(legal, logits, -np.inf).argmax(1))


def test_masked_entropy_against_numpy_and_finite_with_full_columns():
    rng = np.random.default_rng(3)
    legal = random_legal(rng, 200)
    logits = rng.normal(size=(200, COLS)).astype(np.float32) * 3
    got = np.asarray(players.masked_entropy(jnp.asarray(legal), jnp.asarray(logits)))
    expected = []
    for lg, lo in zip(legal, logits):
        z = lo[lg].astype(np.float64)
        p = np.exp(z - z.max())
        p /= p.sum()
        expected.append(-(p * np.log(p)).sum())
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    # uniform logits: log(number of legal columns); gradient finite
    uniform = players.masked_entropy(jnp.asarray(legal), jnp.zeros((200, COLS)))
    np.testing.assert_allclose(np.asarray(uniform), np.log(legal.sum(1)), rtol=1e-5)
    grad = jax.grad(lambda lo: players.masked_entropy(jnp.asarray(legal), lo).sum())(jnp.asarray(logits))
    assert np.isfinite(np.asarray(grad)).all()
    board = jnp.asarray(game.from_moves("111111222222"))[None]
    assert np.isfinite(float(players.entropy(board, jnp.zeros((1, COLS)))[0]))
    np.testing.assert_allclose(float(players.entropy(board, jnp.zeros((1, COLS)))[0]), math.log(5), rtol=1e-5)


def test_loss_masking_adds_a_finite_value():
    legal = jnp.array([[True, False, True, True, True, True, True]])
    logits = jnp.arange(7.0)[None]
    assert float(players.mask_for_loss(legal, logits)[0, 1]) == pytest.approx(1.0 - 1e9)
    assert float(players.mask_for_sampling(legal, logits)[0, 1]) == -np.inf


# ---------------------------------------------------------------------------------------------
# RandomPunisher


@pytest.fixture(scope="module")
def built_positions():
    """Positions from random games with the reference's answer: (board, wins, threats, legal)."""
    rng = random.Random(7)
    out = []
    while len(out) < 3000:
        g = random_game(rng)
        for t in range(0, len(g.moves) - 1):
            ref = replay(g.moves[:t])
            me, other = ref.to_move, 3 - ref.to_move
            wins = [ref.would_win(c, me) for c in range(COLS)]
            threats = [ref.would_win(c, other) for c in range(COLS)]
            out.append((ref.canonical(), wins, threats, ref.legal()))
    return out


def punisher_choices(boards):
    logits = np.asarray(punisher_jit(jnp.asarray(np.array(boards, np.int8))))
    return logits == 0.0


def test_punisher_wins_blocks_or_plays_anything(built_positions):
    chosen = punisher_choices([b for b, *_ in built_positions])
    kinds = {"win": 0, "block": 0, "free": 0}
    for (board, wins, threats, legal), ch in zip(built_positions, chosen):
        ch = (ch & np.array(legal)).tolist()
        if any(wins):
            assert ch == wins
            kinds["win"] += 1
        elif sum(threats) == 1:
            assert ch == threats
            kinds["block"] += 1
        elif not any(threats):
            assert ch == legal
            kinds["free"] += 1
        else:
            assert ch == threats  # several threats: it blocks one of them
    assert min(kinds.values()) > 50, kinds  # the built positions cover every case


def test_leftmost_punisher_takes_the_first_win_or_block(built_positions):
    """The PyTorch project's RandomPunisher (``find_best_move`` scans the columns from 0): the
    leftmost win, else the leftmost block, else any legal column; as the reference says, and as
    the PyTorch peer's NumPy version (torch_peer.random_punisher_logits) forces."""
    from czjax.bench import torch_peer

    boards = np.array([b for b, *_ in built_positions], np.int8)
    logits = np.asarray(jax.jit(lambda b: players.random_punisher_leftmost(None, b, None).logits)(boards))
    peer_forced = torch_peer.random_punisher_logits(boards) == 0.0
    kinds = {"win": 0, "block": 0, "free": 0, "tied": 0}
    for (board, wins, threats, legal), row, peer in zip(built_positions, logits, peer_forced):
        chosen = ((row == 0.0) & np.array(legal)).tolist()
        forced = wins if any(wins) else threats
        if any(forced):
            expected = [c == forced.index(True) for c in range(COLS)]
            kinds["win" if any(wins) else "block"] += 1
            kinds["tied"] += sum(forced) > 1
        else:
            expected = legal
            kinds["free"] += 1
        assert chosen == expected
        assert chosen == (peer & np.array(legal)).tolist()
    assert min(kinds.values()) > 20, kinds  # ties (two wins or two threats) among them


def test_punisher_on_solver_labelled_positions():
    path = Path(game.__file__).parent / "data" / "c4_eval_public.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    chosen = punisher_choices([game.from_string(r["board"]) for r in records])
    for rec, ch in zip(records, chosen):
        picked = [c + 1 for c in range(COLS) if ch[c] and c + 1 in rec["legal_cols"]]
        if rec["immediate_win_cols"]:
            assert picked == rec["immediate_win_cols"], rec["id"]
        elif len(rec["opponent_threat_cols"]) == 1:
            assert picked == rec["opponent_threat_cols"], rec["id"]
        elif not rec["opponent_threat_cols"]:
            assert picked == rec["legal_cols"], rec["id"]


def test_punisher_is_uniform_over_legal_columns_without_tactics(built_positions):
    free = [(b, l) for b, w, t, l in built_positions if not any(w) and not any(t)]
    rng = random.Random(11)
    picks = rng.sample([p for p in free if sum(p[1]) < COLS], 4) + rng.sample([p for p in free if sum(p[1]) == COLS], 2)
    reps = 14000
    boards = jnp.asarray(np.repeat(np.array([b for b, _ in picks], np.int8), reps, 0))
    logits = punisher_jit(boards)
    cols = np.asarray(players.sample(jax.random.key(5), boards, logits)).reshape(len(picks), reps)
    for (board, legal), c in zip(picks, cols):
        p = np.array(legal, float) / sum(legal)
        stat, dof = chi2(np.bincount(c, minlength=COLS), p)
        assert stat < CHI2_CRITICAL_P001[dof], (stat, legal)


def test_random_player_gives_uniform_logits():
    boards = game.new_boards(3)
    np.testing.assert_array_equal(
        np.asarray(players.random_player(None, boards, jax.random.key(0)).logits), np.zeros((3, COLS))
    )


OLD_PATHS = [  # (old module, name, its home now)
    ("czjax.agents", "Agent", "czjax.players.agent"),
    ("czjax.agents", "searched_move", "czjax.players.agent"),
    ("czjax.agents", "load_agent", "czjax.players.loading"),
    ("czjax.agents", "DEFAULT_OPPONENT", "czjax.players.loading"),
    ("czjax.minimax", "Minimax", "czjax.players.minimax"),
    ("czjax.models.player", "model_player", "czjax.players.network"),
    ("czjax.search", "search_player", "czjax.players.searched"),
    ("czjax.search.registry", "search_player", "czjax.players.searched"),
    ("czjax.compaction", "over_valid_chunks", "czjax.row_skipping"),
    ("czjax.run", "folders", "czjax.jobs"),
]


@pytest.mark.parametrize(("old", "name", "home"), OLD_PATHS)
def test_an_old_import_path_answers_with_a_deprecation_warning(old, name, home):
    """A moved name still answers from its old module for one release: the same object, with a
    warning that names its home now and points at the caller's line."""
    import importlib

    with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to {home}.{name}") as caught:
        value = getattr(importlib.import_module(old), name)
    assert value is getattr(importlib.import_module(home), name)
    assert caught[0].filename == __file__
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        importlib.import_module(old).nothing_here  # noqa: B018


def test_a_renamed_package_answers_for_its_modules_old_paths():
    """``czjax.run`` is ``czjax.jobs`` now: ``import czjax.run.<module>`` and ``from czjax.run.<module>
    import <name>`` still give the new module's own objects, with a warning naming the new path."""
    import importlib
    import sys

    for old in [m for m in sys.modules if m.startswith("czjax.run.")]:
        del sys.modules[old]  # an earlier test may have imported it
    with pytest.warns(DeprecationWarning, match="czjax.run.presets moved to czjax.jobs.presets"):
        from czjax.run.presets import get_preset
    assert get_preset is importlib.import_module("czjax.jobs.presets").get_preset
    with pytest.warns(DeprecationWarning, match="czjax.run.scan moved to czjax.jobs.scan"):
        old = importlib.import_module("czjax.run.scan")
    assert old is importlib.import_module("czjax.jobs.scan")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("czjax.run.nothing_here")


def test_the_players_package_names_what_players_named():
    """``czjax.players``, a package now, names what the module did, with no warning; the models'
    package still names a network's player."""
    import warnings

    from czjax import models
    from czjax.players import builtin, network

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert players.random_punisher is builtin.random_punisher and players.BUILTIN_PLAYERS is builtin.BUILTIN_PLAYERS
        assert models.model_player is network.model_player and models.apply_model is network.apply_model
