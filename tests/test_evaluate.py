"""Measuring strength: solver-labelled accuracy, puzzles, ratings, and loading players.

References: the data file's own labels (optimal and outcome-keeping columns, immediate wins and
threats) and its README's reference figures; puzzles replayed in the plain-Python rules of
tests/reference.py; ratings against results scripted from known strengths.
"""

import json
from fractions import Fraction

import numpy as np
import pytest

from czjax.evaluate import pons, puzzles, tournament
from czjax.evaluate import positions as labelled
from czjax.players.agent import Agent, policy
from czjax.players.loading import load_agent
from czjax.util import checkpoint
from tests.reference import COLS, replay

# the reference figures published with the evaluation data (exact expectations over the players' randomness, 3 decimals)
REFERENCE = {
    "random": {"sampled_optimal": 0.285, "sampled_keeps_outcome": 0.652, "sampled_keeps_outcome_not_lost": 0.508},
    "random-punisher": {
        "sampled_optimal": 0.568,
        "sampled_keeps_outcome": 0.780,
        "sampled_keeps_outcome_not_lost": 0.690,
    },
}


@pytest.fixture(scope="module")
def records():
    with labelled.default_positions_path().open() as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def positions():
    return labelled.load_positions()


def reference_choices(player: str, record: dict) -> list[int]:
    """The columns (1-based) a built-in player picks uniformly among, from the file's labels."""
    if player == "random":
        return record["legal_cols"]
    return record["immediate_win_cols"] or record["opponent_threat_cols"] or record["legal_cols"]


def test_derived_columns_equal_the_files_labels(records, positions):
    optimal, keeps, value = labelled.good_columns(positions["scores"])
    for i, r in enumerate(records):
        assert list(np.flatnonzero(optimal[i]) + 1) == r["optimal_cols"]
        assert list(np.flatnonzero(keeps[i]) + 1) == r["outcome_preserving_cols"]
        assert (value[i] > 0, value[i] == 0, value[i] < 0) == tuple(r["outcome"] == o for o in ("win", "draw", "loss"))
    assert positions["ply"].tolist() == [r["ply"] for r in records]


@pytest.mark.parametrize("player", ["random", "random-punisher"])
def test_builtin_players_reproduce_the_reference_figures(player, records, positions):
    report = labelled.accuracy(load_agent(player), positions)
    assert report["n"] == 1000
    for key, expected in REFERENCE[player].items():
        assert abs(report[key] - expected) <= 0.001, (key, report[key])
    # Exactly (as fractions) from the file's own labels: uniform over the player's choice set.
    exact_opt = sum(
        Fraction(len(set(reference_choices(player, r)) & set(r["optimal_cols"])), len(reference_choices(player, r)))
        for r in records
    )
    exact_keep = sum(
        Fraction(
            len(set(reference_choices(player, r)) & set(r["outcome_preserving_cols"])),
            len(reference_choices(player, r)),
        )
        for r in records
    )
    assert report["sampled_optimal"] == pytest.approx(float(exact_opt / len(records)), abs=1e-6)
    assert report["sampled_keeps_outcome"] == pytest.approx(float(exact_keep / len(records)), abs=1e-6)
    # Greedy ties go to the lowest column of the choice set.
    greedy = [min(reference_choices(player, r)) for r in records]
    assert report["greedy_optimal"] == pytest.approx(np.mean([g in r["optimal_cols"] for g, r in zip(greedy, records)]))
    assert report["greedy_keeps_outcome"] == pytest.approx(
        np.mean([g in r["outcome_preserving_cols"] for g, r in zip(greedy, records)])
    )
    # The ply bins partition the positions, and their weighted mean is the overall figure.
    bins = report["by_ply"]
    assert [b["plies"] for b in bins] == ["6-10", "11-15", "16-20", "21-25", "26-30"]
    assert sum(b["n"] for b in bins) == 1000
    assert sum(b["n"] * b["sampled_optimal"] for b in bins) / 1000 == pytest.approx(report["sampled_optimal"])


