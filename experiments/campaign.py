"""Named experiment steps, each resumable within a time limit: ``run`` works on a step for at
most ``--max-seconds``, stops cleanly (its checkpoint written) and continues where it stopped the
next time, so a long experiment runs as a series of short calls on whatever machine is at hand.

Every step
- keeps its state in its work folder ``runs/campaign/<step>/`` (a later call continues from it,
  on this machine or on another one the folder is copied to);
- after every call, done or not, writes its results to ``docs/results/<study>/<step>/``, beside
  the rest of its study's (``experiments/<study>/README.md``):
  ``summary.json`` (state, progress, command, wall time, machine), ``results.md`` (the milestone
  table), figures, and metrics small enough to commit (gzipped, decimated); ``--copy-to DIR``
  also copies those files to ``DIR/<step>/`` (for a machine whose outputs are read from one folder).

    python experiments/campaign.py status                    # what is done, what is next
    python experiments/campaign.py run next --max-seconds 540  # on a GPU, the next step that gains from one
    python experiments/campaign.py run ex1-8seeds --max-seconds 540 --copy-to /tmp/results

``--scale F`` runs F of each step's work (a test or a CPU smoke run); a step's results record
the scale they were run at, and ``status`` counts only full-scale results as done.

This is the runner only: each step is defined in its study's folder, in the study's module of
steps (``experiments/<study>/<name>_steps.py``, its ``STEPS``), and the table of steps is built
from those modules (``STEP_MODULES``, in ``ORDER``); what a step is, and what steps share, is
``steps.py``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import common
from czjax.cli import flags
from steps import ROOT, Context, Step, machine

RESULTS = ROOT / "docs" / "results"
WORK = ROOT / "runs" / "campaign"

# Each study's module of steps, ``experiments/<study>/<module>.py``, whose ``STEPS`` maps step
# names to steps; module names are unique across the folders, so each imports by its bare name.
STEP_MODULES = {
    "benchmarks": "benchmark_steps",
    "strength": "strength_steps",
    "blog-examples": "blog_steps",
    "test-suite": "suite_steps",
    "same-start": "same_start_steps",
    "mixed-precision": "mixed_precision_steps",
    "soft-vs-hard": "soft_vs_hard_steps",
}
# The order `status` lists the steps in and `run next` picks them: the profile first, since on a
# GPU it says where the time of the steps after it goes (and which convolutions examples 3-5
# run: blog_steps.measured_conv); then the strength recipe, the blog's
# examples (example 3 first), the suite, the benchmark tables and the comparisons at scale.
ORDER = (
    "profile",
    "strength-10min",
    "strength-ptemp",
    "strength-seeds",
    "ex3-8seeds",
    "ex1-8seeds",
    "ex2-8seeds",
    "ex4-8seeds",
    "ex5-8seeds",
    "suite-gpu",
    "bench",
    "profile-graphs",
    "same-start",
    "mixed-ex3",
    "soft-vs-hard",
)


def step_table() -> dict[str, Step]:
    """Every study's steps in one table, in ORDER; a step missing from ORDER, or named there and
    defined by no study, is an error at import."""
    common.use(*STEP_MODULES)
    found: dict[str, Step] = {}
    for module in STEP_MODULES.values():
        found.update(importlib.import_module(module).STEPS)
    if sorted(found) != sorted(ORDER):
        raise ValueError(f"campaign: the studies' steps {sorted(found)} are not ORDER's {sorted(ORDER)}")
    return {name: found[name] for name in ORDER}


STEPS = step_table()


# --- Results: files, status, the copy ---------------------------------------------------------


def results_folder(results_root: Path, name: str) -> Path:
    """Where step ``name`` writes its results: ``<results_root>/<study>/<step>/``."""
    return results_root / STEPS[name].study / name


def read_summary(results_root: Path, name: str) -> dict | None:
    path = results_folder(results_root, name) / "summary.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def state_of(summary: dict | None) -> str:
    if summary is None:
        return "not started"
    if summary.get("scale", 1.0) != 1.0:
        return f"run at scale {summary['scale']} only ({100 * summary.get('progress', 0):.0f}%)"
    return "done" if summary.get("done") else f"partial ({100 * summary.get('progress', 0):.0f}%)"


def next_step(results_root: Path, on_gpu: bool | None = None) -> str | None:
    """The first step not done; with ``on_gpu`` True only those that gain from a GPU, with False
    only those that do not (None: any)."""
    return next(
        (
            name
            for name, step in STEPS.items()
            if state_of(read_summary(results_root, name)) != "done" and on_gpu in (None, step.gains_from_gpu)
        ),
        None,
    )


def status(results_root: Path) -> str:
    lines = [f"{'step':16s} {'state':34s} what"]
    for name, step in STEPS.items():
        summary = read_summary(results_root, name)
        when = f" (last run {summary['finished']}, {summary.get('machine', '?')})" if summary else ""
        lines.append(f"{name:16s} {state_of(summary):34s} {step.description}{when}")
    upcoming = next_step(results_root)
    lines.append(f"next: {upcoming}" if upcoming else "every step is done")
    for where, on_gpu in (("a GPU", True), ("the CPU", False)):
        name = next_step(results_root, on_gpu)
        if name:
            lines.append(f"  next on {where}: python experiments/campaign.py run {name} --max-seconds 540")
    return "\n".join(lines)


def running_on_gpu() -> bool:
    import jax

    return jax.default_backend() == "gpu"


def copy_out(results: Path, name: str, copy_to: str | None) -> None:
    """The step's result files also to ``copy_to/<step>/`` (None: nowhere)."""
    if not copy_to:
        return
    target = Path(copy_to) / name
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(results.iterdir()):
        if path.is_file():
            shutil.copy2(path, target / path.name)


