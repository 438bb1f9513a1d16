"""`czjax bench ...`: throughput measurements."""

from __future__ import annotations

import json
from pathlib import Path

from czjax.cli import flags


def _bench(args, what: str, header: str, settings, measure, fmt, roofs_at=None) -> int:
    """Run ``measure`` for each setting, printing a table row as each finishes (to stderr with
    ``--json``, whose JSON document goes to stdout, opening with where its figures come from:
    :func:`czjax.bench.provenance.provenance`, command, commit, machine, date). ``roofs_at``: the
    precisions the rows run at; then the roof table (:func:`czjax.bench.roofline.measure_roofs`,
    ``--roof-size``) is measured once, before the rows, in this process, printed before the
    table and added to the JSON document, and every row gets its roof and fraction."""
    from czjax.bench import harness, provenance, roofline

    log = harness.stderr if args.json else print
    log(
        f"czjax bench {what} on {provenance.machine_description()}; median of {args.runs} timed runs, compile time "
        "separate"
    )
    roofs = roofline.measure_roofs(args.roof_size, tuple(roofs_at)) if roofs_at is not None else {}
    if roofs:
        log(roofline.format_roofs(roofs))
    log(header)
    rows = []
    for setting in settings:
        for row in measure(setting, log):
            rows.append(roofline.with_roof(row, roofs) if roofs else row)
            log(fmt(row))
    if args.json:
        print(json.dumps({**provenance.provenance(), **roofs, "rows": rows}, indent=1))
    return 0


def cmd_bench_rollout(args) -> int:
    from czjax.bench import harness, profiling
    from czjax.players.loading import load_agent

    for spec in args.player:  # a wrong spec is said before anything is measured
        load_agent(spec)

    def measure(setting, log):
        player, batch = setting
        profile = Path(args.profile) / f"{player}-{batch}" if args.profile else None
        row = harness.bench_rollout_czjax(player, batch, args.runs, profile)
        if profile is not None:
            log(f"profile of one batch in {profile} (ui.perfetto.dev opens perfetto_trace.json.gz):")
            log(profiling.format_phases(list(row["phases"].items())))
            log(profiling.format_kinds(row["op_kinds"]))
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
    return _bench(args, "rollout", harness.ROLLOUT_HEADER, settings, measure, fmt, roofs_at=["default"])


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
            log(profiling.format_kinds(row["op_kinds"]))
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
        roofs_at=[args.precision],
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
    from czjax.bench import search_bench

    settings = [(algo, batch, sims) for algo in args.algo for batch in args.batch for sims in args.sims]
    return _bench(
        args,
        "search (czjax's tree; mctx over czjax's rules and over pgx, same network)",
        search_bench.SEARCH_HEADER,
        settings,
        lambda s, log: search_bench.bench_search(s[0], s[1], s[2], args.runs, peers=not args.no_peer),
        search_bench.format_search_row,
        roofs_at=["default"],
    )


def add_commands(commands) -> None:
    bench = commands.add_parser(
        "bench",
        help="measure throughput: `czjax bench rollout`, `czjax bench train`, `czjax bench scan`, `czjax bench "
        "search`; count a GPU's or TPU's kernels without one: `czjax bench kernels`",
    )
    bench_commands = bench.add_subparsers(dest="bench_command", metavar="WHAT", required=True)
    _add_rollout_bench(bench_commands)
    _add_train_bench(bench_commands)
    _add_scan_bench(bench_commands)
    _add_search_bench(bench_commands)
    _add_kernels_bench(bench_commands)


def _add_rollout_bench(bench_commands) -> None:
    rollout = bench_commands.add_parser(
        "rollout",
        help="whole games per second, random and RandomPunisher players",
        description=(
            "Plays whole games (one compiled lax.scan over 42 plies) at each batch size and reports the median "
            "of several timed runs, with compile time separate. Random-vs-random is compared with pgx in the "
            "same process when pgx is installed (pip install 'czjax[bench]'). s/ply is a call's time over the plies "
            "its loop ran; a network player's rows count its FLOPs per move against the roof (net GFLOP/s, of roof; "
            "see czjax bench train)."
        ),
    )
    rollout.add_argument(
        "--batch",
        type=flags.game_batch,
        nargs="+",
        default=[1024, 4096, 16384, 65536],
        help="games per batch (default: %(default)s)",
    )
    rollout.add_argument(
        "--player",
        nargs="+",
        default=["random", "random-punisher"],
        metavar="SPEC",
        help="players, as czjax play names them (random, random-punisher, untrained:MODEL, a checkpoint, a search "
        "over one: a network's rows count its FLOPs against the roof); both sides play the same one "
        "(default: %(default)s)",
    )
    rollout.add_argument(
        "--runs", type=flags.positive_int, default=5, help="timed runs per setting (default: %(default)s)"
    )
    rollout.add_argument("--no-peer", action="store_true", help="skip the pgx comparison")
    rollout.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="also trace one more batch per setting with jax.profiler into DIR/PLAYER-BATCH and print how its "
        "time splits (rules, sampling and the rest; see czjax bench train --profile)",
    )
    _add_roof_flag(rollout)
    flags.add_json_flag(rollout, flags.JSON_TO_STDOUT)
    rollout.set_defaults(func=cmd_bench_rollout)