def test_accuracy_of_a_model_is_a_proper_expectation(model_checkpoints, positions):
    report = labelled.accuracy(load_agent(str(model_checkpoints["cnn-mk4-value"])), positions)
    for key in labelled.ACCURACY_KEYS:
        assert 0.0 <= report[key] <= 1.0
    # keeping the outcome is weaker than being optimal
    assert report["sampled_keeps_outcome"] >= report["sampled_optimal"]
    assert report["greedy_keeps_outcome"] >= report["greedy_optimal"]


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "not JSON"),
        ('{"moves": "44"}', "needs 'moves', 'scores'"),
        ('{"moves": "48", "scores": [0,0,0,0,0,0,0]}', "not a column"),
        ('{"moves": "44", "scores": [0,0,0]}', "list of 7"),
        ('{"moves": "444444", "scores": [0,0,0,0,0,0,0]}', "null for a full one"),
        ('{"moves": "4", "scores": [0,0,0,0,0,0,0], "board": "' + "." * 42 + '"}', "does not match"),
    ],
)
def test_malformed_positions_files_name_the_line(tmp_path, line, message):
    path = tmp_path / "positions.jsonl"
    good = '{"moves": "4", "scores": [0,0,0,0,0,0,0]}'
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message) as exc:
        labelled.load_positions(path)
    assert f"{path}:2" in str(exc.value)


# --------------------------------------------------------------------------------------------
# Puzzles


@pytest.fixture(scope="module")
def shipped_puzzles():
    return puzzles.load()


def test_shipped_puzzles_are_the_seed_0_set():
    with puzzles.default_puzzles_path().open() as f:
        shipped = [json.loads(line) for line in f]
    assert shipped == puzzles.generate(seed=0, per_kind=5000)


def test_generation_depends_only_on_the_seed():
    a, b, c = (
        puzzles.generate(seed=3, per_kind=40),
        puzzles.generate(seed=3, per_kind=40),
        puzzles.generate(seed=4, per_kind=40),
    )
    assert a == b and a != c
    assert [r["kind"] for r in a] == ["win"] * 40 + ["block"] * 40


def test_every_shipped_puzzle_is_verified_by_the_reference_rules(shipped_puzzles):
    records = shipped_puzzles["records"]
    assert len(records) == 10000 and sum(r["kind"] == "win" for r in records) == 5000
    seen = set()
    for r in records:
        g = replay([int(ch) - 1 for ch in r["moves"]])
        assert not g.over
        me, them = g.to_move, 3 - g.to_move
        wins = [c + 1 for c in range(COLS) if g.would_win(c, me)]
        threats = [c + 1 for c in range(COLS) if g.would_win(c, them)]
        if r["kind"] == "win":
            assert wins and r["cols"] == wins
        else:
            assert not wins and len(threats) == 1 and r["cols"] == threats
        key = (str(g.canonical()), r["kind"])
        assert key not in seen  # no position twice
        seen.add(key)


def test_puzzle_scores_of_builtin_players(shipped_puzzles, model_checkpoints):
    punisher = puzzles.score(load_agent("random-punisher"), shipped_puzzles)
    for kind in puzzles.KINDS:
        assert punisher[kind]["n"] == 5000 and punisher[kind]["greedy"] == 1.0
        assert punisher[kind]["sampled"] == pytest.approx(1.0, abs=1e-6)  # float32 probabilities
    assert punisher["value_error_win"] is None
    random = puzzles.score(load_agent("random"), shipped_puzzles)
    for kind in puzzles.KINDS:
        expected = np.mean(
            [
                len(r["cols"]) / sum(replay([int(ch) - 1 for ch in r["moves"]]).legal())
                for r in shipped_puzzles["records"]
                if r["kind"] == kind
            ]
        )
        assert random[kind]["sampled"] == pytest.approx(expected, abs=1e-6)
    assert 1 / 7 <= random["block"]["sampled"] < 0.2  # one answer among at most 7 columns
    model = puzzles.score(load_agent(str(model_checkpoints["cnn-mk4-value"])), shipped_puzzles)
    assert 0.0 <= model["value_error_win"] <= 2.0


def test_malformed_puzzle_files_are_rejected(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"kind": "win", "moves": "1212", "cols": [8]}\n')
    with pytest.raises(ValueError, match="columns 1-7"):
        puzzles.load(path)
    path.write_text('{"kind": "fork", "moves": "1212", "cols": [1]}\n')
    with pytest.raises(ValueError, match="kind must be"):
        puzzles.load(path)


# --------------------------------------------------------------------------------------------
# Ratings and tournaments


