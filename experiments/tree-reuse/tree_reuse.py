"""Tree reuse at equal simulations: PUCT that keeps its subtree between moves
(czjax.search.reuse) against the same PUCT searching afresh at every move.

Both sides run the same number of new simulations per move (the same network evaluations: the
reused subtree costs none), and play their search's move (temperature 0), so a game is fixed by
its opening: every opening of ``--plies`` plies is played twice, each side first once. The
reusing side starts its search from the subtree below its previous move and the opponent's
reply (up to ``--keep`` nodes, default the simulations; 0 for none: both sides fresh).
``--fresh-sims`` gives the fresh side more simulations, to say what the reuse is worth in
simulations, or (with ``--keep 0``) what more simulations are worth at all. Prints one JSON object: the
reusing side's score (wins + half the draws) with a binomial standard error, its wins, draws and
losses, the share of its root visits that came from the previous search, and the seconds per
search of each side (rough: on whatever else the machine runs).

    python experiments/tree-reuse/tree_reuse.py --sims 64 --plies 3
    python experiments/tree-reuse/tree_reuse.py --model czjax@1 --sims 64 --fresh-sims 96 --plies 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time

import numpy as np

from czjax import game
from czjax.evaluate.interactive import game_result
from czjax.players.agent import Agent, searched_move
from czjax.players.loading import load_agent

PATH = 2  # plies between two searches of one side: its move and the reply


def openings(plies: int) -> list[list[int]]:
    """Every sequence of ``plies`` legal moves (0-based columns) that does not finish the game."""
    found = []
    for moves in itertools.product(range(game.COLS), repeat=plies):
        try:
            game.apply_moves(list(moves))
        except ValueError:
            continue
        if game_result(list(moves)) is None:
            found.append(list(moves))
    return found


def play_games(reusing: Agent, fresh: Agent, starts: list[list[int]], reuse_first: bool, keep: int):
    """The games from ``starts``, the reusing side moving first iff ``reuse_first``: ``(results
    from the reusing side's point of view (1, 0.5, 0), reused shares of its root visits, seconds
    per search of each side)``."""
    moves = [list(m) for m in starts]
    n = len(moves)
    tree, searched_at = None, np.full(n, -1)
    reused, seconds = [], {"reuse": [], "fresh": []}
    empty = np.zeros((game.ROWS, game.COLS), np.int8)
    for ply in itertools.count(len(starts[0])):
        going = [game_result(m) is None for m in moves]
        if not any(going):
            break
        boards = np.stack([game.apply_moves(m) if g else empty for m, g in zip(moves, going)])
        reuse_moves = ((ply - len(starts[0])) % 2 == 0) == reuse_first
        start = time.perf_counter()
        if reuse_moves:
            path = np.full((n, PATH), -1, np.int32)
            for i in range(n):
                since = moves[i][searched_at[i] :] if searched_at[i] >= 0 else []
                if searched_at[i] >= 0 and len(since) <= PATH:
                    path[i, : len(since)] = since
                else:  # no earlier search of this game: a path no tree holds
                    path[i, 0] = game.COLS  # past the columns: leaves every tree
            found = searched_move(reusing, boards, tree, path if tree is not None else None, keep)
            tree = found.tree
            if tree is not None:
                root = np.asarray(tree.node_visits[:, 0])
                sims = reusing.search.sims
                # root visits this search did not make (its simulations, a fresh root's evaluation)
                reused += [max(root[i] - sims - 1, 0) / root[i] for i in range(n) if going[i] and searched_at[i] >= 0]
            searched_at = np.where(going, [len(m) for m in moves], searched_at)
        else:
            found = searched_move(fresh, boards)
        seconds["reuse" if reuse_moves else "fresh"].append(time.perf_counter() - start)
        for i in range(n):
            if going[i]:
                moves[i].append(int(found.greedy[i]))
    side = 1 if reuse_first else -1  # game_result: +1 the first player won
    results = [{side: 1.0, -side: 0.0, 0: 0.5}[game_result(m)] for m in moves]
    return results, reused, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--model", default="czjax", help="the network searched (default: the shipped model)")
    parser.add_argument("--sims", type=int, default=64, help="new simulations per move, both sides (default 64)")
    parser.add_argument("--fresh-sims", type=int, default=None, help="the fresh side's simulations (default --sims)")
    parser.add_argument(
        "--keep", type=int, default=None, help="nodes of the subtree kept (default --sims; 0: no reuse, a calibration)"
    )
    parser.add_argument("--c", type=float, default=2.0, help="PUCT's exploration constant (default 2)")
    parser.add_argument("--plies", type=int, default=3, help="the openings: every one of this many plies (default 3)")
    args = parser.parse_args(argv)
    reusing = load_agent(f"mcts:sims={args.sims},c={args.c}:{args.model}")
    fresh = load_agent(f"mcts:sims={args.fresh_sims or args.sims},c={args.c}:{args.model}")
    keep = args.sims if args.keep is None else args.keep
    starts = openings(args.plies)
    results, reused, seconds = [], [], {"reuse": [], "fresh": []}
    for reuse_first in (True, False):
        r, u, s = play_games(reusing, fresh, starts, reuse_first, keep)
        results += r
        reused += u
        for k in seconds:
            seconds[k] += s[k]
    score = float(np.mean(results))
    report = {
        "model": args.model,
        "sims": args.sims,
        "fresh_sims": args.fresh_sims or args.sims,
        "keep": keep,
        "c": args.c,
        "openings": len(starts),
        "games": len(results),
        "reuse_score": score,
        "score_se": math.sqrt(max(np.var(results), 1e-12) / len(results)),
        "reuse_wins": int(sum(r == 1.0 for r in results)),
        "draws": int(sum(r == 0.5 for r in results)),
        "reuse_losses": int(sum(r == 0.0 for r in results)),
        "reused_share_of_root_visits": float(np.mean(reused)) if reused else 0.0,
        "seconds_per_search": {k: float(np.median(v)) for k, v in seconds.items() if v},
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
