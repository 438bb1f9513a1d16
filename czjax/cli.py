"""The ``czjax`` command line."""

from __future__ import annotations

import argparse
import json
import sys


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _batch(text: str) -> int:
    value = _positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("a batch needs at least 2 games (half with each side first)")
    return value


def cmd_bench_rollout(args) -> int:
    from czjax import bench

    log = bench.stderr if args.json else print
    log(f"czjax bench rollout on {bench.machine_description()}; median of {args.runs} timed runs, compile time separate")
    log(bench.ROLLOUT_HEADER)
    rows = bench.bench_rollout(args.batch, args.player, args.runs, peer=not args.no_peer, log=log)
    for row in rows:
        if "vs_pytorch" in row:
            log(
                f"random-punisher at batch {row['batch']}: {row['games_per_s']:,.0f} games/s = "
                f"{row['vs_pytorch']:,.0f}x the PyTorch project's {bench.PYTORCH_PUNISHER_GAMES_PER_S:.0f} games/s"
            )
    if args.json:
        print(json.dumps({"machine": bench.machine_description(), "rows": rows}, indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="czjax",
        description="Connect-Zero in JAX: Connect 4 self-play and policy-gradient training, compiled end to end.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    bench = commands.add_parser("bench", help="measure throughput (see `czjax bench rollout --help`)")
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
    rollout.add_argument("--batch", type=_batch, nargs="+", default=[1024, 4096, 16384, 65536], help="games per batch (default: %(default)s)")
    rollout.add_argument(
        "--player", nargs="+", default=["random", "random-punisher"], choices=["random", "random-punisher"],
        help="players; both sides play the same one (default: %(default)s)",
    )
    rollout.add_argument("--runs", type=_positive_int, default=5, help="timed runs per setting (default: %(default)s)")
    rollout.add_argument("--no-peer", action="store_true", help="skip the pgx comparison")
    rollout.add_argument("--json", action="store_true", help="print the results as JSON on stdout (progress goes to stderr)")
    rollout.set_defaults(func=cmd_bench_rollout)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
