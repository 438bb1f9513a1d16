"""The strength recipe for one CPU hour, scored at 15, 30 and 60 minutes: seed 0 for 60 minutes
and seeds 1 and 2 for 30, each in stages (a run to 900 s of training, then ``--resume`` to 1800
and 3600 s), each stage's checkpoint kept, every stage scored as AlphaZero.jl scores a network
(MCTS with 600 simulations, the most visited move, on Pons' six sets) and alone (its most likely
move: Pons, the solver-labelled positions, 1,000 games against RandomPunisher).

    python experiments/strength/cpu_hour.py train --root runs/cpu-hour        # ~2 hours: give it a core (taskset -c 1)
    python experiments/strength/cpu_hour.py score --root runs/cpu-hour --out docs/results/strength/cpu-hour-DATE

``train`` skips the stages already kept and resumes an interrupted one (the time budget counts
the training done before). ``--flags`` are the recipe's flags beyond the preset (default: the
ablations' best arm, 16 replay steps a batch).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: common
import common

common.use("recipe-ablations")
from ablations import PONS, score, train_command

STAGES = {0: (900, 1800, 3600), 1: (900, 1800), 2: (900, 1800)}
FLAGS = ["--replay-steps", "16"]


def stage_folder(root: Path, seed: int, seconds: int) -> Path:
    return root / f"seed{seed}" / f"stage-{seconds}"


def train(root: Path, flags: list[str], seeds: list[int]) -> None:
    for seed in seeds:
        stages = STAGES[seed]
        run = root / f"seed{seed}"
        for seconds in stages:
            kept = stage_folder(root, seed, seconds)
            if (kept / "checkpoint.msgpack").exists():
                continue
            command = train_command(run, seed, seconds, flags)
            print(f"== seed {seed} to {seconds} s: {' '.join(command[2:])}", flush=True)
            if subprocess.call(command) != 0:
                raise SystemExit(f"cpu_hour.py: seed {seed}'s stage to {seconds} s failed")
            kept.mkdir(parents=True, exist_ok=True)
            for name in ("checkpoint.msgpack", "run.json"):
                shutil.copy2(run / name, kept / name)


def games_of(folder: Path) -> int:
    rows = [json.loads(line) for line in (folder.parent / "metrics.jsonl").read_text().splitlines() if line]
    elapsed = float(folder.name.split("-")[1])
    kept = [r for r in rows if r.get("elapsed_s", 0) <= elapsed + 1]
    return int(kept[-1]["games"]) if kept else 0


def score_all(root: Path, out: Path, games: int, minutes: list[int] | None = None) -> list[dict]:
    """Every kept stage's scores (each scored once, into its ``score.json``), or the stages at
    ``minutes`` only; the table of those scored into ``out``."""
    rows = []
    for seed, stages in STAGES.items():
        for seconds in stages:
            folder = stage_folder(root, seed, seconds)
            if not (folder / "checkpoint.msgpack").exists():
                continue
            if minutes is not None and seconds // 60 not in minutes and not (folder / "score.json").exists():
                continue
            cached = folder / "score.json"
            if not cached.exists():
                print(f"scoring seed {seed} at {seconds // 60} min ...", flush=True)
                cached.write_text(json.dumps(score(folder, games), indent=1))
            rows.append(
                {"seed": seed, "minutes": seconds // 60, "games": games_of(folder), **json.loads(cached.read_text())}
            )
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    (out / "results.md").write_text(table(rows) + "\n")
    print(table(rows))
    return rows


def table(rows: list[dict]) -> str:
    head = (
        "| seed | minutes | games | protocol: "
        + " | ".join(PONS)
        + " | protocol mean | network alone: Pons mean | keeps | vs RandomPunisher |"
    )
    lines = [head, "| " + " | ".join(["---:"] * (len(PONS) + 7)) + " |"]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {r['minutes']} | {r['games']:,} | "
            + " | ".join(f"{r[f'protocol_{s}']:.1f}" for s in PONS)
            + f" | {r['protocol_mean']:.1f} | {r['network_pons_mean']:.1f} | {r['network_public_keeps']:.3f}"
            + f" | {r['network_vs_random_punisher_win']:.3f} |"
        )
    for minutes in sorted({r["minutes"] for r in rows}):
        group = [r for r in rows if r["minutes"] == minutes]
        if len(group) > 1:
            mean = {k: float(np.mean([r[k] for r in group])) for k in ("protocol_mean", "network_pons_mean")}
            lines.append(
                f"\nAt {minutes} minutes, seeds {', '.join(str(r['seed']) for r in group)}: protocol mean "
                f"{mean['protocol_mean']:.1f}% (sd {np.std([r['protocol_mean'] for r in group], ddof=1):.1f}), "
                f"network alone {mean['network_pons_mean']:.1f}%."
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("train", "score"))
    parser.add_argument("--root", default="runs/cpu-hour", help="the runs' folder (default: %(default)s)")
    parser.add_argument(
        "--out",
        default=f"docs/results/strength/cpu-hour-{time.strftime('%Y-%m-%d')}",
        help="score: the table's folder (default: %(default)s, a dated run of the strength study)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        choices=sorted(STAGES),
        default=sorted(STAGES),
        help="train: only these seeds (two processes, a core each, can share the hour: --seeds 0 and --seeds 1 2)",
    )
    parser.add_argument("--games", type=int, default=1000, help="score: games against RandomPunisher")
    parser.add_argument(
        "--minutes",
        type=int,
        nargs="+",
        default=None,
        help="score: only the stages at these minutes not scored yet (default: every stage; those scored stay in the table)",
    )
    parser.add_argument("--flags", nargs=argparse.REMAINDER, default=FLAGS, help="train: the recipe's extra flags")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.command == "train":
        train(Path(args.root), args.flags, args.seeds)
    else:
        score_all(Path(args.root), Path(args.out), args.games, args.minutes)
    print(f"cpu_hour.py {args.command}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