def _add_train_bench(bench_commands) -> None:
    train_bench = bench_commands.add_parser(
        "train",
        help="games and positions per second of the whole training iteration",
        description=(
            "Times the compiled training iteration (a batch of self-play games against a frozen copy and one AdamW "
            "step) per model and batch size: median of several runs of a few iterations each, compile time separate. "
            "positions/s counts the learner's real positions (the ones it trains on). When PyTorch is installed, the "
            "PyTorch project's iteration (czjax.bench.torch_peer: a Python loop over plies, one forward per model "
            "per ply) "
            "is timed in the same process for the same setting, and the ratio printed. net GFLOP/s is the "
            "network's matrix-product and convolution FLOPs per second of iteration: a forward pass per position "
            "played in the self-play games and a forward and backward pass (counted as 3 forward) per learner "
            "position trained on (a search's root and simulations per move where a search plays), a lower bound on "
            "what the program computes (docs/benchmarks.md). 'of roof' is that as a fraction of the roof of the "
            "run's precision, a large plain matrix product (--roof-size) timed once in the same process on the same "
            "device."
        ),
    )
    flags.add_setting_flag(
        train_bench, "model", nargs="+", default=["mlp", "cnn-mk4"], help="models (default: %(default)s)"
    )
    flags.add_setting_flag(train_bench, "games_per_batch", nargs="+", default=[50, 4096], help="(default: %(default)s)")
    train_bench.add_argument(
        "--runs", type=flags.positive_int, default=3, help="timed runs per setting (default: %(default)s)"
    )
    train_bench.add_argument(
        "--steps", type=flags.positive_int, default=5, help="iterations per timed run (default: %(default)s)"
    )
    train_bench.add_argument(
        "--no-peer", action="store_true", help="skip the PyTorch iteration (czjax.bench.torch_peer) timed beside czjax"
    )
    train_bench.add_argument(
        "--peer-steps",
        type=flags.positive_int,
        default=None,
        help="PyTorch iterations per timed run (default: --steps)",
    )
    train_bench.add_argument(
        "--devices",
        type=flags.positive_int,
        nargs="+",
        default=[1],
        metavar="N",
        help="split each batch's games over N devices; several values are measured side by side (default: 1)",
    )
    _add_train_bench_settings(train_bench)
    _add_roof_flag(train_bench)
    train_bench.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="also trace one more chunk per setting with jax.profiler into DIR/MODEL-GAMES-Ndev and print how "
        "its time splits into phases (self-play: network, rules, compaction; update: targets, "
        "gradient, optimizer; evaluation) and into kinds of operation (convolutions, products, gathers and "
        "scatters, reductions, host transfers and loop control, copies, elementwise, idle)",
    )
    flags.add_json_flag(train_bench, flags.JSON_TO_STDOUT)
    train_bench.set_defaults(func=cmd_bench_train)


def _add_train_bench_settings(train_bench) -> None:
    """The settings a training benchmark times, train's flags (czjax.cli.flags) with lists of values and defaults."""
    see = "(default: %(default)s; see czjax train --help)"
    flags.add_setting_flag(
        train_bench, "precision", default="default", help="float32 matrix products of the compiled iteration " + see
    )
    flags.add_setting_flag(
        train_bench,
        "control_flow",
        nargs="+",
        default=["auto"],
        help="skip finished work with lax.cond, or compute it masked; several are timed in the same run "
        "(default: auto; see czjax train --help)",
    )
    flags.add_setting_flag(
        train_bench, "unroll", default=1, help="pairs of plies per step of the rollout's loop " + see
    )
    flags.add_setting_flag(train_bench, "norm", default="auto", help="Mk4's GroupNorm layers " + see)
    flags.add_setting_flag(train_bench, "conv", default="auto", help="the 3x3 convolutions " + see)
    flags.add_setting_flag(
        train_bench,
        "compaction",
        default="auto",
        help="skipping of finished games and invalid positions " + see,
    )