def scripted_results(ratings, games, rng=None):
    n = len(ratings)
    results = np.zeros((n, n, 3))
    for i in range(n):
        for j in range(i + 1, n):
            p = tournament.expected_score(ratings[i], ratings[j])
            wins = rng.binomial(games, p) if rng is not None else games * p
            results[i, j] = (wins, 0, games - wins)
            results[j, i] = (games - wins, 0, wins)
    return results


def test_ratings_fit_recovers_known_strengths():
    true = np.array([0.0, 200.0, 450.0, -150.0])
    fitted, half = tournament.fit_ratings(scripted_results(true, 1000))  # exact expectations
    np.testing.assert_allclose(fitted, true, atol=1.0)
    assert half[0] == 0 and (half[1:] > 0).all()
    fitted, half = tournament.fit_ratings(scripted_results(true, 2000, np.random.default_rng(0)))
    assert (np.abs(fitted - true) <= 1.5 * half + 1e-9).all()
    # draws count as half a win: all draws between two players is a rating difference of 0
    draws = np.zeros((2, 2, 3))
    draws[0, 1, 1] = draws[1, 0, 1] = 100
    np.testing.assert_allclose(tournament.fit_ratings(draws)[0], [0.0, 0.0], atol=1e-6)


def test_a_clean_sweep_stays_finite():
    results = np.zeros((2, 2, 3))
    results[0, 1], results[1, 0] = (50, 0, 0), (0, 0, 50)
    ratings, half = tournament.fit_ratings(results, anchor=1)
    assert np.isfinite(ratings).all() and ratings[0] > 400 and np.isfinite(half).all()


def test_tournament_orders_random_below_random_punisher(model_checkpoints):
    players = [load_agent(s) for s in ("random", "random-punisher", str(model_checkpoints["mlp"]))]
    report = tournament.tournament(players, games=300, anchor="random")
    for row in report["results"]:
        assert row["wins_a"] + row["draws"] + row["wins_b"] == 300
    ratings = {r["player"]: r for r in report["ratings"]}
    assert ratings["random"]["elo"] == 0.0
    punisher = ratings["random-punisher"]
    assert punisher["elo"] - punisher["ci95"] > 200 and punisher["ci95"] < 100
    assert report["ratings"][0]["player"] == "random-punisher"


def greedy_game(first, second) -> int:
    """+1 if ``first`` wins, -1 if ``second`` does, 0 for a draw: both play their most likely
    column, the game kept by the plain-Python reference rules."""
    from tests.reference import RefGame

    ref, movers = RefGame(), (first, second)
    while not ref.over:
        _, _, greedy = policy(movers[len(ref.moves) % 2], np.asarray([ref.canonical()], np.int8))
        ref.play(int(greedy[0]))
    return 0 if ref.winner == 0 else (1 if ref.winner == 1 else -1)


def test_a_tournament_plays_each_player_as_it_plays_everywhere(model_checkpoints, tmp_path, capsys):
    """A trained model plays its most likely column (Agent.temperature, as play, serve and the
    evaluations): every game of a pair with the same side first is the same game, the one the
    reference rules give; --temperature overrides, and the table says how each player chose."""
    import shutil

    from czjax import cli

    copy = tmp_path / "copy.msgpack"
    shutil.copy(model_checkpoints["mlp"], copy)
    a, b = load_agent(str(model_checkpoints["mlp"])), load_agent(str(copy))
    report = tournament.tournament([a, b], games=20, seed=3)
    a_first, b_first = greedy_game(a, b), -greedy_game(b, a)  # from a's side
    expected = [sum(10 * (o == side) for o in (a_first, b_first)) for side in (1, 0, -1)]
    [row] = report["results"]
    assert [row["wins_a"], row["draws"], row["wins_b"]] == expected
    assert report["temperatures"] == [0.0, 0.0] and report["plays"] == ["its most likely column"] * 2
    sampled = tournament.tournament([a, b], games=20, seed=3, temperature=1.0)
    [row] = sampled["results"]
    assert [row["wins_a"], row["draws"], row["wins_b"]] != expected and sampled["temperatures"] == [1.0, 1.0]
    assert cli.main(["tournament", "random", f"mcts:sims=2:{copy}", "--games", "4"]) == 0
    printed = capsys.readouterr().out
    assert "how each player chose its moves:" in printed
    assert "random samples its policy at temperature 1" in printed and "the search's move" in printed
    assert cli.main(["tournament", "random", str(copy), "--games", "4", "--temperature", "0.5"]) == 0
    assert capsys.readouterr().out.count("samples its policy at temperature 0.5") == 2


