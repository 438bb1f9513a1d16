"""The host-side training loop: compiled chunks, metrics, dashboard, checkpoints, resume.

A run's folder holds ``run.json`` (what the run is: settings, seed, and its target in batches
or seconds), ``checkpoint.msgpack`` (the same description and the TrainState, written
atomically), ``metrics.jsonl`` (one object per chunk) and ``dashboard.png`` (refreshed during
the run).

Nothing is lost silently:
- A folder that holds a run is never started over unless asked (``overwrite=True``).
- A checkpoint is written every ``checkpoint_every`` chunks *or* ``checkpoint_every_s``
  seconds (default 60), whichever comes first, at the end, and when the run is interrupted,
  so ``kill -9`` at any moment loses at most that much training.
- ``resume=True`` continues from the checkpoint with the checkpoint's settings and target;
  rows logged after it are dropped first, so a resumed run gives the same metrics and
  parameters as an uninterrupted one with the same seed.

- ``SIGTERM`` (``timeout``, ``docker stop``, SLURM) is handled as Ctrl-C is: the last completed
  chunk is saved and the run says how to continue it. A broken output pipe (``czjax train |
  head``, or the pipe's reader killed by the same Ctrl-C) never stops the save: the run saves and
  stops (``summary["interrupted"] = "broken pipe"``).
- A run that fails before its first checkpoint (the device's memory, a full disk) removes the
  files it wrote, so the corrected command needs no ``--overwrite``; :func:`check_out_dir`
  refuses a folder that is a file or cannot be written before anything starts.
- A run folder is locked while a process trains in it (``.lock``, ``fcntl.flock``: released
  when the process ends, even by ``kill -9``): a second process gets a one-line error naming
  the first's process id.

``init_from`` starts a run from given weights (a PyTorch ``.pth`` or a czjax checkpoint) instead
of fresh ones; the source is recorded in ``run.json`` and in the checkpoint, and a resumed run
does not read it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from czjax import agents
from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import make_trainer
from czjax.run import plots
from czjax.run.sinks import log_rows
from czjax.util import checkpoint, devices, precision
from czjax.util.progress import eta_text, heartbeat, time_left_after_compile

CHECKPOINT = checkpoint.FILENAME
METRICS = "metrics.jsonl"
DASHBOARD = "dashboard.png"
RUN = "run.json"
RUN_FILES = (CHECKPOINT, METRICS, RUN, DASHBOARD)

LOCK = ".lock"


class Stopped(Exception):
    """SIGTERM arrived: stop after saving, as for Ctrl-C."""


@contextlib.contextmanager
def locked(out_dir: Path, what: str = "run"):
    """Hold ``out_dir``'s lock for the block: a ValueError naming the holder's process id when
    another process holds it. The lock is the kernel's (``flock``) on ``out_dir/.lock``, so it
    goes with its process, however that ends."""
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    handle = open(out_dir / LOCK, "a+")
    failed = True
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise ValueError(
                f"{out_dir} is in use by another czjax {what} (process {holder}): wait for it to end, "
                "or choose another --out"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
        failed = False
    finally:
        handle.close()
        if failed and created:  # a run refused before it wrote anything leaves no folder behind
            (out_dir / LOCK).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                out_dir.rmdir()


def check_out_dir(out_dir: Path, flag: str = "--out") -> None:
    """A one-line ValueError when ``out_dir`` cannot hold a run: it, or the nearest existing
    folder above it, is a file or is not writable by this process (checked before any work)."""
    out_dir = Path(out_dir)
    existing = next(p for p in (out_dir, *out_dir.parents) if p.exists())  # "." or "/" at worst
    if not existing.is_dir():
        raise ValueError(f"{flag} {out_dir}: {existing} is a file, not a folder: choose another {flag}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(
            f"{flag} {out_dir}: {existing} is not writable here (read-only or another user's): choose another {flag}"
        )


def check_out_file(path: Path, flag: str = "--out") -> None:
    """The same for a file to be written: not a folder, and its folder can be made and written."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a folder: name the file to write")
    check_out_dir(path.parent, flag)


@contextlib.contextmanager
def discarded_on_failure(out_dir: Path, files, discard: Callable[[], bool]):
    """Within the block, an error (not a stop: those save) removes ``files`` from ``out_dir`` when
    ``discard()`` says nothing in them is worth keeping: a run that failed before its first
    checkpoint, whose ``run.json`` would otherwise make the corrected command need ``--overwrite``."""
    try:
        yield
    except Exception:
        if discard():
            for name in files:
                (Path(out_dir) / name).unlink(missing_ok=True)
        raise


