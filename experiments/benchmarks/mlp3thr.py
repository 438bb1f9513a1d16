"""MLP3's forward at the 50-game rollout's batch (25 boards a network a ply) and its gradient at the
update's batch, timed alone (compiled once, then the median of 50 calls, ``czjax.bench.timing``):
run once on one core and once on both to see what a second thread adds. It wrote
``docs/results/benchmarks/bench-mk4-cpu/mlp3-*core.txt``."""

import statistics

import jax
import jax.numpy as jnp
import numpy as np

from czjax import models
from czjax.bench import timing

RUNS = 50
# MLP3's FLOPs a board: 42 inputs to 256, six layers of 256 x 256, 256 to its 8 outputs
FLOPS_PER_BOARD = 2 * (42 * 256 + 6 * 256 * 256 + 256 * 8)


def median_s(fn, *args) -> float:
    """The median seconds of RUNS calls of ``fn`` on ``args``, compiled and warmed up first."""
    return statistics.median(timing.time_compiled(fn, lambda _: args, RUNS).times)


def main() -> None:
    model = models.get_model("mlp3")
    params = models.init_params(model, jax.random.key(0))

    def forward(p, boards):
        return model.apply(p, boards)

    def gradient(p, boards):  # of the first column's log-probability: a backward pass of the network
        return jax.grad(lambda q: jnp.sum(jax.nn.log_softmax(model.apply(q, boards)[0])[:, 0]))(p)

    for batch in (25, 550):
        boards = jnp.asarray(np.random.randint(-1, 2, (batch, 6, 7)).astype(np.int8))
        tf, tg = median_s(forward, params, boards), median_s(gradient, params, boards)
        flops = batch * FLOPS_PER_BOARD
        print(
            f"mlp3 B={batch:4d} forward {tf * 1e6:8.1f} us {flops / tf / 1e9:6.1f} GFLOP/s | "
            f"gradient {tg * 1e6:8.1f} us {3 * flops / tg / 1e9:6.1f} GFLOP/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
