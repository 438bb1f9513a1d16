"""Ablations of the ``gumbel-az`` recipe at equal wall time: which change makes a better network
per CPU second (docs/strength.md, "The recipe, per CPU second").

Each arm is the preset with a few flags changed; each (arm, seed) run trains for ``--minutes``
of wall time in its own process (``czjax train --time-budget``), one run at a time, so give the
command a core of its own (``taskset -c 1``) and keep the machine otherwise quiet on that core:
the arms are compared by what they learn in the same time.

    python experiments/recipe-ablations/ablations.py run --arms base vmix50 --seeds 0 1 2 --minutes 15
    python experiments/recipe-ablations/ablations.py score           # every finished run, once
    python experiments/recipe-ablations/ablations.py table --out docs/results/recipe-ablations/arms-15min

``run`` skips finished runs and resumes an interrupted one (its time budget counts the time it
already trained). ``score`` scores each finished run's network under AlphaZero.jl's protocol
(its MCTS with 600 simulations, ``czjax eval pons --protocol alphazero.jl``) and alone (its most
likely column: Pons, the public positions, 1,000 games against RandomPunisher), into the run's
``score.json``. ``table`` writes per arm the mean and sample standard deviation over its seeds.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from czjax.players.loading import load_agent

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: common
import common

PRESET = "gumbel-az"
# The preset as these ablations began (4 replay steps a batch, the prior at temperature 1; since
# then 16 steps, steps16, and 1.5, ptemp15): every arm starts from it, so that arms run later stay
# comparable with those in the table (an arm's own --search comes later and wins).
BASE_SEARCH = "gumbel:sims=16,considered=4,move=policy,rescale=0"
BASE_FLAGS = ["--replay-steps", "4", "--search", BASE_SEARCH]
ARMS: dict[str, tuple[str, list[str]]] = {
    "base": ("the gumbel-az preset as the ablations began (4 replay steps a batch, the prior at temperature 1)", []),
    "vmix50": ("value target: half the outcome, half the search's root value", ["--value-mix", "0.5"]),
    "steps16": (
        "16 gradient steps of 512 positions per batch of games (each position trained on about 1.1 times, not 0.3)",
        ["--replay-steps", "16"],
    ),
    "lrcos": (
        "learning rate 1e-3 decayed along a half cosine to 1e-4 over 200k games (about one run)",
        ["--lr-decay-games", "200000", "--lr-final", "0.1"],
    ),
    "window": (
        "replay drawn from a window growing from 10k to 50k positions over 100k games",
        ["--replay-window-start", "10000", "--replay-window-games", "100000"],
    ),
    "ptemp15": (
        "prior temperature 1.5 in the search (flatter prior and improved policy)",
        ["--search", f"{BASE_SEARCH},prior_temperature=1.5"],
    ),
    "pcr": (
        "playout cap randomization: a quarter of the plies searched with 32 simulations and trained on, the rest "
        "with 8 for the move only (14 a ply on average, against 16)",
        ["--search", f"{BASE_SEARCH.replace('sims=16', 'sims=32')},fast_sims=8,full_fraction=0.25"],
    ),
    "resnet-small": ("a 2 x 32 ResNet in place of MLP3", ["--model", "resnet:blocks=2,channels=32"]),
    "posavg": (
        "position averaging: a drawn position's targets are the means over the buffer's rows of the same board "
        "(AlphaZero.jl's use_position_averaging)",
        ["--replay-average"],
    ),
}
PONS = ("L1R1", "L2R1", "L3R1", "L1R2", "L2R2", "L1R3")


def run_folder(root: Path, arm: str, seed: int) -> Path:
    return root / arm / f"seed{seed}"


def train_command(folder: Path, seed: int, seconds: float, flags: list[str]) -> list[str]:
    """``czjax train`` of the preset with ``flags`` into ``folder`` until ``seconds`` of training in
    all; where the folder holds a run, its resumption (a resumed run keeps the settings it began with)."""
    budget = ["--time-budget", str(seconds), "--out", str(folder)]
    if (folder / "run.json").exists():
        return [sys.executable, "-m", "czjax", "train", "--resume", *budget]
    return [sys.executable, "-m", "czjax", "train", "--preset", PRESET, "--seed", str(seed), *budget, *flags]


def train(root: Path, arm: str, seed: int, minutes: float) -> None:
    """One (arm, seed) run to its time budget, in a process of its own; ``done.json`` at the end."""
    folder = run_folder(root, arm, seed)
    if (folder / "done.json").exists():
        print(f"{arm} seed {seed}: finished before, kept", flush=True)
        return
    command = train_command(folder, seed, minutes * 60, [*BASE_FLAGS, *ARMS[arm][1]])
    print(f"== {arm} seed {seed}: {' '.join(command[2:])}", flush=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (root / f"{arm}-seed{seed}.log").open("a") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
    if code != 0:
        raise SystemExit(
            f"ablations.py: {arm} seed {seed} stopped with exit code {code}; see {root}/{arm}-seed{seed}.log"
        )
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    done = {
        "arm": arm,
        "seed": seed,
        "flags": ARMS[arm][1],
        "minutes": minutes,
        "games": rows[-1]["games"],
        "elapsed_s": rows[-1]["elapsed_s"],
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (folder / "done.json").write_text(json.dumps(done, indent=1))


def score(folder: Path, games: int) -> dict:
    """The run's network under AlphaZero.jl's protocol and alone."""
    from czjax.evaluate import pons
    from czjax.evaluate.protocol import protocol_agent

    common.use("strength")
    from strength_table import row

    network = load_agent(str(folder))
    protocol = pons.pons(protocol_agent("alphazero.jl", str(folder)), pons.load_pons(), protocol="alphazero.jl")
    by_set = {r["set"]: r["move_error"] for r in protocol["sets"]}
    # PONS are the short names of pons.PONS_REFERENCE_ORDER, in its order
    out = {f"protocol_{s}": by_set[name] for s, name in zip(PONS, pons.PONS_REFERENCE_ORDER, strict=True)}
    out["protocol_mean"] = protocol["mean_move_error"]
    out.update({f"network_{k}": v for k, v in row(network, games, seed=0, minimax=None).items()})
    return out


def score_all(root: Path, games: int) -> None:
    for done in sorted(root.glob("*/seed*/done.json")):
        folder = done.parent
        if (folder / "score.json").exists():
            continue
        print(f"scoring {folder} ...", flush=True)
        start = time.perf_counter()
        result = score(folder, games)
        (folder / "score.json").write_text(json.dumps(result, indent=1))
        print(
            f"  protocol mean {result['protocol_mean']:.1f}%, network alone {result['network_pons_mean']:.1f}% ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )


def summary(root: Path) -> list[dict]:
    """Per arm: its runs' scores, and the mean and sample standard deviation of each figure."""
    arms = []
    for arm, (what, flags) in ARMS.items():
        runs = []
        for seed_folder in sorted((root / arm).glob("seed*")):
            if (seed_folder / "score.json").exists():
                runs.append(
                    {
                        **json.loads((seed_folder / "done.json").read_text()),
                        **json.loads((seed_folder / "score.json").read_text()),
                    }
                )
        if not runs:
            continue
        keys = [k for k in runs[0] if k.startswith(("protocol_", "network_")) or k == "games"]
        stats = {}
        for k in keys:
            values = np.asarray([r[k] for r in runs], float)
            stats[k] = {"mean": float(values.mean()), "sd": float(values.std(ddof=1)) if len(values) > 1 else None}
        arms.append(
            {"arm": arm, "what": what, "flags": flags, "seeds": [r["seed"] for r in runs], "runs": runs, "stats": stats}
        )
    return arms


