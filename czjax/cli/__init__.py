"""The ``czjax`` command line."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import shlex
import sys
from pathlib import Path

# JAX's integers are 32-bit unless x64 is enabled: a count or seed beyond this does not fit.
INT32_MAX = 2**31 - 1


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    if value > INT32_MAX:
        raise argparse.ArgumentTypeError(
            f"{value} does not fit in a 32-bit integer: expected {what} up to {INT32_MAX:,}"
        )
    return value


def _positive_int(text: str) -> int:
    return _int_at_least(text, 1, "a positive integer")


def _non_negative_int(text: str) -> int:
    return _int_at_least(text, 0, "an integer >= 0")


_seed = _non_negative_int


def _port(text: str) -> int:
    value = _non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def _batch(text: str) -> int:
    value = _positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("a batch needs at least 2 games (half with each side first)")
    return value


def _bench(args, what: str, header: str, settings, measure, fmt) -> int:
    """Run ``measure`` for each setting, printing a table row as each finishes (to stderr with
    ``--json``, whose JSON document goes to stdout)."""
    from czjax.bench import harness

    log = harness.stderr if args.json else print
    log(
        f"czjax bench {what} on {harness.machine_description()}; median of {args.runs} timed runs, compile time separate"
    )
    log(header)
    rows = []
    for setting in settings:
        for row in measure(setting, log):
            rows.append(row)
            log(fmt(row))
    if args.json:
        print(json.dumps({"machine": harness.machine_description(), "rows": rows}, indent=1))
    return 0


def cmd_bench_rollout(args) -> int:
    from czjax.bench import harness, profiling

    def measure(setting, log):
        player, batch = setting
        profile = Path(args.profile) / f"{player}-{batch}" if args.profile else None
        row = harness.bench_rollout_czjax(player, batch, args.runs, profile)
        if profile is not None:
            log(f"profile of one batch in {profile} (ui.perfetto.dev opens perfetto_trace.json.gz):")
            log(profiling.format_phases(list(row["phases"].items())))
        rows = [row]
        if player == "random-punisher":
            row["vs_pytorch"] = row["games_per_s"] / harness.PYTORCH_PUNISHER_GAMES_PER_S
        if player == "random" and not args.no_peer:
            peer = harness.bench_rollout_pgx(batch, args.runs)
            if peer is None:
                log("  (pgx not installed: `pip install czjax[bench]` to measure it side by side)")
                args.no_peer = True
            else:
                peer["czjax_speedup"] = row["games_per_s"] / peer["games_per_s"]
                rows.append(peer)
        return rows

    def fmt(row):
        extra = ""
        if "czjax_speedup" in row:
            extra = f"   czjax/pgx = {row['czjax_speedup']:.1f}x"
        elif "vs_pytorch" in row:
            extra = (
                f"   {row['vs_pytorch']:,.0f}x the PyTorch project's {harness.PYTORCH_PUNISHER_GAMES_PER_S:.0f} games/s"
            )
        return harness.format_rollout_row(row) + extra

    settings = [(player, batch) for player in args.player for batch in args.batch]
    return _bench(args, "rollout", harness.ROLLOUT_HEADER, settings, measure, fmt)


def cmd_bench_train(args) -> int:
    from czjax.bench import harness, profiling

    settings = [
        (model, games, n, flow)
        for model in args.model
        for games in args.games_per_batch
        for n in args.devices
        for flow in args.control_flow
    ]

    def measure(setting, log):
        model, games, n, flow = setting
        profile = Path(args.profile) / f"{model}-{games}-{n}dev-{flow}" if args.profile else None
        settings = {name: getattr(args, name) for name in ("precision", "compaction", "conv", "norm", "unroll")}
        settings["control_flow"] = flow
        row = harness.bench_train(model, games, args.runs, args.steps, n, profile, **settings)
        if profile is not None:
            log(f"profile of one chunk in {profile} (ui.perfetto.dev opens perfetto_trace.json.gz); per iteration:")
            log(profiling.format_phases(list(row["phases"].items())))
        if not args.no_peer and not harness.add_torch_peer(row, args.runs, args.peer_steps or args.steps):
            log("  (PyTorch not installed: `pip install torch==2.13.0` to time the PyTorch iteration side by side)")
            args.no_peer = True
        return [row]

    return _bench(
        args,
        f"train ({args.steps} iterations per run)",
        harness.TRAIN_HEADER,
        settings,
        measure,
        harness.format_train_row,
    )


def cmd_bench_scan(args) -> int:
    from czjax.bench import harness

    return _bench(
        args,
        "scan (vmapped and sequential interleaved)",
        harness.SCAN_HEADER,
        args.k,
        lambda k, log: [harness.bench_scan(k, args.games_per_batch, args.steps, args.runs, args.model)],
        harness.format_scan_row,
    )


def cmd_bench_search(args) -> int:
    from czjax.bench import harness

    settings = [(algo, batch, sims) for algo in args.algo for batch in args.batch for sims in args.sims]
    return _bench(
        args,
        "search (czjax's tree; mctx over czjax's rules and over pgx, same network)",
        harness.SEARCH_HEADER,
        settings,
        lambda s, log: harness.bench_search(*s, args.runs, peers=not args.no_peer),
        harness.format_search_row,
    )


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


# Flags that change what is compiled (TrainConfig, nested settings as "group.name"); with
# --resume they come from the run folder instead.
SETTING_FLAGS = {
    "model": "model",
    "init": "init",
    "games_per_batch": "games_per_batch",
    "opponent": "opponent",
    "algorithm": "algorithm",
    "search": "search",
    "mirror": "mirror",
    "batches_per_chunk": "batches_per_chunk",
    "eval_games": "eval_games",
    "ppo_epochs": "ppo.epochs",
    "ppo_clip": "ppo.clip",
    "target_kl": "ppo.target_kl",
    "ppo_kl_stop": "ppo.kl_stop",
    "ppo_bootstrap": "ppo.bootstrap",
    "pool": "pool.members",
    "league": "pool.league",
    "precision": "precision",
    "compaction": "compaction",
    "conv": "conv",
    "sample_plies": "sample_plies",
    "unroll": "unroll",
    "norm": "norm",
    "replay_capacity": "replay.capacity",
    "replay_batch": "replay.batch",
    "replay_steps": "replay.steps",
    "openings": "openings",
    "both_sides": "both_sides",
    "solver_eval": "solver_eval",
    "control_flow": "control_flow",
}


def _hparam_flags() -> tuple[str, ...]:
    from czjax.learn.train import hparam_names

    return hparam_names()


HPARAM_ALIASES = {"learning_rate": ("--lr",), "discount": ("--gamma",)}
HPARAM_HELP = {
    "temperature": "sampling temperature of the learner (default: the preset's)",
    "value_mix": "search-based training: the weight m of the search's root value in the value target, "
    "(1 - m) * return + m * Q (default 0: the return alone)",
}


def _setting_overrides(args) -> dict:
    """TrainConfig settings given on the command line (``--pool`` implies ``--opponent pool``)."""
    overrides = {field: getattr(args, flag) for flag, field in SETTING_FLAGS.items() if getattr(args, flag) is not None}
    if args.pool is not None:
        overrides["pool.members"] = tuple(args.pool)
        overrides.setdefault("opponent", "pool")
    return overrides


def train_settings(args):
    """(config, hparams, run) from the preset and the flags, or from the run folder on --resume;
    ``run`` holds seed, batches, time_budget_s and title."""
    from czjax.learn.train import HParams, TrainConfig
    from czjax.run import loop, presets

    flags = (*SETTING_FLAGS, *_hparam_flags(), "no_baseline", "seed", "preset", "init_from")
    given = [
        f for f in flags if getattr(args, f) is not None and getattr(args, f) is not False
    ]  # 0 and 0.0 are given values
    if args.resume:
        if given:
            raise ValueError(f"--resume continues with the run's settings; drop --{given[0].replace('_', '-')}")
        stored = loop.read_run(args.out)
        run = dict(stored["run"])
        if args.batches is not None or args.time_budget is not None:  # a new target extends (or shortens) the run
            run.update(batches=args.batches, time_budget_s=args.time_budget)
        if run.get("batches") is None and run.get("time_budget_s") is None:
            raise ValueError(
                f"the run in {args.out} stores no target (an older czjax wrote it): give --batches or --time-budget"
            )
        return TrainConfig.from_dict(stored["config"]), HParams.create(**stored["hparams"]), run
    preset_name = args.preset or "default"
    preset = presets.get_preset(preset_name)
    overrides = _setting_overrides(args)
    if args.no_baseline:
        overrides["baseline"] = False
    config = preset.config.override(overrides)
    hp = dict(preset.hparams)
    hp.update({k: getattr(args, k) for k in _hparam_flags() if getattr(args, k) is not None})
    batches = args.batches if args.batches is not None else (None if args.time_budget else preset.batches)
    seed = args.seed or 0
    run = {
        "seed": seed,
        "batches": batches,
        "time_budget_s": args.time_budget,
        "title": f"czjax train --preset {preset_name} (seed {seed})",
        "init_from": args.init_from,
    }
    return config, HParams.create(**hp), run


def cmd_train(args) -> int:
    from czjax.run import loop, sinks

    if args.out is None:
        if args.resume:
            raise ValueError("--resume needs --out: the folder of the run to continue")
        args.out = f"runs/{args.preset or 'default'}-seed{args.seed or 0}"
    if args.coordinator:
        from czjax.util import devices

        devices.initialize_hosts(args.coordinator, args.num_processes, args.process_id)
    config, hparams, run = train_settings(args)
    loop.check_out_dir(Path(args.out))
    loop.check_unlocked(Path(args.out))  # another process training there: one line, and its files untouched
    if not args.resume and not args.coordinator:  # before the header, so a refused run prints one line only
        loop.guard_fresh(Path(args.out), loop.RUN_FILES, args.overwrite)
    print(
        f"training {config.model} ({config.algorithm}) against {config.opponent}, {config.games_per_batch} games per batch, "
        f"{loop.describe_target(run['batches'], run['time_budget_s'])}"
        f"{', starting from the weights in ' + run['init_from'] if run.get('init_from') and not args.resume else ''}"
        f"; hyperparameters {hparams.to_dict()}; "
        f"outputs in {args.out}/",
        flush=True,
    )
    with sinks.opened(
        args.tensorboard,
        args.wandb,
        run.get("title") or str(args.out),
        {"config": config.to_dict(), "hparams": hparams.to_dict(), **run},
        Path(args.out),
    ) as active:
        summary = loop.run(
            config,
            hparams,
            args.out,
            seed=run["seed"],
            batches=run["batches"],
            time_budget_s=run["time_budget_s"],
            resume=args.resume,
            overwrite=args.overwrite,
            checkpoint_every=args.checkpoint_every,
            checkpoint_every_s=args.checkpoint_seconds,
            log=lambda m: print(m, flush=True),
            title=run.get("title", ""),
            num_devices=args.devices,
            init_from=run.get("init_from"),
            sinks=active,
        )
    try:
        report_run(args, config, summary)
    except BrokenPipeError:  # the run's files are saved; only the report could not be printed
        pass
    return EXIT_CODES.get(summary["interrupted"], 0) if summary["interrupted"] else 0


# Exit statuses of a run stopped before its target (after saving): as the shell reports a
# process ended by that signal.
EXIT_CODES = {"interrupt": 130, "SIGTERM": 143, "broken pipe": 141}


def report_run(args, config, summary) -> None:
    last = summary["last"]
    print(
        f"{'stopped' if summary['interrupted'] else 'done'}: {summary['batches']:,} batches, {summary['games']:,} games "
        f"in {summary['elapsed_s']:.0f} s; last interval: win rate {last.get('win_rate', float('nan')):.2f} against the "
        f"training opponent, {last.get('eval_win_rate', float('nan')):.2f} against RandomPunisher, entropy "
        f"{last.get('entropy', float('nan')):.2f}, game length {last.get('game_length', float('nan')):.1f}"
        + (f", {summary['promotions']} checkpoint promotions" if config.opponent == "self" else "")
        + (f", {summary['promotions']} league additions" if config.pool.league else "")
    )
    print(f"outputs: {summary['checkpoint']}, {summary['metrics']}, {summary['dashboard']}, {summary['run_json']}")
    if summary["interrupted"]:
        print(f"continue with: czjax train --resume --out {shlex.quote(str(args.out))}", flush=True)


def cmd_scan(args) -> int:
    from czjax.run import loop, presets, scan, sinks

    preset = presets.get_preset(args.preset)
    grid = scan.parse_grid(args.grid)
    scan.check_sort(args.sort, list(grid))  # everything is checked before anything is written or run
    config = preset.config.override(_setting_overrides(args))
    settings = scan.grid_settings(grid)
    seeds = list(range(args.seed, args.seed + args.seeds))
    batches = args.batches if args.batches is not None else preset.batches
    out = Path(args.out or f"runs/scan-{args.preset}")
    loop.check_out_dir(out)
    loop.check_unlocked(out, "scan")
    if args.resume:
        scan.check_resumable(out)  # before the header
    print(
        f"scan of {len(settings)} settings x {len(seeds)} seeds = {len(settings) * len(seeds)} configurations of "
        f"{config.model} against {config.opponent}, {config.games_per_batch} games per batch, {batches:,} batches each; "
        f"outputs in {out}/",
        flush=True,
    )
    try:
        with (
            loop.sigterm_as_stop(),
            sinks.opened(
                args.tensorboard,
                args.wandb,
                f"scan {out}",
                {"config": config.to_dict(), "grid": args.grid, "seeds": seeds},
                out,
            ) as active,
        ):
            rows = scan.run_scan(
                config,
                dict(preset.hparams),
                settings,
                seeds,
                out,
                batches,
                chunk=args.chunk,
                resume=args.resume,
                overwrite=args.overwrite,
                log=lambda m: print(m, flush=True),
                num_devices=args.devices,
                sinks=active,
            )
    except (KeyboardInterrupt, loop.Stopped) as stop:
        print(
            f"{'SIGTERM' if isinstance(stop, loop.Stopped) else 'interrupted'}: the scan is saved after its last completed chunk; "
            f"continue with the same command and --resume",
            file=sys.stderr,
        )
        return 143 if isinstance(stop, loop.Stopped) else 130
    print(
        scan.write_report(rows, out, list(grid), args.sort, f"czjax scan --preset {args.preset} " + " ".join(args.grid))
    )
    return 0


def _add_sink_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tensorboard",
        default=None,
        metavar="DIR",
        help="also log every metrics.jsonl row to TensorBoard event files in DIR (a scan: a subfolder per "
        "configuration); needs pip install 'czjax[tensorboard]'",
    )
    parser.add_argument(
        "--wandb",
        default=None,
        metavar="PROJECT",
        help="also log every metrics.jsonl row to a Weights & Biases run in PROJECT (a scan: one run, a series "
        "per configuration; WANDB_MODE=offline keeps it local); needs pip install 'czjax[wandb]'",
    )


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """The static settings (SETTING_FLAGS) that override a preset, for train and scan."""
    from czjax.compaction import COMPACTION_MODES
    from czjax.learn.algorithms import ALGORITHMS
    from czjax.learn.train import OPPONENTS, PPO_KL_STOPS
    from czjax.models import CONV_METHODS, INITS, MODELS, NORM_METHODS
    from czjax.util.precision import PRECISIONS

    parser.add_argument(
        "--model",
        default=None,
        help=f"the network: {', '.join(MODELS)}, or resnet[:blocks=B,channels=C] (default 5 x 64) (default: the preset's)",
    )
    parser.add_argument("--games-per-batch", type=_batch, default=None, help="games per batch (one update each)")
    parser.add_argument(
        "--opponent",
        default=None,
        help=f"{', '.join(OPPONENTS)}: self is a frozen copy of the learner, promoted at 52%%; current is the "
        "learner itself (AlphaZero's self-play); pool needs --pool",
    )
    parser.add_argument(
        "--algorithm",
        default=None,
        choices=list(ALGORITHMS),
        help="; ".join(f"{name}: {a.description}" for name, a in ALGORITHMS.items()),
    )
    parser.add_argument(
        "--search",
        default=None,
        metavar="SEARCH[:OPTIONS]",
        help="the search that plays the games of alpha and alphazero, e.g. mcts:sims=32,noise=0.25 or "
        "rollout:width=4,depth=4 (searches and options as in a player spec: czjax eval accuracy --help)",
    )
    parser.add_argument("--mirror", action="store_true", default=None, help="add every position flipped left-right")
    parser.add_argument(
        "--pool",
        nargs="+",
        default=None,
        metavar="PLAYER",
        help="opponents for --opponent pool: random, random-punisher, checkpoint files; each batch draws one, "
        "favouring those the learner beats least",
    )
    parser.add_argument(
        "--league",
        action="store_true",
        default=None,
        help="add a frozen copy of the learner to the pool whenever it beats every member",
    )
    parser.add_argument("--ppo-epochs", type=_positive_int, default=None)
    parser.add_argument("--target-kl", type=_non_negative_float, default=None)
    parser.add_argument("--ppo-clip", type=_non_negative_float, default=None)
    parser.add_argument(
        "--ppo-bootstrap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="PPO with A2C's one-step TD target in place of the Monte-Carlo return, as the PyTorch project's "
        "example 5 (bootstrap_value=True; the ex5-ppo preset's default)",
    )
    parser.add_argument(
        "--ppo-kl-stop",
        default=None,
        choices=list(PPO_KL_STOPS),
        help="after-step (default, as the PyTorch project): the epoch whose KL exceeds --target-kl still "
        "takes its step, then PPO stops; before-step: it stops without that step",
    )
    parser.add_argument(
        "--batches-per-chunk",
        "--eval-every",
        dest="batches_per_chunk",
        type=_positive_int,
        default=None,
        metavar="BATCHES",
        help="batches per compiled chunk: log, evaluate against RandomPunisher, and check the clock this often",
    )
    parser.add_argument(
        "--eval-games", type=_batch, default=None, help="games against RandomPunisher per evaluation (default 100)"
    )
    parser.add_argument(
        "--precision",
        default=None,
        metavar="|".join(PRECISIONS),
        help="float32 matrix products: default (the backend's: TF32-class on an NVIDIA GPU, exact on a CPU), "
        "highest (full float32), bf16 (bfloat16 products) or mixed (bfloat16 activations and products, "
        "float32 parameters and optimizer state)",
    )
    parser.add_argument(
        "--replay-capacity",
        type=_non_negative_int,
        default=None,
        metavar="POSITIONS",
        help="search-based training from an on-device replay buffer of this many positions (circular; "
        "default 0: train on each batch as it comes)",
    )
    parser.add_argument(
        "--replay-batch",
        type=_positive_int,
        default=None,
        metavar="POSITIONS",
        help="positions drawn uniformly from the replay buffer for each step (default 1024)",
    )
    parser.add_argument(
        "--replay-steps",
        type=_positive_int,
        default=None,
        metavar="STEPS",
        help="gradient steps per batch of games, each on a fresh draw from the replay buffer (default 1); "
        "a position is trained on about STEPS x POSITIONS / positions-per-batch times (metric replay_reuse)",
    )
    parser.add_argument(
        "--openings",
        type=_non_negative_int,
        default=None,
        metavar="PLIES",
        help="start each game from a position drawn uniformly from every distinct position 0..PLIES plies deep "
        "(at most 6; default 0: the empty board)",
    )
    parser.add_argument(
        "--control-flow",
        choices=("auto", "cond", "static"),
        default=None,
        help="cond: skip finished pairs of plies, idle chunks and PPO's stopped epochs with lax.cond; static: compute "
        "them under masks, a program with no data-dependent branch (a GPU's host round trip per step at small "
        "batches); the same results; auto: by backend (default)",
    )
    parser.add_argument(
        "--solver-eval",
        choices=("off", "network", "search"),
        default=None,
        help="after every chunk, score the network's (or the training search's) move on Pons' six sets and the "
        "public solver positions, on the device: metrics pons_*_error (%%, AlphaZero.jl's measure), "
        "public_optimal, public_keeps (default: network for the search-based presets, else off)",
    )
    parser.add_argument(
        "--both-sides",
        action="store_true",
        default=None,
        help="with --opponent current and a search-based algorithm: train on both players' positions",
    )
    parser.add_argument(
        "--sample-plies",
        type=_non_negative_int,
        default=None,
        metavar="PLIES",
        help="sample moves at the temperature on the game's first PLIES plies only, then play the most likely "
        "(the most visited, for a search): AlphaZero's schedule (default: sample throughout)",
    )
    parser.add_argument(
        "--unroll",
        type=_positive_int,
        default=None,
        metavar="PAIRS",
        help="pairs of plies per step of the rollout's compiled loop (default 1): fewer loop steps, which "
        "each wait on the host on a GPU, for a larger program; the same games",
    )
    parser.add_argument(
        "--norm",
        default=None,
        metavar="|".join(NORM_METHODS),
        help="Mk4's GroupNorm layers: flax (nn.GroupNorm), grouped (normalised in the grouped shape) or auto "
        "(the default: chosen per backend by measurement)",
    )
    parser.add_argument(
        "--conv",
        default=None,
        metavar="|".join(CONV_METHODS),
        help="Mk4's 3x3 convolutions: im2col (patches and one matmul), xla (lax.conv: cuDNN on a GPU) or "
        "auto (the default: chosen per backend by measurement, im2col on a CPU)",
    )
    parser.add_argument(
        "--compaction",
        default=None,
        metavar="|".join(COMPACTION_MODES),
        help="skip finished games in the rollout and invalid positions in the gradient when the model is "
        "expensive enough: on (both), loss (the gradient only), off (neither), auto (the default: on, "
        "except that on a GPU rollouts of fewer than 4,096 games evaluate every board, as measured)",
    )
    parser.add_argument(
        "--init",
        default=None,
        metavar="|".join(INITS),
        help="fresh parameters: torch (PyTorch's default initialisation, as the PyTorch project; the default) "
        "or flax (Flax's LeCun-normal kernels and zero biases, czjax's before)",
    )


def _print_report(args, report: dict, fmt) -> int:
    print(json.dumps(report, indent=1) if args.json else fmt(report))
    return 0


# A game between trained players lasts about 22 plies, 11 moves per side (for the cost notes).
AVERAGE_MOVES_PER_SIDE = 11


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _announced(agent, moves: int, what: str):
    """``agent``, after saying on stderr when ``moves`` of its moves are a large job (a search)."""
    note = agent.cost_note(moves, what)
    if note:
        _stderr(note)
    return agent


def cmd_eval_accuracy(args) -> int:
    from czjax import agents
    from czjax.evaluate import solver

    positions = solver.load_positions(args.positions)
    agent = _announced(agents.load_agent(args.player), len(positions["boards"]), "the positions")
    return _print_report(args, solver.accuracy(agent, positions, log=_stderr), solver.format_accuracy)


def cmd_eval_pons(args) -> int:
    from czjax import agents
    from czjax.evaluate import solver

    sets = solver.load_pons(args.dir)
    agent = _announced(
        agents.load_agent(args.player), sum(len(data["boards"]) for data in sets.values()), "Pons' positions"
    )
    return _print_report(args, solver.pons(agent, sets, log=_stderr), solver.format_pons)


def cmd_eval_puzzles(args) -> int:
    from czjax import agents
    from czjax.evaluate import puzzles

    data = puzzles.load(args.puzzles)
    agent = _announced(agents.load_agent(args.player), len(data["boards"]), "the puzzles")
    return _print_report(args, puzzles.score(agent, data, log=_stderr), puzzles.format_score)


def cmd_eval_make_puzzles(args) -> int:
    from czjax.evaluate import puzzles
    from czjax.run import loop

    loop.check_out_file(Path(args.out))  # before generating
    print(f"generating {args.per_kind:,} puzzles of each kind from seed {args.seed}", file=sys.stderr)
    records = puzzles.generate(args.seed, args.per_kind, log=lambda m: print(m, file=sys.stderr))
    puzzles.write(args.out, records)
    print(f"wrote {len(records):,} puzzles to {args.out}")
    return 0


def cmd_tournament(args) -> int:
    from czjax import agents
    from czjax.evaluate import tournament

    players = [agents.load_agent(spec) for spec in args.players]
    log = (lambda m: print(m, file=sys.stderr)) if args.json else print
    log(f"round robin between {len(players)} players, {args.games} games per pair")
    for agent in players:  # a search's moves: about 11 per game, in every pair it plays
        _announced(
            agent,
            args.games * AVERAGE_MOVES_PER_SIDE * (len(players) - 1),
            f"its {args.games * (len(players) - 1):,} games",
        )
    report = tournament.tournament(players, args.games, anchor=args.anchor, seed=args.seed, log=log)
    return _print_report(args, report, tournament.format_tournament)


def cmd_play(args) -> int:
    from czjax import agents
    from czjax.evaluate import interactive

    agent = agents.load_agent(args.player)
    interactive.play(agent, first=args.first, temperature=agent.temperature(args.temperature), seed=args.seed)
    return 0


def cmd_analyze(args) -> int:
    from czjax import agents
    from czjax.evaluate import interactive

    report = interactive.analyze(
        agents.load_agent(args.player), args.moves, temperature=args.temperature, seed=args.seed
    )
    return _print_report(args, report, interactive.format_analysis)


def cmd_openings(args) -> int:
    from czjax import agents
    from czjax.evaluate import interactive

    agent = _announced(
        agents.load_agent(args.player), args.games * 2 * AVERAGE_MOVES_PER_SIDE, f"{args.games:,} games against itself"
    )
    report = interactive.openings(
        agent, args.games, args.depth, args.top, temperature=args.temperature, seed=args.seed, log=_stderr
    )
    return _print_report(args, report, interactive.format_openings)


def cmd_import_torch(args) -> int:
    from czjax.interop import torch_io
    from czjax.models import torch_layout

    model = torch_io.import_torch(args.file, args.out, args.model)
    print(f"imported {torch_layout.TORCH_CLASSES[model]} from {args.file} as {model}: {args.out}")
    return 0


def cmd_export_torch(args) -> int:
    from czjax.interop import torch_io
    from czjax.models import torch_layout
    from czjax.util import checkpoint

    model = torch_io.export_torch(checkpoint.resolve(args.checkpoint), args.out)
    print(f"exported {model} as a {torch_layout.TORCH_CLASSES[model]} state dict: {args.out}")
    return 0


def cmd_distill(args) -> int:
    from czjax import agents
    from czjax.run import distill

    teacher = _announced(
        agents.load_agent(args.teacher),
        args.games * 4 * AVERAGE_MOVES_PER_SIDE,
        f"{args.games:,} games against itself and the labels of their positions",
    )
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    report = distill.distill(
        teacher,
        args.model,
        args.out,
        args.games,
        args.epochs,
        args.batch_size,
        args.lr,
        args.value_weight,
        args.temperature,
        args.seed,
        args.overwrite,
        log,
    )
    return _print_report(args, report, distill.format_report)


def cmd_export_onnx(args) -> int:
    from czjax.interop import onnx_export
    from czjax.util import checkpoint

    ckpt = checkpoint.resolve(args.checkpoint)
    model = onnx_export.export(ckpt, args.out, batched=args.batch)
    shape = "(N, 6, 7) -> logits (N, 7), value (N,)" if args.batch else "(6, 7) -> logits (7,), value ()"
    print(f"exported {model} to {args.out}: board int8 {shape}")
    diff = onnx_export.max_difference(args.out, ckpt, onnx_export.sample_boards(256))
    if diff is None:
        print("(onnxruntime is not installed: the file was not checked against czjax)")
    else:
        print(f"onnxruntime check on 256 random positions: largest difference from czjax {diff:.2e}")
        if diff > 1e-4:
            raise ValueError(f"the exported model differs from czjax by {diff:.2e}")
    return 0


def cmd_serve(args) -> int:
    from czjax import agents
    from czjax.evaluate import serve

    agent = agents.load_agent(args.player)
    print(f"compiling {agent.name} (the page opens once it is ready) ...", flush=True)
    try:
        server = serve.make_server(
            agent, args.host, args.port, temperature=agent.temperature(args.temperature), seed=args.seed
        )
    except OSError as err:  # port taken, host unknown
        raise ValueError(f"cannot serve on {args.host}:{args.port}: {err.strerror or err}") from None
    host, port = server.server_address[:2]
    print(
        f"playing {agent.name} at temperature {agent.temperature(args.temperature):g} at http://{host}:{port}/  (Ctrl-C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


TEMPERATURE_HELP = (
    "the opponent's sampling temperature; 0 plays its most likely column, 1 samples its policy "
    "(default: 0 for a checkpoint, 1 for the built-in random and random-punisher)"
)


def player_help() -> str:
    from czjax.search import search_options

    return (
        "a checkpoint (run folder or .msgpack file), random, random-punisher, czjax (the model shipped with czjax), or a "
        "search over one: "
        "SEARCH[:OPTIONS]:PLAYER, e.g. mcts:sims=64:runs/ex3 or rollout:width=4,depth=4:runs/ex3; "
        f"searches and their options (defaults): {search_options()}"
    )


def _add_player_arg(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    if default is None:
        parser.add_argument("player", metavar="PLAYER", help=player_help())
    else:
        parser.add_argument(
            "player", metavar="PLAYER", nargs="?", default=default, help=f"{player_help()} (default: {default})"
        )


def _add_evaluation_commands(commands) -> None:
    json_help = "print the results as one JSON object"
    evaluate = commands.add_parser(
        "eval", help="measure a model: solver-labelled accuracy, tactical puzzles, values on Pons' sets"
    )
    eval_commands = evaluate.add_subparsers(dest="eval_command", metavar="WHAT", required=True)
    acc = eval_commands.add_parser(
        "accuracy",
        help="how often the move is optimal or keeps the outcome, on solver-labelled positions",
        description=(
            "Scores the player's greedy move (its most likely column) and its sampled move (the exact expectation "
            "over its move probabilities) against perfect-solver labels: the fraction of positions where the move "
            "is optimal, and where it keeps the game-theoretic outcome (also on the positions not already lost), "
            "by ply range. Default positions: the 1,000 shipped with czjax (ply 6-30)."
        ),
    )
    _add_player_arg(acc)
    acc.add_argument(
        "--positions", default=None, metavar="FILE", help="a JSON Lines file in the same format (moves, scores)"
    )
    acc.add_argument("--json", action="store_true", help=json_help)
    acc.set_defaults(func=cmd_eval_accuracy)
    puz = eval_commands.add_parser(
        "puzzles",
        help="success on tactical puzzles: win now, or block the single threat",
        description=(
            "Scores the player on puzzles where the side to move can win at once (every winning column counts) or "
            "must block the opponent's single threat: sampled success (exact expectation) and greedy success per "
            "kind, and the value head's error on win puzzles. Default: the 10,000 puzzles shipped with czjax."
        ),
    )
    _add_player_arg(puz)
    puz.add_argument("--puzzles", default=None, metavar="FILE", help="a puzzles file from `czjax eval make-puzzles`")
    puz.add_argument("--json", action="store_true", help=json_help)
    puz.set_defaults(func=cmd_eval_puzzles)
    pons = eval_commands.add_parser(
        "pons",
        help="does the value read win, draw or loss right, on Pascal Pons' benchmark sets",
        description=(
            "Reads each position's outcome from the player's value (the value head, or a search's root value): win "
            "above +1/3, loss below -1/3, a draw between, and compares it with the exact score of Pons' benchmark "
            "sets (6 x 1,000 positions shipped with czjax: L3 ply 29-41, L2 15-28, L1 1-14; R1-R3 increasingly "
            "hard for a solver). Also the sign alone on the decided positions."
        ),
    )
    _add_player_arg(pons)
    pons.add_argument(
        "--dir", default=None, metavar="DIR", help="a folder of Test_L*_R* files (default: the shipped sets)"
    )
    pons.add_argument("--json", action="store_true", help=json_help)
    pons.set_defaults(func=cmd_eval_pons)
    make = eval_commands.add_parser(
        "make-puzzles",
        help="generate a puzzle set from random games, deterministically from a seed",
        description="Plays random games on device, keeps distinct win and block positions, and draws a seeded sample of each kind.",
    )
    make.add_argument("--seed", type=_seed, default=0, help="(default: %(default)s; seed 0 is the shipped set)")
    make.add_argument(
        "--per-kind", type=_positive_int, default=5000, help="puzzles of each kind (default: %(default)s)"
    )
    make.add_argument("-o", "--out", required=True, metavar="FILE")
    make.set_defaults(func=cmd_eval_make_puzzles)


def _add_play_commands(commands) -> None:
    from czjax.agents import DEFAULT_OPPONENT

    json_help = "print the results as one JSON object"
    tour = commands.add_parser(
        "tournament",
        help="round robin between players, with Elo ratings",
        description=(
            "Every pair of players plays --games games, half with each side first; pairs of the same model run as one "
            "compiled program. Prints the win/draw/loss table and Bradley-Terry (Elo-scale) ratings fitted by maximum "
            "likelihood, draws counted as half, with 95%% intervals, anchored to --anchor."
        ),
    )
    tour.add_argument("players", nargs="+", metavar="PLAYER", help="players, each " + player_help())
    tour.add_argument("--games", type=_batch, default=200, help="games per pair (default: %(default)s)")
    tour.add_argument("--anchor", default=None, help="the player rated 0 (default: the first)")
    tour.add_argument("--seed", type=_seed, default=0)
    tour.add_argument("--json", action="store_true", help=json_help)
    tour.set_defaults(func=cmd_tournament)

    play = commands.add_parser(
        "play",
        help="play a model in the terminal",
        description="You against a model (or a built-in player) in the terminal: type a column 1-7, q to quit.",
    )
    _add_player_arg(play, default=DEFAULT_OPPONENT)
    play.add_argument(
        "--first", default="human", choices=["human", "model", "random"], help="who starts (default: %(default)s)"
    )
    play.add_argument("--temperature", type=_non_negative_float, default=None, help=TEMPERATURE_HELP)
    play.add_argument("--seed", type=_seed, default=0)
    play.set_defaults(func=cmd_play)

    analyze = commands.add_parser(
        "analyze",
        help="a game move by move: probability of the move played, entropy, value",
        description="Analyses the game given by --moves (1-based columns, first player first), or the model's own self-play game.",
    )
    _add_player_arg(analyze)
    analyze.add_argument("--moves", default=None, help="e.g. 4453 (default: a self-play game of the model)")
    analyze.add_argument(
        "--temperature",
        type=_non_negative_float,
        default=1.0,
        help="sampling temperature of the self-play game (default: %(default)s)",
    )
    analyze.add_argument("--seed", type=_seed, default=0)
    analyze.add_argument("--json", action="store_true", help=json_help)
    analyze.set_defaults(func=cmd_analyze)

    openings = commands.add_parser(
        "openings",
        help="the model's most frequent openings in self-play",
        description="Plays the model against itself on device and counts the first --depth moves of each game.",
    )
    _add_player_arg(openings)
    openings.add_argument("--games", type=_batch, default=1000, help="(default: %(default)s)")
    openings.add_argument("--depth", type=_positive_int, default=4, help="moves per opening (default: %(default)s)")
    openings.add_argument("--top", type=_positive_int, default=10, help="openings listed (default: %(default)s)")
    openings.add_argument("--temperature", type=_non_negative_float, default=1.0, help="(default: %(default)s)")
    openings.add_argument("--seed", type=_seed, default=0)
    openings.add_argument("--json", action="store_true", help=json_help)
    openings.set_defaults(func=cmd_openings)


def _add_exchange_commands(commands) -> None:
    from czjax.agents import DEFAULT_OPPONENT

    dist = commands.add_parser(
        "distill",
        help="train a small network on a teacher's moves and values (a search, say)",
        description=(
            "As the PyTorch project's distill.py: the teacher (any player, a search included) plays itself, labels every "
            "position with its policy target (a search's visit counts or improved policy, a network's softmax) and its "
            "value, and a fresh student network learns both (cross-entropy and squared error, AdamW, minibatches). 10%% of "
            "the positions are held out to check it. The student is written to OUT/checkpoint.msgpack, a player for every "
            "command."
        ),
    )
    dist.add_argument("teacher", metavar="TEACHER", help="the teacher: " + player_help())
    dist.add_argument("--model", default="mlp3", help="the student's model (default: %(default)s)")
    dist.add_argument(
        "--games", type=_batch, default=2000, help="self-play games of the teacher (default: %(default)s)"
    )
    dist.add_argument(
        "--temperature",
        type=_non_negative_float,
        default=1.0,
        help="the teacher's sampling temperature (default: %(default)s)",
    )
    dist.add_argument("--epochs", type=_positive_int, default=10, help="(default: %(default)s)")
    dist.add_argument("--batch-size", type=_positive_int, default=256, help="(default: %(default)s)")
    dist.add_argument("--lr", type=_non_negative_float, default=1e-3, help="AdamW learning rate (default: %(default)s)")
    dist.add_argument("--value-weight", type=_non_negative_float, default=1.0, help="(default: %(default)s)")
    dist.add_argument("--seed", type=_seed, default=0)
    dist.add_argument("--out", default="runs/distill", help="(default: %(default)s)")
    dist.add_argument("--overwrite", action="store_true", help="replace a student already in --out")
    dist.add_argument("--json", action="store_true", help="print the report as JSON")
    dist.set_defaults(func=cmd_distill)
    imp = commands.add_parser(
        "import-torch",
        help="a PyTorch project checkpoint (.pth) -> a czjax checkpoint",
        description=(
            "Reads the model_state_dict of a Connect-Zero .pth (SimpleMLPModel, Connect4MLP3 or Connect4CNN_Mk4 with "
            "or without value head; a bare state dict works too) and writes a czjax checkpoint with those weights and "
            "a fresh optimizer state. Needs PyTorch: pip install 'czjax[torch]'."
        ),
    )
    imp.add_argument("file", metavar="FILE.pth")
    imp.add_argument("--model", default=None, help="mlp, mlp3, cnn-mk4 or cnn-mk4-value (default: found from the keys)")
    imp.add_argument("-o", "--out", required=True, metavar="CHECKPOINT")
    imp.set_defaults(func=cmd_import_torch)
    exp = commands.add_parser(
        "export-torch",
        help="a czjax checkpoint -> a .pth the PyTorch project loads",
        description="Writes {'model_state_dict': ...} with the PyTorch project's key names and layouts. Needs PyTorch.",
    )
    exp.add_argument("checkpoint", metavar="CHECKPOINT", help="a run folder or checkpoint file")
    exp.add_argument("-o", "--out", required=True, metavar="FILE.pth")
    exp.set_defaults(func=cmd_export_torch)
    onnx = commands.add_parser(
        "export-onnx",
        help="a czjax checkpoint -> ONNX for the PyTorch project's web applet",
        description=(
            "Writes an ONNX model (opset 17) with the applet's contract: input 'board' int8 (6, 7), +1 = side to move; "
            "outputs 'logits' float (7,) and 'value' float () (0 without a value head). --batch gives board (N, 6, 7), "
            "logits (N, 7), value (N,). When onnxruntime is installed the file is checked against czjax on random "
            "positions. Needs pip install 'czjax[onnx]'."
        ),
    )
    onnx.add_argument("checkpoint", metavar="CHECKPOINT", help="a run folder or checkpoint file")
    onnx.add_argument("-o", "--out", required=True, metavar="FILE.onnx")
    onnx.add_argument("--batch", action="store_true", help="a batched model: board (N, 6, 7)")
    onnx.set_defaults(func=cmd_export_onnx)
    serve = commands.add_parser(
        "serve",
        help="play a model in the browser",
        description=(
            "Serves a page on localhost where you play the model: click a column; the page shows the model's move "
            "probabilities and value after each move, who starts (you, the model or random), a New game button and "
            "the move list to copy. The model runs in czjax behind a small JSON API."
        ),
    )
    _add_player_arg(serve, default=DEFAULT_OPPONENT)
    serve.add_argument("--port", type=_port, default=8000, help="(default: %(default)s; 0 picks a free port)")
    serve.add_argument("--host", default="127.0.0.1", help="(default: %(default)s, this machine only)")
    serve.add_argument("--temperature", type=_non_negative_float, default=None, help=TEMPERATURE_HELP)
    serve.add_argument("--seed", type=_seed, default=0)
    serve.set_defaults(func=cmd_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="czjax",
        description="Connect-Zero in JAX: Connect 4 self-play and policy-gradient training, compiled end to end.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    _add_bench_commands(commands)
    _add_train_command(commands)
    _add_scan_command(commands)
    _add_evaluation_commands(commands)
    _add_play_commands(commands)
    _add_exchange_commands(commands)
    return parser


def _add_bench_commands(commands) -> None:
    from czjax.compaction import COMPACTION_MODES
    from czjax.models import CONV_METHODS, NORM_METHODS
    from czjax.util.precision import PRECISIONS

    bench = commands.add_parser(
        "bench",
        help="measure throughput: `czjax bench rollout`, `czjax bench train`, `czjax bench scan`, `czjax bench search`",
    )
    bench_commands = bench.add_subparsers(dest="bench_command", metavar="WHAT", required=True)
    rollout = bench_commands.add_parser(
        "rollout",
        help="whole games per second, random and RandomPunisher players",
        description=(
            "Plays whole games (one compiled lax.scan over 42 plies) at each batch size and reports the median "
            "of several timed runs, with compile time separate. Random-vs-random is compared with pgx in the "
            "same process when pgx is installed (pip install 'czjax[bench]')."
        ),
    )
    rollout.add_argument(
        "--batch",
        type=_batch,
        nargs="+",
        default=[1024, 4096, 16384, 65536],
        help="games per batch (default: %(default)s)",
    )
    rollout.add_argument(
        "--player",
        nargs="+",
        default=["random", "random-punisher"],
        choices=["random", "random-punisher"],
        help="players; both sides play the same one (default: %(default)s)",
    )
    rollout.add_argument("--runs", type=_positive_int, default=5, help="timed runs per setting (default: %(default)s)")
    rollout.add_argument("--no-peer", action="store_true", help="skip the pgx comparison")
    rollout.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="also trace one more batch per setting with jax.profiler into DIR/PLAYER-BATCH and print how its "
        "time splits (rules, sampling and the rest; see czjax bench train --profile)",
    )
    rollout.add_argument(
        "--json", action="store_true", help="print the results as JSON on stdout (progress goes to stderr)"
    )
    rollout.set_defaults(func=cmd_bench_rollout)
    train_bench = bench_commands.add_parser(
        "train",
        help="games and positions per second of the whole training iteration",
        description=(
            "Times the compiled training iteration (a batch of self-play games against a frozen copy and one AdamW "
            "step) per model and batch size: median of several runs of a few iterations each, compile time separate. "
            "positions/s counts the learner's real positions (the ones it trains on). When PyTorch is installed, the "
            "PyTorch project's iteration (czjax.bench.torch_peer: a Python loop over plies, one forward per model per ply) "
            "is timed in the same process for the same setting, and the ratio printed."
        ),
    )
    train_bench.add_argument("--model", nargs="+", default=["mlp", "cnn-mk4"], help="models (default: %(default)s)")
    train_bench.add_argument(
        "--games-per-batch", type=_batch, nargs="+", default=[50, 4096], help="(default: %(default)s)"
    )
    train_bench.add_argument(
        "--runs", type=_positive_int, default=3, help="timed runs per setting (default: %(default)s)"
    )
    train_bench.add_argument(
        "--steps", type=_positive_int, default=5, help="iterations per timed run (default: %(default)s)"
    )
    train_bench.add_argument(
        "--no-peer", action="store_true", help="skip the PyTorch iteration (czjax.bench.torch_peer) timed beside czjax"
    )
    train_bench.add_argument(
        "--peer-steps", type=_positive_int, default=None, help="PyTorch iterations per timed run (default: --steps)"
    )
    train_bench.add_argument(
        "--devices",
        type=_positive_int,
        nargs="+",
        default=[1],
        metavar="N",
        help="split each batch's games over N devices; several values are measured side by side (default: 1)",
    )
    train_bench.add_argument(
        "--precision",
        default="default",
        choices=list(PRECISIONS),
        help="float32 matrix products of the compiled iteration (default: %(default)s; see czjax train --help)",
    )
    train_bench.add_argument(
        "--control-flow",
        nargs="+",
        default=["auto"],
        choices=["auto", "cond", "static"],
        help="skip finished work with lax.cond, or compute it masked; several are timed in the same run "
        "(default: auto; see czjax train --help)",
    )
    train_bench.add_argument(
        "--unroll",
        type=_positive_int,
        default=1,
        metavar="PAIRS",
        help="pairs of plies per step of the rollout's loop (default: %(default)s; see czjax train --help)",
    )
    train_bench.add_argument(
        "--norm",
        default="auto",
        choices=list(NORM_METHODS),
        help="Mk4's GroupNorm layers (default: %(default)s; see czjax train --help)",
    )
    train_bench.add_argument(
        "--conv",
        default="auto",
        choices=list(CONV_METHODS),
        help="Mk4's 3x3 convolutions (default: %(default)s; see czjax train --help)",
    )
    train_bench.add_argument(
        "--compaction",
        default="auto",
        choices=list(COMPACTION_MODES),
        help="skipping of finished games and invalid positions (default: %(default)s; see czjax train --help)",
    )
    train_bench.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="also trace one more chunk per setting with jax.profiler into DIR/MODEL-GAMES-Ndev and print how "
        "its time splits into phases (self-play: network, rules, compaction; update: targets, "
        "gradient, optimizer; evaluation)",
    )
    train_bench.add_argument(
        "--json", action="store_true", help="print the results as JSON on stdout (progress goes to stderr)"
    )
    train_bench.set_defaults(func=cmd_bench_train)
    scan_bench = bench_commands.add_parser(
        "scan",
        help="a vmapped scan of K configurations against the same K runs one after another",
        description=(
            "Runs K training configurations (entropy bonus spread over [0, 0.1]) for a few batches as one vmapped "
            "compiled chunk, and the same K chunks one after another, in the same process and interleaved; reports "
            "both times and the ratio."
        ),
    )
    scan_bench.add_argument(
        "--k", type=_positive_int, nargs="+", default=[16], help="configurations (default: %(default)s)"
    )
    scan_bench.add_argument("--model", default="mlp", help="(default: %(default)s)")
    scan_bench.add_argument("--games-per-batch", type=_batch, default=256, help="(default: %(default)s)")
    scan_bench.add_argument("--steps", type=_positive_int, default=5, help="batches per run (default: %(default)s)")
    scan_bench.add_argument("--runs", type=_positive_int, default=3, help="timed runs (default: %(default)s)")
    scan_bench.add_argument(
        "--json", action="store_true", help="print the results as JSON on stdout (progress goes to stderr)"
    )
    scan_bench.set_defaults(func=cmd_bench_scan)
    search_bench = bench_commands.add_parser(
        "search",
        help="searches per second: czjax's tree against mctx over pgx, the same network",
        description=(
            "Times batched searches from mid-game positions (12 random plies) with a SimpleMLP-sized policy-value MLP "
            "(84-128-64-8): czjax's own tree (czjax.search), and, when mctx is installed (pip install 'czjax[bench]'), "
            "mctx's policy with czjax's rules as its recurrent function and mctx over pgx's connect_four, in the same "
            "process. gumbel is Gumbel MuZero (mctx.gumbel_muzero_policy), mcts is PUCT (mctx.muzero_policy). Median of "
            "several runs, the implementations' runs interleaved, compile time separate; czjax/this is czjax's searches per "
            "second over that row's."
        ),
    )
    search_bench.add_argument(
        "--algo", nargs="+", default=["gumbel", "mcts"], choices=["gumbel", "mcts"], help="(default: %(default)s)"
    )
    search_bench.add_argument(
        "--batch",
        type=_positive_int,
        nargs="+",
        default=[1024, 4096],
        help="positions searched at once (default: %(default)s)",
    )
    search_bench.add_argument(
        "--sims", type=_positive_int, nargs="+", default=[32], help="simulations per search (default: %(default)s)"
    )
    search_bench.add_argument(
        "--runs", type=_positive_int, default=5, help="timed runs per setting (default: %(default)s)"
    )
    search_bench.add_argument("--no-peer", action="store_true", help="czjax only (no mctx rows)")
    search_bench.add_argument(
        "--json", action="store_true", help="print the results as JSON on stdout (progress goes to stderr)"
    )
    search_bench.set_defaults(func=cmd_bench_search)


def _add_train_command(commands) -> None:
    from czjax.run.presets import PRESETS

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
    _add_setting_flags(train)
    train.add_argument(
        "--batches",
        type=_positive_int,
        default=None,
        help="stop after this many batches in all (default: the preset's)",
    )
    train.add_argument(
        "--time-budget",
        type=_non_negative_float,
        default=None,
        metavar="SECONDS",
        help="stop after this many seconds of training in all (a resumed run counts its earlier time)",
    )
    for name in _hparam_flags():  # one flag per traced hyperparameter (train.HParams)
        train.add_argument(
            f"--{name.replace('_', '-')}",
            *HPARAM_ALIASES.get(name, ()),
            dest=name,
            type=_non_negative_float,
            default=None,
            help=HPARAM_HELP.get(name, "(default: the preset's)"),
        )
    train.add_argument("--no-baseline", action="store_true", help="plain REINFORCE even with a value head")
    train.add_argument("--out", default=None, help="output folder (default: runs/PRESET-seedSEED)")
    _add_sink_flags(train)
    train.add_argument("--seed", type=_seed, default=None, help="(default: 0)")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out with its stored settings and target (--batches or --time-budget change the target)",
    )
    train.add_argument(
        "--init-from",
        default=None,
        metavar="FILE",
        help="start the learner and its frozen opponent from these weights: a PyTorch project .pth/.pt, or a "
        "czjax checkpoint (run folder or .msgpack; its parameters only, fresh optimizer state)",
    )
    train.add_argument(
        "--overwrite", action="store_true", help="start again in an --out that already holds a run, deleting it"
    )
    train.add_argument(
        "--devices",
        type=_positive_int,
        default=None,
        metavar="N",
        help="split each batch's games over N devices (default: all of them, every host's; the same run on any number)",
    )
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
        "--num-processes", type=_positive_int, default=None, metavar="N", help="processes (hosts) in all"
    )
    hosts.add_argument(
        "--process-id", type=_non_negative_int, default=None, metavar="I", help="this process's number, 0 to N-1"
    )
    train.add_argument(
        "--checkpoint-every",
        type=_positive_int,
        default=10,
        metavar="CHUNKS",
        help="checkpoint at least every this many chunks (default: %(default)s)",
    )
    train.add_argument(
        "--checkpoint-seconds",
        type=_non_negative_float,
        default=60.0,
        metavar="SECONDS",
        help="and at least every this many seconds of training, so a kill loses at most this much (default: %(default)s)",
    )
    train.set_defaults(func=cmd_train)


def _add_scan_command(commands) -> None:
    scan = commands.add_parser(
        "scan",
        help="a hyperparameter scan (settings x seeds) as one compiled program",
        description=(
            "Runs every configuration of a grid over the traced hyperparameters, times a number of seeds, as one "
            "vmapped program: each configuration has its own parameters, optimizer state, opponent and PRNG stream. "
            "Example: czjax scan --preset ex2-entropy --grid entropy_bonus=0,0.01,0.02,0.05,0.1 --seeds 3 --batches 2000"
        ),
    )
    scan.add_argument("--preset", default="ex2-entropy", help="base settings (default: %(default)s)")
    scan.add_argument(
        "--grid", nargs="+", default=[], metavar="NAME=V1,V2", help="values to scan: " + ", ".join(_hparam_flags())
    )
    scan.add_argument("--seeds", type=_positive_int, default=1, help="seeds per setting (default: %(default)s)")
    scan.add_argument("--seed", type=_seed, default=0, help="first seed (default: %(default)s)")
    scan.add_argument(
        "--batches", type=_positive_int, default=None, help="batches per configuration (default: the preset's)"
    )
    _add_setting_flags(scan)
    scan.add_argument(
        "--chunk",
        type=_positive_int,
        default=None,
        metavar="N",
        help="run the configurations N at a time (same results, less memory)",
    )
    scan.add_argument(
        "--sort", default="eval_win_rate", help="summary order: eval_win_rate, win_rate, entropy or game_length"
    )
    _add_sink_flags(scan)
    scan.add_argument("--out", default=None, help="output folder (default: runs/scan-PRESET)")
    scan.add_argument("--resume", action="store_true", help="continue the scan in --out")
    scan.add_argument(
        "--overwrite", action="store_true", help="start again in an --out that already holds a scan, deleting it"
    )
    scan.add_argument(
        "--devices",
        type=_positive_int,
        default=None,
        metavar="N",
        help="spread each group's configurations over N local devices (default: all of them)",
    )
    scan.set_defaults(func=cmd_scan)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:  # bad settings, unknown names, unusable checkpoints: one line
        print(f"czjax: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: as a process ended by SIGPIPE
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as err:  # the system refused: a read-only folder, a full disk, a file where a folder goes
        print(f"czjax: error: {system_error_line(err)}", file=sys.stderr)
        return 1
    except Exception as err:
        if not out_of_memory(err):
            raise
        print(f"czjax: error: {out_of_memory_line(err)}", file=sys.stderr)
        return 1


# What to change when the system refuses a file operation, by errno.
OS_ERROR_FIXES = {
    errno.ENOSPC: "free some space on that disk, or choose another --out",
    errno.EDQUOT: "free some space within your quota, or choose another --out",
    errno.EROFS: "that file system is read-only: choose another --out",
    errno.EACCES: "you may not write there: choose another --out",
    errno.EPERM: "you may not write there: choose another --out",
    errno.ENOTDIR: "a file stands where a folder is needed: choose another path",
    errno.EEXIST: "a file stands where a folder is needed: choose another path",
    errno.EISDIR: "a folder stands where a file is needed: choose another path",
    errno.ENAMETOOLONG: "choose a shorter path",
}


def system_error_line(err: OSError) -> str:
    where = f" ({err.filename})" if err.filename else ""
    fix = OS_ERROR_FIXES.get(err.errno, "check the path and the disk")
    return f"{err.strerror or err}{where}: {fix}"


def out_of_memory(err: BaseException) -> bool:
    """A device (XLA: RESOURCE_EXHAUSTED) or host allocation that did not fit."""
    return isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in str(err).split("\n", 1)[0]


def out_of_memory_line(err: BaseException) -> str:
    detail = str(err).split("\n", 1)[0].replace("RESOURCE_EXHAUSTED: ", "").strip()
    return (
        f"out of memory{f' ({detail})' if detail else ''}: play fewer games at once (--games-per-batch, --eval-games, "
        "--games), or use a smaller --model or fewer simulations; a run that had not saved yet left nothing behind"
    )


if __name__ == "__main__":
    sys.exit(main())
