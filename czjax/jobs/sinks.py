"""Optional metric sinks beside ``metrics.jsonl``: TensorBoard and Weights & Biases.

Each takes the rows a run or a scan appends to ``metrics.jsonl``, as they are appended: every
numeric entry a scalar at the row's batch. A scan logs one series per configuration (its
``config`` id: TensorBoard a subfolder ``config-003`` each, W&B one run whose keys are prefixed
``config-003/``, each series stepped by its own ``batches``). Neither package is required: they
are imported when asked for (``pip install 'czjax[tensorboard]'`` / ``'czjax[wandb]'``), and
W&B honours its own settings (``WANDB_MODE=offline`` writes local files only). Host side only.

W&B needs a login (``wandb login``, or ``WANDB_API_KEY``) or offline mode: :func:`check_wandb`
says so in one line before a run writes anything. The W&B run opens with the first row, so a run
refused before it trains opens none; its id is kept in the run's folder (:data:`WANDB_RUN`), and a
resumed run logs to the same W&B run.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Protocol

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


# The W&B run of a run folder (its project and id), which a resumed run logs to again.
WANDB_RUN = "wandb-run.json"

WANDB_LOGIN = (
    "--wandb needs a W&B login (wandb login, or WANDB_API_KEY) or offline mode (WANDB_MODE=offline: files in "
    "--out's wandb folder, wandb sync uploads them later)"
)


def _wandb_credentials_missing() -> str | None:
    """Why ``wandb.init`` would stop for want of credentials (None when it would not, or when this
    version of wandb does not tell): not offline or disabled, and no API key in the environment,
    ~/.netrc or W&B's settings, as ``wandb.init`` looks for them."""
    try:
        from wandb.errors import AuthenticationError
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib.wbauth import authenticate
    except ImportError:
        return None
    try:
        settings = wandb_setup.singleton().settings
        if settings._offline or settings._noop:
            return None
        found = authenticate.authenticate_session(
            host=settings.base_url, source="czjax", prompt=False, update_session=False
        )
    except AuthenticationError as err:  # a key of the wrong form
        return f"--wandb: {str(err).splitlines()[0]}"
    except Exception:  # another wandb than the one this reads: wandb.init will tell
        return None
    return None if found is not None else WANDB_LOGIN


def check_wandb() -> None:
    """A one-line ValueError unless W&B can log: its package, and a login or offline mode."""
    _require("wandb", "--wandb", "wandb")
    missing = _wandb_credentials_missing()
    if missing:
        raise ValueError(missing)


class WandbSink:
    """One W&B run in ``project`` for a run or a whole scan (its files under ``folder``), opened
    with the first row; ``resume``: the run in ``folder`` goes on, and so does the W&B run it
    logged to (its id in ``folder/wandb-run.json``)."""

    def __init__(self, project: str, name: str, config: dict, folder, resume: bool = False):
        self.wandb = _require("wandb", "--wandb", "wandb")
        self.project, self.name, self.config, self.folder, self.resume = project, name, config, Path(folder), resume
        self.run: Any = None  # the W&B run, once the first row came
        self.series: set = set()

    def _stored_id(self) -> str | None:
        """The id of the W&B run the run in ``folder`` logged to in ``project``, if any."""
        try:
            stored = json.loads((self.folder / WANDB_RUN).read_text())
        except (OSError, ValueError):
            return None
        return stored.get("id") if isinstance(stored, dict) and stored.get("project") == self.project else None

    def _open(self):
        run_id = self._stored_id() if self.resume else None
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            run = self.wandb.init(
                project=self.project,
                name=self.name,
                config=self.config,
                dir=str(self.folder),
                **({"id": run_id, "resume": "allow"} if run_id else {}),
            )
        except Exception as err:  # wandb's errors (a refused key, no network): one line
            if isinstance(err, MemoryError):
                raise
            detail = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ValueError(
                f"--wandb: W&B did not start a run: {detail} (it needs a login, wandb login or WANDB_API_KEY, or "
                "WANDB_MODE=offline)"
            ) from None
        (self.folder / WANDB_RUN).write_text(json.dumps({"project": self.project, "id": run.id}))
        return run

    def log(self, row: dict, series: str | None = None) -> None:
        if self.run is None:
            self.run = self._open()
        prefix = f"{series}/" if series else ""
        if series not in self.series:  # each series stepped by its own batch count (a scan's groups restart at 1)
            self.run.define_metric(f"{prefix}batches")
            self.run.define_metric(f"{prefix}*", step_metric=f"{prefix}batches")
            self.series.add(series)
        self.run.log({f"{prefix}{k}": v for k, v in {**scalars(row), "batches": float(row["batches"])}.items()})

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()


@contextlib.contextmanager
def opened(tensorboard: str | None, wandb: str | None, name: str, config: dict, folder, resume: bool = False):
    """The sinks asked for (none: an empty list), closed when the block ends, however it ends;
    ``resume``: the run (or scan) in ``folder`` goes on, and logs to its W&B run again."""
    sinks: list[MetricSink] = []
    try:
        if tensorboard:
            sinks.append(TensorBoardSink(tensorboard))
        if wandb:
            sinks.append(WandbSink(wandb, name, config, folder, resume))
        yield sinks
    finally:
        for sink in sinks:
            try:
                sink.close()
            except Exception as err:  # a sink that fails to close must not hide the run's own outcome, nor go unsaid
                detail = (str(err).strip().splitlines() or [type(err).__name__])[0]
                print(f"czjax: warning: {type(sink).__name__} did not close: {detail}", file=sys.stderr)


def log_rows(sinks, rows: list[dict]) -> None:
    """Every row to every sink; a scan's rows each to its configuration's series."""
    for sink in sinks:
        for row in rows:
            sink.log(row, series_name(row.get("config")))