def markdown(arms: list[dict]) -> str:
    def cell(stat, fmt="{:.1f}"):
        return fmt.format(stat["mean"]) + ("" if stat["sd"] is None else " ± " + fmt.format(stat["sd"]))

    lines = [
        "| arm | seeds | games | protocol: "
        + " | ".join(PONS)
        + " | protocol mean | network alone: Pons mean | keeps | vs RandomPunisher |",
        "| --- | --- | ---: | " + " | ".join("---:" for _ in PONS) + " | ---: | ---: | ---: | ---: |",
    ]
    for a in arms:
        s = a["stats"]
        lines.append(
            f"| {a['arm']} | {','.join(map(str, a['seeds']))} | {cell(s['games'], '{:,.0f}')} | "
            + " | ".join(cell(s[f"protocol_{p}"]) for p in PONS)
            + f" | {cell(s['protocol_mean'])} | {cell(s['network_pons_mean'])} | {cell(s['network_public_keeps'], '{:.3f}')}"
            f" | {cell(s['network_vs_random_punisher_win'], '{:.3f}')} |"
        )
    lines.append("")
    lines.extend(f"- **{a['arm']}**: {a['what']} (`{' '.join(a['flags']) or 'no flags'}`)" for a in arms)
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("run", "score", "table"))
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), help="(default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="(default: %(default)s)")
    parser.add_argument("--minutes", type=float, default=15.0, help="wall time per run (default: %(default)s)")
    parser.add_argument("--root", default="runs/ablations", help="the runs' folder (default: %(default)s)")
    parser.add_argument(
        "--games", type=int, default=1000, help="games against RandomPunisher when scoring (default: %(default)s)"
    )
    parser.add_argument("--out", default=None, metavar="DIR", help="table: write results.md and ablations.json here")
    args = parser.parse_args(argv)
    root = Path(args.root)
    if args.command == "run":
        for arm in args.arms:  # every seed of an arm before the next arm: complete arms first
            for seed in args.seeds:
                train(root, arm, seed, args.minutes)
    elif args.command == "score":
        score_all(root, args.games)
    else:
        arms = summary(root)
        text = markdown(arms)
        print(text)
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / "results.md").write_text(text + "\n")
            (out / "ablations.json").write_text(json.dumps(arms, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