def _add_roof_flag(parser) -> None:
    parser.add_argument(
        "--roof-size",
        type=flags.positive_int,
        default=2048,
        metavar="N",
        help="the roofs: an NxN by NxN matrix product at each precision the device offers (float32; on an NVIDIA "
        "GPU also TF32 and bfloat16) and at the rows' precision, timed once before the rows (default: %(default)s)",
    )


def _add_scan_bench(bench_commands) -> None:
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
        "--k", type=flags.positive_int, nargs="+", default=[16], help="configurations (default: %(default)s)"
    )
    scan_bench.add_argument("--model", default="mlp", help="(default: %(default)s)")
    scan_bench.add_argument("--games-per-batch", type=flags.game_batch, default=256, help="(default: %(default)s)")
    scan_bench.add_argument(
        "--steps", type=flags.positive_int, default=5, help="batches per run (default: %(default)s)"
    )
    scan_bench.add_argument("--runs", type=flags.positive_int, default=3, help="timed runs (default: %(default)s)")
    flags.add_json_flag(scan_bench, flags.JSON_TO_STDOUT)
    scan_bench.set_defaults(func=cmd_bench_scan)


def _add_search_bench(bench_commands) -> None:
    search_bench = bench_commands.add_parser(
        "search",
        help="searches per second: czjax's tree against mctx over pgx, the same network",
        description=(
            "Times batched searches from mid-game positions (12 random plies) with a SimpleMLP-sized policy-value MLP "
            "(84-128-64-8): czjax's own tree (czjax.search), and, when mctx is installed (pip install 'czjax[bench]'), "
            "mctx's policy with czjax's rules as its recurrent function and mctx over pgx's connect_four, in the same "
            "process. gumbel is Gumbel MuZero (mctx.gumbel_muzero_policy), mcts is PUCT (mctx.muzero_policy). Median "
            "of "
            "several runs, the implementations' runs interleaved, compile time separate; czjax/this is czjax's "
            "searches per "
            "second over that row's. s/sim is a call's time over its simulations; net GFLOP/s counts the network's "
            "evaluations, each search's root and one a simulation, and 'of roof' is that over the roof (see czjax "
            "bench train)."
        ),
    )
    search_bench.add_argument(
        "--algo", nargs="+", default=["gumbel", "mcts"], choices=["gumbel", "mcts"], help="(default: %(default)s)"
    )
    search_bench.add_argument(
        "--batch",
        type=flags.positive_int,
        nargs="+",
        default=[1024, 4096],
        help="positions searched at once (default: %(default)s)",
    )
    search_bench.add_argument(
        "--sims", type=flags.positive_int, nargs="+", default=[32], help="simulations per search (default: %(default)s)"
    )
    search_bench.add_argument(
        "--runs", type=flags.positive_int, default=5, help="timed runs per setting (default: %(default)s)"
    )
    search_bench.add_argument("--no-peer", action="store_true", help="czjax only (no mctx rows)")
    _add_roof_flag(search_bench)
    flags.add_json_flag(search_bench, flags.JSON_TO_STDOUT)
    search_bench.set_defaults(func=cmd_bench_search)


def kernels_programs(args) -> list:
    """The programs ``czjax bench kernels`` compiles, for each target platform, from its flags."""
    from czjax.bench import kernels
    from czjax.jobs import presets

    if args.program == "rollout":
        return [lambda platform, p=p, b=b: kernels.rollout_program(p, b) for p in args.player for b in args.batch]
    if args.program == "protocol":
        return [lambda platform, b=b: kernels.protocol_program(args.protocol_player, b, platform) for b in args.batch]
    if args.program == "search":
        return [
            lambda platform, a=a, b=b, n=n: kernels.search_program(a, b, n, platform)
            for a in args.algo
            for b in args.batch
            for n in args.sims
        ]
    from czjax.cli.train import setting_overrides

    config = presets.get_preset(args.preset or "default").config.override(setting_overrides(args))
    return [lambda platform: kernels.train_program(config, platform, args.seeds)]


def cmd_bench_kernels(args) -> int:
    from czjax.bench import kernels

    kernels.prepare_environment()
    from czjax.bench import harness, provenance

    targets = [kernels.get_target(name) for name in args.target]
    for target in targets:
        kernels.check_installed(target)  # one line naming the install, before any compile
    log = harness.stderr if args.json else print
    if args.program == "calibrate":
        return calibrate_kernels(args, targets[0], log)
    log(f"czjax bench kernels: programs compiled on {provenance.machine_description()} for {', '.join(args.target)}")
    rows = []
    for make in kernels_programs(args):
        for target in targets:
            row = kernels.report(make(target.platform), target)
            rows.append(row)
            log(kernels.format_row(row))
    log("predicted times are predictions, not measurements (docs/benchmarks.md, 'Kernels counted without a GPU')")
    if args.json:
        print(json.dumps({**provenance.provenance(), "rows": rows}, indent=1))
    return 0


