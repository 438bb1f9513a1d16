"""Search against the network it searches with: solver accuracy, puzzles and one tournament.

For a trained model (by default the one `experiments/ex3_rwb.py` writes), the raw network, the
rollout improver (width 4, depth 4), PUCT, Gumbel MuZero and entropy-guided PUCT over it are
each scored on the shipped solver-labelled positions (greedy move: optimal / keeps the
game-theoretic outcome) and the shipped puzzles, then play one round robin (every player
sampled at temperature 1, as `czjax tournament` plays: the network from its policy, PUCT in
proportion to its visits, Gumbel and the rollout improver their own choice). The same table
answers seed 004's question: entropy-guided PUCT against plain PUCT at equal simulations.

    python experiments/search_strength.py runs/ex3-rwb --games 100
    python experiments/search_strength.py runs/ex3-rwb --players mcts:sims=64 entropy-mcts:sims=64 --games 400
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from czjax import agents
from czjax.evaluate import puzzles, solver, tournament

SEARCHES = ["", "playouts:width=4,depth=4", "mcts:sims=64", "gumbel:sims=16", "gumbel:sims=64", "entropy-mcts:sims=64"]


def spec(search: str, model: str) -> str:
    return f"{search}:{model}" if search else model


def sample_puzzles(data: dict, n: int, seed: int) -> dict:
    """``n // 2`` puzzles of each kind, drawn without replacement with ``seed`` (all for n = 0)."""
    if n <= 0:
        return data
    rng = np.random.default_rng(seed)
    keep = np.concatenate([rng.permutation(np.flatnonzero(data["kind"] == k))[: n // 2] for k in puzzles.KINDS])
    keep.sort()
    return {
        "kind": data["kind"][keep],
        "boards": data["boards"][keep],
        "answers": data["answers"][keep],
        "records": [data["records"][i] for i in keep],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument(
        "model",
        nargs="?",
        default="czjax@1",
        help="a run folder, a checkpoint or a shipped model (default: %(default)s, example 3's Mk4)",
    )
    parser.add_argument(
        "--players",
        nargs="+",
        default=SEARCHES,
        metavar="SEARCH",
        help="searches over the model, as in a player spec without the model ('' = the network alone; default: %(default)s)",
    )
    parser.add_argument(
        "--games",
        type=int,
        default=100,
        help="tournament games per pair, half with each side first (default: %(default)s; 0: no tournament)",
    )
    parser.add_argument(
        "--puzzles",
        type=int,
        default=2000,
        metavar="N",
        help="a seeded sample of N of the 10,000 shipped puzzles, N/2 of each kind (default: %(default)s; 0: all)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        default=None,
        help="write the report as JSON here (default: MODEL/search_strength.json for a run folder, "
        "else search_strength.json)",
    )
    args = parser.parse_args(argv)
    players = [agents.load_agent(spec(s, args.model)) for s in args.players]
    positions, puzzle_set = solver.load_positions(), sample_puzzles(puzzles.load(), args.puzzles, args.seed)
    rows = []
    for agent in players:
        start = time.perf_counter()
        acc = solver.accuracy(agent, positions)
        puz = puzzles.score(agent, puzzle_set)
        rows.append(
            {
                "player": agent.name,
                "optimal": acc["greedy_optimal"],
                "keeps": acc["greedy_keeps_outcome"],
                **{f"puzzle_{k}": puz[k]["greedy"] for k in puzzles.KINDS if puz[k]["n"]},
                "eval_s": time.perf_counter() - start,
            }
        )
        print(
            f"{agent.name}: optimal {acc['greedy_optimal']:.3f}, keeps the outcome {acc['greedy_keeps_outcome']:.3f}, "
            + ", ".join(f"{k} puzzles {puz[k]['greedy']:.3f}" for k in puzzles.KINDS if puz[k]["n"]),
            flush=True,
        )
    start = time.perf_counter()
    report = tournament.tournament(players, args.games, seed=args.seed, log=print) if args.games else None
    elo = {r["player"]: (r["elo"], r["ci95"]) for r in report["ratings"]} if report else {}
    for row in rows:
        row["elo"], row["elo_ci95"] = elo.get(row["player"], (float("nan"), float("nan")))
    if report:
        print(
            f"\ntournament: {args.games} games per pair in {time.perf_counter() - start:.0f} s; Elo relative to {report['anchor']}\n"
        )
    kinds = [k for k in puzzles.KINDS if f"puzzle_{k}" in rows[0]]
    print("| player | optimal | keeps outcome | " + " | ".join(f"{k} puzzles" for k in kinds) + " | Elo |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in kinds) + " | ---: |")
    for row in rows:
        print(
            f"| {row['player']} | {row['optimal']:.3f} | {row['keeps']:.3f} | "
            + " | ".join(f"{row[f'puzzle_{k}']:.3f}" for k in kinds)
            + f" | {row['elo']:+.0f} +- {row['elo_ci95']:.0f} |"
        )
    folder = Path(args.model) if Path(args.model).is_dir() else Path(".")
    out = Path(args.out) if args.out else folder / "search_strength.json"
    if out.parent.is_dir():
        out.write_text(json.dumps({"rows": rows, "tournament": report}, indent=1))
        print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
