"""`czjax train` and `czjax scan`."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from pathlib import Path

from czjax.cli import flags, output


def setting_overrides(args) -> dict:
    """TrainConfig settings given on the command line (``--pool`` implies ``--opponent pool``)."""
    overrides = {name: getattr(args, name) for name in flags.setting_flags() if getattr(args, name) is not None}
    if "pool.members" in overrides:
        overrides["pool.members"] = tuple(overrides["pool.members"])
        overrides.setdefault("opponent", "pool")
    return overrides


def _resumed_spec(args):
    """The RunSpec of the run in --out, which --resume continues with its stored settings; a flag
    that would change them is refused."""
    from czjax.jobs import folders
    from czjax.jobs.spec import RunSpec
    from czjax.learn.settings import HParams, TrainConfig

    named = (*flags.setting_flags(), *flags.hparam_flags(), "seed", "preset", "init_from")
    given = [name for name in named if getattr(args, name) is not None]  # 0, 0.0 and False are given values
    if given:
        raise ValueError(f"--resume continues with the run's settings; drop {flags.flag_name(given[0])}")
    if args.out is None:
        raise ValueError("--resume needs --out: the folder of the run to continue")
    stored = folders.read_run(args.out)
    run = dict(stored["run"])
    if args.batches is not None or args.time_budget is not None:  # a new target extends (or shortens) the run
        run.update(batches=args.batches, time_budget_s=args.time_budget)
    if run.get("batches") is None and run.get("time_budget_s") is None:
        raise ValueError(
            f"the run in {args.out} stores no target (an older czjax wrote it): give --batches or --time-budget"
        )
    return RunSpec(
        TrainConfig.from_dict(stored["config"]),
        HParams.create(**stored["hparams"]),
        args.out,
        seed=run["seed"],
        batches=run["batches"],
        time_budget_s=run["time_budget_s"],
        title=run.get("title", ""),
        init_from=run.get("init_from"),
        **_run_options(args),
    )


def _run_options(args) -> dict:
    """The RunSpec's fields the flags give whether or not the run is resumed."""
    from czjax.jobs import folders

    return dict(
        resume=args.resume,
        overwrite=args.overwrite,
        num_devices=args.devices,
        checkpoint_every=args.checkpoint_every,
        checkpoint_every_s=args.checkpoint_seconds,
        log=lambda m: print(m, flush=True),
        notice=output.stderr,  # a stop's "saved" line: read even when stdout goes into a pipe
        spelling=folders.FLAGS,
    )


def train_spec(args):
    """The :class:`~czjax.jobs.spec.RunSpec` of ``czjax train``: from the preset and the flags, or
    from the run folder on --resume."""
    from czjax.jobs import presets
    from czjax.jobs.spec import RunSpec
    from czjax.learn.settings import HParams

    if args.resume:
        return _resumed_spec(args)
    preset_name = args.preset or "default"
    preset = presets.get_preset(preset_name)
    config = preset.config.override(setting_overrides(args))
    hp = dict(preset.hparams)
    hp.update({k: getattr(args, k) for k in flags.hparam_flags() if getattr(args, k) is not None})
    batches = args.batches if args.batches is not None else (None if args.time_budget else preset.batches)
    seed = args.seed or 0
    return RunSpec(
        config,
        HParams.create(**hp),
        args.out if args.out is not None else f"runs/{preset_name}-seed{seed}",
        seed=seed,
        batches=batches,
        time_budget_s=args.time_budget,
        title=f"czjax train --preset {preset_name} (seed {seed})",
        init_from=args.init_from,
        **_run_options(args),
    )


