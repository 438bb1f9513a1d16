"""The precision policy, in one place.

Float32 matrix products are exact float32 on a CPU, but on an NVIDIA GPU XLA's default runs
them through TF32-class tensor-core arithmetic (about 1e-3 relative). So:

- **Training** uses the precision its config names (``TrainConfig.precision``, CLI
  ``--precision``): ``default`` (the backend's fast default), ``highest`` (full float32
  everywhere), ``bf16`` (``jax.default_matmul_precision("bfloat16")``) or ``mixed``: every
  product of a layer, dense or convolution, forward and backward, on bfloat16 operands and
  accumulated in float32 (``preferred_element_type``); parameters, gradients, optimizer state,
  the activations between products, normalisation, softmax and losses float32 (the models'
  ``dtype`` is the products' operands', czjax.models.COMPUTE_DTYPES; czjax.models.layers).
- **Every parity path** (the ONNX export's check against czjax, comparisons with PyTorch,
  tests of one formulation against another) computes under :func:`parity`: full float32, so
  tolerances of float32 rounding hold on every backend.
"""

from __future__ import annotations

import contextlib

import jax

# --precision names -> jax.default_matmul_precision values (None: leave the backend's default)
PRECISIONS = {"default": None, "highest": "highest", "bf16": "bfloat16", "mixed": None}
# --precision names whose models' products take operands of another dtype (czjax.models.COMPUTE_DTYPES)
ACTIVATIONS = {"mixed": "bfloat16"}
PARITY = "highest"


def check(name: str) -> None:
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}")


def activation_dtype(name: str) -> str:
    """The dtype of the models' products' operands under precision ``name`` (float32 but under ``mixed``)."""
    check(name)
    return ACTIVATIONS.get(name, "float32")


def matmul(name: str):
    """A context in which jitted functions are traced and compiled at precision ``name``."""
    check(name)
    value = PRECISIONS[name]
    return contextlib.nullcontext() if value is None else jax.default_matmul_precision(value)


def parity():
    """Full float32 matrix products, for every comparison of czjax with another computation."""
    return jax.default_matmul_precision(PARITY)
