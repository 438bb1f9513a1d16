"""The experiment scripts (same_start.py, search_strength.py, soft_vs_hard.py) at a tiny scale, the
blog's milestones, and their pure helpers against hand-computed examples."""

import importlib.util
import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from czjax.players.loading import load_agent

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"

import curves


def load_script(name: str):
    """The script ``experiments/<study>/<module>.py`` named ``"<study>/<module>"``."""
    spec = importlib.util.spec_from_file_location(f"experiment_{Path(name).name}", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seed_band_is_mean_and_two_standard_errors():
    band = curves.seed_band([0.4, 0.5, 0.6])
    se = 0.1 / math.sqrt(3)  # sample std 0.1 over 3 seeds
    assert band["n"] == 3 and band["mean"] == pytest.approx(0.5)
    assert (
        band["se"] == pytest.approx(se)
        and band["low"] == pytest.approx(0.5 - 2 * se)
        and band["high"] == pytest.approx(0.5 + 2 * se)
    )
    one = curves.seed_band([None, 0.3])  # a seed whose run did not reach the milestone is left out
    assert one == {"mean": 0.3, "low": None, "high": None, "se": None, "n": 1}
    assert curves.seed_band([None]) is None


def test_readings_at_milestones():
    games, values = np.array([1000, 2000, 3000, 4000]), np.array([0.5, 0.2, 0.4, 0.1])
    assert curves.value_at(games, values, 4000, 2000) == pytest.approx(0.25)  # rows at 3000 and 4000
    assert curves.value_at(games, values, 2000, 1000) == pytest.approx(0.2)
    assert curves.value_at(games, values, 5000, 1000) is None  # not reached
    assert curves.min_until(games, values, 3000, 1000) == pytest.approx(0.2)
    assert curves.min_until(games, values, 4000, 2000) == pytest.approx(0.25)  # means 0.5, 0.35, 0.3, 0.25
    np.testing.assert_allclose(curves.trailing_mean(np.array([1.0, 2.0, 3.0, 4.0]), 2), [1.0, 1.5, 2.5, 3.5])


def test_agrees():
    band = {"mean": 0.5, "low": 0.4, "high": 0.6, "se": 0.05, "n": 4}
    assert curves.agrees(band, value=0.55) is True and curves.agrees(band, value=0.7) is False
    assert curves.agrees(band, low=0.45) is True and curves.agrees(band, high=0.45) is False
    assert curves.agrees(band, low=1.0, high=1.2) is False
    assert curves.agrees(None, value=0.5) is None and curves.agrees(band) is None
    assert curves.agrees({"mean": 0.5, "low": None, "high": None, "se": None, "n": 1}, value=0.5) is None


def test_milestone_rows_by_hand():
    blog = load_script("blog-examples/blog_examples")
    rows = [
        {"seed": 0, "games": 1000, "eval_win_rate": 0.2, "entropy": 1.0},
        {"seed": 0, "games": 2000, "eval_win_rate": 0.4, "entropy": 0.8},
        {"seed": 1, "games": 1000, "eval_win_rate": 0.4, "entropy": 1.2},
        {"seed": 1, "games": 2000, "eval_win_rate": 0.6, "entropy": 0.6},
    ]
    points = [
        blog.Point(2000, "eval_win_rate", value=0.5),
        blog.Point(None, "entropy", high=0.1),
        blog.Point(2000, "entropy", value=0.8, stat="min"),
    ]
    table = blog.milestone_rows(rows, points, full_games=3000, run_games=2000, window=1000)
    first = table[0]
    assert set(blog.ROW_KEYS) <= set(first)
    # readings 0.4 and 0.6: mean 0.5, sample std 0.1414, SE 0.1, band 0.3..0.7
    assert first["czjax"]["mean"] == pytest.approx(0.5) and first["czjax"]["se"] == pytest.approx(0.1)
    assert first["agrees"] is True and first["per_seed"] == {"0": pytest.approx(0.4), "1": pytest.approx(0.6)}
    assert table[1]["games"] == 3000 and table[1]["czjax"] is None and table[1]["agrees"] is None  # not reached
    assert table[2]["czjax"]["mean"] == pytest.approx(0.7)  # lowest per seed: 0.8 and 0.6
    ends = table[3:]
    assert [r["metric"] for r in ends] == list(blog.END_METRICS) and all(
        r["games"] == 2000 and r["blog"] is None for r in ends
    )
    assert ends[2]["czjax"]["mean"] == pytest.approx(0.7)  # entropy at the end: 0.8 and 0.6


def test_same_start_milestones_fall_on_logged_rows():
    same_start = load_script("same-start/same_start")
    assert same_start.milestones(batches=5, log_every=2, games_per_batch=4, parts=4) == [8, 16, 20]
    assert same_start.milestones(batches=240, log_every=20, games_per_batch=50, parts=4) == [3000, 6000, 9000, 12000]


def test_same_start_tiny(tmp_path, capsys):
    pytest.importorskip("torch")
    same_start = load_script("same-start/same_start")
    argv = [
        "--games",
        "8",
        "--games-per-batch",
        "4",
        "--seeds",
        "2",
        "--model",
        "mlp",
        "--log-every",
        "1",
        "--out",
        str(tmp_path),
    ]
    summary = same_start.main(argv)
    assert set(same_start.SUMMARY_KEYS) <= set(summary)
    assert json.loads((tmp_path / "summary.json").read_text())["games"] == 8
    assert (tmp_path / "same_start.png").stat().st_size > 0
    for seed in (0, 1):
        assert (tmp_path / f"seed{seed}" / "init.pth").exists()
        for side in same_start.SIDES:
            rows = [
                json.loads(line)
                for line in (tmp_path / f"seed{seed}" / side / "metrics.jsonl").read_text().splitlines()
            ]
            assert [r["games"] for r in rows] == [4, 8]
            assert {"entropy", "win_rate", "value_loss", "game_length", "eval_win_rate", "promotions"} <= set(rows[-1])
        assert summary["start_check"][str(seed)] < 1e-5  # both sides start as the same network
    assert summary["milestones"][0]["games"] == 4 and summary["milestones"][0]["torch"]["band"]["n"] == 2
    with pytest.raises(SystemExit, match="already holds"):
        same_start.main(argv)
    again = same_start.main(argv + ["--resume"])  # everything finished: kept, nothing run again
    assert again["runs"] == summary["runs"] and "finished before, kept" in capsys.readouterr().out
    # --only-seeds runs just those (another process or machine can take the rest)
    four = [*argv[:5], "4", *argv[6:], "--resume"]
    part = same_start.main([*four, "--only-seeds", "3", "--sides", "torch"])
    assert set(part["runs"]["torch"]) == {"0", "1", "3"} and set(part["runs"]["czjax"]) == {"0", "1"}
    assert not (tmp_path / "seed2").exists()
    with pytest.raises(SystemExit):
        same_start.main([*four, "--only-seeds", "4"])  # not among the seeds 0..3
    # more seeds resume the comparison (the finished ones kept); --results writes what to commit
    results = tmp_path / "results"
    more = same_start.main([*four, "--results", str(results)])
    assert (
        more["runs"]["czjax"]["0"] == summary["runs"]["czjax"]["0"]
        and more["runs"]["torch"]["3"] == part["runs"]["torch"]["3"]
        and more["milestones"][0]["torch"]["band"]["n"] == 4
    )
    assert {"results.md", "summary.json", "metrics.jsonl.gz"} <= {p.name for p in results.iterdir()}
    page = (results / "results.md").read_text()
    assert "| games | metric |" in page
    # where each side ran: czjax on this test's backend, the PyTorch project's loop on the CPU
    assert f"czjax (JAX) ({jax.default_backend()}):" in page and "PyTorch project loop (cpu):" in page


def test_same_start_keeps_a_stopped_czjax_side_unfinished(tmp_path, monkeypatch):
    """A czjax side stopped early (SIGTERM, Ctrl-C, a deadline) is saved, not finished: no
    done.json, so --resume goes on with it instead of keeping it as it is."""
    from czjax.jobs import loop

    same_start = load_script("same-start/same_start")
    stopped = {"interrupted": "SIGTERM", "batches": 3, "games": 12, "promotions": 0}
    monkeypatch.setattr(loop, "run_training", lambda *args, **kwargs: stopped)
    folder = tmp_path / "czjax"
    with pytest.raises(SystemExit, match="stopped at batch 3 of 10.*--resume"):
        same_start.run_czjax(None, {}, 0, tmp_path / "init.pth", folder, 10, False, print)
    assert not (folder / "done.json").exists()


def test_the_blog_examples_run_as_the_campaigns_steps_over_their_presets():
    """The blog's examples run one way: their presets (``czjax train --preset ex1-collapse``, ...),
    and at the blog's length with 8 seeds the campaign's ``exN-8seeds`` steps over those presets,
    whose results sit with the blog-examples study; every example has its blog milestones."""
    import campaign
    from czjax.jobs import presets

    blog = load_script("blog-examples/blog_examples")
    for number, preset in blog.EXAMPLES.items():
        step = campaign.STEPS[f"ex{number}-8seeds"]
        assert step.study == "blog-examples" and f"({preset})" in step.description
        assert presets.get_preset(preset).batches > 0 and preset in blog.BLOG
    assert not list(EXPERIMENTS.rglob("ex[0-9]_*.py")) and not list(EXPERIMENTS.rglob("reproduce_blog.py"))


def test_search_strength_scores_every_player_and_rates_them(model_checkpoints, tmp_path, capsys, monkeypatch):
    """search_strength.py at a tiny scale: the untrained mlp alone and PUCT over it, on the
    shipped positions and puzzles, a 4-game match and 10 positions of each Pons set; its JSON has
    a row per player with an Elo, the figures are fractions, and the Pons rates are those
    `czjax eval pons` gives the same players, the difference paired position by position."""
    from czjax.evaluate import pons

    script = load_script("search-strength/search_strength")
    full = pons.load_pons
    sets = {name: {k: v[:10] for k, v in data.items()} for name, data in full().items()}
    monkeypatch.setattr(pons, "load_pons", lambda *a, **k: sets)
    out = tmp_path / "strength.json"
    assert (
        script.main(
            [
                str(model_checkpoints["mlp"]),
                "--players",
                "",
                "mcts:sims=4",
                "--games",
                "4",
                "--puzzles",
                "40",
                "--out",
                str(out),
                "--pons",
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    rows, scores = report["rows"], report["pons"]["players"]
    for name, scored in scores.items():
        rates = {r["set"]: r["greedy_error"] for r in pons.pons(load_agent(name), sets)["sets"]}
        assert scored["per_set"] == pytest.approx(rates)
    network, searched = (scores[r["player"]] for r in rows)
    assert network["difference_from_first"] is None
    assert searched["difference_from_first"]["diff"] == pytest.approx(searched["mean"] - network["mean"])
    assert [r["player"] for r in rows] == [str(model_checkpoints["mlp"]), f"mcts:sims=4:{model_checkpoints['mlp']}"]
    for r in rows:
        assert 0 <= r["optimal"] <= r["keeps"] <= 1 and 0 <= r["puzzle_win"] <= 1 and math.isfinite(r["elo"])
    assert "| player | optimal |" in capsys.readouterr().out


def test_intervals_and_equivalence_against_hand_computed_values():
    """Student's and Welch's intervals against values computed by hand from their formulas
    (t quantiles from tables: t(0.975, 3) = 3.182446, t(0.95, 3) = 2.353363), and the TOST
    verdicts on constructed samples."""
    from curves import difference_interval, equivalence_verdict, mean_interval, paired_interval

    band = mean_interval([1.0, 2.0, 3.0, 4.0])  # mean 2.5, sd 1.290994, se 0.645497
    assert band["mean"] == pytest.approx(2.5) and band["high"] - 2.5 == pytest.approx(3.182446 * 0.645497, rel=1e-5)
    same = difference_interval([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], 0.9)  # equal variances: df = 6
    assert same["diff"] == 0 and same["df"] == pytest.approx(6.0)
    assert same["high"] == pytest.approx(1.943180 * math.sqrt(2 * 1.290994**2 / 4), rel=1e-5)
    near = [0.50, 0.51, 0.49, 0.50, 0.52, 0.48]
    assert equivalence_verdict(near, [x + 0.01 for x in near], margin=0.1)["verdict"] == "equivalent"
    assert equivalence_verdict(near, [x + 0.3 for x in near], margin=0.1)["verdict"] == "different"
    assert equivalence_verdict([0.0, 1.0, 0.0, 1.0], [0.5, 0.4, 0.6, 0.5], margin=0.1)["verdict"] == "inconclusive"
    assert equivalence_verdict([1.0], [1.0, 2.0], margin=0.1) is None
    # paired: differences -1, 0, 0, 1 (mean 0, sd sqrt(2/3)), normal quantile 1.959964
    paired = paired_interval([-1.0, 0.0, 0.0, 1.0])
    assert paired["diff"] == 0 and paired["high"] == pytest.approx(1.959964 * math.sqrt(2 / 3) / 2, rel=1e-5)
    assert paired_interval([1.0]) is None


def test_seed_questions_arms_differ_only_in_their_setting_and_verdicts_need_an_interval_off_zero():
    """soft_vs_hard.py: each question's two arms train the same recipe but for the setting asked
    about (the soft-targets note: the policy target; the entropy-guided PUCT proposal: the training search), and a verdict names an arm
    only where the difference's interval excludes 0, in the direction that is better for the score."""
    from types import SimpleNamespace

    from czjax.jobs import presets

    script = load_script("soft-vs-hard/soft_vs_hard")
    args = SimpleNamespace(model="mlp3", games_per_batch=8, sims=24, batches=5, recipe="gumbel")
    gumbel = presets.get_preset("gumbel-az")
    soft = script.arm_config(gumbel, "targets", "soft", args)
    hard = script.arm_config(gumbel, "targets", "hard", args)
    played, played_too = str(soft.search), str(hard.search)
    assert (soft.algorithm, hard.algorithm) == ("alphazero", "alphazero-hard")
    assert played == played_too and "sims=24" in played and "move=action" in played
    assert soft.override({"algorithm": "alphazero-hard"}) == hard
    args.recipe = "puct"
    alphazero = presets.get_preset("alphazero")
    mcts = script.arm_config(alphazero, "search", "mcts", args)
    entropy = script.arm_config(alphazero, "search", "entropy-mcts", args)
    searched, searched_entropy = str(mcts.search), str(entropy.search)
    assert (searched, searched_entropy) == ("mcts:sims=24,noise=0.25", "entropy-mcts:sims=24,noise=0.25")
    assert mcts.override({"search": searched_entropy}) == entropy
    # the difference is first - second: a lower error for the first arm favours it
    resolved, unresolved = {"diff": -2.0, "low": -3.0, "high": -1.0}, {"diff": -2.0, "low": -3.0, "high": 0.5}
    assert script.verdict("protocol_mean", resolved, "soft", "hard") == "soft better"
    assert script.verdict("optimal", resolved, "soft", "hard") == "hard better"
    assert script.verdict("protocol_mean", unresolved, "soft", "hard") == "no difference resolved"
    assert script.verdict("entropy", resolved, "soft", "hard") == "" and script.verdict("optimal", None, "a", "b") == ""
