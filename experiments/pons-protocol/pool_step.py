"""Time a step of the protocol's search pool (czjax/search/azjl_stream.py): for each pool size and
convolution, the median of several compiled calls of a few steps, in ms a step and a board.

    python experiments/pons-protocol/pool_step.py --player czjax --slots 1024 512 256 --conv xla winograd im2col

The pool starts on the first positions of Pons' sets; the steps timed are its first ones (graphs
still small, every slot busy), where the network's batch is the pool.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from czjax import models
from czjax.evaluate.pons import load_pons
from czjax.evaluate.protocol import protocol_agent
from czjax.search import azjl_stream
from czjax.search.base import CONNECT_FOUR


def time_steps(agent, conv: str, slots: int, steps: int, calls: int) -> dict:
    """Median seconds of ``calls`` calls of ``steps`` steps of a pool of ``slots`` graphs."""
    model = models.get_model(agent.model_name, conv=conv)
    network = models.model_player(model)
    advance = azjl_stream.compiled_advance(models.convolves(model))  # with the scoring's compiler options
    boards = np.concatenate([data["boards"] for data in load_pons().values()])[: 2 * slots]
    roots = CONNECT_FOUR.encode(jnp.asarray(boards))
    state = azjl_stream.start(roots, slots, agent.search.sims)
    args = (agent.search, network, agent.params, jax.random.key(0), CONNECT_FOUR, steps)
    state = jax.block_until_ready(advance(state, roots, *args))  # compiles
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        state = jax.block_until_ready(advance(state, roots, *args))
        times.append(time.perf_counter() - start)
    step_s = statistics.median(times) / steps
    return {"conv": conv, "slots": slots, "ms_per_step": 1e3 * step_s, "ms_per_board": 1e3 * step_s / slots}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--player", default="czjax", help="a network (default czjax, the shipped model)")
    parser.add_argument("--slots", type=int, nargs="+", default=[1024, 512])
    parser.add_argument("--conv", nargs="+", default=["xla", "winograd", "im2col"], choices=models.CONV_METHODS)
    parser.add_argument("--steps", type=int, default=8, help="steps a call (default 8)")
    parser.add_argument("--calls", type=int, default=3, help="calls timed (default 3)")
    args = parser.parse_args(argv)
    agent = protocol_agent("alphazero.jl", args.player)
    rows = []
    for slots in args.slots:
        for conv in args.conv:
            rows.append(time_steps(agent, conv, slots, args.steps, args.calls))
            print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
