"""Mk4's 3x3 convolution of 64 channels at 550 and 50 boards, and the im2col product of the same
size, each timed alone (compiled once, then the median of 10 calls, ``czjax.bench.timing``): run
once on one core and once on both (``taskset -c 1`` / no taskset) to see what a second thread
adds. It wrote ``docs/results/benchmarks/bench-mk4-cpu/threads-*.txt``."""

import statistics

import jax.numpy as jnp
import numpy as np

from czjax.bench import timing
from czjax.models import layers  # _conv_nhwc lives with the layers

RUNS = 10


def median_s(fn, *args) -> float:
    """The median seconds of RUNS calls of ``fn`` on ``args``, compiled and warmed up first."""
    return statistics.median(timing.time_compiled(fn, lambda _: args, RUNS).times)


def random(*shape) -> jnp.ndarray:
    return jnp.asarray(np.random.randn(*shape).astype(np.float32))


def main() -> None:
    kernel = random(3, 3, 64, 64)
    print("conv550", round(median_s(layers._conv_nhwc, random(550, 6, 7, 64), kernel) * 1e3, 2), "ms")
    # the same product as one matrix multiplication: 550 boards x 42 cells by 3 x 3 x 64 inputs
    print("dot550", round(median_s(lambda a, b: a @ b, random(550 * 42, 576), random(576, 64)) * 1e3, 2), "ms")
    print("conv50", round(median_s(layers._conv_nhwc, random(50, 6, 7, 64), kernel) * 1e3, 3), "ms")


if __name__ == "__main__":
    main()
