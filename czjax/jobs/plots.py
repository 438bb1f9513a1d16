"""Matplotlib dashboards from metric rows (host side).

The figures are drawn without pyplot (``matplotlib.figure.Figure``, written by its own canvas), so
importing czjax changes no global state of matplotlib: a notebook keeps its inline backend, and
pyplot's figures are the user's alone. ``plt`` is pyplot, for the experiments' own figures.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

# (title, [(metric key, label)]): the blog's panels plus game length.
PANELS = [
    ("win rate", [("win_rate", "vs training opponent"), ("eval_win_rate", "vs RandomPunisher")]),
    ("entropy", [("entropy", "mean entropy (nats)")]),
    ("returns std", [("returns_std", "std of G")]),
    ("game length", [("game_length", "plies")]),
    ("policy loss", [("policy_loss", "per position")]),
    ("value loss", [("value_loss", "per position")]),
    ("advantage std", [("advantage_std", "std of G - v")]),
    ("checkpoint promotions", [("promotions", "promotions")]),
]


def save_figure(fig, path) -> None:
    """Write a figure atomically (a reader never sees half a PNG while the run refreshes it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.stem + ".", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=90)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        plt.close(fig)  # a pyplot figure (the experiments'); nothing for czjax's own


# Mean over Pons' six sets of AlphaZero.jl's reference error rates (czjax.evaluate.solver.PONS_REFERENCE).
PONS_REFERENCE_MEANS = {"AlphaZero.jl (15 iterations)": 1.92, "minimax depth 5": 7.30}


def applies(rows: list[dict], series) -> bool:
    """A panel is drawn only when some row has one of its metrics (no value loss without a value
    head, no promotions without a frozen opponent to promote)."""
    return any(key in r and r[key] == r[key] for r in rows for key, _ in series)


def solver_panel(ax, rows: list[dict], x, xlabel: str, per_set: bool) -> None:
    """The Pons error rates (%) logged by ``--solver-eval``, with the reference levels drawn."""
    sets = sorted(
        {k for r in rows for k in r if k.startswith("pons_") and k.endswith("_error") and k != "pons_mean_error"}
    )
    if per_set:
        for key in sets:
            ax.plot(x, [r.get(key, float("nan")) for r in rows], lw=0.8, alpha=0.7, label=key[5:-6])
    ax.plot(x, [r.get("pons_mean_error", float("nan")) for r in rows], lw=2.0, color="k", label="mean")
    for (label, level), style in zip(PONS_REFERENCE_MEANS.items(), ("--", ":")):
        ax.axhline(level, color="tab:red", ls=style, lw=1.0, label=f"{label}: {level:.1f}")
    ax.set_title("Pons move error (%)")
    ax.set_xlabel(xlabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)


def dashboard_panels(rows: list[dict], promotes: bool = True) -> list[tuple[str, list]]:
    """The panels of :data:`PANELS` that apply to ``rows``: those with a metric logged, and the
    promotions only when the run has something to promote (``promotes``: self-play's frozen
    opponent or a league; against a fixed opponent the count stays 0)."""
    return [
        (panel, series)
        for panel, series in PANELS
        if applies(rows, series) and (promotes or panel != "checkpoint promotions")
    ]


def dashboard(rows: list[dict], path, title: str = "", promotes: bool = True) -> None:
    """One figure of the panels that apply (2 rows; :func:`dashboard_panels`), x axis = games
    played; with solver metrics, their error rates against games and against training time."""
    panels = dashboard_panels(rows, promotes)
    solver = any("pons_mean_error" in r for r in rows)
    count = len(panels) + (2 if solver else 0)
    cols = max(1, -(-count // 2))
    fig = Figure(figsize=(4 * cols, 7), constrained_layout=True)
    axes = fig.subplots(2, cols, squeeze=False)
    games = [r["games"] for r in rows]
    for ax in axes.flat[count:]:
        ax.axis("off")
    if solver:
        solver_panel(axes.flat[len(panels)], rows, games, "games", per_set=True)
        solver_panel(
            axes.flat[len(panels) + 1],
            rows,
            [r.get("elapsed_s", float("nan")) / 60 for r in rows],
            "training minutes",
            per_set=False,
        )
    for ax, (panel, series) in zip(axes.flat, panels):
        for key, label in series:
            ax.plot(games, [r.get(key, float("nan")) for r in rows], label=label, lw=1.2)
        ax.set_title(panel)
        ax.set_xlabel("games")
        ax.grid(alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize=8)
        if panel == "win rate":
            ax.set_ylim(-0.02, 1.02)
    if title:
        fig.suptitle(title)
    save_figure(fig, path)
