"""`czjax tune`: a hyperparameter search whose trials train in batches, each batch one compiled scan."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from czjax.cli import flags, output
from czjax.cli.train import setting_overrides


def tune_spec(args):
    """The :class:`~czjax.jobs.tune.TuneSpec` of ``czjax tune``: the preset's settings with the
    flags', the searched ranges, the objective and the batches of trials."""
    from czjax.jobs import folders, presets, tune

    preset = presets.get_preset(args.preset)
    overrides = setting_overrides(args)
    config = preset.config.override(overrides)
    params = [tune.Param.parse(text) for text in args.param]
    objective = tune.Objective.parse(args.objective)
    tune.check_objective(objective, config)  # before anything is written or run
    return tune.TuneSpec(
        config,
        dict(preset.hparams),
        tuple(params),
        objective,
        Path(args.out or f"runs/tune-{args.preset}"),
        trials=args.trials,
        batch=args.batch,
        batches=args.batches if args.batches is not None else preset.batches,
        seeds=args.seeds,
        seed=args.seed,
        sampler=args.sampler,
        resume=args.resume,
        overwrite=args.overwrite,
        num_devices=args.devices,
        preset=args.preset,
        overrides=tuple(flags.setting_words(overrides)),
        log=(lambda m: None) if args.json else (lambda m: print(m, flush=True)),
        notice=output.stderr,
        spelling=folders.FLAGS,
    )


def cmd_tune(args) -> int:
    from czjax.jobs import folders, stops, tune

    tune.import_optuna()  # the install named before anything else
    spec = tune_spec(args)
    folders.prepare(spec)  # before the header
    if not args.json:
        print(
            f"tune of {spec.trials} trials over {', '.join(p.text() for p in spec.params)}, {spec.batch} trials x "
            f"{spec.seeds} seeds per compiled scan, {spec.batches:,} batches each, {spec.objective.text()} by "
            f"{spec.sampler}; outputs in {spec.out_dir}/",
            flush=True,
        )
    launcher = flags.launcher(args)
    if launcher is None:
        result = tune.run_tune(spec)
    else:
        result = launched(spec, launcher, args)
        if result is None:
            return 0
    if result.interrupted:
        output.stderr(f"continue with: czjax tune --resume and the same flags (--out {spec.out_dir})")
    if args.json:
        print(
            json.dumps(
                {
                    "trials": result.trials,
                    "best_command": result.best_command,
                    "outputs": [str(p) for p in result.outputs],
                    "interrupted": result.interrupted,
                },
                indent=1,
            )
        )
    elif result.trials:
        metric = spec.objective.metric
        print(f"\n{len(result.trials)} trials, best first ({metric}: mean over {spec.seeds} seeds, std):")
        for row in result.trials[:10]:
            values = "  ".join(f"{p.name}={row[p.name]:.4g}" for p in spec.params)
            print(f"  trial {row['trial']:4d}  {row[metric]:.4f} ({row['std']:.4f})  {values}")
        print(f"best trial as a run: {result.best_command}")
        print(f"outputs: {', '.join(str(p) for p in result.outputs)}")
    return stops.exit_code(result.interrupted) if result.interrupted else 0


def launched(spec, launcher, args):
    """``czjax tune --launcher``: --workers jobs sharing the study; once they end (unless
    --no-wait), the tune's result from the study."""
    from czjax.jobs import launch, tune

    jobs = launch.launch_tune(spec, launcher, args.workers)
    ids = ", ".join(str(job.job_id) for job in jobs)
    output.stderr(f"submitted {len(jobs)} workers ({launcher.kind}): {ids}; logs in {spec.out_dir / launch.JOBS}/")
    if args.no_wait:
        output.stderr(
            f"once they finish: czjax tune --resume with the same flags and --out {spec.out_dir} writes the tables"
        )
        return None
    launch.wait(jobs, spec.log)
    optuna = tune.import_optuna()
    return tune.finish(spec, tune.open_study(dataclasses.replace(spec, resume=True), optuna), optuna, False)


def add_tune_command(commands) -> None:

    parser = commands.add_parser(
        "tune",
        help="a hyperparameter search (Optuna) whose trials train in batches, each batch one compiled scan",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Searches traced hyperparameters with Optuna's ask-and-tell: each ask hands out --batch trials, which "
            "train with --seeds seeds each as one vmapped scan (the program czjax scan compiles), and each trial is "
            "told its objective averaged over its seeds. The study is kept in --out as Optuna's journal file: an "
            "interrupted tune continues with --resume, and several processes sharing --out (started with --resume) "
            "share the study. Writes trials.csv, best.json (the best trial as a czjax train command) and Optuna's "
            "figures. Needs Optuna: pip install 'czjax[tune]'.\n\n"
            "Example: czjax tune --preset ex2-entropy --param entropy_bonus=0:0.1 --param learning_rate=1e-4:1e-2:log "
            "--trials 64 --batch 16 --batches 2000 --objective eval_win_rate"
        ),
    )
    add_search_flags(parser)
    flags.add_setting_flags(parser)
    add_output_flags(parser)
    parser.add_argument(
        "--workers",
        type=flags.positive_int,
        default=2,
        metavar="N",
        help="with --launcher: jobs sharing the study, each asking --batch trials at a time (default: %(default)s)",
    )
    flags.add_launcher_flags(parser, "a worker asking for batches of trials from the shared study")
    parser.set_defaults(func=cmd_tune)


def add_search_flags(parser) -> None:
    """What is searched, how, and for how long."""
    from czjax.jobs import tune

    parser.add_argument("--preset", default="ex2-entropy", help="base settings (default: %(default)s)")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        required=True,
        metavar="NAME=LOW:HIGH[:log|:int]",
        help="a range to search (repeatable); any traced hyperparameter: " + ", ".join(flags.hparam_flags()),
    )
    parser.add_argument("--trials", type=flags.positive_int, default=16, help="trials in all (default: %(default)s)")
    parser.add_argument(
        "--batch", type=flags.positive_int, default=8, help="trials per compiled scan (default: %(default)s)"
    )
    parser.add_argument(
        "--seeds", type=flags.positive_int, default=1, help="seeds per trial, averaged (default: %(default)s)"
    )
    parser.add_argument(
        "--seed", type=flags.seed, default=0, help="first seed, and the sampler's (default: %(default)s)"
    )
    parser.add_argument(
        "--batches", type=flags.positive_int, default=None, help="training batches per trial (default: the preset's)"
    )
    parser.add_argument(
        "--objective",
        default="eval_win_rate:max",
        metavar="METRIC[:max|:min]",
        help="a logged metric, each run's mean over its last 20%% of intervals (default: %(default)s)",
    )
    parser.add_argument(
        "--sampler", choices=tune.SAMPLERS, default="tpe", help="Optuna's sampler (default: %(default)s)"
    )


def add_output_flags(parser) -> None:
    """Where the study and the batches' scans go, and how the search is continued."""
    parser.add_argument("--out", default=None, help="output folder (default: runs/tune-PRESET)")
    parser.add_argument(
        "--resume", action="store_true", help="continue the tune in --out (or join it from another process)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="start again in an --out that already holds a tune, deleting it"
    )
    parser.add_argument(
        "--devices",
        type=flags.positive_int,
        default=None,
        metavar="N",
        help="spread each batch's trials over N local devices (default: all of them)",
    )
    parser.add_argument("--json", action="store_true", help="print the trials table and the best command as JSON")
