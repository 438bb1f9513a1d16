"""Does ``--precision mixed`` (every product on bfloat16 operands, accumulated in float32) learn
what float32 learns? Each comparison starts both precisions from the same initial weights and
the same random streams, seed for seed, and judges the readings with the same-start study's
equivalence margins (TOST at alpha 0.05, margins fixed before the runs).

- ``ex3``: example 3 (``ex3-rwb``: REINFORCE with baseline, Mk4 with value head, self-play) for
  ``--games`` (25,000) a seed, ``--seeds`` (4) seeds, each precision as one ``czjax scan`` (the
  seeds vmapped, one program); read at the last milestone as the same-start study reads (a seed's
  mean over the 5,000 games before it): entropy (+-0.1 nats), win rate against RandomPunisher
  (+-0.05), game length (+-1 ply).
- ``recipe-train`` / ``recipe-score``: the ``gumbel-az`` recipe, float32 for ``--minutes`` of
  training a seed, then mixed for the same number of batches (so the same games: the question is
  what it learns, not how fast). With ``--batches`` both precisions run that many batches instead,
  so no run depends on the machine's speed: the runs may then share a busy machine, and
  ``--precisions`` splits them between cores;
  each network scored under AlphaZero.jl's protocol and alone, as the recipe's ablations score
  theirs; margins: the protocol's mean error and the network's alone on Pons' sets, 1
  percentage point each (the ablations' seeds spread by 0.1-0.7).

    python experiments/mixed-precision/mixed_precision.py ex3 --out docs/results/mixed-precision/ex3-DATE
    python experiments/mixed-precision/mixed_precision.py recipe-train --seeds 0 1 2 --minutes 15
    python experiments/mixed-precision/mixed_precision.py recipe-train --seeds 0 1 2 --batches 360 --precisions default   # and mixed, on the other core
    python experiments/mixed-precision/mixed_precision.py recipe-score --out docs/results/mixed-precision/recipe-DATE

Runs go under ``--root`` (runs/mixed-precision); every step skips what is finished and resumes
what was interrupted, so the same command continues. Give each command a core of its own
(``taskset -c 1``); a time-budgeted float32 run (``--minutes``) also needs an otherwise quiet machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: common, curves
import common
from curves import equivalence_verdict, format_interval, mean_interval, per_seed, value_at

common.use("same-start", "recipe-ablations")
from ablations import PONS, score
from same_start import EQUIVALENCE_MARGINS, VERDICT_WINDOW

PRECISIONS = ("default", "mixed")  # float32 (the CPU's default is exact float32) and mixed
EX3_PRESET = "ex3-rwb"
RECIPE_PRESET = "gumbel-az"
# Margins of the recipe's verdicts, percentage points of Pons' positions wrong, fixed before its runs
RECIPE_MARGINS = {"protocol_mean": 1.0, "network_pons_mean": 1.0}


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ex3_scan(root: Path, precision: str, seeds: int, games: int, games_per_batch: int) -> Path:
    """Example 3 at ``precision``, ``seeds`` seeds vmapped in one ``czjax scan``, run or resumed."""
    out = root / "ex3" / precision
    batches = -(-games // games_per_batch)
    command = [sys.executable, "-m", "czjax", "scan", "--preset", EX3_PRESET, "--seeds", str(seeds)]
    command += ["--batches", str(batches), "--precision", precision, "--out", str(out)]
    if (out / "scan.json").exists():
        command.append("--resume")
    print(f"== example 3 at {precision}: {' '.join(command[2:])}", flush=True)
    if subprocess.call(command) != 0:
        raise SystemExit(f"mixed_precision.py: example 3's scan at {precision} failed; the same command resumes it")
    return out / "metrics.jsonl"


def readings(rows: list[dict], at: int) -> dict[str, list[float | None]]:
    """Per metric of the margins, each seed's mean over the :data:`VERDICT_WINDOW` games before ``at``."""
    out = {}
    for key in EQUIVALENCE_MARGINS:
        out[key] = [value_at(games, values, at, VERDICT_WINDOW) for games, values in per_seed(rows, key).values()]
    return out