def test_tournament_rejects_bad_input():
    with pytest.raises(ValueError, match="at least two"):
        tournament.tournament([load_agent("random")], games=10)
    with pytest.raises(ValueError, match="anchor"):
        tournament.tournament([load_agent("random"), load_agent("random-punisher")], games=10, anchor="nobody")


# --------------------------------------------------------------------------------------------
# Loading players


def test_players_load_from_names_files_and_run_folders(model_checkpoints, tmp_path):
    assert load_agent("random").params is None
    path = model_checkpoints["mlp"]
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "checkpoint.msgpack").write_bytes(path.read_bytes())
    a, b = load_agent(str(path)), load_agent(str(folder))
    assert a.model_name == b.model_name == "mlp" and not a.has_value
    assert load_agent(str(model_checkpoints["cnn-mk4-value"])).has_value
    with pytest.raises(ValueError, match="neither a built-in player .* no such path"):
        load_agent("no-such-player")
    (tmp_path / "unsaved-run").mkdir()
    with pytest.raises(ValueError, match="a folder with no checkpoint.msgpack yet"):
        load_agent(str(tmp_path / "unsaved-run"))
    with pytest.raises(
        ValueError, match="unknown search 'alphabeta'.*one of playouts, mcts, entropy-mcts, gumbel, azjl"
    ):
        load_agent("alphabeta:depth=3:random")
    with pytest.raises(ValueError, match="minimax takes options only.*it searches no player"):
        load_agent("minimax:depth=3:random")  # minimax searches no network
    damaged = tmp_path / "damaged.msgpack"
    damaged.write_bytes(path.read_bytes()[:100])
    with pytest.raises(checkpoint.CheckpointError, match="damaged"):
        load_agent(str(damaged))


def test_pons_sets_are_shipped_and_read(tmp_path):
    """The six shipped sets with every column's score, 1,000 legal positions each, in
    AlphaZero.jl's order; each position's best column score is the score of the plain Pons file
    (also shipped, read by --dir) for the same line; a malformed line names itself."""
    sets = pons.load_pons()
    plain = pons.load_pons(pons.default_pons_dir())
    assert list(sets) == list(pons.PONS_REFERENCE_ORDER) and sorted(plain) == sorted(pons.PONS_SETS)
    for name, data in sets.items():
        assert len(data["moves"]) == 1000 and data["moves"] == plain[name]["moves"], name
        np.testing.assert_array_equal(np.nanmax(data["scores"], axis=1), plain[name]["value"])
        np.testing.assert_array_equal(
            np.isnan(data["scores"]), data["boards"][:, 0, :] != 0
        )  # null exactly on full columns
    (tmp_path / "Test_L1_R1").write_text("44 0\n4x 1\n")
    with pytest.raises(ValueError, match="Test_L1_R1:2"):
        pons.load_pons(tmp_path)


def test_pons_report_reads_outcomes_from_values_and_scores_moves(monkeypatch):
    """With values and moves chosen by hand: +-0.9 on the right side, 0.2 (a draw), -0.5 (a
    loss); a move error where the chosen column's score changes the outcome's sign."""
    boards = np.zeros((5, 6, 7), np.int8)
    scores = np.full((5, 7), -1.0)
    scores[0, 2], scores[1, 1], scores[2, 0], scores[3, 6], scores[4, 0] = 3, -2, 0, 5, 0  # the best column of each
    sets = {"Test_X": {"boards": boards, "scores": scores, "value": np.array([3, -2, 0, 5, 0]), "moves": [""] * 5}}
    values = np.array([0.9, -0.9, 0.2, -0.5, 0.5])  # right, right, right (draw), wrong (a loss), wrong (a win)
    greedy = np.array([2, 3, 0, 0, 4])  # keeps, keeps (a lost position), keeps, error, error
    monkeypatch.setattr(pons, "policy", lambda agent, b, **kwargs: (np.eye(7)[greedy], values, greedy))
    agent = load_agent("mcts:sims=2:random")
    row = pons.pons(agent, sets)["sets"][0]
    assert row["outcome"] == pytest.approx(3 / 5) and row["move_error"] == pytest.approx(40.0)
    assert (row["win"], row["n_win"], row["loss"], row["draw"], row["n_draw"]) == (0.5, 2, 1.0, 0.5, 2)
    assert row["sign_on_decided"] == pytest.approx(2 / 3)  # 0.9, -0.9 right; -0.5 on a win wrong
    assert "Test_X" in pons.format_pons(pons.pons(agent, sets))
    no_value = pons.pons(load_agent("random"), sets)["sets"][0]  # a player without a value: moves only
    assert "outcome" not in no_value and no_value["move_error"] == pytest.approx(40.0)


