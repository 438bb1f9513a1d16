"""Deprecated: skipping work on rows that do not matter moved to :mod:`czjax.row_skipping`. Each
old name still answers here, with a ``DeprecationWarning``, for one release."""

from __future__ import annotations

from typing import Any

from czjax.deprecation import moved

MOVED = {
    name: "czjax.row_skipping"
    for name in (
        "COMPACTION_MODES",
        "LOSS_CHUNKS",
        "LOSS_MIN_FLOPS",
        "ROLLOUT_CHUNKS",
        "ROLLOUT_MIN_FLOPS",
        "all_configurations",
        "check_mode",
        "flops_per_board",
        "in_gradient",
        "in_rollout",
        "loss_chunks",
        "over_valid_chunks",
        "rollout_chunks",
        "valid_first",
    )
}


def __getattr__(name: str) -> Any:
    return moved(__name__, MOVED, name)
