"""Hyperparameter search as vmapped batches (``czjax tune``).

Optuna's ask-and-tell interface hands out ``batch`` trials at once. czjax's hyperparameters are
traced values (:class:`~czjax.learn.settings.HParams`), not compile-time constants, so those
trials times ``seeds`` seeds train as one compiled scan (:func:`czjax.jobs.scan.train_scan`, the
program ``czjax scan`` compiles), where a search tool running one trial per process would compile
and run each alone. Each trial is then told the mean of its objective over its seeds (the spread
is kept as a trial attribute).

The tune's folder holds the study as Optuna's journal file (``study.journal``), one scan folder
per batch of trials (``batch-NNNN``, named by its first trial's number) and, at the end, the
trials table, the best trial as a ``czjax train`` command and Optuna's figures. An interrupted
tune resumes (``resume``): the trials it had asked for continue in their batch's folder from
that scan's last checkpoint, so no trial is lost or run twice. Several processes or hosts that
share the folder share the study: each resumes the batches no live process holds (a scan
folder's lock) and asks for new trials while the study has fewer than ``trials``.

Optuna is an optional extra (``pip install 'czjax[tune]'``; CMA-ES also needs ``cmaes``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from czjax.jobs import folders, stops
from czjax.jobs.loop import TIMING_KEYS
from czjax.jobs.scan import SCANNABLE, differences, train_scan
from czjax.jobs.spec import ScanSpec, check_resume_or_overwrite
from czjax.learn.settings import TrainConfig

STUDY = "study.journal"
DESCRIPTION = "tune.json"
TRIALS_TABLE = "trials.csv"
BEST = "best.json"
BATCH_TRIALS = "trials.json"  # in a batch's folder: its trials' numbers and values, in the scan's order
BATCH_RESULTS = "objective.json"  # in a batch's folder: each trial's objective per seed
FIGURES = ("optimization_history.png", "param_importances.png", "slice.png")
SAMPLERS = ("tpe", "cmaes", "random")
STUDY_NAME = "czjax-tune"
SHARED_LOCK_WAIT_S = 60.0  # seconds a process joining a study waits for another opening it
TAIL = 0.2  # the objective: a run's mean over its last 20% of intervals (as czjax scan's summary)
INSTALL = "czjax tune needs Optuna: pip install 'czjax[tune]' (or pip install optuna)"


def import_optuna():
    """Optuna, or a one-line error naming the install."""
    try:
        import optuna
    except ImportError:
        raise ValueError(INSTALL) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # czjax prints its own progress
    return optuna


@dataclasses.dataclass(frozen=True)
class Param:
    """A searched hyperparameter: ``NAME=LOW:HIGH[:log|:int]``, any traced one."""

    name: str
    low: float
    high: float
    log: bool = False
    integer: bool = False

    @classmethod
    def parse(cls, text: str) -> Param:
        name, sep, bounds = text.partition("=")
        name = name.strip().replace("-", "_")
        parts = bounds.split(":")
        if not sep or len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("log", "int")):
            raise ValueError(f"bad --param {text!r}: expected NAME=LOW:HIGH, NAME=LOW:HIGH:log or NAME=LOW:HIGH:int")
        if name not in SCANNABLE:
            raise ValueError(f"cannot tune {name!r}: not a traced hyperparameter; tunable: {', '.join(SCANNABLE)}")
        try:
            low, high = float(parts[0]), float(parts[1])
        except ValueError:
            raise ValueError(f"bad --param {text!r}: LOW and HIGH must be numbers") from None
        kind = parts[2] if len(parts) == 3 else ""
        if not low < high:
            raise ValueError(f"bad --param {text!r}: LOW must be below HIGH")
        if low < 0:
            raise ValueError(f"bad --param {text!r}: hyperparameters are not negative")
        if kind == "log" and low <= 0:
            raise ValueError(f"bad --param {text!r}: a log range must start above 0")
        if kind == "int" and (low != int(low) or high != int(high)):
            raise ValueError(f"bad --param {text!r}: an int range takes whole numbers")
        return cls(name, low, high, log=kind == "log", integer=kind == "int")

    def distribution(self, optuna):
        if self.integer:
            return optuna.distributions.IntDistribution(int(self.low), int(self.high))
        return optuna.distributions.FloatDistribution(self.low, self.high, log=self.log)

    def text(self) -> str:
        kind = ":log" if self.log else ":int" if self.integer else ""
        return f"{self.name}={self.low:g}:{self.high:g}{kind}"


@dataclasses.dataclass(frozen=True)
class Objective:
    """``METRIC[:max|:min]``: a metric a run logs, its mean over each run's last ``TAIL`` of
    intervals, averaged over the trial's seeds."""

    metric: str
    maximize: bool = True

    @classmethod
    def parse(cls, text: str) -> Objective:
        metric, _, way = text.partition(":")
        if way not in ("", "max", "min") or not metric:
            raise ValueError(f"bad --objective {text!r}: expected METRIC, METRIC:max or METRIC:min")
        return cls(metric.strip(), way != "min")

    @property
    def direction(self) -> str:
        return "maximize" if self.maximize else "minimize"

    def per_seed(self, rows: list[dict]) -> list[float]:
        """The metric of each seed's run among ``rows`` (one setting's), in seed order."""
        values = []
        for seed in sorted({r["seed"] for r in rows}):
            runs = sorted((r for r in rows if r["seed"] == seed), key=lambda r: r["batches"])
            values.append(float(np.mean([r[self.metric] for r in runs[-max(1, int(len(runs) * TAIL)) :]])))
        return values

    def text(self) -> str:
        return f"{self.metric}:{'max' if self.maximize else 'min'}"


