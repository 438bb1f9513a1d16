"""Progress with an estimate of the time left on everything that can take more than a few
seconds: the counting itself (against hand-computed paces), the training and scan lines, and
the commands that used to work in silence (tournament, eval with a search, openings, distill)."""

import time

import jax
import numpy as np
import pytest

from czjax import agents, cli
from czjax.rollout import Side, play_games
from czjax.run import loop, scan
from czjax.util import progress


def test_durations_and_time_left():
    assert [progress.duration(s) for s in (0, 42.4, 200, 7500)] == ["0 s", "42 s", "3 min 20 s", "2 h 05 min"]
    assert progress.time_left(0, 10, 5.0) is None  # nothing done: no pace yet
    assert progress.time_left(2, 10, 4.0) == pytest.approx(16.0)  # 2 s a unit, 8 to go
    assert progress.time_left(10, 10, 4.0) == 0.0


def test_progress_counts_estimates_without_the_compiling_step_and_stays_quiet_when_quick():
    lines = []
    work = progress.Progress(lines.append, "positions", 40, every_s=0.0)
    work.step(lambda: time.sleep(0.3), 10)  # the first step compiles: slow
    for _ in range(3):
        work.step(lambda: time.sleep(0.05), 10)
    counted = [
        line for line in lines if not line.startswith("  positions: 0/")
    ]  # (lines during the first step: no pace yet)
    assert (
        counted[0].startswith("  positions: 10/40 (")
        and counted[-1].startswith("  positions: 40/40 (")
        and "done" in counted[-1]
    )
    # after the second step: the pace of the steps after the first, 0.05 s per 10: about 0.1 s for the 20 left
    left = float(next(line for line in counted if "20/40" in line).split("about ")[1].split(" s left")[0])
    assert left < 0.3 + 0.05  # with the first step counted it would say about 0.5 s
    quiet = []
    fast = progress.Progress(quiet.append, "positions", 2, every_s=5.0)
    assert [fast.step(lambda i=i: i, 1) for i in range(2)] == [0, 1]
    assert quiet == []


def test_a_step_longer_than_the_interval_is_heard_from_while_it_runs():
    lines = []
    work = progress.Progress(lines.append, "games", 2, every_s=0.1)
    work.step(lambda: time.sleep(0.45), 1, "gumbel vs random")
    assert sum("gumbel vs random" in line and line.startswith("  games: 0/2") for line in lines) >= 2


def rows(*pairs):
    """Metric rows from (batches, elapsed_s, chunk_s)."""
    return [{"batches": b, "elapsed_s": e, "chunk_s": c} for b, e, c in pairs]


def test_the_training_lines_time_left():
    # one chunk of 10 batches in 2 s so far (compile left out): 90 to go at 0.2 s each
    assert loop.run_time_left(rows((10, 30.0, 2.0)), 0, 100, None) == pytest.approx(18.0)
    # then wall time per batch since that chunk: 20 batches in 8 s, 70 left at 0.4 s
    assert loop.run_time_left(rows((10, 30.0, 2.0), (30, 38.0, 2.0)), 0, 100, None) == pytest.approx(28.0)
    # a resumed run: this process's rows start at the third; its own first chunk sets the pace
    assert loop.run_time_left(rows((10, 3, 1), (20, 6, 1), (30, 60, 5.0)), 2, 100, None) == pytest.approx(35.0)
    # a time budget ends sooner
    assert loop.run_time_left(rows((10, 30.0, 2.0)), 0, 100, 40.0) == pytest.approx(10.0)
    assert loop.run_time_left(rows((10, 30.0, 2.0)), 0, None, 20.0) == 0.0
    row = {
        "batches": 10,
        "games": 500,
        "games_per_s": 9.0,
        "win_rate": 0.5,
        "eval_win_rate": 0.1,
        "entropy": 1.0,
        "game_length": 20.0,
        "promotions": 0,
    }
    line = loop.format_progress(row, 100, 200.0)
    assert line.endswith("| about 3 min 20 s left") and "| vs punisher 0.10 |" in line
    # the blog presets' yardstick, the project's RandomPunisher, is told apart in the line
    assert "| vs leftmost punisher 0.10 |" in loop.format_progress(row, 100, 200.0, "random-punisher-leftmost")


def test_the_scan_lines_time_left():
    # first chunk of group 1 of 3: 5 batches in 1 s, 15 left in it, 40 in the later groups
    assert scan.scan_time_left(None, 5, (5, 1.0), 20, 40) == pytest.approx(11.0)
    started = time.perf_counter() - 2.0  # then 10 batches in 2 s since that chunk
    assert scan.scan_time_left((5, started), 15, (5, 1.0), 20, 40) == pytest.approx(9.0, rel=0.05)


def test_self_play_in_slices(monkeypatch):
    """A long self-play job is played in equal slices (each a step of its progress); up to one
    slice it is the one call it always was, so the same seed keeps its games."""
    player = agents.load_agent("random")
    key = jax.random.key(4)
    whole, _ = play_games(key, Side(player.player), Side(player.player), 6)
    one = agents.self_play(player, 6, key, 1.0)
    assert np.array_equal(one.actions, whole.actions)
    monkeypatch.setattr(agents, "SELF_PLAY_SLICE", 8)
    lines = []
    sliced = agents.self_play(player, 20, key, 1.0, progress.Progress(lines.append, "games", 20, every_s=0.0))
    assert sliced.actions.shape[1] == 20
    for i in range(3):  # 20 games: three slices of 8 (7 rounded up to even), the last 4 dropped
        part, _ = play_games(jax.random.fold_in(key, i), Side(player.player), Side(player.player), 8)
        assert np.array_equal(sliced.actions[:, 8 * i : 8 * (i + 1)], np.asarray(part.actions)[:, : 20 - 8 * i][:, :8])
    assert lines[-1].startswith("  games: 20/20 (")


def test_the_protocols_cost_is_a_bound_when_its_searches_stop_when_decided():
    """Under AlphaZero.jl's protocol each search stops once its move is decided, so the count of
    evaluations announced is the most it can take, and says why; run to the end, about that."""
    agent = agents.load_agent("azjl:sims=600:czjax@3")
    stopped = agent.cost_note(6000, "Pons' positions", stopped=True)
    assert stopped is not None and "up to 600 times per move: at most 3,600,000 evaluations" in stopped
    assert "each search stops once its move is decided" in stopped
    assert "about 3,600,000 evaluations for Pons' positions" in agent.cost_note(6000, "Pons' positions")


def test_a_search_announces_its_cost_and_reports_progress(monkeypatch, capsys):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    monkeypatch.setattr(agents, "LARGE_JOB_EVALUATIONS", 100)
    # czjax@3, an MLP3: this is about the progress lines, and a small network compiles fast
    assert cli.main(["tournament", "random", "mcts:sims=2:czjax@3", "--games", "4"]) == 0
    out = capsys.readouterr()
    assert "mcts:sims=2:czjax@3 evaluates its network 3 times per move: about 132 evaluations" in out.err
    assert "  games: 4/4 (" in out.out
    assert cli.main(["openings", "mcts:sims=2:czjax@3", "--games", "4"]) == 0
    err = capsys.readouterr().err
    assert "evaluates its network 3 times per move" in err and "  games: 4/4 (" in err
