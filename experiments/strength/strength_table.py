"""The strength issue's table for checkpoints: the network alone and a search over it, on Pons'
six sets (AlphaZero.jl's move error), the 1,000 public solver positions, the shipped puzzles,
1,000 games against RandomPunisher and 1,000 against AlphaZero.jl's depth-5 minimax with random
tie-breaking (``minimax:depth=5,ties=random``), scored as points (a draw half).

    python experiments/strength/strength_table.py runs/gumbel-az-seed0 czjax --search gumbel:sims=64 --json table.json

Each PLAYER is a run folder, a checkpoint file or ``czjax`` (the shipped model). The network
plays its most likely column (temperature 0) and the search its move, as ``czjax play`` does;
RandomPunisher samples, and minimax samples among its equally good moves. Half of the games
with each side first.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import numpy as np

from czjax import rollout
from czjax.evaluate import puzzles
from czjax.learn import solver_metrics
from czjax.players.agent import Agent
from czjax.players.loading import load_agent

PONS = ("L1R1", "L2R1", "L3R1", "L1R2", "L2R2", "L1R3")
MINIMAX = "minimax:depth=5,ties=random"  # AlphaZero.jl's baseline, its ties broken at random


def play(agent: Agent, opponent: Agent, games: int, seed: int) -> np.ndarray:
    """The outcomes (1 a win, 0 a draw, -1 a loss, ``agent``'s view) of ``games`` games of
    ``agent`` against ``opponent``, each playing as everywhere (a network its most likely column,
    a built-in player sampled), half with each side first."""
    _, results = rollout.play_games(
        jax.random.key(seed),
        rollout.Side(agent.player, agent.params, temperature=agent.temperature()),
        rollout.Side(opponent.player, opponent.params, temperature=opponent.temperature()),
        games,
    )
    return np.asarray(results.outcome)


def row(agent: Agent, games: int, seed: int, minimax: str | None = MINIMAX) -> dict:
    """``agent``'s row of the table (``minimax``: the minimax opponent, None for no such games)."""
    bench = solver_metrics.load()
    scores = jax.jit(lambda p: solver_metrics.metrics(agent.player, p, bench))(agent.params)
    out = {f"pons_{s}": float(scores[f"pons_{s}_error"]) for s in PONS}
    out.update(
        pons_mean=float(scores["pons_mean_error"]),
        public_optimal=float(scores["public_optimal"]),
        public_keeps=float(scores["public_keeps"]),
    )
    report = puzzles.score(agent, puzzles.load())
    out.update(win_in_one=report["win"]["greedy"], block=report["block"]["greedy"])
    outcome = play(agent, load_agent("random-punisher"), games, seed)
    out.update(
        vs_random_punisher_win=float((outcome == 1).mean()),
        vs_random_punisher_draw=float((outcome == 0).mean()),
        games=games,
    )
    if minimax is None:
        return out
    outcome = play(agent, load_agent(minimax), games, seed)
    out.update(
        minimax=minimax,
        vs_minimax_points=float((outcome == 1).mean() + (outcome == 0).mean() / 2),
        vs_minimax_win=float((outcome == 1).mean()),
        vs_minimax_draw=float((outcome == 0).mean()),
    )
    return out


def format_rows(rows: list[dict]) -> str:
    head = (
        f"{'player':44s} "
        + " ".join(f"{s:>5s}" for s in PONS)
        + f" {'mean':>5s} {'opt':>5s} {'keeps':>5s} {'win1':>5s} {'block':>5s} {'vs RP':>6s} {'vs mm':>6s}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['player'][-44:]:44s} "
            + " ".join(f"{r[f'pons_{s}']:5.1f}" for s in PONS)
            + f" {r['pons_mean']:5.1f} {r['public_optimal']:5.3f} {r['public_keeps']:5.3f} {r['win_in_one']:5.3f}"
            f" {r['block']:5.3f} {r['vs_random_punisher_win']:6.3f} {r['vs_minimax_points']:6.3f}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("players", nargs="+", metavar="PLAYER")
    parser.add_argument(
        "--search",
        default="gumbel:sims=64",
        help="the search scored over each network too ('' for none; default: %(default)s)",
    )
    parser.add_argument(
        "--games", type=int, default=1000, help="games against RandomPunisher and minimax (default: %(default)s)"
    )
    parser.add_argument("--minimax", default=MINIMAX, help="the minimax opponent (default: %(default)s)")
    parser.add_argument(
        "--search-games", type=int, default=200, help="games against each opponent for a search (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the rows to FILE")
    args = parser.parse_args(argv)
    rows = []
    for spec in args.players:
        for name in [spec] + ([f"{args.search}:{spec}"] if args.search else []):
            games = args.search_games if name != spec else args.games
            try:
                agent = load_agent(name)
            except ValueError as err:
                print(f"strength_table.py: {err}", file=sys.stderr)
                return 2
            print(f"scoring {name} ...", file=sys.stderr, flush=True)
            start = time.perf_counter()
            rows.append({"player": name, **row(agent, games, args.seed, args.minimax)})
            print(f"  {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print(format_rows(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