def logged_metrics(config: TrainConfig) -> list[str]:
    """The metrics a run of ``config`` logs per interval, read from its compiled chunk's
    output shapes (traced, not run)."""
    import jax

    from czjax.learn.settings import HParams
    from czjax.learn.trainer import make_trainer

    trainer = make_trainer(config)
    state = jax.eval_shape(lambda: trainer.init(0))
    shapes = jax.eval_shape(lambda s, h: trainer.run_chunk(s, h, 1, trainer.solver_bench)[1], state, HParams.create())
    return sorted(k for k in shapes if k not in TIMING_KEYS and k != "finite")


def check_objective(objective: Objective, config: TrainConfig) -> None:
    names = logged_metrics(config)
    if objective.metric not in names:
        raise ValueError(f"cannot optimise {objective.metric!r}: a run of these settings logs {', '.join(names)}")


def tune_files(out_dir: Path) -> list[str]:
    """A tune's files in ``out_dir`` (its batches' scan folders are removed with them by
    ``overwrite``: :func:`run_tune`)."""
    return [STUDY, DESCRIPTION, TRIALS_TABLE, BEST, *FIGURES]


TUNE_FOLDER = folders.FolderKind("tune", tune_files, DESCRIPTION)


@dataclasses.dataclass(frozen=True)
class TuneSpec:
    """A search: ``trials`` trials over ``params`` (over ``base_hparams`` on ``config``), asked
    ``batch`` at a time, each trained for ``batches`` batches with ``seeds`` seeds from ``seed``
    and scored by ``objective``; the study and every batch's scan in ``out_dir``. ``preset``:
    the preset name and ``overrides`` the setting flags (for the best trial's command line)."""

    config: TrainConfig
    base_hparams: dict
    params: tuple[Param, ...]
    objective: Objective
    out_dir: Path
    trials: int
    batch: int
    batches: int
    seeds: int = 1
    seed: int = 0
    sampler: str = "tpe"
    resume: bool = False
    overwrite: bool = False
    num_devices: int | None = 1
    preset: str = "default"
    overrides: tuple[str, ...] = ()
    stop_at: float | None = None
    log: Callable[[str], None] = print
    notice: Callable[[str], None] | None = None
    spelling: folders.Spelling = folders.KEYWORDS

    folder: ClassVar[folders.FolderKind] = TUNE_FOLDER

    def __post_init__(self):
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        object.__setattr__(self, "params", tuple(self.params))
        if not self.params:
            raise ValueError("nothing to tune: give at least one --param NAME=LOW:HIGH")
        names = [p.name for p in self.params]
        if len(set(names)) < len(names):
            raise ValueError("a hyperparameter is tuned twice")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}")
        for name, value in (("trials", self.trials), ("batch", self.batch), ("seeds", self.seeds)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1")
        check_resume_or_overwrite(self.resume, self.overwrite, self.spelling)

    def description(self) -> dict:
        """What ``tune.json`` stores: a resumed tune must match it (but for ``trials``)."""
        return {
            "config": self.config.to_dict(),
            "hparams": self.base_hparams,
            "params": [p.text() for p in self.params],
            "objective": self.objective.text(),
            "batches": self.batches,
            "batch": self.batch,
            "seeds": self.seeds,
            "seed": self.seed,
            "sampler": self.sampler,
        }


def make_sampler(optuna, name: str, seed: int):
    if name == "tpe":  # trials asked together are told apart by a "constant liar"
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    if name == "cmaes":
        try:
            import cmaes  # noqa: F401 (Optuna's CMA-ES sampler imports it when it first samples)
        except ImportError:
            raise ValueError("--sampler cmaes needs the cmaes package: pip install cmaes") from None
        return optuna.samplers.CmaEsSampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


def open_study(spec: TuneSpec, optuna):
    """The study in ``spec.out_dir`` (created, or loaded to resume), ``tune.json`` checked."""
    path = spec.out_dir / DESCRIPTION
    if spec.resume:
        stored = json.loads(path.read_text())
        stored["config"] = TrainConfig.from_dict(stored["config"]).to_dict()
        differ = differences(stored, json.loads(json.dumps(spec.description())))  # as stored: lists
        if differ:
            name, before, now = differ[0]
            raise ValueError(
                f"{spec.spelling.resume} must use the settings of the tune in the folder: {name} was {before!r}, "
                f"now {now!r}" + (f" (and {len(differ) - 1} more)" if len(differ) > 1 else "")
            )
    else:
        path.write_text(json.dumps(spec.description(), indent=1))
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(spec.out_dir / STUDY)))
    return optuna.create_study(
        study_name=STUDY_NAME,
        storage=storage,
        direction=spec.objective.direction,
        sampler=make_sampler(optuna, spec.sampler, spec.seed),
        load_if_exists=True,
    )


