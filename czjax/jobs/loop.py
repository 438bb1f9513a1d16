"""The host-side training loop: compiled chunks, metrics, dashboard, checkpoints, resume.

A run is described by a :class:`~czjax.jobs.spec.RunSpec` (built by the command line, or by
:func:`run_training` from its keyword arguments) and trained by :func:`train` into its folder
(:mod:`czjax.jobs.folders`: ``run.json``, ``checkpoint.msgpack``, ``metrics.jsonl``,
``dashboard.png``).

Nothing is lost silently:
- A checkpoint is written every ``checkpoint_every`` chunks *or* ``checkpoint_every_s``
  seconds (default 60), whichever comes first, at the end, and when the run is stopped, so
  ``kill -9`` at any moment loses at most that much training.
- ``resume=True`` continues from the checkpoint with the checkpoint's settings and target;
  rows logged after it are dropped first, so a resumed run gives the same metrics and
  parameters as an uninterrupted one with the same seed. A run that has reached its target
  trains nothing and says so, as the command line does (:func:`finished_message`).
- A run with a replay buffer can also keep a portable checkpoint (``portable=True``:
  ``portable.msgpack``, everything but the buffer's rows), so that its folder moves to another
  machine without the big checkpoints: a resume from it plays games with the current network
  to fill the buffer again (:func:`rebuild_replay`; not training: no gradient step, no count
  moved, not in the time of training), then goes on with the same schedule (learning rate,
  games, promotions, keys) from the same batch.
- Ctrl-C, ``SIGTERM`` and a broken output pipe stop the run after saving its last completed
  chunk, by the rule runs and scans share (:mod:`czjax.jobs.stops`); ``summary["interrupted"]``
  says why.
- The folder is checked, locked and cleared of a failed start by :mod:`czjax.jobs.folders`.

``init_from`` starts a run from given weights (a PyTorch ``.pth`` or a czjax checkpoint) instead
of fresh ones; the source is recorded in ``run.json`` and in the checkpoint, and a resumed run
does not read it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from czjax.jobs import folders, plots, stops
from czjax.jobs.folders import CHECKPOINT, DASHBOARD, METRICS, PORTABLE, RUN, RUN_FILES, read_metrics, write_metrics
from czjax.jobs.sinks import log_rows
from czjax.jobs.spec import RunSpec
from czjax.learn import replay
from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import make_trainer, portable
from czjax.players.loading import load_weights
from czjax.util import checkpoint, devices, precision
from czjax.util.progress import eta_text, heartbeat, pace_of

# Earlier checkpoints a run keeps beside its newest (checkpoint.1.msgpack, checkpoint.2.msgpack):
# a damaged newest one is not the end of the run (czjax.util.checkpoint.newest_intact).
KEEP_CHECKPOINTS = 2

# Compiled chunks, by what determines the program (config, number of batches, and for scans
# the number of configurations); hyperparameters are traced.
_COMPILED: dict = {}


class ChunkProgram(NamedTuple):
    """A compiled chunk as the host runs it: ``chunk`` (jitted, its number of batches static),
    compiled at ``config.precision`` once per ``cache_key`` and named ``what`` in the compile
    line; ``place`` puts state and hyperparameters on the devices (replicated, or a scan's
    configurations spread); ``bench``, the chunk's solver benchmark (``trainer.solver_bench``,
    placed by the caller), an argument of the program."""

    chunk: Any
    config: TrainConfig
    cache_key: Any
    what: str
    place: Callable = lambda tree: tree
    bench: Any = None


def run_chunk_once(program: ChunkProgram, state, hparams, num_batches: int, log: Callable[[str], None], label: str):
    """The one host-side chunk runner of training runs and scans: ``program``'s chunk of
    ``num_batches`` batches, compiled once per cache key (the compile time logged and left out of
    the speed figures), run with a heartbeat (``label``) while it works, its metrics fetched.
    State and hyperparameters are placed before compiling and before every call, so the compiled
    program always sees the placement it was compiled for. Returns ``(state, metrics on the host,
    seconds)``."""
    state, hparams = program.place(state), program.place(hparams)
    if program.cache_key not in _COMPILED:
        start = time.perf_counter()
        with (
            heartbeat(
                log,
                lambda: (
                    f"  ... compiling a chunk of {num_batches} batches {program.what} "
                    f"({time.perf_counter() - start:.0f} s)"
                ),
            ),
            precision.matmul(program.config.precision),
        ):
            _COMPILED[program.cache_key] = program.chunk.lower(state, hparams, num_batches, program.bench).compile()
        log(f"compiled a chunk of {num_batches} batches {program.what} in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    with heartbeat(log, lambda: f"  ... {label} running ({time.perf_counter() - start:.0f} s)"):
        state, metrics = _COMPILED[program.cache_key](state, hparams, program.bench)
        metrics = jax.device_get(devices.local_view(metrics))
    return state, metrics, time.perf_counter() - start


class NonFiniteTraining(FloatingPointError):
    """A batch gave a non-finite loss, gradient or parameter: the run stops without saving it."""


def check_finite(metrics: dict, first_batch: int, kept: str) -> None:
    """Take the chunk's ``first_nonfinite`` (one per configuration in a scan) out of ``metrics``;
    raise :class:`NonFiniteTraining` naming the batch (``first_batch`` is the chunk's first, 1-based)
    and ``kept``, what is left untouched, when a batch was not finite."""
    flags = np.atleast_1d(np.asarray(metrics.pop("first_nonfinite", -1)))
    bad = np.flatnonzero(flags >= 0)
    if bad.size:
        where = f" of configuration {bad[0]}" if flags.size > 1 else ""
        raise NonFiniteTraining(
            f"batch {first_batch + int(flags[bad[0]]):,}{where} gave a non-finite loss, gradient or parameter "
            f"(a learning rate too high, or damaged weights): the run stops there, {kept}"
        )


# Keys whose values depend on the machine's speed, not on the run.
TIMING_KEYS = ("games_per_s", "elapsed_s", "chunk_s")
INT_KEYS = ("batches", "games", "promotions", "positions")


def metric_row(metrics: dict, index=None) -> dict:
    """A compiled chunk's metrics (fetched to the host) as a JSON row; ``index`` picks one
    configuration of a scan."""
    pick = (lambda v: v) if index is None else (lambda v: v[index])
    return {key: (int(pick(v)) if key in INT_KEYS else float(pick(v))) for key, v in metrics.items()}


def eval_label(eval_opponent: str) -> str:
    """The evaluation opponent's short name in progress lines."""
    return {"random-punisher": "punisher", "random-punisher-leftmost": "leftmost punisher"}.get(
        eval_opponent, eval_opponent
    )


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
    """Seconds until the run's target at this process's :class:`~czjax.util.progress.Pace`:
    its first chunk's own time (``rows[first]``: compile time left out) while it is the only
    one, then the wall time between its later chunks (the host's work counted); the time
    budget's remainder if sooner."""
    left = [time_budget_s - rows[-1]["elapsed_s"]] if time_budget_s is not None and rows else []
    if total_batches is not None and len(rows) > first:
        left.append(pace_of(chunk_steps(rows, first)).time_left(total_batches - rows[-1]["batches"]))
    left = [x for x in left if x is not None]
    return max(0.0, min(left)) if left else None


def chunk_steps(rows: list[dict], first: int) -> list[tuple[int, float]]:
    """``(batches, seconds)`` of each chunk from ``rows[first]`` (the first of this process): the
    first its own time, each later one the wall time since the chunk before."""
    before = rows[first - 1]["batches"] if first else 0
    steps = [(rows[first]["batches"] - before, rows[first]["chunk_s"])]
    for a, b in zip(rows[first:], rows[first + 1 :]):
        steps.append((b["batches"] - a["batches"], b["elapsed_s"] - a["elapsed_s"]))
    return steps


def describe_target(batches: int | None, time_budget_s: float | None) -> str:
    """``until 1,500 batches``, ``for 600 s of training``, or both joined by ``or``."""
    parts = [f"until {batches:,} batches"] if batches is not None else []
    parts += [f"for {time_budget_s:g} s of training"] if time_budget_s is not None else []
    return " or ".join(parts)


def resume_call(spec: RunSpec) -> str:
    """How ``spec``'s caller continues its run: ``czjax train --resume --out FOLDER`` on the
    command line, ``run_training(..., resume=True)`` from Python."""
    words = spec.spelling
    if words == folders.FLAGS:
        return f"czjax train {words.resume} {words.out} {shlex.quote(str(spec.out_dir))}"
    return f"run_training(..., {words.resume})"


def finished_message(spec: RunSpec) -> str:
    """What a resume of a run that has already reached its target says, in the words of its
    caller (``spec.spelling``: the command line's flags or the API's keywords)."""
    words = spec.spelling
    return (
        f"{spec.out_dir} holds a finished run: its target ({describe_target(spec.batches, spec.time_budget_s)}) "
        f"is reached, nothing to continue. Train it further with {resume_call(spec)} and a larger {words.batches} "
        f"or {words.time_budget}, or start it again with {words.overwrite}"
    )


def saved_batches(out_dir: Path) -> int | None:
    """The batches of the newest state saved in ``out_dir`` (its checkpoint or its portable
    checkpoint); None when it holds neither."""
    paths = [out_dir / name for name in (CHECKPOINT, PORTABLE) if (out_dir / name).exists()]
    return max((checkpoint.stored_count(checkpoint.read_meta(path)[1]["step"]) for path in paths), default=None)


def target_reached(spec: RunSpec) -> bool:
    """Whether the run saved in ``spec.out_dir`` has reached ``spec``'s target: its checkpoint's
    batches, or its time in training by the metrics rows up to its checkpoint. False when it has
    no checkpoint yet."""
    done = saved_batches(spec.out_dir)
    if done is None:
        return False
    rows = [r for r in read_metrics(spec.out_dir / METRICS) if r["batches"] <= done]
    return spec.target_reached(done, rows[-1]["elapsed_s"] if rows else 0.0)


class OpenedRun(NamedTuple):
    """A run ready to train (:func:`open_run`): its trainer and state, the metrics rows before it
    (``elapsed_before``: their time in training), the weights it started from, and the rebuild of
    its replay buffer when it resumed from a portable checkpoint (:func:`rebuild_replay`)."""

    trainer: Any
    state: Any
    rows: list[dict]
    elapsed_before: float
    init_from: str | None
    rebuilt: dict | None = None
    finished: bool = False  # resumed at its target already: nothing to train


def open_run(spec: RunSpec, start_params, log, num_devices: int = 1) -> OpenedRun:
    """The run in ``spec.out_dir`` ready to start or continue: on ``resume`` from its newest saved
    state (:func:`load_saved`; rows logged after it dropped; ``finished`` where that state has
    reached the target, which the log says as the command line does), else fresh (from
    ``start_params``, the weights of ``init_from``, if given)."""
    metrics_path = spec.out_dir / METRICS
    spec.out_dir.mkdir(parents=True, exist_ok=True)
    trainer = make_trainer(spec.config, None, num_devices)
    saved = load_saved(spec, trainer) if spec.resume else None
    if saved is not None:
        path, state, meta = saved
        init_from = meta.get("extra", {}).get("init_from")  # already in the checkpoint's weights
        done = int(state.step)
        rows = [r for r in read_metrics(metrics_path) if r["batches"] <= done]
        if devices.is_main_process():
            write_metrics(metrics_path, rows)
        elapsed = rows[-1]["elapsed_s"] if rows else 0.0
        if spec.target_reached(done, elapsed):
            log(finished_message(spec))
            return OpenedRun(trainer, state, rows, elapsed, init_from, finished=True)
        log(f"resuming {path} at batch {done:,} ({int(state.games):,} games)")
        rebuilt = None
        if path.name == PORTABLE:
            state, rebuilt = rebuild_replay(trainer, state, spec.hparams, log, num_devices)
        return OpenedRun(trainer, state, rows, elapsed, init_from, rebuilt)
    if spec.resume and devices.is_main_process():  # over several hosts, process 0 clears the folder
        log(f"{spec.out_dir} has no checkpoint yet: starting its run from the beginning")
        metrics_path.unlink(missing_ok=True)
    return OpenedRun(trainer, trainer.init(spec.seed, start_params), [], 0.0, spec.init_from)


def load_saved(spec: RunSpec, trainer):
    """``(path, state, meta)`` of the newest state saved in ``spec.out_dir``: its checkpoint, or
    its portable checkpoint where that is newer or the only one (the folder moved without its
    checkpoints; its replay buffer without rows, for :func:`rebuild_replay`); None when it holds
    neither."""
    ckpt_path, portable_path = spec.out_dir / CHECKPOINT, spec.out_dir / PORTABLE
    template, model = trainer.init(spec.seed), spec.config.model
    full = checkpoint.load(ckpt_path, template, expected_model=model) if ckpt_path.exists() else None
    if portable_path.exists():
        _, raw = checkpoint.read_meta(portable_path)
        if full is None or checkpoint.stored_count(raw["step"]) > int(full[0].step):
            return (portable_path, *checkpoint.load(portable_path, portable(template), expected_model=model))
    return None if full is None else (ckpt_path, *full)


# Folded into a resumed state's key for the games that rebuild its replay buffer: a stream of
# their own, so the training after the rebuild draws the keys it would have drawn.
REBUILD_STREAM = 0x52454255


def rebuild_replay(trainer, state, hparams: HParams, log, num_devices: int = 1) -> tuple[Any, dict | None]:
    """``state`` from a portable checkpoint (its replay buffer without rows) with its buffer
    filled again to the rows it held: batches of games of the current network, played as
    training plays them (``trainer.refill``), their positions written until the buffer holds as
    many rows as before, nothing else changed. Returns the state and a record of the rebuild
    (rows, batches, games, seconds, compiling included), None when the buffer was empty."""
    config, rows = trainer.config, int(state.replay.filled) if state.replay is not None else 0
    if not rows:
        return state, None
    empty = replay.empty(config.replay.capacity)
    state = devices.replicate(dataclasses.replace(state, replay=empty), num_devices)
    hparams, limit = devices.replicate(hparams, num_devices), np.int32(rows)
    key = jax.random.fold_in(state.key, REBUILD_STREAM)
    start, batches, filled = time.perf_counter(), 0, 0
    cache_key = ("refill", config, num_devices)
    if cache_key not in _COMPILED:
        with (
            heartbeat(
                log,
                lambda: f"  ... compiling a batch to rebuild the replay buffer ({time.perf_counter() - start:.0f} s)",
            ),
            precision.matmul(config.precision),
        ):
            _COMPILED[cache_key] = trainer.refill.lower(state, hparams, key, limit).compile()
    with heartbeat(
        log,
        lambda: (
            f"  ... rebuilding the replay buffer: {filled:,} of {rows:,} rows ({time.perf_counter() - start:.0f} s)"
        ),
    ):
        while filled < rows:
            state = _COMPILED[cache_key](state, hparams, jax.random.fold_in(key, batches), limit)
            batches += 1
            filled = int(devices.local_view(state.replay.filled))
    seconds = time.perf_counter() - start
    record = {"rows": rows, "batches": batches, "games": batches * config.games_per_batch, "seconds": seconds}
    log(
        f"rebuilt the replay buffer: {rows:,} rows from {record['games']:,} games of the current network in "
        f"{seconds:.1f} s (not training: no step taken, no game counted)"
    )
    return state, record


def run_training(config: TrainConfig, hparams: HParams, out_dir, **options) -> dict:
    """Train one run into a folder, resumable, saved on Ctrl-C and SIGTERM.

    Args:
        config: what is compiled (a preset's ``config``, or :meth:`TrainConfig.override` of it).
        hparams: the traced hyperparameters (``HParams.create(**preset.hparams)``).
        out_dir: the run's folder (``run.json``, ``checkpoint.msgpack``, ``metrics.jsonl``,
            ``dashboard.png``).
        **options: the rest of a :class:`~czjax.jobs.spec.RunSpec`: ``seed``, ``batches`` or
            ``time_budget_s`` (one of them is needed), ``resume``, ``overwrite``, ``init_from``,
            ``num_devices``, ``portable`` (also keep a checkpoint without the replay buffer's
            rows, to move the run to another machine), ``stop_at`` (a deadline), ``log``.
            With ``resume``, a run that has reached its target trains nothing and says so.

    Returns:
        The run's summary (:func:`train`): batches and games done, wall time, the last metrics,
        ``interrupted`` (why it stopped early, or False), and ``replay_rebuilt`` (the rebuild of
        the replay buffer it resumed with from a portable checkpoint, or None).
    """
    return train(RunSpec(config, hparams, out_dir, **options))


def train(spec: RunSpec) -> dict:
    """Train until ``spec.batches`` batches in all or ``spec.time_budget_s`` seconds of training
    in all (both counting what came before a resume), whichever comes first, or until a stop
    (:mod:`czjax.jobs.stops`: the last completed chunk saved, ``summary["interrupted"]`` says
    why); returns a summary. The run is the same computation on any number of devices
    (:mod:`czjax.util.devices`); ``spec.sinks`` get every row as metrics.jsonl does."""
    # over several hosts the processes share the folder and process 0 writes: it holds the lock
    lock = folders.locked(spec.out_dir, "run", spec.spelling) if devices.is_main_process() else contextlib.nullcontext()
    with lock, stops.sigterm_as_stop():
        resuming = spec.resume and any((spec.out_dir / name).exists() for name in (CHECKPOINT, PORTABLE))
        # the starting weights are read first: a bad file leaves the output folder as it was
        load = spec.init_from is not None and not resuming
        start_params = load_weights(spec.init_from, spec.config.model) if load else None
        folders.prepare(spec)
        num_devices = devices.available(spec.num_devices)
        rule = stops.stop_rule(spec.log, spec.notice, spec.stop_at)
        opened = open_run(spec, start_params, rule.log, num_devices)
        trainer, state, rows, elapsed_before = opened.trainer, opened.state, opened.rows, opened.elapsed_before
        if opened.finished:  # nothing to train, nothing to save
            summary = run_summary(spec.out_dir, devices.local_view(state), rows, elapsed_before, False)
            return {**summary, "replay_rebuilt": None}
        keeps_portable = spec.portable or (spec.out_dir / PORTABLE).exists()  # kept current once there
        spec = dataclasses.replace(spec, init_from=opened.init_from, portable=keeps_portable)
        training = _Training(spec, trainer, rule, num_devices, rebuilt=opened.rebuilt)
        if resuming and opened.rebuilt is None:  # the checkpoint resumed from is the one saved last
            training.saved_step = int(devices.local_view(state).step)
        discard = lambda: training.writes and not resuming and not training.saved  # noqa: E731
        with folders.discarded_on_failure(spec.out_dir, RUN_FILES, discard):
            return _train(training, state, rows, elapsed_before)


@dataclasses.dataclass
class _Training:
    """What stays fixed while a run trains: its spec (with the ``init_from`` its weights came
    from), its trainer, its stop rule and devices; and ``saved``, whether it has written a
    checkpoint yet."""

    spec: RunSpec
    trainer: Any
    rule: stops.StopRule
    num_devices: int
    writes: bool = dataclasses.field(default_factory=devices.is_main_process)  # over several hosts, process 0 writes
    saved: bool = False
    saved_step: int | None = None  # the batch of the checkpoint this process wrote last
    rebuilt: dict | None = None  # the rebuild of the replay buffer it resumed with (rebuild_replay)

    @property
    def out_dir(self) -> Path:
        return self.spec.out_dir

    def write_description(self) -> None:
        """``run.json``: the run's settings and description."""
        if self.writes:
            spec = self.spec
            stored = {"config": spec.config.to_dict(), "hparams": spec.hparams.to_dict(), "run": spec.description()}
            (self.out_dir / RUN).write_text(json.dumps(stored, indent=1))

    def save(self, state) -> None:
        """The checkpoint of ``state``, with the run's settings and description (once per batch:
        the state saved last is not saved again, so the earlier checkpoints kept are earlier)."""
        step = int(devices.local_view(state).step)
        if step == self.saved_step:
            return
        if self.writes:  # over several hosts process 0 writes, and every process knows the batch
            spec = self.spec
            state = devices.local_view(state)
            stored = (spec.config.to_dict(), spec.hparams.to_dict(), spec.description())
            checkpoint.save(self.out_dir / CHECKPOINT, state, *stored, keep=KEEP_CHECKPOINTS)
            if spec.portable:  # after the checkpoint: a portable one is never newer than it
                checkpoint.save(self.out_dir / PORTABLE, portable(state), *stored)
            self.saved = True
        self.saved_step = step

    def kept(self) -> str:
        """What a stop before the next save leaves: the last checkpoint, or nothing (from
        ``saved_step``, without reading the file)."""
        if self.saved_step is None:
            return "nothing saved"
        return f"its last checkpoint ({self.out_dir / CHECKPOINT}, batch {self.saved_step:,}) untouched"

    def append_row(self, row: dict) -> None:
        """One chunk's row to ``metrics.jsonl`` and the sinks."""
        if self.writes:
            with (self.out_dir / METRICS).open("a") as f:
                f.write(json.dumps(row) + "\n")
            log_rows(self.spec.sinks, [row])

    def dashboard(self, rows: list[dict]) -> None:
        """``dashboard.png`` redrawn from ``rows`` (a promotions panel when the run promotes)."""
        if self.writes and rows:
            config = self.spec.config
            promotes = config.opponent == "self" or config.pool.league
            plots.dashboard(rows, self.out_dir / DASHBOARD, title=self.spec.title, promotes=promotes)


@dataclasses.dataclass
class _Clock:
    """A run's host-side timing in this process: when it started (``time.perf_counter()``), the
    first of its rows (a resumed run's earlier ones came before), and when it last printed,
    plotted and saved (seconds since its start)."""

    start: float
    first_row: int
    last_print: float = 0.0
    last_plot: float = 0.0
    last_save: float = 0.0


def _train(training: _Training, state, rows: list[dict], elapsed_before: float) -> dict:
    """Train from ``state`` to the run's target, saving on the way and at the end (also when
    stopped); returns the run's summary."""
    training.write_description()
    state = _train_chunks(training, state, rows, elapsed_before)
    # the save comes before any word about it: printing may fail (a pipe whose reader is gone)
    with contextlib.suppress(KeyboardInterrupt, stops.Stopped):
        training.save(state)
    training.rule.report(f"the last completed chunk (batch {int(devices.local_view(state).step):,})")
    training.dashboard(rows)
    summary = run_summary(training.out_dir, devices.local_view(state), rows, elapsed_before, training.rule.reason)
    return {**summary, "replay_rebuilt": training.rebuilt}


def _train_chunks(training: _Training, state, rows: list[dict], elapsed_before: float):
    """Run chunks until the target or a stop, each chunk's row appended to ``rows`` and written;
    returns the last completed chunk's state."""
    clock, rule, spec = _Clock(time.perf_counter(), len(rows)), training.rule, training.spec
    with rule.watching():
        while not rule.due():
            done = int(devices.local_view(state).step)
            if spec.target_reached(done, elapsed_before + time.perf_counter() - clock.start):
                break
            num_batches = spec.chunk_size(done)
            state, metrics, chunk_s = _run_chunk(training, state, done, num_batches)
            check_finite(metrics, done + 1, training.kept())
            row = _chunk_row(
                spec.config, metrics, num_batches, chunk_s, elapsed_before + time.perf_counter() - clock.start
            )
            rows.append(row)
            training.append_row(row)
            rule.chunks += 1
            _report(training, state, rows, clock)
    return state


def _run_chunk(training: _Training, state, done: int, num_batches: int):
    """The compiled chunk of ``num_batches`` batches from batch ``done``, state and hyperparameters
    replicated over the run's devices: ``(state, metrics, seconds)``."""
    config, num_devices = training.spec.config, training.num_devices
    program = ChunkProgram(
        training.trainer.run_chunk,
        config,
        (config, num_batches, num_devices),
        f"of {config.games_per_batch} games",
        lambda tree: devices.replicate(tree, num_devices),
        devices.replicate(training.trainer.solver_bench, num_devices),
    )
    label = f"batches {done + 1:,}-{done + num_batches:,}"
    return run_chunk_once(program, state, training.spec.hparams, num_batches, training.rule.log, label)


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
    spec, now, chunks = training.spec, time.perf_counter() - clock.start, training.rule.chunks
    if now - clock.last_print >= 2.0 or chunks == 1:
        left_s = run_time_left(rows, clock.first_row, spec.batches, spec.time_budget_s)
        training.rule.log(format_progress(rows[-1], spec.batches, left_s, str(spec.config.eval_opponent)))
        clock.last_print = now
    if chunks % spec.checkpoint_every == 0 or now - clock.last_save >= spec.checkpoint_every_s:
        training.save(state)
        clock.last_save = now
    if training.writes and now - clock.last_plot >= spec.plot_every_s and rows:
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
        "portable": str(out_dir / PORTABLE),
    }


def deterministic(row: dict) -> dict:
    """A metrics row without its timing keys (what a resumed run must reproduce)."""
    return {k: v for k, v in row.items() if k not in TIMING_KEYS}


def params_equal(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
