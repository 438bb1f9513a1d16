"""MLP3's forward at the 50-game rollout's batch (25 boards a network a ply) and its gradient at the
update's batch, timed alone: run once on one core and once on both to see what a second thread adds.
It wrote ``docs/results/benchmarks/bench-mk4-cpu/mlp3-*core.txt``."""

import time

import jax
import jax.numpy as jnp
import numpy as np

from czjax import models


def bench(f, *a, n=50):
    jax.block_until_ready(f(*a))
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        jax.block_until_ready(f(*a))
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


m = models.get_model("mlp3")
params = models.init_params(m, jax.random.key(0))
F = 2 * (42 * 256 + 6 * 256 * 256 + 256 * 8)
for B in (25, 550):
    boards = jnp.asarray(np.random.randint(-1, 2, (B, 6, 7)).astype(np.int8))
    fwd = jax.jit(lambda p, b: m.apply(p, b))
    g = jax.jit(jax.grad(lambda p, b: jnp.sum(jax.nn.log_softmax(m.apply(p, b)[0])[:, 0])))
    tf, tg = bench(fwd, params, boards), bench(g, params, boards)
    print(
        f"mlp3 B={B:4d} forward {tf * 1e6:8.1f} us {B * F / tf / 1e9:6.1f} GFLOP/s | gradient {tg * 1e6:8.1f} us {3 * B * F / tg / 1e9:6.1f} GFLOP/s",
        flush=True,
    )
