"""Mk4's 3x3 convolution of 64 channels at 550 and 50 boards, and the im2col product of the same
size, each timed alone (the median of 10 calls after compiling): run once on one core and once on
both (``taskset -c 1`` / no taskset) to see what a second thread adds. It wrote
``docs/results/benchmarks/bench-mk4-cpu/threads-*.txt``."""

import time

import jax
import jax.numpy as jnp
import numpy as np

from czjax.models import layers as models  # _conv_nhwc lives with the layers


def bench(f, *a, n=10):
    jax.block_until_ready(f(*a))
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        jax.block_until_ready(f(*a))
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


x = jnp.asarray(np.random.randn(550, 6, 7, 64).astype(np.float32))
k = jnp.asarray(np.random.randn(3, 3, 64, 64).astype(np.float32))
print("conv550", round(bench(jax.jit(models._conv_nhwc), x, k) * 1e3, 2), "ms")
p = jnp.asarray(np.random.randn(550 * 42, 576).astype(np.float32))
w = jnp.asarray(np.random.randn(576, 64).astype(np.float32))
print("dot550", round(bench(jax.jit(lambda a, b: a @ b), p, w) * 1e3, 2), "ms")
x = jnp.asarray(np.random.randn(50, 6, 7, 64).astype(np.float32))
print("conv50", round(bench(jax.jit(models._conv_nhwc), x, k) * 1e3, 3), "ms")