def calibrate_kernels(args, target, log) -> int:
    """``czjax bench kernels calibrate``: the cost model fitted on the GPU times in
    ``--measured``, its table written to ``--out`` and its seconds to the package's model."""
    from czjax.bench import kernels, provenance

    measured = kernels.measured_rows(Path(args.measured))
    if not measured:
        raise ValueError(
            f"no czjax bench rows in {args.measured} (bench-rollout.json, bench-search.json, bench-train.json)"
        )
    log(f"calibrating on {len(measured)} measured rows, each program compiled for {target.name} at this commit:")
    found = {**provenance.provenance(), **kernels.calibrate(measured, target, log)}
    log(kernels.format_calibration(found))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(found, indent=1) + "\n")
    model = {key: found[key] for key in ("target", "seconds", "commit") if key in found}
    kernels.CALIBRATION.write_text(json.dumps({**model, "table": args.out}, indent=1) + "\n")
    log(f"table: {args.out}; model: {kernels.CALIBRATION}")
    if args.json:
        print(json.dumps(found, indent=1))
    return 0


def _add_kernels_bench(bench_commands) -> None:
    from czjax.bench import kernels

    parser = bench_commands.add_parser(
        "kernels",
        help="compile a program for a GPU or TPU without one: its loops, kernels, host waits, FLOPs, predicted time",
        description=(
            "Compiles a rollout, a search or a training chunk for an accelerator this machine does not have "
            "(deviceless ahead-of-time compilation: the CUDA plugin for a GPU, libtpu for a TPU; without them it "
            "says what to install) and reads XLA's optimised program: its loop tree (trip counts XLA knows, or "
            "assumed ones, said so), the kernels a run launches (each fusion, library call or copy outside a "
            "fusion), its host waits on a GPU (each test of a loop XLA does not know the count of, each "
            "conditional), its matrix-product and convolution FLOPs, and a predicted time: on a GPU from a cost "
            "model fitted on the GPU times the repository holds (docs/benchmarks.md), on a TPU from the "
            "compiler's own cycle estimates (uncalibrated). Nothing runs on the accelerator."
        ),
    )
    parser.add_argument(
        "program",
        choices=["rollout", "search", "train", "protocol", "calibrate"],
        help="what to compile (protocol: one step of AlphaZero.jl's protocol's stream of searches, --batch of "
        "them, as czjax eval pons --protocol alphazero.jl runs it); calibrate: fit the cost model on the GPU times "
        "in --measured (every row's program compiled for the first --target) and write its table to --out",
    )
    parser.add_argument(
        "--measured",
        default="docs/results/benchmarks/bench",
        metavar="DIR",
        help="calibrate: the folder of czjax bench's GPU JSON files (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        default="docs/results/benchmarks/kernels/calibration.json",
        metavar="FILE",
        help="calibrate: where the table goes (default: %(default)s)",
    )
    parser.add_argument(
        "--target",
        nargs="+",
        default=["h100"],
        choices=list(kernels.TARGETS),
        help="accelerators to compile for (default: %(default)s)",
    )
    _add_kernels_program_flags(parser)
    flags.add_json_flag(parser, flags.JSON_TO_STDOUT)
    parser.set_defaults(func=cmd_bench_kernels)


def _add_kernels_program_flags(parser) -> None:
    """``czjax bench kernels``' flags of each program: what it plays, searches or trains."""
    parser.add_argument(
        "--batch",
        type=flags.positive_int,
        nargs="+",
        default=[1024],
        help="rollout, search, protocol: games or positions at once (default: %(default)s)",
    )
    parser.add_argument(
        "--player",
        nargs="+",
        default=["random"],
        metavar="SPEC",
        help="rollout: the player of both sides (default: %(default)s)",
    )
    parser.add_argument(
        "--protocol-player",
        default="czjax",
        metavar="SPEC",
        help="protocol: the network its searches play with (default: %(default)s, the shipped model)",
    )
    parser.add_argument(
        "--algo", nargs="+", default=["gumbel"], choices=["gumbel", "mcts"], help="search (default: %(default)s)"
    )
    parser.add_argument(
        "--sims", type=flags.positive_int, nargs="+", default=[32], help="search: simulations (default: %(default)s)"
    )
    parser.add_argument("--preset", default=None, help="train: a preset's config (czjax train --help lists them)")
    parser.add_argument(
        "--seeds",
        type=flags.positive_int,
        default=1,
        help="train: seeds vmapped as one program, as czjax scan --seeds compiles them (default: %(default)s)",
    )
    flags.add_setting_flags(parser)  # train: settings over the preset's, as czjax train takes them
