"""Where the experiments' modules are found.

``experiments/`` holds what the studies share (``campaign``, the runner of the named steps;
``steps``, what a step is; ``curves``, the statistics of seeds and milestones; ``index``, the
studies' table; this module) and a folder per study, ``experiments/<study>/``, with its scripts,
its campaign steps (``<name>_steps.py``) and its README. A script runs
as ``python experiments/<study>/<script>.py``, so Python puts its own folder on the import path
and not ``experiments/``; a script that imports a shared module puts ``experiments/`` there
first, in one line, and a module of another study by naming that study:

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: common, curves
    import common

    common.use("recipe-ablations")
    from ablations import PONS

Every module name under ``experiments/`` is unique (``tests/test_studies.py``), so a bare name
means one file whichever folders are on the path. The tests import from ``experiments/`` as a
script does (``pythonpath`` in ``pyproject.toml``) and call :func:`use` for a study's modules.
"""

from __future__ import annotations

import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parent


def folder(study: str) -> Path:
    """``experiments/<study>/``; a one-line error for a study that does not exist."""
    path = EXPERIMENTS / study
    if not (path / "README.md").is_file():
        raise ValueError(f"no study {study!r}: experiments/{study}/README.md does not exist")
    return path


def use(*studies: str) -> None:
    """Put these studies' folders on the import path (at its end, once), so that their modules
    import by their bare names."""
    for study in studies:
        path = str(folder(study))
        if path not in sys.path:
            sys.path.append(path)
