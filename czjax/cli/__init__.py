"""The ``czjax`` command line: the parser of every command (one module per group of commands:
:mod:`~czjax.cli.train`, :mod:`~czjax.cli.evaluate`, :mod:`~czjax.cli.exchange`,
:mod:`~czjax.cli.bench`; the flags they share in :mod:`~czjax.cli.flags`) and ``main``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from czjax.cli import bench, errors, evaluate, exchange, train
from czjax.cli.train import train_spec

__all__ = ["build_parser", "main", "train_spec"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="czjax",
        description="Connect-Zero in JAX: Connect 4 self-play and policy-gradient training, compiled end to end.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    bench.add_commands(commands)
    train.add_train_command(commands)
    train.add_scan_command(commands)
    evaluate.add_evaluation_commands(commands)
    evaluate.add_play_commands(commands)
    exchange.add_commands(commands)
    evaluate.add_serve_command(commands)
    return parser


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
        print(f"czjax: error: {errors.system_error_line(err)}", file=sys.stderr)
        return 1
    except Exception as err:
        if not errors.out_of_memory(err):
            raise
        print(f"czjax: error: {errors.out_of_memory_line(err)}", file=sys.stderr)
        return 1