def run_step(
    name: str,
    max_seconds: float,
    scale: float,
    results_root: Path,
    work_root: Path,
    log=print,
    copy_to: str | None = None,
) -> dict:
    step = STEPS[name]
    results = results_folder(results_root, name)
    results.mkdir(parents=True, exist_ok=True)
    work = work_root / name
    work.mkdir(parents=True, exist_ok=True)
    begun = time.monotonic()
    # no new piece of work (a chunk, a command) starts in the last 15% of the call: a chunk
    # started before that point ends inside it
    ctx = Context(work=work, results=results, stop_at=begun + 0.85 * max_seconds, scale=scale, log=log)
    log(f"campaign: {name}: {step.description} (at most {max_seconds:.0f} s{'' if scale == 1 else f', scale {scale}'})")
    summary = step.run(ctx)
    previous = read_summary(results_root, name) or {}
    summary.update(
        step=name,
        description=step.description,
        scale=scale,
        machine=machine(),
        finished=time.strftime("%Y-%m-%d %H:%M:%S"),
        call_s=time.monotonic() - begun,
        calls=previous.get("calls", previous.get("slots", 0)) + 1,
        command=f"python experiments/campaign.py run {name} --max-seconds {max_seconds:.0f}",
    )
    (results / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    copy_out(results, name, copy_to)
    log(f"campaign: {name}: {state_of(summary)}; results in {results}")
    return summary


def launch_step(launcher, name: str, args, argv) -> int:
    """``run STEP --launcher ...``: the step as one submitit job that calls this script for the
    step (at most --max-seconds a call, exit 3 while not done) until it is done, requeued after
    preemption or its time limit; waits for it unless --no-wait."""
    from czjax.jobs import launch

    again = ["--results", args.results, "--work", args.work, "run", name, "--max-seconds", str(args.max_seconds)]
    again += ["--scale", str(args.scale)] + (["--copy-to", args.copy_to] if args.copy_to else [])
    job_folder = Path(args.work) / name / launch.JOBS
    executor = launcher.executor(job_folder)
    job = executor.submit(launch.CommandJob([sys.executable, str(Path(__file__).resolve()), *again], os.getcwd(), (3,)))
    print(f"campaign: {name}: submitted as job {job.job_id} ({launcher.kind}); its log in {job_folder}/", flush=True)
    if args.no_wait:
        return 0
    launch.wait([job])
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--results", default=str(RESULTS), help="where results are written and read (default: docs/results)"
    )
    parser.add_argument("--work", default=str(WORK), help="the steps' work folders (default: runs/campaign)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="every step: done, partial or not started; and the next")
    run = commands.add_parser("run", help="run a step (or 'next') for at most --max-seconds")
    run.add_argument("step", help=f"'next' or one of: {', '.join(STEPS)}")
    run.add_argument(
        "--max-seconds", type=float, default=540.0, help="stop cleanly before this many seconds (default: %(default)s)"
    )
    run.add_argument(
        "--copy-to", metavar="DIR", default=None, help="also copy the step's results to DIR/<step>/ (default: no copy)"
    )
    run.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of the step's work, for tests and CPU smoke runs (default: 1)",
    )
    flags.add_launcher_flags(run, "one: the step, run in calls of at most --max-seconds until it is done")
    return parser


def print_status(results_root: Path) -> int:
    try:
        print(status(results_root), flush=True)
    except BrokenPipeError:  # `status | head`: as a process ended by SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    results_root, work_root = Path(args.results), Path(args.work)
    if args.command == "status":
        return print_status(results_root)
    name = next_step(results_root, running_on_gpu()) if args.step == "next" else args.step
    if name is None:
        print("campaign: every step is done")
        return 0
    if name not in STEPS:
        parser.error(f"unknown step {name!r}; choose 'next' or one of {', '.join(STEPS)}")
    if not args.max_seconds > 0 or not 0 < args.scale <= 1:
        parser.error("--max-seconds must be positive and --scale in (0, 1]")
    try:
        launcher = flags.launcher(args)
        if launcher is not None:
            return launch_step(launcher, name, args, argv)
        summary = run_step(
            name,
            args.max_seconds,
            args.scale,
            results_root,
            work_root,
            log=lambda m: print(m, flush=True),
            copy_to=args.copy_to,
        )
    except (ValueError, OSError) as err:
        print(f"campaign: {name}: {err}", file=sys.stderr)
        return 2
    return 0 if summary.get("done") else 3


if __name__ == "__main__":
    sys.exit(main())
