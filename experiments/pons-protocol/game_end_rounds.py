"""Time the protocol's scoring with each number of game-ending rounds a pool step may run before
its network call (czjax/search/azjl_stream.py), in one process: the same searches, so the same
moves, at another cost.

    python experiments/pons-protocol/game_end_rounds.py --player untrained:mlp3 --per-set 100 --hardest 1000 --rounds 8 4 0

A round is a walk of every slot of the pool: it saves a network call for the slots whose walk
ends the game, so it pays where a call costs more than a walk. Each row is the wall time of
``stream_search`` on the first ``--per-set`` positions of each of Pons' sets (``--hardest`` of
the hardest set's), compiling included (each rounds' program is compiled once), with the moves
checked equal across rows. ``--out FILE`` writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from czjax.bench.provenance import provenance
from czjax.evaluate import pons, protocol


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--player", default="czjax", help="a network (default czjax, the shipped model)")
    parser.add_argument("--per-set", type=int, default=100, help="positions of each set (default 100)")
    parser.add_argument("--hardest", type=int, default=None, help="positions of the hardest set (default --per-set)")
    parser.add_argument("--rounds", type=int, nargs="+", default=[8, 4, 0], help="rounds tried (default 8 4 0)")
    parser.add_argument("--out", type=Path, default=None, help="a JSON file for the rows")
    args = parser.parse_args(argv)
    if args.per_set < 1 or min(args.rounds) < 0:
        parser.error("--per-set must be at least 1 and --rounds at least 0")
    agent = protocol.protocol_agent(protocol.ALPHAZERO_JL, args.player)
    if not protocol.streams(agent):
        parser.error(f"--player {args.player}: the protocol's stopped searches need a network")
    hardest = pons.PONS_REFERENCE_ORDER[-1]
    sets = pons.load_pons()
    boards = np.concatenate(
        [
            data["boards"][: (args.hardest or args.per_set) if name == hardest else args.per_set]
            for name, data in sets.items()
        ]
    )
    rows, moves = [], None
    for rounds in args.rounds:
        start = time.perf_counter()
        rules = dataclasses.replace(protocol.ALPHAZERO_JL, game_end_rounds=rounds)
        found = protocol.stopped_searches(agent, boards, protocol=rules)
        rows.append({"rounds": rounds, "seconds": round(time.perf_counter() - start, 1)})
        print(json.dumps(rows[-1]), flush=True)
        if moves is not None and not np.array_equal(moves, found.action):
            raise SystemExit(f"{rounds} rounds chose other moves")
        moves = found.action
    result = {**provenance(), "player": agent.name, "positions": len(boards), "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
