"""REINFORCE with baseline, A2C and PPO against RandomPunisher on the same budget of games, in one figure.

Each algorithm runs its seeds as one vmapped scan (the algorithm itself is compiled in, so the
three are three programs); the figure shows the mean over seeds with a min-max band.

    python experiments/compare-algorithms/compare_algorithms.py --model mlp3 --batches 600 --games-per-batch 100 --seeds 2   # CPU scale
    python experiments/compare-algorithms/compare_algorithms.py --model cnn-mk4-value --batches 20000 --seeds 4              # the blog's scale (a GPU)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from czjax.jobs import presets, scan

ALGORITHMS = {"reinforce": "REINFORCE with baseline", "a2c": "A2C", "ppo": "PPO"}
PANELS = [
    ("eval_win_rate", "win rate vs RandomPunisher (evaluation)"),
    ("win_rate", "win rate in training"),
    ("entropy", "policy entropy"),
    ("value_loss", "value loss"),
]


def curves(rows: list[dict], key: str):
    """(games, mean, low, high) over seeds at each logged batch."""
    by_batch: dict[int, list[dict]] = {}
    for r in rows:
        by_batch.setdefault(r["batches"], []).append(r)
    batches = sorted(by_batch)
    values = [[r[key] for r in by_batch[b]] for b in batches]
    games = np.array([np.mean([r["games"] for r in by_batch[b]]) for b in batches])
    return (
        games,
        np.array([np.mean(v) for v in values]),
        np.array([min(v) for v in values]),
        np.array([max(v) for v in values]),
    )


def wall_seconds(rows: list[dict]) -> float:
    """Wall time of the scan, resumed parts included (``elapsed_s`` restarts on --resume)."""
    first = min(r["config"] for r in rows)
    elapsed = [r["elapsed_s"] for r in sorted((r for r in rows if r["config"] == first), key=lambda r: r["batches"])]
    return sum(a for a, b in zip(elapsed, elapsed[1:] + [0.0]) if b < a)


def smooth(x: np.ndarray, width: int) -> np.ndarray:
    if width <= 1 or len(x) < width:
        return x
    kernel = np.ones(width) / width
    padded = np.concatenate([np.full(width - 1, x[0]), x])
    return np.convolve(padded, kernel, mode="valid")


def figure(results: dict[str, list[dict]], path: Path, title: str, smoothing: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for ax, (key, label) in zip(axes.flat, PANELS):
        for algorithm, rows in results.items():
            games, mean, low, high = curves(rows, key)
            (line,) = ax.plot(games, smooth(mean, smoothing), label=ALGORITHMS[algorithm])
            ax.fill_between(games, smooth(low, smoothing), smooth(high, smoothing), color=line.get_color(), alpha=0.15)
        ax.set_title(label)
        ax.set_xlabel("games played (per run)")
        ax.grid(alpha=0.3)
    axes.flat[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="cnn-mk4-value", help="a model with a value head (default: %(default)s)")
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--games-per-batch", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=None, help="(default: the presets' 1e-4)")
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    parser.add_argument("--smoothing", type=int, default=5, help="moving average over logged intervals in the figure")
    parser.add_argument("--out", default="runs/compare-algorithms")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--overwrite", action="store_true", help="start again where --out already holds runs")
    args = parser.parse_args(argv)
    out = Path(args.out)
    results = {}
    preset = presets.get_preset("ex5-ppo")
    hparams = dict(preset.hparams, **({"learning_rate": args.learning_rate} if args.learning_rate is not None else {}))
    for algorithm in args.algorithms:
        config = preset.config.override(
            {"algorithm": algorithm, "model": args.model, "games_per_batch": args.games_per_batch}
        )
        folder = out / algorithm
        resume = args.resume and (folder / "scan.json").exists()
        print(
            f"== {ALGORITHMS[algorithm]}: {args.seeds} seeds of {args.model}, {args.batches:,} batches of {args.games_per_batch} games",
            flush=True,
        )
        rows = scan.run_scan(
            config,
            hparams,
            [{}],
            list(range(args.seeds)),
            folder,
            args.batches,
            resume=resume,
            overwrite=args.overwrite,
            log=lambda m: print(m, flush=True),
        )
        print(scan.write_report(rows, folder, [], title=f"{ALGORITHMS[algorithm]} ({args.model})"))
        results[algorithm] = rows
    title = (
        f"{args.model} against RandomPunisher, {args.games_per_batch} games per batch, {args.batches:,} batches, "
        f"{args.seeds} seeds (mean, min-max band)"
    )
    figure(results, out / "compare.png", title, args.smoothing)
    summary = {}
    for algorithm, rows in results.items():
        _, mean, _, _ = curves(rows, "eval_win_rate")
        tenth = max(1, len(mean) // 10)
        summary[algorithm] = {
            "first_10pct": float(mean[:tenth].mean()),
            "last_10pct": float(mean[-tenth:].mean()),
            "wall_s": wall_seconds(rows),
        }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("win rate against RandomPunisher, mean over seeds (first 10% of the run -> last 10%):")
    for algorithm, s in summary.items():
        print(f"  {ALGORITHMS[algorithm]:>24s}: {s['first_10pct']:.3f} -> {s['last_10pct']:.3f}  ({s['wall_s']:.0f} s)")
    print(f"figure: {out / 'compare.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