def test_random_punisher_pons_error_against_the_reference_game():
    """RandomPunisher's expected error on the end-easy set, from the plain-Python game: it
    takes a win if there is one, else blocks, else plays uniformly; the chosen column is an
    error where its score does not keep the outcome."""
    from tests.reference import RefGame

    data = pons.load_pons()["Test_L3_R1"]
    errors = []
    for moves, scores in zip(data["moves"], data["scores"]):
        g = RefGame()
        for ch in moves:
            g.play(int(ch) - 1)
        legal = [c for c in range(COLS) if g.legal()[c]]
        wins = [c for c in legal if g.would_win(c, g.to_move)]
        blocks = [c for c in legal if g.would_win(c, 3 - g.to_move)]
        choice = wins or blocks or legal
        best = max(scores[c] for c in legal)
        keeps = [c for c in legal if best < 0 or np.sign(scores[c]) == np.sign(best)]
        errors.append(sum(c not in keeps for c in choice) / len(choice))
    report = pons.pons(load_agent("random-punisher"), {"Test_L3_R1": data})
    assert report["sets"][0]["move_error"] == pytest.approx(100 * np.mean(errors), abs=1e-6)


def test_the_old_solver_module_gives_each_name_from_its_new_home_with_a_warning():
    """``czjax.evaluate.solver`` was split by job (positions, pons, protocol): for one release
    each of its names resolves from its new home with a DeprecationWarning naming that home, the
    two whose shape changed as they were; the public API's names are the new homes'."""
    import importlib

    import czjax
    from czjax.evaluate import solver

    for name, home in solver.MOVED.items():
        with pytest.warns(DeprecationWarning, match=f"moved to {home}.{name};"):
            assert getattr(solver, name) is getattr(importlib.import_module(home), name)
    with pytest.warns(DeprecationWarning, match="PROTOCOLS"):
        assert solver.PROTOCOLS == {"alphazero.jl": "azjl:sims=600,c=2.0"}
    with pytest.warns(DeprecationWarning, match="stopped_searches"), pytest.raises(ValueError, match="over a network"):
        solver.stopped_searches(load_agent("random"), np.zeros((1, 6, 7), np.int8), game_end_rounds=0)
    with pytest.raises(AttributeError, match="search_cost.cpu_conv"):
        solver.YARDSTICK_CONV  # noqa: B018
    public = (czjax.load_positions, czjax.accuracy, czjax.load_pons, czjax.pons)
    assert public == (labelled.load_positions, labelled.accuracy, pons.load_pons, pons.pons)


def test_solver_metrics_on_the_device_equal_the_host_reports():
    """czjax.learn.solver_metrics (one compiled call, as training logs it) against eval pons (greedy
    move) and eval accuracy, for an untrained mlp3."""
    import jax

    from czjax import models
    from czjax.learn import solver_metrics

    model = models.get_model("mlp3")
    agent = Agent("mlp3", models.model_player(model), models.init_params(model, jax.random.key(1)), "mlp3")
    bench = solver_metrics.load()
    device = jax.jit(lambda p: solver_metrics.metrics(agent.player, p, bench))(agent.params)
    report = pons.pons(agent, pons.load_pons())
    for row in report["sets"]:
        assert float(device[solver_metrics.short_name(row["set"]) + "_error"]) == pytest.approx(
            row["move_error"], abs=1e-3
        )
    assert float(device["pons_mean_error"]) == pytest.approx(report["mean_move_error"], abs=1e-3)
    accuracy = labelled.accuracy(agent, labelled.load_positions())
    assert float(device["public_optimal"]) == pytest.approx(accuracy["greedy_optimal"], abs=1e-6)
    assert float(device["public_keeps"]) == pytest.approx(accuracy["greedy_keeps_outcome"], abs=1e-6)
