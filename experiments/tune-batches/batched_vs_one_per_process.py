"""The same Optuna search run two ways on one machine, one after the other: `czjax tune` asking
its trials in batches (each batch one compiled scan), against one trial per process (how a
search tool that runs one configuration per process would run it: each process starts Python,
compiles its program and trains one trial, the processes sharing the study's journal file).

    python experiments/tune-batches/batched_vs_one_per_process.py --out docs/results/tune-batches/DATE/result.json

Both arms start from an empty JAX compilation cache (none is configured for czjax, as for a
user); the machine must run nothing else while it is timed."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEARCH = [
    "--preset",
    "ex2-entropy",
    "--param",
    "entropy_bonus=0:0.2",
    "--param",
    "learning_rate=1e-4:1e-2:log",
    "--objective",
    "eval_win_rate:max",
]


def tune(out: Path, *flags: str) -> float:
    """Seconds for one `czjax tune` process with ``flags``, in a fresh process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "czjax.cli", "tune", *SEARCH, *flags, "--out", str(out), "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"czjax tune failed:\n{done.stderr[-2000:]}")
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16, help="trials per compiled scan in the batched arm")
    parser.add_argument("--batches", type=int, default=20, help="training batches per trial")
    parser.add_argument("--games-per-batch", type=int, default=50)
    parser.add_argument("--out", type=Path, required=True, help="the JSON result file")
    args = parser.parse_args(argv)
    size = ["--batches", str(args.batches), "--games-per-batch", str(args.games_per_batch)]
    size += ["--batches-per-chunk", str(args.batches), "--solver-eval", "off"]
    with tempfile.TemporaryDirectory() as folder:
        batched = tune(Path(folder) / "batched", "--trials", str(args.trials), "--batch", str(args.batch), *size)
        print(f"batched: {args.trials} trials in batches of {args.batch}: {batched:.1f} s", flush=True)
        one = []
        for k in range(args.trials):
            resume = ["--resume"] if k else []
            one.append(tune(Path(folder) / "one", "--trials", str(k + 1), "--batch", "1", *resume, *size))
            print(f"one per process: trial {k + 1}/{args.trials}: {one[-1]:.1f} s", flush=True)
    from czjax.bench import provenance

    result = {
        **provenance.provenance(),
        "search": " ".join(SEARCH),
        "trials": args.trials,
        "batch": args.batch,
        "training": " ".join(size),
        "batched_s": batched,
        "one_per_process_s": sum(one),
        "one_per_process_median_s": sorted(one)[len(one) // 2],
        "ratio": sum(one) / batched,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