def batch_folder(spec: TuneSpec, first_trial: int) -> Path:
    return spec.out_dir / f"batch-{first_trial:04d}"


def ask_batch(spec: TuneSpec, study, optuna, count: int) -> Path:
    """``count`` new trials, their folder and values written before anything runs."""
    distributions = {p.name: p.distribution(optuna) for p in spec.params}
    trials = [study.ask(distributions) for _ in range(count)]
    folder = batch_folder(spec, trials[0].number)
    for trial in trials:
        trial.set_user_attr("batch", folder.name)
    folder.mkdir(parents=True, exist_ok=True)
    listed = [{"trial": t.number, **{p.name: float(t.params[p.name]) for p in spec.params}} for t in trials]
    (folder / BATCH_TRIALS).write_text(json.dumps(listed, indent=1))
    return folder


def run_batch(spec: TuneSpec, study, folder: Path, rule_log) -> str | bool:
    """The trials of ``folder`` as one scan (continued from its checkpoint where it has one),
    each told its objective; why it stopped early, or False."""
    listed = json.loads((folder / BATCH_TRIALS).read_text())
    settings = [{k: v for k, v in t.items() if k != "trial"} for t in listed]
    started = (folder / folders.SCAN).exists()
    scan = ScanSpec(
        spec.config,
        spec.base_hparams,
        settings,
        list(range(spec.seed, spec.seed + spec.seeds)),
        folder,
        spec.batches,
        resume=started,
        num_devices=spec.num_devices,
        stop_at=spec.stop_at,
        log=rule_log,
        notice=spec.notice,
        spelling=spec.spelling,
    )
    result = train_scan(scan)
    if result.interrupted:
        return result.interrupted
    per_seed = {
        t["trial"]: spec.objective.per_seed([r for r in result.rows if r["setting"] == i]) for i, t in enumerate(listed)
    }
    (folder / BATCH_RESULTS).write_text(json.dumps({str(k): v for k, v in per_seed.items()}, indent=1))
    for number, values in per_seed.items():
        study.tell(number, float(np.mean(values)))
    return False


def unfinished_batches(spec: TuneSpec, study, optuna) -> list[Path]:
    """The folders of trials asked but not told (an interrupted tune's, or another process's),
    oldest first. Trials asked whose folder was never written are failed (nothing ran)."""
    found: dict[str, Path] = {}
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        name = trial.user_attrs.get("batch")
        if name and (spec.out_dir / name / BATCH_TRIALS).exists():
            found[name] = spec.out_dir / name
        else:
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
    return [found[name] for name in sorted(found)]


def counted_trials(study, optuna) -> int:
    """Trials that count towards the target: told, or running."""
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.RUNNING)
    return len(study.get_trials(deepcopy=False, states=states))


@dataclasses.dataclass
class TuneResult:
    """The completed trials (``number``, ``value``, ``std``, the params), best first; the best
    trial's ``czjax train`` command; why the tune stopped before its target (False: it did not)."""

    trials: list[dict]
    best_command: str | None
    interrupted: str | bool
    outputs: list[Path]


def run_tune(spec: TuneSpec) -> TuneResult:
    """Run (or continue) the search ``spec`` describes: batches of trials, each one compiled
    scan, until the study holds ``spec.trials`` trials, or a stop (:mod:`czjax.jobs.stops`:
    a time limit, SIGINT, SIGTERM; every chunk is saved as it completes)."""
    optuna = import_optuna()
    # processes sharing the study (--resume) each hold the folder's lock a moment to open it
    with folders.locked(spec.out_dir, "tune", spec.spelling, wait_s=SHARED_LOCK_WAIT_S if spec.resume else 0.0):
        folders.prepare(spec)
        if spec.overwrite:
            for old in spec.out_dir.glob("batch-*"):
                shutil.rmtree(old)
        study = open_study(spec, optuna)
    rule = stops.stop_rule(spec.log, spec.notice, spec.stop_at)
    reason: str | bool = False
    with stops.sigterm_as_stop(), rule.watching():
        for folder in unfinished_batches(spec, study, optuna):
            if folders.in_use(folder):
                continue  # another process is running it
            spec.log(f"continuing {folder.name}")
            if reason := unless_taken(spec, study, folder):
                break
        while not reason and (left := spec.trials - counted_trials(study, optuna)) > 0:
            folder = ask_batch(spec, study, optuna, min(spec.batch, left))
            spec.log(f"{folder.name}: {min(spec.batch, left)} trials x {spec.seeds} seeds as one scan")
            if not (reason := unless_taken(spec, study, folder)):
                spec.log(progress_line(study, optuna, spec))
    # a Ctrl-C or SIGTERM between batches (asking, telling) is the rule's: no batch returned it
    return finish(spec, study, optuna, reason or rule.reason)


