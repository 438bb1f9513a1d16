"""Optional metric sinks beside ``metrics.jsonl``: TensorBoard and Weights & Biases.

Each takes the rows a run or a scan appends to ``metrics.jsonl``, as they are appended: every
numeric entry a scalar at the row's batch. A scan logs one series per configuration (its
``config`` id: TensorBoard a subfolder ``config-003`` each, W&B one run whose keys are prefixed
``config-003/``, each series stepped by its own ``batches``). Neither package is required: they
are imported when asked for (``pip install 'czjax[tensorboard]'`` / ``'czjax[wandb]'``), and
W&B honours its own settings (``WANDB_MODE=offline`` writes local files only). Host side only.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from pathlib import Path
from typing import Protocol

# Row entries that are not metrics of the run (a scan's bookkeeping), or are the step itself.
NOT_LOGGED = ("batches", "config", "setting", "seed")


def _require(module: str, flag: str, extra: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"{flag} needs the {module} package: pip install 'czjax[{extra}]'") from None


def scalars(row: dict) -> dict[str, float]:
    """The entries of ``row`` to log: numbers (booleans and NaN-free or not) other than NOT_LOGGED."""
    return {
        k: float(v)
        for k, v in row.items()
        if k not in NOT_LOGGED and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


class MetricSink(Protocol):
    """Where rows go besides metrics.jsonl. The step of a row is its ``batches``; ``series``: a
    scan's configuration (``config-003``), None for a run."""

    def log(self, row: dict, series: str | None = None) -> None: ...

    def close(self) -> None: ...


def series_name(config: int | None) -> str | None:
    return None if config is None else f"config-{int(config):03d}"


class TensorBoardSink:
    """Event files under ``logdir`` (a subfolder per scan configuration), one scalar per metric.

    A resumed run logs again the rows after its checkpoint: each writer starts with a purge at its
    first row's step, so TensorBoard hides what an earlier session logged from that step on
    (instead of drawing both)."""

    def __init__(self, logdir: str | Path) -> None:
        self.writer_class = _require("tensorboardX", "--tensorboard", "tensorboard").SummaryWriter
        self.logdir = Path(logdir)
        self.writers: dict = {}

    def log(self, row: dict, series: str | None = None) -> None:
        if series not in self.writers:
            # tensorboardX names a file by the second and the host, and truncates it: the suffix keeps
            # two sessions in one folder within a second (a quick resume) from overwriting each other.
            self.writers[series] = self.writer_class(
                str(self.logdir / series if series else self.logdir),
                purge_step=int(row["batches"]),
                filename_suffix=f".{os.getpid()}.{time.time_ns()}",
            )
        writer = self.writers[series]
        for key, value in scalars(row).items():
            writer.add_scalar(key, value, int(row["batches"]))
        writer.flush()  # a run stopped by kill -9 keeps what it logged

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


class WandbSink:
    """One W&B run in ``project`` for a run or a whole scan (its files under ``folder``)."""

    def __init__(self, project: str, name: str, config: dict, folder):
        wandb = _require("wandb", "--wandb", "wandb")
        Path(folder).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=project, name=name, config=config, dir=str(folder))
        self.series: set = set()

    def log(self, row: dict, series: str | None = None) -> None:
        prefix = f"{series}/" if series else ""
        if series not in self.series:  # each series stepped by its own batch count (a scan's groups restart at 1)
            self.run.define_metric(f"{prefix}batches")
            self.run.define_metric(f"{prefix}*", step_metric=f"{prefix}batches")
            self.series.add(series)
        self.run.log({f"{prefix}{k}": v for k, v in {**scalars(row), "batches": float(row["batches"])}.items()})

    def close(self) -> None:
        self.run.finish()


@contextlib.contextmanager
def opened(tensorboard: str | None, wandb: str | None, name: str, config: dict, folder):
    """The sinks asked for (none: an empty list), closed when the block ends, however it ends."""
    sinks: list[MetricSink] = []
    try:
        if tensorboard:
            sinks.append(TensorBoardSink(tensorboard))
        if wandb:
            sinks.append(WandbSink(wandb, name, config, folder))
        yield sinks
    finally:
        for sink in sinks:
            with contextlib.suppress(Exception):  # a sink that fails to close must not hide the run's own outcome
                sink.close()


def log_rows(sinks, rows: list[dict]) -> None:
    """Every row to every sink; a scan's rows each to its configuration's series."""
    for sink in sinks:
        for row in rows:
            sink.log(row, series_name(row.get("config")))
