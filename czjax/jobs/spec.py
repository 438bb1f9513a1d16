"""What a training run or a scan is, as one typed value, built once (by the command line from its
flags, or by :func:`czjax.jobs.loop.run_training` / :func:`czjax.jobs.scan.run_scan` from their
keyword arguments) and passed whole to the runner (:func:`czjax.jobs.loop.train`,
:func:`czjax.jobs.scan.train_scan`).

A spec holds what is trained (the config and hyperparameters), where (the output folder, and
whether to resume or overwrite what it holds), for how long, how often it saves, and where its
lines go (``log``; ``notice``, the line to read after a stop; ``sinks``, the metric sinks of
:mod:`czjax.jobs.sinks`). The part that describes the run is stored with it (:meth:`RunSpec.description`,
:meth:`ScanSpec.description`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from czjax.jobs import folders
from czjax.learn.settings import HParams, TrainConfig


def check_resume_or_overwrite(resume: bool, overwrite: bool, words: folders.Spelling = folders.FLAGS) -> None:
    """``resume`` continues what ``overwrite`` deletes: a one-line error for both at once."""
    if resume and overwrite:
        raise ValueError(
            f"{words.resume} continues the run in {words.out} and {words.overwrite} deletes it: "
            "give one or the other, not both"
        )


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run: train ``config`` at ``hparams`` into ``out_dir`` from ``seed`` until
    ``batches`` batches or ``time_budget_s`` seconds of training in all (whichever comes first;
    both count what came before a resume).

    ``resume`` continues the run in ``out_dir`` from its checkpoint (with the spec's settings:
    the command line reads them from the folder); ``overwrite`` starts again in a folder that
    holds a run. ``init_from``: a ``.pth`` / ``.pt`` file or czjax checkpoint whose weights the
    learner and its frozen opponent start from (ignored when resuming from a checkpoint).
    ``num_devices``: each batch's games split across that many local devices (None: all of
    them). A checkpoint is written every ``checkpoint_every`` chunks or ``checkpoint_every_s``
    seconds, the dashboard redrawn every ``plot_every_s`` seconds. ``title`` names the run on
    its dashboard. ``portable``: every checkpoint also written as ``portable.msgpack``, without
    the replay buffer's rows (a run folder that holds one keeps it current anyway), so that the
    folder moves to another machine without its checkpoints and resumes there, the buffer
    rebuilt (:func:`czjax.jobs.loop.rebuild_replay`). ``stop_at``: a ``time.monotonic()``
    deadline after which no new chunk starts (the run is then continued with ``resume``)."""

    config: TrainConfig
    hparams: HParams
    out_dir: Path
    seed: int = 0
    batches: int | None = None
    time_budget_s: float | None = None
    resume: bool = False
    overwrite: bool = False
    title: str = ""
    init_from: str | None = None
    num_devices: int | None = 1
    checkpoint_every: int = 10
    checkpoint_every_s: float = 60.0
    plot_every_s: float = 20.0
    portable: bool = False
    stop_at: float | None = None
    sinks: Any = ()
    log: Callable[[str], None] = print
    notice: Callable[[str], None] | None = None  # the line to read after a stop (default: log)
    spelling: folders.Spelling = folders.KEYWORDS  # how its messages name the options (the CLI: its flags)

    folder: ClassVar[folders.FolderKind] = folders.RUN_FOLDER

    def __post_init__(self):
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        if self.batches is None and self.time_budget_s is None:
            words = self.spelling
            raise ValueError(f"give a number of batches ({words.batches}) or a time budget ({words.time_budget})")
        check_resume_or_overwrite(self.resume, self.overwrite, self.spelling)

    def description(self) -> dict:
        """What ``run.json`` and the checkpoint store as the run (beside its settings)."""
        return {
            "seed": self.seed,
            "batches": self.batches,
            "time_budget_s": self.time_budget_s,
            "title": self.title,
            **({"init_from": str(self.init_from)} if self.init_from is not None else {}),
        }

    def target_reached(self, done: int, elapsed_s: float) -> bool:
        """Whether ``done`` batches, or ``elapsed_s`` seconds of training in all, reach the target."""
        return (self.batches is not None and done >= self.batches) or (
            self.time_budget_s is not None and elapsed_s >= self.time_budget_s
        )

    def chunk_size(self, done: int) -> int:
        """The batches in the next chunk after ``done``: a whole chunk, or what is left to the target."""
        whole = self.config.batches_per_chunk
        return whole if self.batches is None else min(whole, self.batches - done)


@dataclasses.dataclass(frozen=True)
class ScanSpec:
    """A scan: every setting of ``settings`` (dicts of HParams values over ``base_hparams``)
    times every seed of ``seeds``, each configuration trained on ``config`` for ``batches``
    batches, as one vmapped program per group of ``chunk`` configurations (None: one group),
    spread over up to ``num_devices`` local devices (None: all of them), into ``out_dir``.
    ``stop_at``: a ``time.monotonic()`` deadline after which no new chunk starts (the scan is
    then continued with ``resume``)."""

    config: TrainConfig
    base_hparams: dict
    settings: list[dict]
    seeds: list[int]
    out_dir: Path
    batches: int
    chunk: int | None = None
    resume: bool = False
    overwrite: bool = False
    num_devices: int | None = 1
    stop_at: float | None = None
    sinks: Any = ()
    log: Callable[[str], None] = print
    notice: Callable[[str], None] | None = None  # the line to read after a stop (default: log)
    spelling: folders.Spelling = folders.KEYWORDS  # how its messages name the options (the CLI: its flags)

    folder: ClassVar[folders.FolderKind] = folders.SCAN_FOLDER

    def __post_init__(self):
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        object.__setattr__(self, "base_hparams", dict(self.base_hparams))
        object.__setattr__(self, "settings", [dict(s) for s in self.settings])
        object.__setattr__(self, "seeds", list(self.seeds))
        check_resume_or_overwrite(self.resume, self.overwrite, self.spelling)

    @property
    def group_size(self) -> int:
        """Configurations per group (the last may have fewer)."""
        configurations = len(self.settings) * len(self.seeds)
        return configurations if self.chunk is None else max(1, min(self.chunk, configurations))

    def description(self) -> dict:
        """What ``scan.json`` stores: a resumed scan must match it (but for ``batches``)."""
        return {
            "config": self.config.to_dict(),
            "hparams": self.base_hparams,
            "settings": self.settings,
            "seeds": self.seeds,
            "batches": self.batches,
            "chunk": self.group_size,
        }