def unless_taken(spec: TuneSpec, study, folder: Path) -> str | bool:
    """:func:`run_batch`, unless another process sharing the study holds the batch's folder
    (it took the batch between the look and the lock: that process tells its trials)."""
    try:
        return run_batch(spec, study, folder, spec.log)
    except ValueError:
        if folders.in_use(folder):
            spec.log(f"{folder.name}: taken by another process")
            return False
        raise


def progress_line(study, optuna, spec: TuneSpec) -> str:
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    best = study.best_trial
    values = ", ".join(f"{k}={v:.4g}" for k, v in best.params.items())
    return (
        f"{len(done)}/{spec.trials} trials | best {spec.objective.metric} {best.value:.4f} "
        f"(trial {best.number}: {values})"
    )


def trials_table(study, optuna, out_dir: Path, params: tuple[Param, ...], objective: Objective) -> list[dict]:
    """One row per completed trial: its number, objective (mean over seeds) and the spread over
    its seeds, its values and batch; best first."""
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    per_seed: dict[str, list[float]] = {}
    for name in {t.user_attrs["batch"] for t in done}:
        per_seed.update(json.loads((out_dir / name / BATCH_RESULTS).read_text()))
    table = [
        {
            "trial": t.number,
            objective.metric: t.value,
            "std": float(np.std(per_seed[str(t.number)])),
            "seeds": len(per_seed[str(t.number)]),
            **{p.name: t.params[p.name] for p in params},
            "batch": t.user_attrs["batch"],
        }
        for t in done
    ]
    return sorted(table, key=lambda row: -row[objective.metric] if objective.maximize else row[objective.metric])


def best_command(spec: TuneSpec, best: dict) -> str:
    """The ``czjax train`` command that trains the best trial's settings with its first seed."""
    words = ["czjax", "train", "--preset", spec.preset, *spec.overrides]
    for p in spec.params:
        words += ["--" + p.name.replace("_", "-"), f"{best[p.name]:.17g}"]
    words += ["--batches", str(spec.batches), "--seed", str(spec.seed)]
    return shlex.join(words)


def write_figures(study, optuna, out_dir: Path) -> list[Path]:
    """Optuna's optimisation history, parameter importances (PED-ANOVA: no scikit-learn) and
    slice plot as PNGs; the importances need two completed trials or more."""
    import matplotlib

    from czjax.jobs.plots import save_figure

    vis = optuna.visualization.matplotlib
    written = []
    plots: list[tuple[str, Callable[[], Any]]] = [
        (FIGURES[0], lambda: vis.plot_optimization_history(study)),
        (
            FIGURES[1],
            lambda: vis.plot_param_importances(study, evaluator=optuna.importance.PedAnovaImportanceEvaluator()),
        ),
        (FIGURES[2], lambda: vis.plot_slice(study)),
    ]
    with matplotlib.rc_context({"backend": "Agg"}):
        import warnings

        for name, plot in plots:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Optuna marks its matplotlib figures experimental
                try:
                    axes = plot()
                except (ValueError, RuntimeError):  # too few trials for this figure
                    continue
            figure = np.ravel(axes)[0].figure
            save_figure(figure, out_dir / name)
            written.append(out_dir / name)
    return written


def finish(spec: TuneSpec, study, optuna, reason: str | bool) -> TuneResult:
    """The trials table, the best trial and the figures, from the study as it stands."""
    table = trials_table(study, optuna, spec.out_dir, spec.params, spec.objective)
    outputs: list[Path] = [spec.out_dir / STUDY]
    command = None
    if table:
        with (spec.out_dir / TRIALS_TABLE).open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
        command = best_command(spec, table[0])
        best = {**table[0], "command": command}
        (spec.out_dir / BEST).write_text(json.dumps(best, indent=1))
        outputs += [spec.out_dir / TRIALS_TABLE, spec.out_dir / BEST, *write_figures(study, optuna, spec.out_dir)]
    return TuneResult(table, command, reason, outputs)