def cmd_train(args) -> int:
    from czjax.jobs import folders, loop, sinks, stops

    if args.coordinator:
        from czjax.util import devices

        devices.initialize_hosts(args.coordinator, args.num_processes, args.process_id)
    spec = train_spec(args)
    folders.prepare(spec)  # before the header, so that a refused run prints one line only
    if spec.resume and loop.target_reached(spec):
        print(loop.finished_message(spec), flush=True)
        return 0
    if args.wandb:
        sinks.check_wandb()  # the package, and a login or offline mode: before anything is written
    config = spec.config
    print(
        f"training {config.model} ({config.algorithm}) against {config.opponent}, {config.games_per_batch} games "
        f"per batch, {loop.describe_target(spec.batches, spec.time_budget_s)}"
        f"{', starting from the weights in ' + spec.init_from if spec.init_from and not spec.resume else ''}"
        f"; hyperparameters {spec.hparams.to_dict()}; outputs in {spec.out_dir}/",
        flush=True,
    )
    stored = {"config": config.to_dict(), "hparams": spec.hparams.to_dict(), **spec.description()}
    with sinks.opened(
        args.tensorboard, args.wandb, spec.title or str(spec.out_dir), stored, spec.out_dir, resume=spec.resume
    ) as active:
        summary = loop.train(dataclasses.replace(spec, sinks=active))
    try:
        report_run(spec, summary)
    except BrokenPipeError:  # the run's files are saved; only the report could not be printed
        pass
    return stops.exit_code(summary["interrupted"])


def report_run(spec, summary) -> None:
    config, last, nan = spec.config, summary["last"], float("nan")
    head = (
        f"{'stopped' if summary['interrupted'] else 'done'}: {summary['batches']:,} batches, {summary['games']:,} "
        f"games in {summary['elapsed_s']:.0f} s"
    )
    if not last:  # stopped before its first chunk: no metrics yet
        print(f"{head}; no chunk completed, so no metrics yet")
    else:
        print(
            f"{head}; last interval: win rate {last.get('win_rate', nan):.2f} against the training opponent, "
            f"{last.get('eval_win_rate', nan):.2f} against {config.eval_opponent}, entropy "
            f"{last.get('entropy', nan):.2f}, game length {last.get('game_length', nan):.1f}"
            + (
                f", {output.counted(summary['promotions'], 'checkpoint promotion')}"
                if config.opponent == "self"
                else ""
            )
            + (f", {output.counted(summary['promotions'], 'league addition')}" if config.pool.league else "")
        )
    files = ("checkpoint", "portable", "metrics", "dashboard", "run_json")
    written = [summary[k] for k in files if Path(summary[k]).exists()]
    if written:
        print(f"outputs: {', '.join(written)}", flush=True)
    if summary["interrupted"]:  # what must be read after a stop goes to stderr: stdout may be a pipe already closed
        output.stderr(f"continue with: czjax train --resume --out {shlex.quote(str(spec.out_dir))}")


def scan_spec(args, preset, grid: dict):
    """The :class:`~czjax.jobs.spec.ScanSpec` of ``czjax scan``: the preset's settings with the
    flags', the grid's settings times the seeds."""
    from czjax.jobs import folders, scan
    from czjax.jobs.spec import ScanSpec

    return ScanSpec(
        preset.config.override(setting_overrides(args)),
        dict(preset.hparams),
        scan.grid_settings(grid),
        list(range(args.seed, args.seed + args.seeds)),
        Path(args.out or f"runs/scan-{args.preset}"),
        args.batches if args.batches is not None else preset.batches,
        chunk=args.chunk,
        resume=args.resume,
        overwrite=args.overwrite,
        num_devices=args.devices,
        log=lambda m: print(m, flush=True),
        notice=output.stderr,
        spelling=folders.FLAGS,
    )


def cmd_scan(args) -> int:
    from czjax.jobs import folders, presets, scan, sinks, stops

    if args.merge:
        return merge_scan(args)
    preset = presets.get_preset(args.preset)
    grid = scan.parse_grid(args.grid)
    scan.check_sort(args.sort, list(grid))  # everything is checked before anything is written or run
    spec = scan_spec(args, preset, grid)
    launcher = flags.launcher(args)
    if launcher is not None:
        return launch_scan(args, spec, launcher, list(grid))
    folders.prepare(spec)  # before the header
    if args.wandb:
        sinks.check_wandb()
    config, configurations = spec.config, len(spec.settings) * len(spec.seeds)
    print(
        f"scan of {len(spec.settings)} settings x {len(spec.seeds)} seeds = {configurations} configurations of "
        f"{config.model} against {config.opponent}, {config.games_per_batch} games per batch, {spec.batches:,} "
        f"batches each; outputs in {spec.out_dir}/",
        flush=True,
    )
    stored = {"config": config.to_dict(), "grid": args.grid, "seeds": spec.seeds}
    with sinks.opened(
        args.tensorboard, args.wandb, f"scan {spec.out_dir}", stored, spec.out_dir, resume=spec.resume
    ) as active:
        result = scan.train_scan(dataclasses.replace(spec, sinks=active))
    if result.interrupted:  # what must be read after a stop goes to stderr: stdout may be a pipe already closed
        output.stderr("continue with: the same czjax scan command and --resume")
        return stops.exit_code(result.interrupted)
    title = f"czjax scan --preset {args.preset} " + " ".join(args.grid)
    print(scan.write_report(result.rows, spec.out_dir, list(grid), args.sort, title))
    return 0


