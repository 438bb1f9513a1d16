"""Progress with an estimate of the time left on everything that can take more than a few
seconds: the counting itself (against hand-computed paces), the training and scan lines, and
the commands that used to work in silence (tournament, eval with a search, openings, distill)."""

import re
import time

import jax
import numpy as np
import pytest

from czjax import cli
from czjax.jobs import loop, scan
from czjax.players.agent import self_play
from czjax.players.loading import load_agent
from czjax.rollout import Side, play_games
from czjax.util import progress


class FakeClock:
    """A clock that moves only when told: steps of known durations."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_durations_and_time_left():
    assert [progress.duration(s) for s in (0, 42.4, 200, 7500)] == ["0 s", "42 s", "3 min 20 s", "2 h 05 min"]
    assert progress.Pace().time_left(10) is None  # nothing done: no pace yet
    one = progress.Pace().add(2, 4.0)
    assert one.time_left(8) == pytest.approx(16.0)  # the first step alone: 2 s a unit, 8 to go
    assert one.time_left(0) == 0.0
    assert one.add(4, 4.0).time_left(8) == pytest.approx(8.0)  # then the first (it compiles) left out: 1 s a unit
    assert progress.pace_of([(2, 4.0), (4, 4.0)]) == one.add(4, 4.0)


def test_the_time_left_never_reads_0_s_while_work_remains():
    assert [progress.eta_text(s) for s in (None, 0.0, 0.4, 0.6, 200)] == [
        "",
        "done",
        "under a second left",
        "under a second left",
        "about 3 min 20 s left",
    ]


def estimates(durations, units_per_step) -> list[tuple[float | None, int]]:
    """``(seconds left, units left)`` after each step of a :class:`progress.Progress` over steps of
    ``units_per_step[i]`` units taking ``durations[i]`` seconds of a fake clock."""
    clock = FakeClock()
    work = progress.Progress(lambda line: None, "positions", sum(units_per_step), every_s=1e9, clock=clock)
    out = []
    for seconds, units in zip(durations, units_per_step):
        work.step(lambda s=seconds: clock.advance(s), units)
        out.append((work.counting_down(clock()), work.total - work.done))
    return out


def within(seconds_per_unit: float, found: list[tuple[float, float]], share: float) -> bool:
    """Whether every estimate with work left is within ``share`` of the time at the true pace."""
    return all(abs(left / (units * seconds_per_unit) - 1) <= share for left, units in found if units)


def test_noisy_steps_give_a_steady_estimate():
    """Steps of 10 units with log-normal noise (sigma 0.5: a step often half or twice the median)
    after a first step that compiles (30 s): once a tenth of the work is done, every estimate is
    within 20% of the time at the true mean pace."""
    rng = np.random.default_rng(0)
    durations = [30.0, *rng.lognormal(0.0, 0.5, 300)]
    found = estimates(durations, [10] * len(durations))
    mean_pace = np.exp(0.5**2 / 2) / 10  # seconds per unit
    assert within(mean_pace, found[len(found) // 10 :], 0.2)
    # one step's own pace would swing from half to twice that
    assert max(durations[1:]) / min(durations[1:]) > 4


def test_a_stream_whose_stops_come_in_waves_gives_a_steady_estimate():
    """A pool of searches: 1 s steps, nothing stopping for 11 of them, then a wave of about 60
    stops (as a pool's searches started together end together): once a tenth of the work is
    done, every estimate is within 30% of the time at the true pace (0.2 s a search)."""
    rng = np.random.default_rng(0)
    steps = 600
    units = [0] + [int(rng.poisson(60)) if k % 12 == 11 else 0 for k in range(steps)]
    durations = [30.0, *rng.uniform(0.8, 1.2, steps)]
    found = estimates(durations, units)
    done = np.cumsum(units)
    assert within(1.0 / 5, [f for f, d in zip(found, done) if d >= done[-1] / 10], 0.3)


def test_a_step_longer_than_its_estimate_never_says_0_s_and_no_line_repeats():
    """A tournament's second match compiles too and outlasts the estimate made after the first:
    its lines while it runs drop the estimate rather than say ``about 0 s left``."""
    clock, lines = FakeClock(), []
    work = progress.Progress(lines.append, "games", 8, every_s=5.0, clock=clock)
    work.step(lambda: clock.advance(10.0), 4)  # the first match: 10 s for 4 of 8 games, "about 10 s left"

    def long_match():
        for _ in range(8):  # 40 s, a line from the ticker every 5 s
            clock.advance(5.0)
            work._emit(clock(), "1 match of 4 games")
            work._emit(clock(), "1 match of 4 games")  # twice at the same time: the same line, left out

    work.step(long_match, 4)
    assert not any(re.search(r"\b0 s left", line) for line in lines), lines
    assert len(lines) == len(set(lines))
    assert "about 5 s left" in lines[1] and "under a second left" not in " ".join(lines)
    assert lines[-1] == "  games: 8/8 (50 s, done)"


def test_progress_counts_estimates_without_the_compiling_step_and_stays_quiet_when_quick():
    clock, lines = FakeClock(), []
    work = progress.Progress(lines.append, "positions", 40, every_s=0.0, clock=clock)
    work.step(lambda: clock.advance(30.0), 10)  # the first step compiles: slow, and alone sets the pace
    for _ in range(3):
        work.step(lambda: clock.advance(5.0), 10)
    assert lines == [
        "  positions: 10/40 (30 s, about 1 min 30 s left)",
        "  positions: 20/40 (35 s, about 10 s left)",  # the steps after the first: 5 s per 10
        "  positions: 30/40 (40 s, about 5 s left)",
        "  positions: 40/40 (45 s, done)",
    ]
    quiet = []
    fast = progress.Progress(quiet.append, "positions", 2, every_s=5.0)
    assert [fast.step(lambda i=i: i, 1) for i in range(2)] == [0, 1]
    assert quiet == []


def test_a_step_longer_than_the_interval_is_heard_from_while_it_runs():
    lines = []
    work = progress.Progress(lines.append, "games", 2, every_s=0.1)
    work.step(lambda: time.sleep(1.25), 1, "gumbel vs random")  # lines at 0 s and 1 s (each said once)
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
    # the last chunks: never "about 0 s left"
    assert loop.format_progress(row, 100, 0.3).endswith("| under a second left")
    assert loop.format_progress(row, 10, loop.run_time_left(rows((10, 30.0, 2.0)), 0, 10, None)).endswith("| done")
    # the blog presets' yardstick, the project's RandomPunisher, is told apart in the line
    assert "| vs leftmost punisher 0.10 |" in loop.format_progress(row, 100, 200.0, "random-punisher-leftmost")


def test_the_scan_lines_time_left():
    # first chunk of group 1 of 3: 5 batches in 1 s, 15 left in it, 40 in the later groups
    first = progress.Pace().add(5, 1.0)
    assert scan.scan_time_left(first, 5, 20, 40) == pytest.approx(11.0)
    # then the wall time since that chunk: 10 batches in 2 s, 45 left at 0.2 s each
    assert scan.scan_time_left(first.add(10, 2.0), 15, 20, 40) == pytest.approx(9.0)


def test_self_play_in_slices(monkeypatch):
    """A long self-play job is played in equal slices (each a step of its progress); up to one
    slice it is the one call it always was, so the same seed keeps its games."""
    player = load_agent("random")
    key = jax.random.key(4)
    whole, _ = play_games(key, Side(player.player), Side(player.player), 6)
    one = self_play(player, 6, key, 1.0)
    assert np.array_equal(one.actions, whole.actions)
    monkeypatch.setattr("czjax.players.agent.SELF_PLAY_SLICE", 8)
    lines = []
    sliced = self_play(player, 20, key, 1.0, progress.Progress(lines.append, "games", 20, every_s=0.0))
    assert sliced.actions.shape[1] == 20
    for i in range(3):  # 20 games: three slices of 8 (7 rounded up to even), the last 4 dropped
        part, _ = play_games(jax.random.fold_in(key, i), Side(player.player), Side(player.player), 8)
        assert np.array_equal(sliced.actions[:, 8 * i : 8 * (i + 1)], np.asarray(part.actions)[:, : 20 - 8 * i][:, :8])
    assert lines[-1].startswith("  games: 20/20 (")


def test_the_protocols_cost_is_a_bound_when_its_searches_stop_when_decided():
    """Under AlphaZero.jl's protocol each search stops once its move is decided, so the count of
    evaluations announced is the most it can take, and says why; run to the end, about that."""
    agent = load_agent("azjl:sims=600:czjax@3")
    stopped = agent.cost_note(6000, "Pons' positions", stopped=True)
    assert stopped is not None and "up to 600 times per move: at most 3,600,000 evaluations" in stopped
    assert "each search stops once its move is decided" in stopped
    assert "about 3,600,000 evaluations for Pons' positions" in agent.cost_note(6000, "Pons' positions")


def test_a_search_announces_its_cost_and_reports_progress(monkeypatch, capsys):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    monkeypatch.setattr("czjax.players.agent.LARGE_JOB_EVALUATIONS", 100)
    # czjax@3, an MLP3: this is about the progress lines, and a small network compiles fast
    assert cli.main(["tournament", "random", "mcts:sims=2:czjax@3", "--games", "4"]) == 0
    out = capsys.readouterr()
    assert "mcts:sims=2:czjax@3 evaluates its network 3 times per move: about 132 evaluations" in out.err
    assert "  games: 4/4 (" in out.out
    assert cli.main(["openings", "mcts:sims=2:czjax@3", "--games", "4"]) == 0
    err = capsys.readouterr().err
    assert "evaluates its network 3 times per move" in err and "  games: 4/4 (" in err