def judge(sides: dict[str, dict[str, list]], margins: dict[str, float]) -> list[dict]:
    """Per metric: each precision's seed mean with its 95% interval, mixed minus float32 with
    Welch's interval, and the equivalence verdict against the metric's margin."""
    table = []
    for key, margin in margins.items():
        mixed, full = sides["mixed"][key], sides["default"][key]
        table.append(
            {
                "metric": key,
                "margin": margin,
                "float32": mean_interval(full),
                "mixed": mean_interval(mixed),
                "seeds": {"float32": full, "mixed": mixed},
                "test": equivalence_verdict(mixed, full, margin),
            }
        )
    return table


def format_table(table: list[dict], digits: int = 3) -> str:
    lines = [
        "| metric | float32 mean [95% CI] | mixed mean [95% CI] | mixed - float32 [95% CI] | margin | verdict (TOST) |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for e in table:
        t = e["test"]
        diff = "-" if t is None else f"{t['diff']:+.{digits}f} [{t['ci95'][0]:+.{digits}f}, {t['ci95'][1]:+.{digits}f}]"
        lines.append(
            f"| {e['metric']} | {format_interval(e['float32'], digits)} | {format_interval(e['mixed'], digits)} | {diff} | "
            f"{e['margin']:g} | {'-' if t is None else t['verdict']} |"
        )
    return "\n".join(lines)


def write(out: Path, name: str, title: str, table: list[dict], extra: dict) -> str:
    out.mkdir(parents=True, exist_ok=True)
    text = f"# {title}\n\n{format_table(table)}\n"
    (out / "results.md").write_text(text)
    from czjax.bench.provenance import machine_description, source_commit

    where = {"commit": source_commit(), "machine": machine_description(), "written": time.strftime("%Y-%m-%d")}
    (out / "results.json").write_text(json.dumps({"comparison": name, **extra, **where, "verdicts": table}, indent=1))
    return text


def run_ex3(args) -> None:
    from czjax.jobs import presets

    games_per_batch = presets.get_preset(EX3_PRESET).config.games_per_batch
    at = -(-args.games // games_per_batch) * games_per_batch
    sides = {}
    for precision in PRECISIONS:
        path = ex3_scan(args.root, precision, args.seeds, args.games, games_per_batch)
        sides[precision] = readings(read_rows(path), at)
    table = judge(sides, EQUIVALENCE_MARGINS)
    command = f"python experiments/mixed-precision/mixed_precision.py ex3 --games {args.games} --seeds {args.seeds}"
    title = f"Example 3, mixed precision against float32: {args.seeds} seeds x {at:,} games, read at {at:,}"
    print(write(args.out, "ex3", title, table, {"command": command, "games": at, "seeds": args.seeds}))


def recipe_folder(root: Path, precision: str, seed: int) -> Path:
    return root / "recipe" / precision / f"seed{seed}"


def recipe_command(folder: Path, seed: int, precision: str, budget: list[str]) -> list[str]:
    if (folder / "run.json").exists():
        return [sys.executable, "-m", "czjax", "train", "--resume", "--out", str(folder), *budget]
    return [sys.executable, "-m", "czjax", "train", "--preset", RECIPE_PRESET, "--seed", str(seed)] + [
        "--precision",
        precision,
        "--out",
        str(folder),
        *budget,
    ]


def recipe_train(args) -> None:
    """Per seed: float32 for ``--minutes`` of training, then mixed for the batches float32 ran; or,
    with ``--batches``, each precision of ``--precisions`` for that many batches."""
    for seed in args.seeds:
        for precision in args.precisions:
            folder = recipe_folder(args.root, precision, seed)
            if (folder / "done.json").exists():
                continue
            if args.batches is not None:
                budget = ["--batches", str(args.batches)]
            elif precision == "default":
                budget = ["--time-budget", str(args.minutes * 60)]
            else:
                full = recipe_folder(args.root, "default", seed)
                if not (full / "done.json").exists():
                    raise SystemExit(f"mixed_precision.py: {full} is not finished; mixed runs the batches it ran")
                budget = ["--batches", str(read_rows(full / "metrics.jsonl")[-1]["batches"])]
            run_to(folder, recipe_command(folder, seed, precision, budget))


def run_to(folder: Path, command: list[str]) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    print(f"== {' '.join(command[2:])}", flush=True)
    if subprocess.call(command) != 0:
        raise SystemExit(f"mixed_precision.py: the run in {folder} stopped; the same command resumes it")
    last = read_rows(folder / "metrics.jsonl")[-1]
    (folder / "done.json").write_text(json.dumps({k: last[k] for k in ("batches", "games", "elapsed_s")}, indent=1))


def recipe_score(args) -> None:
    """Score every run of ``--precisions`` (each once, kept in its score.json); with both, judge."""
    sides: dict[str, dict[str, list]] = {p: {} for p in PRECISIONS}
    runs = []
    for precision in args.precisions:
        for seed in args.seeds:
            folder = recipe_folder(args.root, precision, seed)
            if not (folder / "done.json").exists():
                raise SystemExit(f"mixed_precision.py: {folder} is not finished; run recipe-train first")
            cached = folder / "score.json"
            if not cached.exists():
                print(f"scoring {precision} seed {seed} ...", flush=True)
                cached.write_text(json.dumps(score(folder, args.eval_games), indent=1))
            result = json.loads(cached.read_text())
            runs.append(
                {"precision": precision, "seed": seed, **json.loads((folder / "done.json").read_text()), **result}
            )
            for key in RECIPE_MARGINS:
                sides[precision].setdefault(key, []).append(result[key])
    if set(args.precisions) != set(PRECISIONS):
        print(f"scored {', '.join(args.precisions)}; recipe-score with both precisions judges them")
        return
    table = judge(sides, RECIPE_MARGINS)
    command = "python experiments/mixed-precision/mixed_precision.py recipe-train / recipe-score"
    title = f"The gumbel-az recipe, mixed precision against float32: seeds {', '.join(map(str, args.seeds))}"
    text = write(args.out, "recipe", title, table, {"command": command, "runs": runs, "pons_sets": PONS})
    print(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("ex3", "recipe-train", "recipe-score"))
    parser.add_argument(
        "--root", type=Path, default=Path("runs/mixed-precision"), help="the runs (default: %(default)s)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the results folder (default: docs/results/mixed-precision/COMMAND-DATE)",
    )
    parser.add_argument("--games", type=int, default=25_000, help="ex3: games a seed (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="ex3: how many (4); recipe: which (0 1 2)")
    parser.add_argument("--minutes", type=float, default=15, help="recipe: float32's training a seed (default: 15)")
    parser.add_argument(
        "--batches",
        type=int,
        default=None,
        help="recipe: each precision's batches a seed, instead of --minutes (default: float32 by time)",
    )
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=PRECISIONS,
        default=list(PRECISIONS),
        help="recipe-train, recipe-score: which precisions to run or score (default: both, float32 first)",
    )
    parser.add_argument(
        "--eval-games", type=int, default=1000, help="recipe: games against RandomPunisher (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if args.batches is not None and args.batches < 1:
        parser.error(f"--batches must be at least 1, got {args.batches}")
    name = "recipe" if args.command.startswith("recipe") else args.command
    args.out = args.out or Path(f"docs/results/mixed-precision/{name}-{time.strftime('%Y-%m-%d')}")
    if args.command == "ex3":
        args.seeds = (args.seeds or [4])[0]
        run_ex3(args)
    elif args.command == "recipe-train":
        args.seeds = args.seeds or [0, 1, 2]
        recipe_train(args)
    else:
        args.seeds = args.seeds or [0, 1, 2]
        recipe_score(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