def scan_title(args, grid_names) -> str:
    return f"czjax scan --preset {args.preset} " + " ".join(args.grid or grid_names)


def launch_scan(args, spec, launcher, grid_names: list[str]) -> int:
    """``czjax scan --launcher``: the scan as an array of shard jobs, then (unless --no-wait) their
    merge into the files and report a one-machine scan writes."""
    from czjax.jobs import launch

    if args.tensorboard or args.wandb:
        raise ValueError("--tensorboard and --wandb log a scan run in this process: not with --launcher")
    shards = args.shards or len(spec.settings)
    jobs = launch.launch(spec, launcher, shards)
    if not jobs:
        print(f"every shard of the scan in {spec.out_dir} has finished", flush=True)
    else:
        ids = ", ".join(str(job.job_id) for job in jobs)
        print(
            f"submitted {len(jobs)} shard jobs ({launcher.kind}): {ids}; logs in {spec.out_dir / launch.JOBS}/",
            flush=True,
        )
    merge_command = f"czjax scan --merge {shlex.quote(str(spec.out_dir))}"
    if args.no_wait:
        print(f"once they finish: {merge_command}")
        return 0
    launch.wait(jobs)
    print(launch.merged_report(spec.out_dir, grid_names, args.sort, scan_title(args, grid_names)))
    return 0


def merge_scan(args) -> int:
    """``czjax scan --merge DIR``: a launched scan's shards gathered, its report written."""
    import json

    from czjax.jobs import launch, scan

    out = Path(args.merge)
    shards = out / launch.SHARDS
    names = list(json.loads(shards.read_text())["scan"]["settings"][0]) if shards.exists() else []
    scan.check_sort(args.sort, names)
    print(launch.merged_report(out, names, args.sort, f"czjax scan --merge {out}"))
    return 0


def add_train_command(commands) -> None:
    from czjax.jobs.presets import PRESETS

    train = commands.add_parser(
        "train",
        help="train a model on device (presets: the blog's examples)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Trains with batches of games and one AdamW step per batch, many batches per compiled chunk. "
            "Writes checkpoint.msgpack, metrics.jsonl (one row per chunk) and dashboard.png to --out.\n\npresets:\n"
            + "\n".join(f"  {name:13s} {p.description} ({p.batches:,} batches)" for name, p in PRESETS.items())
        ),
    )
    train.add_argument("--preset", default=None, help="named settings (default: default); flags override them")
    flags.add_setting_flags(train)
    train.add_argument(
        "--batches",
        type=flags.positive_int,
        default=None,
        help="stop after this many batches in all (default: the preset's)",
    )
    train.add_argument(
        "--time-budget",
        type=flags.positive_float,
        default=None,
        metavar="SECONDS",
        help="stop after this many seconds of training in all (a resumed run counts its earlier time)",
    )
    flags.add_hparam_flags(train)  # one flag per traced hyperparameter (train.HParams)
    train.add_argument("--out", default=None, help="output folder (default: runs/PRESET-seedSEED)")
    flags.add_sink_flags(train)
    train.add_argument("--seed", type=flags.seed, default=None, help="(default: 0)")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out with its stored settings and target (--batches or --time-budget change the "
        "target)",
    )
    train.add_argument(
        "--init-from",
        default=None,
        metavar="FILE",
        help="start the learner and its frozen opponent from these weights: a PyTorch project .pth/.pt, or a "
        "czjax checkpoint (run folder or .msgpack; its parameters only, fresh optimizer state)",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="start again in an --out that already holds a run, deleting it (not with --resume)",
    )
    train.add_argument(
        "--devices",
        type=flags.positive_int,
        default=None,
        metavar="N",
        help="split each batch's games over N devices (default: all of them, every host's; the same run on any number)",
    )
    _add_run_flags(train)


