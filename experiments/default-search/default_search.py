"""Choose `czjax play`'s default search by measurement: each candidate search over the shipped
model, scored on Pons' six sets as AlphaZero.jl's protocol scores a player (its most likely
move; `czjax eval pons --protocol alphazero.jl`), and timed per move on one board, as `play`
asks it (the median of ``--moves`` calls after compiling, positions from Pons' sets). The
default is the strongest candidate whose median move takes at most ``--budget`` seconds; the
candidates are all timed first, and only those within the budget scored.

    python experiments/default-search/default_search.py --out docs/results/default-search/DATE
    python experiments/default-search/default_search.py --time-only --out docs/results/default-search/DATE   # re-time, keep the scores

Time it on a quiet machine: the timings mean nothing beside another busy process. The Pons
scores are counts and do not depend on the machine; ``--time-only`` re-times the candidates
and keeps the scores already in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from czjax.evaluate.pons import load_pons, pons
from czjax.players.agent import policy
from czjax.players.loading import load_agent

CANDIDATES = (
    "gumbel:sims=64",
    "gumbel:sims=200",
    "mcts:sims=600",
    "azjl:sims=600",
    "azjl:sims=1000",
    "azjl:sims=1600",
    "azjl:sims=3200",
)


def score(spec: str) -> dict:

    report = pons(load_agent(spec), load_pons(), protocol="alphazero.jl")
    return {"pons": {r["set"]: r["move_error"] for r in report["sets"]}, "pons_mean": report["mean_move_error"]}


def time_moves(spec: str, moves: int) -> dict:
    """Seconds per move of ``spec`` on one board at a time (``policy`` as `play` calls it)."""
    import numpy as np

    agent = load_agent(spec)
    boards = np.concatenate([data["boards"][::200] for data in load_pons().values()])[:moves]
    policy(agent, boards[:1], batch_size=1)  # compile
    seconds = []
    for board in boards:
        start = time.perf_counter()
        policy(agent, board[None], batch_size=1)
        seconds.append(time.perf_counter() - start)
    return {"median_s": statistics.median(seconds), "max_s": max(seconds), "moves": len(seconds)}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="czjax", help="the network searched (default: %(default)s)")
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), metavar="SEARCH")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds a move at most (default: %(default)s)")
    parser.add_argument(
        "--moves", type=int, default=30, help="single-board moves timed per candidate (default: %(default)s)"
    )
    parser.add_argument(
        "--time-only", action="store_true", help="re-time the candidates, keep the Pons scores in --out"
    )
    parser.add_argument(
        "--score",
        choices=("all", "slowest"),
        default="all",
        help="score every candidate within the budget, or only the last of them in --candidates, for candidates "
        "listed by growing simulations where more were never weaker (as over czjax@3's network; a large "
        "network's search takes long to score) (default: %(default)s)",
    )
    parser.add_argument("--out", default=None, metavar="DIR", help="write results.json and results.md here")
    args = parser.parse_args(argv)
    if args.time_only and (args.out is None or not (Path(args.out) / "results.json").exists()):
        parser.error("--time-only needs --out holding an earlier results.json")
    return args


def kept_scores(args: argparse.Namespace) -> dict:
    """With ``--time-only``, the rows of ``--out``'s results.json by search (their Pons scores
    are kept); else none."""
    if not args.time_only:
        return {}
    return {r["search"]: r for r in json.loads((Path(args.out) / "results.json").read_text())["rows"]}


def time_candidates(args: argparse.Namespace) -> list[dict]:
    """A row per candidate with its seconds a move."""
    rows = []
    for search in args.candidates:
        spec = f"{search}:{args.model}"
        rows.append({"search": search, **time_moves(spec, args.moves)})
        print(f"{spec}: {rows[-1]['median_s']:.3f} s a move", file=sys.stderr, flush=True)
    return rows


def score_within_budget(args: argparse.Namespace, rows: list[dict], kept: dict) -> None:
    """The Pons scores of the candidates within the budget (only the slowest of them with
    ``--score slowest``; kept ones taken from ``kept``) added to their rows, None for the rest."""
    within = [r for r in rows if r["median_s"] <= args.budget]
    to_score = within[-1:] if args.score == "slowest" else within
    for row in rows:
        if row not in to_score:
            row.update(pons=None, pons_mean=None)
            continue
        spec = f"{row['search']}:{args.model}"
        print(f"scoring {spec} ...", file=sys.stderr, flush=True)
        row.update({k: kept[row["search"]][k] for k in ("pons", "pons_mean")} if row["search"] in kept else score(spec))
        print(f"  Pons mean {row['pons_mean']:.1f}%", file=sys.stderr, flush=True)


def results_page(args: argparse.Namespace, result: dict) -> list[str]:
    """results.md's lines: a row per candidate (its Pons errors per set, mean, seconds a move)."""
    rows = result["rows"]
    sets = list(next((r["pons"] for r in rows if r["pons"]), {}))
    lines = [
        f"Searches over `{args.model}`, scored as AlphaZero.jl's protocol scores a player; a move timed on one board "
        f"({result['machine']}, load {result['load_average'][0]:.2f}, {result['measured']}).",
        "",
        "| search | " + " | ".join(s.replace("Test_", "") for s in sets) + " | mean | s a move (median) |",
        "| --- | " + " | ".join("---:" for _ in sets) + " | ---: | ---: |",
    ]
    for r in rows:
        scores = (
            [f"{r['pons'][s]:.1f}" for s in sets] + [f"{r['pons_mean']:.1f}"] if r["pons"] else ["-"] * (len(sets) + 1)
        )
        lines.append(f"| `{r['search']}` | " + " | ".join(scores) + f" | {r['median_s']:.3f} |")
    lines += [
        "",
        f"Not scored (-): a search slower than {args.budget} s a move, which cannot be chosen"
        + (", or one before the last within it (--score slowest)." if args.score == "slowest" else "."),
    ]
    lines += ["", f"Chosen (strongest within {args.budget} s a move): `{result['chosen']}`"]
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out) if args.out else None
    kept = kept_scores(args)
    # Every candidate timed first, while the machine is as quiet as it was at the start; then
    # scored, only those within the budget (a slower one cannot be chosen, and scoring a large
    # network's search is the long part)
    rows = time_candidates(args)
    score_within_budget(args, rows, kept)
    fast = [r for r in rows if r["median_s"] <= args.budget and r["pons"]]
    best = min(fast, key=lambda r: r["pons_mean"]) if fast else None
    result = {
        "model": args.model,
        "budget_s": args.budget,
        "scored": args.score,
        "chosen": best["search"] if best else None,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load_average": os.getloadavg(),
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "rows": rows,
    }
    lines = results_page(args, result)
    print("\n".join(lines))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(result, indent=1))
        (out / "results.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
