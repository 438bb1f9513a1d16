"""Shared command line for the experiment scripts: run a preset at a chosen scale."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

from czjax.learn.settings import HParams
from czjax.run import loop, presets


def run_preset(name: str, doc: str, verdict: Callable[[list[dict]], str] | None = None, argv=None) -> dict:
    preset = presets.get_preset(name)
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=preset.batches, help="batches in all (default: %(default)s)")
    parser.add_argument(
        "--games-per-batch", type=int, default=preset.config.games_per_batch, help="(default: %(default)s)"
    )
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS", help="stop after this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=f"runs/{name}", help="output folder (default: %(default)s)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--overwrite", action="store_true", help="start again where --out already holds a run")
    args = parser.parse_args(argv)
    if args.batches <= 0 or args.games_per_batch < 2:
        parser.error("--batches must be positive and --games-per-batch at least 2")
    config = dataclasses.replace(preset.config, games_per_batch=args.games_per_batch)
    print(
        f"{name}: {preset.description}; {args.batches:,} batches of {args.games_per_batch} games; outputs in {args.out}/",
        flush=True,
    )
    summary = loop.run_training(
        config,
        HParams.create(**preset.hparams),
        args.out,
        seed=args.seed,
        batches=args.batches,
        time_budget_s=args.time_budget,
        resume=args.resume,
        overwrite=args.overwrite,
        log=lambda m: print(m, flush=True),
        title=f"{name} (seed {args.seed}, {args.games_per_batch} games per batch)",
    )
    rows = loop.read_metrics(Path(args.out) / loop.METRICS)
    summary["verdict"] = verdict(rows) if verdict and rows else ""
    print(
        json.dumps(
            {k: summary[k] for k in ("batches", "games", "promotions", "elapsed_s", "dashboard", "verdict")}, indent=1
        )
    )
    return summary


def win_rate_trend(rows: list[dict]) -> str:
    """The evaluation win rate against RandomPunisher over the first and the last 10% of a run."""
    head = rows[: max(1, len(rows) // 10)]
    start = sum(r["eval_win_rate"] for r in head) / len(head)
    return f"win rate against RandomPunisher {start:.2f} (first 10% of the run) -> {tail_mean(rows, 'eval_win_rate'):.2f} (last 10%)"


def tail_mean(rows: list[dict], key: str, fraction: float = 0.1) -> float:
    """Mean of ``key`` over the last ``fraction`` of the logged intervals."""
    tail = rows[-max(1, int(len(rows) * fraction)) :]
    return sum(r[key] for r in tail) / len(tail)


if __name__ == "__main__":
    sys.exit("run one of the ex*.py scripts")
