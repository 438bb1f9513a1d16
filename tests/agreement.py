"""How closely two training results computed by different compiled programs must agree.

Two different compiled programs (a batched and an unbatched update, a run's first batches in
another process) may sum in different orders; on a GPU they do (XLA's autotuner picks kernels per
compilation, and each process compiles its own). An entry whose gradient is float noise may then
step either way under Adam, whose first step is the gradient's sign. So "the same steps" means:
all but 0.1% of the parameter entries agree to 1% of a step, and none differs by more than two
steps each way. The same compiled program run twice on one device is compared bitwise instead.
"""

import jax
import numpy as np


def took_the_same_steps(params_a, params_b, lr: float, steps: int) -> bool:
    differences = np.concatenate(
        [
            np.abs(np.asarray(x) - np.asarray(y)).ravel()
            for x, y in zip(jax.tree.leaves(params_a), jax.tree.leaves(params_b))
        ]
    )
    return bool((differences > 0.01 * lr).mean() <= 1e-3 and differences.max() <= 2 * 2 * lr * max(steps, 1))


def on_cpu() -> bool:
    """XLA's CPU backend gives bitwise-equal results across its compilations of one training step."""
    return jax.default_backend() == "cpu"
