"""PyTorch, imported by each function of the peer that uses it, so that the peer (and the
benchmarks beside it) import without PyTorch installed."""

from __future__ import annotations


def import_torch():
    """The ``torch`` module; a one-line ``ValueError`` saying how to install it where it is missing."""
    try:
        import torch
    except ImportError:
        raise ValueError("the PyTorch peer needs PyTorch: pip install torch==2.13.0 (CPU build)") from None
    return torch