def _add_run_flags(train) -> None:
    """Where and how a run goes on: several hosts, checkpoints."""
    hosts = train.add_argument_group(
        "several hosts",
        "one `czjax train` per host, the same flags on each but --process-id; "
        "--out on a filesystem they share (process 0 writes it)",
    )
    hosts.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="process 0's address, or auto to let JAX detect the cluster (SLURM, Open MPI, Kubernetes, Cloud TPU)",
    )
    hosts.add_argument(
        "--num-processes", type=flags.positive_int, default=None, metavar="N", help="processes (hosts) in all"
    )
    hosts.add_argument(
        "--process-id", type=flags.non_negative_int, default=None, metavar="I", help="this process's number, 0 to N-1"
    )
    train.add_argument(
        "--checkpoint-every",
        type=flags.positive_int,
        default=10,
        metavar="CHUNKS",
        help="checkpoint at least every this many chunks (default: %(default)s)",
    )
    train.add_argument(
        "--checkpoint-seconds",
        type=flags.non_negative_float,
        default=60.0,
        metavar="SECONDS",
        help="and at least every this many seconds of training, so a kill loses at most this much (default: "
        "%(default)s)",
    )
    train.set_defaults(func=cmd_train)


def add_scan_command(commands) -> None:
    scan = commands.add_parser(
        "scan",
        help="a hyperparameter scan (settings x seeds) as one compiled program",
        description=(
            "Runs every configuration of a grid over the traced hyperparameters, times a number of seeds, as one "
            "vmapped program: each configuration has its own parameters, optimizer state, opponent and PRNG stream. "
            "Example: czjax scan --preset ex2-entropy --grid entropy_bonus=0,0.01,0.02,0.05,0.1 --seeds 3 --batches "
            "2000"
        ),
    )
    scan.add_argument("--preset", default="ex2-entropy", help="base settings (default: %(default)s)")
    scan.add_argument(
        "--grid", nargs="+", default=[], metavar="NAME=V1,V2", help="values to scan: " + ", ".join(flags.hparam_flags())
    )
    scan.add_argument("--seeds", type=flags.positive_int, default=1, help="seeds per setting (default: %(default)s)")
    scan.add_argument("--seed", type=flags.seed, default=0, help="first seed (default: %(default)s)")
    scan.add_argument(
        "--batches", type=flags.positive_int, default=None, help="batches per configuration (default: the preset's)"
    )
    flags.add_setting_flags(scan)
    scan.add_argument(
        "--chunk",
        type=flags.positive_int,
        default=None,
        metavar="N",
        help="run the configurations N at a time (same results, less memory)",
    )
    scan.add_argument(
        "--sort", default="eval_win_rate", help="summary order: eval_win_rate, win_rate, entropy or game_length"
    )
    flags.add_sink_flags(scan)
    scan.add_argument("--out", default=None, help="output folder (default: runs/scan-PRESET)")
    scan.add_argument("--resume", action="store_true", help="continue the scan in --out")
    scan.add_argument(
        "--overwrite", action="store_true", help="start again in an --out that already holds a scan, deleting it"
    )
    scan.add_argument(
        "--devices",
        type=flags.positive_int,
        default=None,
        metavar="N",
        help="spread each group's configurations over N local devices (default: all of them)",
    )
    scan.add_argument(
        "--shards",
        type=flags.positive_int,
        default=None,
        metavar="N",
        help="with --launcher: jobs the scan is split into, by settings (by seeds past one a setting) "
        "(default: one a setting)",
    )
    scan.add_argument(
        "--merge",
        metavar="DIR",
        default=None,
        help="gather the finished shards of the launched scan in DIR into its table and figure, and stop",
    )
    flags.add_launcher_flags(scan, "one a shard of the scan's configurations, each shard a scan folder")
    scan.set_defaults(func=cmd_scan)
