"""Output folders of training runs and scans: their files, their lock, and the one check that
prepares them (:func:`prepare`).

A run's folder holds ``run.json`` (what the run is: settings, seed, and its target in batches
or seconds), ``checkpoint.msgpack`` (the same description and the TrainState, written
atomically; the two before it kept as ``checkpoint.1.msgpack`` and ``checkpoint.2.msgpack``),
``metrics.jsonl`` (one object per chunk) and ``dashboard.png``, and where asked
(``RunSpec.portable``) ``portable.msgpack``, the state without its replay buffer's rows, small
enough to move to another machine (a resume from it rebuilds the buffer); a scan's,
``scan.json``, ``metrics.jsonl``, a checkpoint per group of configurations and, once it has
finished, ``scan.png`` and ``summary.json`` (:func:`scan_files`).

Nothing is lost silently:
- A folder that holds a run (or a scan) is never started over unless asked (``overwrite``).
- :func:`prepare` refuses a folder that is a file or cannot be written, or that another process
  is using, before anything starts; the command line calls it before it prints a word, the
  runner again under the folder's lock.
- A run that fails before its first checkpoint (the device's memory, a full disk) removes the
  files it wrote (:func:`discarded_on_failure`), so the corrected command needs no ``--overwrite``.
- A folder is locked while a process trains in it (``.lock``, ``fcntl.flock``: released when the
  process ends, even by ``kill -9``): a second process gets a one-line error naming the first's
  process id.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from czjax.util import checkpoint, devices

CHECKPOINT = checkpoint.FILENAME
METRICS = "metrics.jsonl"
DASHBOARD = "dashboard.png"
RUN = "run.json"
PORTABLE = "portable.msgpack"  # the state without its replay buffer's rows (czjax.learn.trainer.portable)
RUN_FILES = (CHECKPOINT, METRICS, RUN, DASHBOARD, PORTABLE)
SCAN = "scan.json"
SCAN_REPORT = ("scan.png", "summary.json")  # a finished scan's figure and summary table
LOCK = ".lock"

_HELD: set[Path] = set()  # the folders whose lock this process holds


@dataclasses.dataclass(frozen=True)
class Spelling:
    """How a caller names a run's options in messages: the command line's flags, or the Python
    API's keyword arguments (``run_training(..., resume=True)``), so each error tells its reader
    what to type."""

    resume: str
    overwrite: str
    out: str
    chunk: str
    batches: str
    time_budget: str


FLAGS = Spelling("--resume", "--overwrite", "--out", "--chunk", "--batches", "--time-budget")
KEYWORDS = Spelling("resume=True", "overwrite=True", "out_dir", "chunk", "batches", "time_budget_s")


@dataclasses.dataclass(frozen=True)
class FolderKind:
    """What a kind of output folder holds: ``what`` it is called in messages, ``files`` (those a
    fresh start refuses to overwrite, or removes with ``overwrite``), and ``needs`` (a file
    ``resume`` needs, or None when a resume without one starts from the beginning)."""

    what: str
    files: Callable[[Path], list[str]]
    needs: str | None = None


def group_checkpoint(out_dir: Path, group: int) -> Path:
    """The checkpoint of a scan's ``group`` of configurations."""
    return Path(out_dir) / f"checkpoint-group{group}.msgpack"


def run_files(out_dir: Path) -> list[str]:
    """A run's files in ``out_dir``: :data:`RUN_FILES` and the earlier checkpoints kept beside
    its checkpoint (:func:`czjax.util.checkpoint.kept`)."""
    return [*RUN_FILES, *(p.name for p in checkpoint.kept(Path(out_dir) / CHECKPOINT) if p.name != CHECKPOINT)]


def scan_files(out_dir: Path) -> list[str]:
    """A scan's files in ``out_dir``: ``scan.json``, ``metrics.jsonl``, the checkpoint of each
    group of configurations there, and the report written at its end (figure and summary)."""
    groups = sorted(Path(out_dir).glob("checkpoint-group*.msgpack"), key=lambda p: (len(p.name), p.name))
    return [SCAN, METRICS, *(p.name for p in groups), *SCAN_REPORT]


RUN_FOLDER = FolderKind("run", run_files)
SCAN_FOLDER = FolderKind("scan", scan_files, SCAN)


