"""The protocol's scoring against the full searches it replaced, timed in one process: the
scoring as ``czjax eval pons --protocol alphazero.jl`` runs it (each search stopped once its move
is decided) on the first ``--per-set`` positions of each of Pons' sets, and the full searches'
cost on the same machine at the same time.

    python experiments/pons-protocol/scoring_speed.py --player czjax --per-set 500 --out DIR

The full searches (``--full-searches``: the network's own convolution, every search to its
600th simulation, 1,000 positions a batch as the command runs them) take an hour on a slow
2-core CPU, so they are timed for their first ``--full-sims`` simulations on one batch of 1,000
positions (a sixth of each set), compiled beforehand, and scaled to the positions and 600
simulations. Later simulations walk deeper graphs, so the scaled time is a lower bound and the
ratio an upper bound. A machine's speed drifts, so the figure that counts is the ratio from one
run. ``DIR/speed.json`` gets the seconds, the ratio and the scoring's per-set figures.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from czjax.bench.provenance import provenance
from czjax.evaluate import pons
from czjax.evaluate.protocol import protocol_agent
from czjax.search.azjl import run_graph_search

FULL_BATCH = 1000  # positions a compiled call of the full searches: a set at a time


def full_search_seconds(agent, sets: dict, sims: int) -> float:
    """Seconds of the first ``sims`` simulations of the full searches (the agent's own network)
    on one batch of :data:`FULL_BATCH` positions, a sixth from each set, compiled beforehand."""
    share = FULL_BATCH // len(sets)
    boards = np.concatenate([data["boards"][:share] for data in sets.values()])
    boards = np.concatenate([boards, boards[: FULL_BATCH - len(boards)]])
    c = agent.search.c
    run = jax.jit(lambda b: run_graph_search(agent.network, agent.params, b, jax.random.key(0), sims, c))
    board_array = jnp.asarray(boards)
    jax.block_until_ready(run(board_array))  # compiles
    start = time.perf_counter()
    jax.block_until_ready(run(board_array))
    return time.perf_counter() - start


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--player", default="czjax", help="a network (default czjax, the shipped model)")
    parser.add_argument("--per-set", type=int, default=500, help="positions of each set scored (default 500)")
    parser.add_argument("--full-sims", type=int, default=100, help="full searches' simulations timed (default 100)")
    parser.add_argument("--out", type=Path, required=True, help="folder for speed.json")
    args = parser.parse_args(argv)
    if args.per_set < 1 or args.full_sims < 2:
        parser.error(f"--per-set must be at least 1 and --full-sims at least 2, got {args.per_set}, {args.full_sims}")
    agent = protocol_agent("alphazero.jl", args.player)
    sims = agent.search.sims
    sets = pons.load_pons()
    batch_s = full_search_seconds(agent, sets, args.full_sims)
    scored = {name: {k: v[: args.per_set] for k, v in data.items()} for name, data in sets.items()}
    positions = sum(len(data["boards"]) for data in scored.values())
    full_s = batch_s * (positions / FULL_BATCH) * (sims - 1) / (args.full_sims - 1)
    print(f"full searches, {args.full_sims} simulations on {FULL_BATCH} positions: {batch_s:.1f} s", flush=True)
    start = time.perf_counter()
    report = pons.pons(agent, scored, protocol="alphazero.jl")
    stopped_s = time.perf_counter() - start
    print(f"scoring, {positions} positions: {stopped_s:.0f} s", flush=True)
    result = {
        **provenance(),
        "player": agent.name,
        "positions": positions,
        "full_searches_batch_s": round(batch_s, 2),
        "full_searches_s": round(full_s, 1),
        "scoring_s": round(stopped_s, 1),
        "ratio": round(stopped_s / full_s, 3),
        "move_error": [r["move_error"] for r in report["sets"]],
        "simulations": [r["simulations"] for r in report["sets"]],
        "evaluations": [r["evaluations"] for r in report["sets"]],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speed.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("full_searches_s", "scoring_s", "ratio")}))
    return result


if __name__ == "__main__":
    main()
