"""The precision policy, in one place.

Float32 matrix products are exact float32 on a CPU, but on an NVIDIA GPU XLA's default runs
them through TF32-class tensor-core arithmetic (about 1e-3 relative). So:

- **Training** uses the precision its config names (``TrainConfig.precision``, CLI
  ``--precision``): ``default`` (the backend's fast default), ``highest`` (full float32
  everywhere) or ``bf16`` (bfloat16 products, the fastest on a GPU).
- **Every parity path** (the ONNX export's check against czjax, comparisons with PyTorch,
  tests of one formulation against another) computes under :func:`parity`: full float32, so
  tolerances of float32 rounding hold on every backend.
"""

from __future__ import annotations

import contextlib

import jax

# --precision names -> jax.default_matmul_precision values (None: leave the backend's default)
PRECISIONS = {"default": None, "highest": "highest", "bf16": "bfloat16"}
PARITY = "highest"


def check(name: str) -> None:
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}")


def matmul(name: str):
    """A context in which jitted functions are traced and compiled at precision ``name``."""
    check(name)
    value = PRECISIONS[name]
    return contextlib.nullcontext() if value is None else jax.default_matmul_precision(value)


def parity():
    """Full float32 matrix products, for every comparison of czjax with another computation."""
    return jax.default_matmul_precision(PARITY)
