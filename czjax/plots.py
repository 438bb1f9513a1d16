"""Matplotlib dashboards from metric rows (host side)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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
        plt.close(fig)


def dashboard(rows: list[dict], path, title: str = "") -> None:
    """One figure, 2 x 4 panels, x axis = games played."""
    fig, axes = plt.subplots(2, 4, figsize=(16, 7), constrained_layout=True)
    games = [r["games"] for r in rows]
    for ax, (panel, series) in zip(axes.flat, PANELS):
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