class Output(Protocol):
    """Where a run or scan writes (:class:`czjax.jobs.spec.RunSpec`, :class:`~czjax.jobs.spec.ScanSpec`)."""

    @property
    def out_dir(self) -> Path: ...
    @property
    def resume(self) -> bool: ...
    @property
    def overwrite(self) -> bool: ...
    @property
    def folder(self) -> FolderKind: ...
    @property
    def spelling(self) -> Spelling: ...


def prepare(spec: Output) -> None:
    """The one check of an output folder before a run or a scan: the folder can be made and
    written, no other process holds it, and either ``spec.resume`` finds what it needs or the
    folder holds no run (its files removed with ``spec.overwrite``). One-line ValueErrors; the
    command line calls it before its first line, the runner again under the lock (nothing left to
    do by then). Over several hosts only process 0 refuses or removes anything."""
    out_dir, kind, words = Path(spec.out_dir), spec.folder, spec.spelling
    check_out_dir(out_dir, words.out)
    check_unlocked(out_dir, kind.what, words)
    if spec.resume:
        if kind.needs is not None and not (out_dir / kind.needs).exists():
            raise ValueError(f"nothing to resume in {out_dir}: it holds no {kind.needs}")
    elif out_dir.is_dir():
        guard_fresh(out_dir, kind.files(out_dir), spec.overwrite, words)


@contextlib.contextmanager
def locked(out_dir: Path, what: str = "run", words: Spelling = FLAGS, wait_s: float = 0.0):
    """Hold ``out_dir``'s lock for the block: a ValueError naming the holder's process id when
    another process holds it (for ``wait_s`` seconds: processes that share a folder and hold its
    lock a moment each, a tune's workers). The lock is the kernel's (``flock``) on
    ``out_dir/.lock``, so it goes with its process, however that ends."""
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    handle = open(out_dir / LOCK, "a+")
    failed, held = True, False
    try:
        try:
            acquire(handle, wait_s)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise ValueError(
                f"{out_dir} is in use by another czjax {what} (process {holder}): wait for it to end, "
                f"or choose another {words.out}"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        _HELD.add(out_dir.resolve())
        held = True
        yield
        failed = False
    finally:
        if held:
            _HELD.discard(out_dir.resolve())
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


def acquire(handle, wait_s: float) -> None:
    """``flock`` on ``handle``, retried for ``wait_s`` seconds; BlockingIOError past them."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def in_use(out_dir: Path) -> bool:
    """Whether another process holds ``out_dir``'s lock now (a live process: the lock goes with it)."""
    path = Path(out_dir) / LOCK
    if not path.exists() or Path(out_dir).resolve() in _HELD:
        return False
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def check_unlocked(out_dir: Path, what: str = "run", words: Spelling = FLAGS) -> None:
    """A one-line ValueError if another process holds ``out_dir``'s lock (before touching its files)."""
    out_dir = Path(out_dir)
    if (out_dir / LOCK).exists() and out_dir.resolve() not in _HELD and devices.is_main_process():
        with locked(out_dir, what, words):
            pass


def guard_fresh(out_dir: Path, files, overwrite: bool, words: Spelling = FLAGS) -> None:
    """Refuse to start a run in ``out_dir`` when it holds one, unless ``overwrite`` (then its
    files are removed). Over several hosts, process 0 decides (the others would see its files)."""
    held = [name for name in files if (Path(out_dir) / name).exists()]
    if not held or not devices.is_main_process():
        return
    if not overwrite:
        raise ValueError(
            f"{out_dir} already holds a run ({held[0]}): continue it with {words.resume}, "
            f"start it again with {words.overwrite}, or choose another {words.out}"
        )
    for name in held:
        (Path(out_dir) / name).unlink()


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


def read_run(out_dir) -> dict:
    """What a run folder's run is (``config``, ``hparams``, ``run``: seed, batches,
    time_budget_s, title): from its checkpoint (or its portable one, where only that came with
    the folder), or from ``run.json`` when it was stopped before its first checkpoint."""
    out_dir = Path(out_dir)
    for name in (CHECKPOINT, PORTABLE):
        if (out_dir / name).exists():
            meta, _ = checkpoint.read_meta(out_dir / name)
            return {"config": meta["config"], "hparams": meta["hparams"], "run": meta.get("extra", {})}
    if (out_dir / RUN).exists():
        return json.loads((out_dir / RUN).read_text())
    raise ValueError(f"nothing to resume in {out_dir}: it holds no {CHECKPOINT}, {PORTABLE} or {RUN}")
