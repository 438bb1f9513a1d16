"""Search against the network it searches with: solver accuracy, puzzles and one tournament.

For a trained model (a run folder such as `czjax train --preset ex3-rwb --out runs/ex3-rwb`'s, a
checkpoint or a shipped model), the raw network, the rollout improver (width 4, depth 4), PUCT,
Gumbel MuZero and entropy-guided PUCT over it are each scored on the shipped solver-labelled
positions (greedy move: optimal / keeps the game-theoretic outcome) and the shipped puzzles,
then play one round robin (every player sampled at temperature 1, as `czjax tournament` plays:
the network from its policy, PUCT in proportion to its visits, Gumbel and the rollout improver
their own choice). The same table answers the entropy-guided PUCT proposal's question:
entropy-guided PUCT against plain PUCT at equal simulations.

``--pons`` also scores each player on Pons' six sets as AlphaZero.jl's benchmark scores its
player (the most visited column, the lowest on ties; move error in %), and gives every player's
difference from the first with a 95% interval paired over the same 6,000 positions.

    python experiments/search-strength/search_strength.py runs/ex3-rwb --games 100
    python experiments/search-strength/search_strength.py runs/ex3-rwb --players mcts:sims=64 entropy-mcts:sims=64 --games 400
    python experiments/search-strength/search_strength.py czjax --players mcts:sims=600,c=2.0 entropy-mcts:sims=600,c=2.0 --pons
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: curves
from curves import paired_interval
from czjax.evaluate import pons, puzzles, tournament
from czjax.evaluate.positions import accuracy, load_positions
from czjax.players.loading import load_agent

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


def progress(line: str) -> None:
    """A slow search's progress lines (MCTS-600 over a ResNet takes minutes a thousand positions on a CPU)."""
    print(f"  {line}", flush=True)


def pons_comparison(players: list) -> dict:
    """Each player's Pons move error (%) per set and mean, and its difference from the first
    player's with a 95% interval paired over the positions; printed as a table."""
    sets = pons.load_pons()
    errors = {}
    for agent in players:
        start = time.perf_counter()
        errors[agent.name] = pons.pons_greedy_errors(agent, sets, log=progress)
        print(f"{agent.name}: Pons in {time.perf_counter() - start:.0f} s", flush=True)
    first = players[0].name
    first_errors = np.concatenate(list(errors[first].values()))
    report: dict = {"sets": list(sets), "players": {}}
    print("\n| player | " + " | ".join(sets) + " | mean | difference from the first [95%, paired] |")
    print("| --- | " + " | ".join("---:" for _ in sets) + " | ---: | --- |")
    for name, by_set in errors.items():
        every = np.concatenate(list(by_set.values()))
        diff = paired_interval(100 * (every - first_errors))
        report["players"][name] = {
            "per_set": {s: 100 * float(e.mean()) for s, e in by_set.items()},
            "mean": 100 * float(np.mean([e.mean() for e in by_set.values()])),
            "difference_from_first": diff if name != first else None,
        }
        row = report["players"][name]
        shown = "-" if name == first else f"{diff['diff']:+.2f} [{diff['low']:+.2f}, {diff['high']:+.2f}]"
        print(
            f"| {name} | "
            + " | ".join(f"{v:.1f}" for v in row["per_set"].values())
            + f" | {row['mean']:.2f} | {shown} |"
        )
    return report


def parse_args(argv=None) -> argparse.Namespace:
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
        "--pons",
        action="store_true",
        help="also Pons' move error per set as AlphaZero.jl's benchmark scores it, paired against the first player",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="write the report as JSON here (default: MODEL/search_strength.json for a run folder, "
        "else search_strength.json)",
    )
    return parser.parse_args(argv)


def score_players(players: list, puzzle_set: dict) -> list[dict]:
    """A row per player: its greedy move's accuracy on the solver-labelled positions and on the
    puzzles, and the seconds they took."""
    positions = load_positions()
    rows = []
    for agent in players:
        start = time.perf_counter()
        acc = accuracy(agent, positions, log=progress)
        puz = puzzles.score(agent, puzzle_set, log=progress)
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
    return rows


def rate_players(players: list, rows: list[dict], games: int, seed: int) -> dict | None:
    """The round robin of ``games`` a pair (none for 0), each row given its player's Elo and
    interval (NaN without a tournament); the tournament's report."""
    start = time.perf_counter()
    report = tournament.tournament(players, games, seed=seed, log=print) if games else None
    elo = {r["player"]: (r["elo"], r["ci95"]) for r in report["ratings"]} if report else {}
    for row in rows:
        row["elo"], row["elo_ci95"] = elo.get(row["player"], (float("nan"), float("nan")))
    if report:
        print(
            f"\ntournament: {games} games per pair in {time.perf_counter() - start:.0f} s; Elo relative to {report['anchor']}\n"
        )
    return report


def print_rows(rows: list[dict], rated: bool) -> None:
    """The players' table: accuracy, puzzles, and the Elo where a tournament rated them."""
    kinds = [k for k in puzzles.KINDS if f"puzzle_{k}" in rows[0]]
    elo_head, elo_rule = (" Elo |", " ---: |") if rated else ("", "")  # no tournament, no Elo
    print("| player | optimal | keeps outcome | " + " | ".join(f"{k} puzzles" for k in kinds) + " |" + elo_head)
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in kinds) + " |" + elo_rule)
    for row in rows:
        print(
            f"| {row['player']} | {row['optimal']:.3f} | {row['keeps']:.3f} | "
            + " | ".join(f"{row[f'puzzle_{k}']:.3f}" for k in kinds)
            + " |"
            + (f" {row['elo']:+.0f} +- {row['elo_ci95']:.0f} |" if rated else "")
        )


def main(argv=None) -> int:
    args = parse_args(argv)
    players = [load_agent(spec(s, args.model)) for s in args.players]
    rows = score_players(players, sample_puzzles(puzzles.load(), args.puzzles, args.seed))
    report = rate_players(players, rows, args.games, args.seed)
    print_rows(rows, rated=report is not None)
    pons = pons_comparison(players) if args.pons else None
    folder = Path(args.model) if Path(args.model).is_dir() else Path(".")
    out = Path(args.out) if args.out else folder / "search_strength.json"
    if out.parent.is_dir():
        out.write_text(json.dumps({"rows": rows, "tournament": report, "pons": pons}, indent=1))
        print(f"\nwritten {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
