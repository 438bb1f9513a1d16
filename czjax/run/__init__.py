"""Deprecated: the package that runs training, scans, tunes and distillation is
:mod:`czjax.jobs` (``czjax.run`` read as a verb beside the ``runs/`` folders it writes). Its modules
still import from here, with a ``DeprecationWarning``, for one release."""

from __future__ import annotations

from typing import Any

from czjax.deprecation import moved_module, renamed_package

renamed_package(__name__, "czjax.jobs")


def __getattr__(name: str) -> Any:
    return moved_module(__name__, "czjax.jobs", name)
