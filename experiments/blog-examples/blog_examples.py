"""What the blog reports for its examples 1-5, and czjax's seeds read at the same milestones.

The examples run one way: their presets (``czjax train --preset ex1-collapse`` ... ``ex5-ppo``,
one seed), and at the blog's length with 8 seeds as the campaign's steps over those presets
(``python experiments/campaign.py run ex1-8seeds`` ... ``ex5-8seeds``: the seeds vmapped as one
compiled scan, :func:`czjax.jobs.scan.run_scan`). This module is what those steps read the runs
with: the blog's figures (``BLOG``), each example's milestone table, czjax's seed band (mean +-
2 standard errors over seeds) beside the blog's figure, and the figure per example with the
band and the blog's points. Milestones a run does not reach are left empty (null), never
rescaled; every example also gets rows at the end of its run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: curves
from curves import agrees, min_until, per_seed, seed_band, trailing_mean, value_at

EXAMPLES = {1: "ex1-collapse", 2: "ex2-entropy", 3: "ex3-rwb", 4: "ex4-a2c", 5: "ex5-ppo"}


class Point(NamedTuple):
    """A figure the blog reports: ``metric`` at ``games`` (None: the end of the blog's run),
    a ``value`` or a range (``low`` / ``high``). ``stat="min"``: the lowest reading up to
    ``games`` (how low a curve fell), else the reading at ``games``."""

    games: int | None
    metric: str
    value: float | None = None
    low: float | None = None
    high: float | None = None
    stat: str = "at"
    note: str = ""


# What the blog reports: its posts on the first training run and policy collapse (example 1),
# entropy regularization (example 2) and REINFORCE with baseline (example 3). Readings of
# plotted curves ("around 75%") are given as the blog words them. The posts czjax was built
# from give no figures for examples 4 and 5 (A2C and PPO).
BLOG: dict[str, list[Point]] = {
    "ex1-collapse": [
        Point(None, "entropy", high=0.1, note="policy collapse: entropy to ~0, the same short game every time"),
    ],
    "ex2-entropy": [
        Point(
            None, "entropy", value=1.0, low=0.7, high=1.3, note="no collapse: entropy oscillates in the vicinity of 1.0"
        ),
    ],
    "ex3-rwb": [
        Point(300_000, "entropy", value=0.2, stat="min", note="early on entropy drops to around 0.2"),
        Point(
            300_000,
            "eval_win_rate",
            value=0.50,
            note="convincingly breaks 50% against RandomPunisher after ~300k games",
        ),
        Point(350_000, "entropy", low=0.7, note="entropy stabilises above 0.7 after ~300k games"),
        Point(550_000, "eval_win_rate", value=0.75, note="around 75%"),
        Point(550_000, "entropy", low=1.0, high=1.2, note="entropy steady in the 1.0-1.2 range"),
        Point(550_000, "value_loss", value=0.28, note="value loss down to around 0.28"),
        Point(550_000, "advantage_std", value=0.52, note="advantage std 0.52"),
        Point(550_000, "returns_std", value=0.57, note="returns std 0.57"),
        Point(850_000, "eval_win_rate", value=0.86, note="around 86%"),
        Point(850_000, "value_loss", value=0.23),
        Point(850_000, "advantage_std", value=0.47),
        Point(850_000, "returns_std", value=0.55),
        Point(1_600_000, "eval_win_rate", value=0.94, note="94%, occasionally 98%"),
        Point(1_600_000, "value_loss", value=0.14),
        Point(1_600_000, "advantage_std", value=0.37),
        Point(1_600_000, "returns_std", value=0.50),
        Point(1_600_000, "entropy", low=1.0, note="entropy stable above 1.0 after the initial drop"),
    ],
    "ex4-a2c": [],
    "ex5-ppo": [],
}
# Rows at the end of every run, blog figure or not.
END_METRICS = ("eval_win_rate", "win_rate", "entropy", "game_length", "value_loss")
# Figure panels: (metric, title)
PANELS = [
    ("eval_win_rate", "win rate vs RandomPunisher (100 games)"),
    ("entropy", "policy entropy (nats)"),
    ("value_loss", "value loss (per position)"),
    ("game_length", "game length (plies)"),
    ("win_rate", "win rate vs training opponent"),
    ("advantage_std", "advantage std (returns std: dashed, blog hollow)"),
]
ROW_KEYS = ("games", "metric", "stat", "blog", "note", "czjax", "per_seed", "agrees")


def reading(games, values, point_games: int, stat: str, window: int) -> float | None:
    """One seed's reading at a milestone: the mean over the ``window`` games up to it, or the
    lowest such mean up to it (``stat="min"``)."""
    if stat == "min":
        return min_until(games, values, point_games, window)
    return value_at(games, values, point_games, window)


def milestone_rows(rows: list[dict], points: list[Point], full_games: int, run_games: int, window: int) -> list[dict]:
    """The milestone table of one example: a row per blog point (``games=None`` is the end of
    the blog's run, ``full_games``), then ``END_METRICS`` at the end of this run (``run_games``).
    Each row: the blog's figure, czjax's seed band (:func:`curves.seed_band`) and whether they
    agree (:func:`curves.agrees`)."""
    table = []
    wanted = [(p, full_games if p.games is None else p.games) for p in points]
    wanted += [(Point(run_games, key, note="end of this run"), run_games) for key in END_METRICS]
    for point, at in wanted:
        seeds = per_seed(rows, point.metric)
        readings = [reading(g, v, at, point.stat, window) for g, v in seeds.values()]
        band = seed_band(readings)
        blog = {k: getattr(point, k) for k in ("value", "low", "high") if getattr(point, k) is not None} or None
        table.append(
            {
                "games": at,
                "metric": point.metric,
                "stat": point.stat,
                "blog": blog,
                "note": point.note,
                "czjax": band,
                "per_seed": dict(zip((str(s) for s in seeds), readings)),
                "agrees": agrees(band, point.value, point.low, point.high) if blog else None,
            }
        )
    return table


def format_table(name: str, table: list[dict]) -> str:
    def blog(b):
        if not b:
            return "-"
        if "value" in b:
            return f"{b['value']:g}"
        return f"{b.get('low', '')}..{b.get('high', '')}"

    def band(b):
        if b is None:
            return "not reached"
        return f"{b['mean']:.3f}" + (f" +- {2 * b['se']:.3f}" if b["se"] is not None else "") + f" (n={b['n']})"

    lines = [f"{name}:", f"  {'games':>10} {'metric':>14} {'blog':>9} {'czjax (mean +- 2 SE)':>28} agrees"]
    for r in table:
        metric = ("min " if r["stat"] == "min" else "") + r["metric"]
        agree = {True: "yes", False: "NO", None: "-"}[r["agrees"]]
        lines.append(f"  {r['games']:>10,} {metric:>14} {blog(r['blog']):>9} {band(r['czjax']):>28} {agree}")
    return "\n".join(lines)


def plot_seeds(ax, rows: list[dict], key: str, smoothing: int) -> None:
    """One panel's curves: each seed thin, the mean over seeds with a band of 2 standard errors
    (on the ``smoothing``-row trailing means); the advantage's panel adds the returns' dashed."""
    import numpy as np

    for metric, style in ((key, "-"), *((("returns_std", "--"),) if key == "advantage_std" else ())):
        seeds = per_seed(rows, metric)
        if not seeds:
            continue
        curves = {s: (g, trailing_mean(v, smoothing)) for s, (g, v) in seeds.items()}
        for g, v in curves.values():
            ax.plot(g, v, color="tab:blue", lw=0.4, alpha=0.35, ls=style)
        length = min(len(g) for g, _ in curves.values())
        games = next(iter(curves.values()))[0][:length]
        data = np.array([v[:length] for _, v in curves.values()])
        mean = data.mean(0)
        label = f"czjax, mean of {len(curves)} seeds" if style == "-" else "returns std"
        ax.plot(games, mean, color="tab:blue", lw=1.6, ls=style, label=label)
        if len(curves) > 1:
            se = data.std(0, ddof=1) / np.sqrt(len(curves))
            ax.fill_between(games, mean - 2 * se, mean + 2 * se, color="tab:blue", alpha=0.18)


def plot_blog_points(ax, table: list[dict], key: str) -> None:
    """One panel's blog figures: a star for a figure (hollow for the returns' std beside the
    advantage's), a bar for a range, a triangle for a bound, a dotted level for a lowest reading."""
    for r in table:
        if r["metric"] not in (key, "returns_std" if key == "advantage_std" else key) or not r["blog"]:
            continue
        b = r["blog"]
        if r["stat"] == "min":  # the lowest reading up to that point: a dotted level
            ax.hlines(b["value"], 0, r["games"], color="black", lw=1.2, ls=":")
        elif "value" in b:
            hollow = r["metric"] != key  # the returns std beside the advantage std
            face = "none" if hollow else "black"
            ax.plot([r["games"]], [b["value"]], marker="*", ms=11, color="black", ls="none", mfc=face)
        elif "low" in b and "high" in b:
            ax.vlines(r["games"], b["low"], b["high"], color="black", lw=2.5)
        else:  # only a bound: a triangle pointing to the side the blog's curve was on
            marker = "^" if "low" in b else "v"
            ax.plot([r["games"]], [b.get("low", b.get("high"))], marker=marker, ms=9, color="black", ls="none")


def figure(name: str, description: str, rows: list[dict], table: list[dict], path: Path, smoothing: int) -> None:
    """Per panel: each seed thin, the mean over seeds with a band of 2 standard errors (on the
    ``smoothing``-row trailing means), and the blog's points (a marker, or a bar for a range)."""
    from czjax.jobs.plots import plt, save_figure

    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5), constrained_layout=True)
    for ax, (key, title) in zip(axes.flat, PANELS):
        plot_seeds(ax, rows, key, smoothing)
        plot_blog_points(ax, table, key)
        ax.set_title(title)
        ax.set_xlabel("games (per run)")
        ax.grid(alpha=0.3)
    key = "the blog: * a figure, | a range, ^ above, v below, ... lowest so far"
    axes.flat[0].plot([], [], marker="*", ms=11, color="black", ls="none", label=key)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(
        f"{name}: {description}\n(band: mean +- 2 standard errors over seeds, {smoothing}-row trailing means)",
        fontsize=10,
    )
    save_figure(fig, path)
