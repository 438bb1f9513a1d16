"""Sweeps beyond one machine: a scan's configurations as an array of jobs (submitit: SLURM's
array jobs, or its local executor where there is no cluster).

A scan launched this way is split into shards (:func:`plan_shards`: slices of its settings,
or of its seeds when there are more shards than settings), each shard an ordinary scan folder,
``shard-NN`` inside the scan's folder, trained by one job. A job that is preempted or reaches its
time limit is requeued by submitit (it signals the job first, and the job's :meth:`Requeued.checkpoint`
hands submitit the same job to run again), and the requeued job continues its shard from that
scan's last checkpoint. When every shard has finished, :func:`merge` gathers them into the files
a one-machine scan writes (``metrics.jsonl`` with the one-machine scan's configuration numbers,
``scan.json``, ``scan.png``, ``summary.json``); ``czjax scan --merge DIR`` does it later for a
launch that was not waited for. Launching the same scan again with ``resume`` submits only the
shards that have not finished.

A tune launched this way runs as an array of workers sharing one study (its journal file in the
tune's folder): each asks for batches of trials until the study holds its target
(:mod:`czjax.jobs.tune`).

submitit is an optional extra (``pip install 'czjax[cluster]'``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from czjax.jobs import folders
from czjax.jobs.folders import METRICS, SCAN, read_metrics, write_metrics
from czjax.jobs.scan import configurations, train_scan, write_report
from czjax.jobs.spec import ScanSpec

LAUNCHERS = ("local", "slurm")
SHARDS = "shards.json"  # in a launched scan's folder: its shards and their slices
JOBS = "jobs"  # submitit's folder of a launch: the pickled jobs and their logs
INSTALL = "--launcher needs submitit: pip install 'czjax[cluster]' (or pip install submitit)"


def import_submitit():
    try:
        import submitit
    except ImportError:
        raise ValueError(INSTALL) from None
    return submitit


@dataclasses.dataclass(frozen=True)
class Launcher:
    """Where jobs run: ``kind`` "local" (this machine, a process a job) or "slurm", with SLURM's
    ``partition``, ``gpus_per_task``, ``time_min`` (a job's limit, after which it is requeued)
    and ``array_parallelism`` (jobs of the array running at once)."""

    kind: str = "local"
    partition: str | None = None
    gpus_per_task: int | None = None
    time_min: int = 60
    array_parallelism: int | None = None

    def __post_init__(self):
        if self.kind not in LAUNCHERS:
            raise ValueError(f"unknown launcher {self.kind!r}; choose one of {', '.join(LAUNCHERS)}")
        if self.kind == "local" and (self.partition or self.gpus_per_task):
            raise ValueError("--partition and --gpus-per-task are SLURM's: give them with --launcher slurm")

    def executor(self, folder: Path):
        """A submitit executor writing its jobs and logs in ``folder``."""
        submitit = import_submitit()
        executor = submitit.AutoExecutor(folder=str(folder), cluster=self.kind)
        executor.update_parameters(
            timeout_min=self.time_min,
            name="czjax",
            slurm_partition=self.partition,
            slurm_gpus_per_task=self.gpus_per_task,
            slurm_array_parallelism=self.array_parallelism,
        )
        return executor


@dataclasses.dataclass(frozen=True)
class Shard:
    """One job's part of a scan: settings ``settings[0]:settings[1]`` and seeds
    ``seeds[0]:seeds[1]`` (positions in the scan's lists), in the folder ``name``."""

    name: str
    settings: tuple[int, int]
    seeds: tuple[int, int]

    def spec(self, scan: ScanSpec) -> ScanSpec:
        """The shard's own scan: its slice of the settings and seeds, in its folder."""
        return dataclasses.replace(
            scan,
            settings=scan.settings[slice(*self.settings)],
            seeds=scan.seeds[slice(*self.seeds)],
            out_dir=scan.out_dir / self.name,
            resume=(scan.out_dir / self.name / SCAN).exists(),
            overwrite=False,
            sinks=(),
        )


def split(count: int, parts: int) -> list[tuple[int, int]]:
    """``range(count)`` as ``parts`` contiguous slices of near-equal sizes."""
    bounds = [round(i * count / parts) for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


def plan_shards(settings: int, seeds: int, shards: int) -> list[Shard]:
    """``shards`` shards of a scan of ``settings`` x ``seeds``: slices of the settings (every
    seed in each) while there are as many settings as shards, else each setting split into
    slices of its seeds. At most one shard per configuration."""
    shards = min(shards, settings * seeds)
    if shards <= settings:
        parts = [((a, b), (0, seeds)) for a, b in split(settings, shards)]
    else:
        per_setting = -(-shards // settings)  # ceil: every setting's seeds in as many slices
        parts = [((s, s + 1), slice_) for s in range(settings) for slice_ in split(seeds, min(per_setting, seeds))]
    return [Shard(f"shard-{i:02d}", a, b) for i, (a, b) in enumerate(parts)]


class Requeued:
    """A job submitit requeues as it is: when the job is preempted or reaches its time limit,
    submitit calls :meth:`checkpoint` and runs what it returns, this job again, which continues
    from what its work saved."""

    def checkpoint(self):
        submitit = import_submitit()
        return submitit.helpers.DelayedSubmission(self)


class ShardJob(Requeued):
    """A job of the array: train its shard to the scan's target (continued from the shard's
    last checkpoint where it has one)."""

    def __init__(self, scan: ScanSpec, shard: Shard):
        self.scan, self.shard = scan, shard

    def __call__(self) -> str:
        result = train_scan(self.shard.spec(self.scan))
        if result.interrupted:  # stopped by a signal: the folder is saved, the launch can resume it
            return f"{self.shard.name}: stopped ({result.interrupted})"
        return f"{self.shard.name}: done"


def finished(folder: Path, configurations: int, batches: int) -> bool:
    """Whether the scan in ``folder`` (a shard's) has trained its ``configurations`` to ``batches``."""
    rows = read_metrics(Path(folder) / METRICS)
    return len({r["config"] for r in rows if r["batches"] >= batches}) == configurations


def pending(out_dir: Path, stored: dict | None = None) -> list[str]:
    """The shards of the launched scan in ``out_dir`` that have not finished (``stored``: its
    ``shards.json`` where the caller has read it)."""
    stored = stored or json.loads((Path(out_dir) / SHARDS).read_text())
    return [
        shard["name"]
        for shard in stored["shards"]
        if not finished(Path(out_dir) / shard["name"], shard_size(shard), stored["scan"]["batches"])
    ]


def shard_size(shard: dict) -> int:
    return (shard["settings"][1] - shard["settings"][0]) * (shard["seeds"][1] - shard["seeds"][0])


def launch(scan: ScanSpec, launcher: Launcher, shards: int) -> list:
    """Submit the shards of ``scan`` that have not finished as one array of jobs; returns
    submitit's jobs (``job.result()`` waits for one). The plan is kept in the scan's folder
    (``shards.json``): a resumed launch must split the scan the same way."""
    out = scan.out_dir
    with folders.locked(out, "scan launch", scan.spelling):
        folders.prepare(scan)
        plan = plan_shards(len(scan.settings), len(scan.seeds), shards)
        stored = {"scan": scan.description(), "shards": [dataclasses.asdict(s) for s in plan]}
        if scan.resume and (out / SHARDS).exists():
            before = json.loads((out / SHARDS).read_text())
            if json.loads(json.dumps(stored)) != before:
                raise ValueError(
                    f"{scan.spelling.resume} must launch the scan in {out} as before: "
                    "the same settings, seeds and shards"
                )
        (out / SHARDS).write_text(json.dumps(stored, indent=1))
    left = pending(out, stored)
    waiting = [shard for shard in plan if shard.name in left]
    if not waiting:
        return []
    executor = launcher.executor(out / JOBS)
    jobs = executor.submit_array([ShardJob(scan, shard) for shard in waiting])
    return jobs


def merge(out_dir: Path) -> list[dict]:
    """The shards of the launched scan in ``out_dir`` gathered into the files a one-machine scan
    writes there (rows renumbered as its configurations); their rows. A one-line ValueError
    while a shard has not finished."""
    out_dir = Path(out_dir)
    if not (out_dir / SHARDS).exists():
        raise ValueError(f"{out_dir} holds no launched scan (no {SHARDS}): nothing to merge")
    stored = json.loads((out_dir / SHARDS).read_text())
    description = stored["scan"]
    settings, seeds = description["settings"], description["seeds"]
    ids = {(c["setting"], c["seed"]): c["config"] for c in configurations(settings, seeds)}
    waiting = pending(out_dir, stored)
    if waiting:
        raise ValueError(
            f"{', '.join(waiting)} of {out_dir} not finished: wait for its jobs, or launch the scan again with --resume"
        )
    rows = []
    for shard in stored["shards"]:
        for r in read_metrics(out_dir / shard["name"] / METRICS):
            setting = shard["settings"][0] + r["setting"]
            rows.append({**r, "setting": setting, "config": ids[setting, r["seed"]]})
    rows.sort(key=lambda r: (r["config"], r["batches"]))
    write_metrics(out_dir / METRICS, rows)
    (out_dir / SCAN).write_text(json.dumps(description, indent=1))
    return rows


def merged_report(out_dir: Path, grid_names: list[str], sort_by: str, title: str) -> str:
    """:func:`merge`, then the report a one-machine scan prints and writes (figure, summary)."""
    rows = merge(out_dir)
    return write_report(rows, out_dir, grid_names, sort_by, title)


class TuneWorker(Requeued):
    """A job of a launched tune: asks for batches of trials and trains them until the shared
    study holds its target (:func:`czjax.jobs.tune.run_tune` with ``resume``: it also continues a
    batch whose process ended)."""

    def __init__(self, spec):
        self.spec = spec

    def __call__(self) -> str:
        from czjax.jobs import tune

        result = tune.run_tune(self.spec)
        return f"tune worker: {'stopped (' + str(result.interrupted) + ')' if result.interrupted else 'done'}"


def launch_tune(spec, launcher: Launcher, workers: int) -> list:
    """The study of the tune ``spec`` made (or checked, with ``resume``) here, then ``workers``
    jobs that share it (each resuming the folder); submitit's jobs."""
    from czjax.jobs import tune

    optuna = tune.import_optuna()
    with folders.locked(spec.out_dir, "tune", spec.spelling):
        folders.prepare(spec)
        tune.open_study(spec, optuna)
    joining = dataclasses.replace(spec, resume=True, overwrite=False)
    executor = launcher.executor(spec.out_dir / JOBS)
    return executor.submit_array([TuneWorker(joining) for _ in range(workers)])


def wait(jobs: list, log=print) -> None:
    """Wait for every job; a one-line ValueError naming the first that failed and its log."""
    for job in jobs:
        try:
            log(f"job {job.job_id}: {job.result()}")
        except Exception as err:  # submitit's UncompletedJobError or the job's own error
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ValueError(f"job {job.job_id} failed ({first}); its log: {job.paths.stderr}") from None


class CommandJob(Requeued):
    """A job that runs a resumable command (``argv``, from ``cwd``) until it exits 0: an exit
    code in ``again`` means "not done yet, call me again" (a campaign step's call that stopped at
    its time limit), any other is a failure. The command is killed with its job, and continues
    from where it saved."""

    def __init__(self, argv: list[str], cwd: str, again: tuple[int, ...] = ()):
        self.argv, self.cwd, self.again = list(argv), cwd, tuple(again)

    def __call__(self) -> str:
        import subprocess

        while True:
            code = subprocess.run(self.argv, cwd=self.cwd).returncode
            if code == 0:
                return "done"
            if code not in self.again:
                raise RuntimeError(f"{' '.join(self.argv)} exited with {code}")