def check_unlocked(out_dir: Path, what: str = "run") -> None:
    """A one-line ValueError if another process holds ``out_dir``'s lock (before touching its files)."""
    if (Path(out_dir) / LOCK).exists() and devices.is_main_process():
        with locked(out_dir, what):
            pass


@contextlib.contextmanager
def sigterm_as_stop():
    """Within the block, SIGTERM raises :class:`Stopped` in the main thread (elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Stopped()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class QuietLog:
    """A log that swallows a broken pipe and remembers it (``.broken``)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.broken = False

    def __call__(self, message: str) -> None:
        if self.broken:
            return
        try:
            self.log(message)
        except BrokenPipeError:
            self.broken = True
            with contextlib.suppress(OSError):  # stdout's buffer still holds the line: drop it
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)


def quiet_when_broken(log: Callable[[str], None]) -> QuietLog:
    """``log`` that swallows a broken pipe and remembers it (``.broken``): output is a courtesy,
    the run's files are what must not be lost."""
    return QuietLog(log)


# Compiled chunks, by what determines the program (config, number of batches, and for scans
# the number of configurations); hyperparameters are traced.
_COMPILED: dict = {}


def run_chunk_once(
    chunk: jax.stages.Wrapped,
    state,
    hparams,
    num_batches: int,
    config: TrainConfig,
    cache_key,
    log: Callable[[str], None],
    what: str,
    label: str,
    place: Callable = lambda tree: tree,
    bench=None,
):
    """The one host-side chunk runner of training runs and scans: ``chunk`` (jitted, its
    ``num_batches`` static) compiled at ``config.precision`` once per ``cache_key`` (the compile
    time logged and left out of the speed figures), run with a heartbeat while it works, its
    metrics fetched. ``place`` puts state and hyperparameters on the devices (replicated, or a
    scan's configurations spread), before compiling and before every call, so the compiled
    program always sees the placement it was compiled for. ``bench``: the chunk's solver
    benchmark (``trainer.solver_bench``, placed by the caller), an argument of the program.
    Returns ``(state, metrics on the host, seconds)``."""
    state, hparams = place(state), place(hparams)
    if cache_key not in _COMPILED:
        start = time.perf_counter()
        with (
            heartbeat(
                log,
                lambda: (
                    f"  ... compiling a chunk of {num_batches} batches {what} ({time.perf_counter() - start:.0f} s)"
                ),
            ),
            precision.matmul(config.precision),
        ):
            _COMPILED[cache_key] = chunk.lower(state, hparams, num_batches, bench).compile()
        log(f"compiled a chunk of {num_batches} batches {what} in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    with heartbeat(log, lambda: f"  ... {label} running ({time.perf_counter() - start:.0f} s)"):
        state, metrics = _COMPILED[cache_key](state, hparams, bench)
        metrics = jax.device_get(devices.local_view(metrics))
    return state, metrics, time.perf_counter() - start


# Keys whose values depend on the machine's speed, not on the run.
TIMING_KEYS = ("games_per_s", "elapsed_s", "chunk_s")
INT_KEYS = ("batches", "games", "promotions", "positions")


def read_metrics(path) -> list[dict]:
    """The rows of a metrics file; a last line cut short by a kill is dropped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise ValueError(f"{path} is damaged at line {i + 1}") from None
    return rows


def write_metrics(path, rows: list[dict]) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(path)


def metric_row(metrics: dict, index=None) -> dict:
    """A compiled chunk's metrics (fetched to the host) as a JSON row; ``index`` picks one
    configuration of a scan."""
    pick = (lambda v: v) if index is None else (lambda v: v[index])
    return {key: (int(pick(v)) if key in INT_KEYS else float(pick(v))) for key, v in metrics.items()}


def eval_label(eval_opponent: str) -> str:
    """The evaluation opponent's short name in progress lines."""
    return "punisher" if eval_opponent == "random-punisher" else eval_opponent


def format_progress(
    row: dict, total_batches: int | None, left_s: float | None = None, eval_opponent: str = "random-punisher"
) -> str:
    batches = f"{row['batches']:,}" + (f"/{total_batches:,}" if total_batches else "")
    return (
        f"batch {batches} | {row['games']:,} games | {row['games_per_s']:,.0f} games/s | "
        f"win {row['win_rate']:.2f} | vs {eval_label(eval_opponent)} {row['eval_win_rate']:.2f} | "
        f"entropy {row['entropy']:.2f} | length {row['game_length']:.1f} | promotions {row['promotions']}"
        + (
            f" | Pons error {row['pons_mean_error']:.1f}% | keeps {row['public_keeps']:.3f}"
            if "pons_mean_error" in row
            else ""
        )
        + (f" | {eta_text(left_s)}" if left_s is not None else "")
    )


def run_time_left(rows: list[dict], first: int, total_batches: int | None, time_budget_s: float | None) -> float | None:
    """Seconds until the run's target at this process's pace: wall time per batch since its
    first chunk (``rows[first]``: compile time left out, the host's work counted), that chunk's
    own time while it is the only one; the time budget's remainder if sooner."""
    left = [time_budget_s - rows[-1]["elapsed_s"]] if time_budget_s is not None and rows else []
    if total_batches is not None and len(rows) > first:
        base, last = rows[first], rows[-1]
        first_chunk = (base["batches"] - (rows[first - 1]["batches"] if first else 0), base["chunk_s"])
        since_first = (last["batches"] - base["batches"], last["elapsed_s"] - base["elapsed_s"])
        left.append(time_left_after_compile(first_chunk, since_first, total_batches - last["batches"]))
    left = [x for x in left if x is not None]
    return max(0.0, min(left)) if left else None


def describe_target(batches: int | None, time_budget_s: float | None) -> str:
    """``until 1,500 batches``, ``for 600 s of training``, or both joined by ``or``."""
    parts = [f"until {batches:,} batches"] if batches is not None else []
    parts += [f"for {time_budget_s:g} s of training"] if time_budget_s is not None else []
    return " or ".join(parts)


def guard_fresh(out_dir: Path, files, overwrite: bool) -> None:
    """Refuse to start a run in ``out_dir`` when it holds one, unless ``overwrite`` (then its
    files are removed)."""
    held = [name for name in files if (out_dir / name).exists()]
    if held and not overwrite:
        raise ValueError(
            f"{out_dir} already holds a run ({held[0]}): continue it with --resume, "
            "start it again with --overwrite, or choose another --out"
        )
    for name in held:
        (out_dir / name).unlink()


def target_reached(out_dir, batches: int | None, time_budget_s: float | None) -> bool:
    """Whether the run saved in ``out_dir`` has reached the target ``batches`` / ``time_budget_s``
    (None: no such limit): its checkpoint's batches, or its time in training by the metrics rows up
    to its checkpoint. False when it has no checkpoint yet."""
    out_dir = Path(out_dir)
    if not (out_dir / CHECKPOINT).exists():
        return False
    _, raw = checkpoint.read_meta(out_dir / CHECKPOINT)
    done = checkpoint.stored_count(raw["step"])
    rows = [r for r in read_metrics(out_dir / METRICS) if r["batches"] <= done]
    elapsed = rows[-1]["elapsed_s"] if rows else 0.0
    return _target_reached(_Schedule(batches, time_budget_s, 1, 0.0, 0.0), done, lambda: elapsed)


def read_run(out_dir) -> dict:
    """What a run folder's run is (``config``, ``hparams``, ``run``: seed, batches,
    time_budget_s, title): from its checkpoint, or from ``run.json`` when it was stopped
    before its first checkpoint."""
    out_dir = Path(out_dir)
    if (out_dir / CHECKPOINT).exists():
        meta, _ = checkpoint.read_meta(out_dir / CHECKPOINT)
        return {"config": meta["config"], "hparams": meta["hparams"], "run": meta.get("extra", {})}
    if (out_dir / RUN).exists():
        return json.loads((out_dir / RUN).read_text())
    raise ValueError(f"nothing to resume in {out_dir}: it holds no {CHECKPOINT} or {RUN}")


def open_run(
    config: TrainConfig, out_dir: Path, seed: int, resume: bool, overwrite: bool, init_from, log, num_devices: int = 1
):
    """``(trainer, state, rows, elapsed_before, init_from)`` to start or continue the run in
    ``out_dir``: from its checkpoint on ``resume`` (rows logged after it dropped), else fresh
    (from ``init_from``'s weights if given) in a folder that holds no run unless ``overwrite``."""
    ckpt_path, metrics_path = out_dir / CHECKPOINT, out_dir / METRICS
    resuming = resume and ckpt_path.exists()
    # the starting weights are read first: a bad file leaves the output folder as it was
    start_params = agents.load_weights(init_from, config.model) if init_from is not None and not resuming else None
    out_dir.mkdir(parents=True, exist_ok=True)
    trainer = make_trainer(config, None, num_devices)
    if resuming:
        state, meta = checkpoint.load(ckpt_path, trainer.init(seed), expected_model=config.model)
        init_from = meta.get("extra", {}).get("init_from")  # already in the checkpoint's weights
        done = int(state.step)
        rows = [r for r in read_metrics(metrics_path) if r["batches"] <= done]
        if devices.is_main_process():
            write_metrics(metrics_path, rows)
        log(f"resuming {ckpt_path} at batch {done:,} ({int(state.games):,} games)")
        return trainer, state, rows, (rows[-1]["elapsed_s"] if rows else 0.0), init_from
    if devices.is_main_process():  # over several hosts, process 0 checks and clears the folder
        if resume:
            log(f"{out_dir} has no checkpoint yet: starting its run from the beginning")
            metrics_path.unlink(missing_ok=True)
        else:
            guard_fresh(out_dir, RUN_FILES, overwrite)
    return trainer, trainer.init(seed, start_params), [], 0.0, init_from


def run(
    config: TrainConfig,
    hparams: HParams,
    out_dir,
    seed: int = 0,
    batches: int | None = None,
    time_budget_s: float | None = None,
    resume: bool = False,
    overwrite: bool = False,
    checkpoint_every: int = 10,
    checkpoint_every_s: float = 60.0,
    plot_every_s: float = 20.0,
    log: Callable[[str], None] = print,
    title: str = "",
    init_from: str | None = None,
    num_devices: int | None = 1,
    sinks=(),
    notice: Callable[[str], None] | None = None,
) -> dict:
    """Train until ``batches`` batches in all or ``time_budget_s`` seconds of training in all
    (both counting what came before a resume), whichever comes first; returns a summary.

    ``init_from``: a ``.pth`` / ``.pt`` file or czjax checkpoint whose weights the learner and
    its frozen opponent start from (with a fresh optimizer state). Ignored when resuming from a
    checkpoint: the run continues from its own weights, and keeps naming the source.
    ``num_devices``: each batch's games split across that many local devices (None: all of
    them); the run is the same computation on any number (:mod:`czjax.util.devices`). ``sinks``:
    :mod:`czjax.run.sinks` that get every row as metrics.jsonl does. ``notice``: where the line a
    user must read after a stop goes (the save of an interrupted run; default: ``log``), so that
    the command line can send it to stderr when stdout is a pipe that may be closed."""
    if batches is None and time_budget_s is None:
        raise ValueError("give a number of batches or a time budget")
    out_dir = Path(out_dir)
    # over several hosts the processes share the folder and process 0 writes: it holds the lock
    lock = locked(out_dir) if devices.is_main_process() else contextlib.nullcontext()
    with lock, sigterm_as_stop():
        return _run(
            config,
            hparams,
            out_dir,
            seed,
            batches,
            time_budget_s,
            resume,
            overwrite,
            checkpoint_every,
            checkpoint_every_s,
            plot_every_s,
            quiet_when_broken(log),
            title,
            init_from,
            num_devices,
            sinks,
            notice,
        )


def _run(
    config,
    hparams,
    out_dir,
    seed,
    batches,
    time_budget_s,
    resume,
    overwrite,
    checkpoint_every,
    checkpoint_every_s,
    plot_every_s,
    log,
    title,
    init_from,
    num_devices,
    sinks=(),
    notice=None,
) -> dict:
    num_devices = devices.available(num_devices)
    resumed = resume and (out_dir / CHECKPOINT).exists()
    trainer, state, rows, elapsed_before, init_from = open_run(
        config, out_dir, seed, resume, overwrite, init_from, log, num_devices
    )
    description = {
        "seed": seed,
        "batches": batches,
        "time_budget_s": time_budget_s,
        "title": title,
        **({"init_from": str(init_from)} if init_from is not None else {}),
    }
    writes = devices.is_main_process()  # over several hosts, process 0 writes the run's files
    training = _Training(
        config,
        hparams,
        out_dir,
        trainer,
        description,
        _Schedule(batches, time_budget_s, checkpoint_every, checkpoint_every_s, plot_every_s),
        log,
        title,
        num_devices,
        writes,
        sinks,
        notice=notice or log,
    )
    with discarded_on_failure(out_dir, RUN_FILES, lambda: writes and not resumed and not training.saved):
        return _train(training, state, rows, elapsed_before)


class _Schedule(NamedTuple):
    """When a run stops (``batches``, ``time_budget_s``: None for no such limit) and how often it
    saves a checkpoint (every ``checkpoint_every`` chunks or ``checkpoint_every_s`` seconds) and
    redraws its dashboard (every ``plot_every_s`` seconds)."""

    batches: int | None
    time_budget_s: float | None
    checkpoint_every: int
    checkpoint_every_s: float
    plot_every_s: float


@dataclasses.dataclass
class _Training:
    """What stays fixed while a run trains: what it trains, where it writes, its schedule; and
    ``saved``, whether it has written a checkpoint yet."""

    config: TrainConfig
    hparams: HParams
    out_dir: Path
    trainer: Any
    description: dict
    schedule: _Schedule
    log: QuietLog
    title: str
    num_devices: int
    writes: bool  # over several hosts, process 0 writes the run's files
    sinks: Any
    notice: Callable[[str], None] = print  # the line a user must read after a stop
    saved: bool = False

    @property
    def promotes(self) -> bool:
        """Whether the dashboard has a promotions panel (else the count stays 0)."""
        return self.config.opponent == "self" or self.config.pool.league

    def write_description(self) -> None:
        """``run.json``: the run's settings and description."""
        if self.writes:
            (self.out_dir / RUN).write_text(
                json.dumps(
                    {"config": self.config.to_dict(), "hparams": self.hparams.to_dict(), "run": self.description},
                    indent=1,
                )
            )

    def save(self, state) -> None:
        """The checkpoint of ``state``, with the run's settings and description."""
        if self.writes:
            checkpoint.save(
                self.out_dir / CHECKPOINT,
                devices.local_view(state),
                self.config.to_dict(),
                self.hparams.to_dict(),
                self.description,
            )
            self.saved = True

    def append_row(self, row: dict) -> None:
        """One chunk's row to ``metrics.jsonl`` and the sinks."""
        if self.writes:
            with (self.out_dir / METRICS).open("a") as f:
                f.write(json.dumps(row) + "\n")
            log_rows(self.sinks, [row])

    def dashboard(self, rows: list[dict]) -> None:
        """``dashboard.png`` redrawn from ``rows``."""
        if self.writes and rows:
            plots.dashboard(rows, self.out_dir / DASHBOARD, title=self.title, promotes=self.promotes)


@dataclasses.dataclass
class _Clock:
    """A run's host-side timing in this process: when it started (``time.perf_counter()``), the
    first of its rows (a resumed run's earlier ones came before), the chunks it ran, and when it
    last printed, plotted and saved (seconds since its start)."""

    start: float
    first_row: int
    chunks: int = 0
    last_print: float = 0.0
    last_plot: float = 0.0
    last_save: float = 0.0


def _train(training: _Training, state, rows: list[dict], elapsed_before: float) -> dict:
    """Train from ``state`` to the run's target, saving on the way and at the end (also when
    interrupted); returns the run's summary."""
    training.write_description()
    state, interrupted = _train_chunks(training, state, rows, elapsed_before)
    # the save comes before any word about it: printing may fail (a pipe whose reader is gone)
    with contextlib.suppress(KeyboardInterrupt, Stopped):
        training.save(state)
    if interrupted:
        training.notice(
            f"{interrupted}: saved the last completed chunk (batch {int(devices.local_view(state).step):,})"
        )
    training.dashboard(rows)
    return run_summary(training.out_dir, devices.local_view(state), rows, elapsed_before, interrupted)


def _train_chunks(training: _Training, state, rows: list[dict], elapsed_before: float) -> tuple[Any, str | bool]:
    """Run chunks until the target, a broken output pipe, Ctrl-C or SIGTERM, each chunk's row
    appended to ``rows`` and written; returns the last completed chunk's state and why the run
    stopped early (False when it did not)."""
    clock = _Clock(time.perf_counter(), len(rows))
    try:
        while not training.log.broken:
            done = int(devices.local_view(state).step)
            if _target_reached(training.schedule, done, lambda: elapsed_before + time.perf_counter() - clock.start):
                break
            num_batches = _chunk_size(training.config, done, training.schedule.batches)
            state, metrics, chunk_s = _run_chunk(training, state, done, num_batches)
            row = _chunk_row(
                training.config, metrics, num_batches, chunk_s, elapsed_before + time.perf_counter() - clock.start
            )
            rows.append(row)
            training.append_row(row)
            clock.chunks += 1
            _report(training, state, rows, clock)
    except KeyboardInterrupt:
        return state, "interrupt"
    except Stopped:
        return state, "SIGTERM"
    return state, ("broken pipe" if training.log.broken else False)


def _target_reached(schedule: _Schedule, done: int, elapsed: Callable[[], float]) -> bool:
    """Whether ``done`` batches, or ``elapsed()`` seconds of training in all, reach the run's target."""
    return (schedule.batches is not None and done >= schedule.batches) or (
        schedule.time_budget_s is not None and elapsed() >= schedule.time_budget_s
    )


def _chunk_size(config: TrainConfig, done: int, batches: int | None) -> int:
    """The batches in the next chunk: a whole chunk, or what is left to the target."""
    return config.batches_per_chunk if batches is None else min(config.batches_per_chunk, batches - done)


def _run_chunk(training: _Training, state, done: int, num_batches: int):
    """The compiled chunk of ``num_batches`` batches from batch ``done``, state and hyperparameters
    replicated over the run's devices: ``(state, metrics, seconds)``."""
    config, num_devices = training.config, training.num_devices
    return run_chunk_once(
        training.trainer.run_chunk,
        state,
        training.hparams,
        num_batches,
        config,
        (config, num_batches, num_devices),
        training.log,
        f"of {config.games_per_batch} games",
        f"batches {done + 1:,}-{done + num_batches:,}",
        lambda tree: devices.replicate(tree, num_devices),
        devices.replicate(training.trainer.solver_bench, num_devices),
    )


def _chunk_row(config: TrainConfig, metrics: dict, num_batches: int, chunk_s: float, elapsed_s: float) -> dict:
    """A chunk's metrics row: its metrics, speed, own time and the run's time in all."""
    return dict(
        metric_row(metrics),
        games_per_s=num_batches * config.games_per_batch / chunk_s,
        chunk_s=chunk_s,
        elapsed_s=elapsed_s,
    )


def _report(training: _Training, state, rows: list[dict], clock: _Clock) -> None:
    """After a chunk: its progress line every 2 s (and after the first chunk), a checkpoint every
    ``checkpoint_every`` chunks or ``checkpoint_every_s`` seconds, the dashboard every
    ``plot_every_s`` seconds."""
    schedule, now = training.schedule, time.perf_counter() - clock.start
    if now - clock.last_print >= 2.0 or clock.chunks == 1:
        left_s = run_time_left(rows, clock.first_row, schedule.batches, schedule.time_budget_s)
        training.log(format_progress(rows[-1], schedule.batches, left_s, training.config.eval_opponent))
        clock.last_print = now
    if clock.chunks % schedule.checkpoint_every == 0 or now - clock.last_save >= schedule.checkpoint_every_s:
        training.save(state)
        clock.last_save = now
    if training.writes and now - clock.last_plot >= schedule.plot_every_s and rows:
        training.dashboard(rows)
        clock.last_plot = now


def run_summary(out_dir: Path, state, rows: list[dict], elapsed_before: float, interrupted: str | bool) -> dict:
    return {
        "out_dir": str(out_dir),
        "batches": int(state.step),
        "games": int(state.games),
        "promotions": int(state.promotions),
        "elapsed_s": rows[-1]["elapsed_s"] if rows else elapsed_before,
        "interrupted": interrupted,
        "last": rows[-1] if rows else {},
        "checkpoint": str(out_dir / CHECKPOINT),
        "metrics": str(out_dir / METRICS),
        "dashboard": str(out_dir / DASHBOARD),
        "run_json": str(out_dir / RUN),
    }


def deterministic(row: dict) -> dict:
    """A metrics row without its timing keys (what a resumed run must reproduce)."""
    return {k: v for k, v in row.items() if k not in TIMING_KEYS}


def params_equal(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
