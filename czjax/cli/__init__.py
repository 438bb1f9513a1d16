"""The ``czjax`` command line: the parser of every command (one module per group of commands:
:mod:`~czjax.cli.train`, :mod:`~czjax.cli.evaluate`, :mod:`~czjax.cli.exchange`,
:mod:`~czjax.cli.bench`; the flags they share in :mod:`~czjax.cli.flags`) and ``main``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from czjax.cli import bench, errors, evaluate, exchange, train, tune
from czjax.cli.train import train_spec

__all__ = ["build_parser", "main", "train_spec"]


class Parser(argparse.ArgumentParser):
    """argparse's parser with a usage error in one line and where to read more, instead of the
    whole usage block above it (the subcommands' parsers are of this class too)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\nsee {self.prog} --help\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but a flag no command knows is reported by the command it was given to
        (``czjax bench train: error: unrecognized arguments: ...``), whose help lists its flags."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._command_parser(sys.argv[1:] if args is None else list(args)).error(
                f"unrecognized arguments: {' '.join(extras)}"
            )
        return parsed

    def _command_parser(self, argv: list[str]) -> argparse.ArgumentParser:
        """The (sub)command's parser that ``argv`` names: its leading command words followed down."""
        parser: argparse.ArgumentParser = self
        for word in argv:
            commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            if not commands or word not in commands[0].choices:
                break
            parser = commands[0].choices[word]
        return parser


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="czjax",
        description="Connect-Zero in JAX: Connect 4 self-play and policy-gradient training, compiled end to end.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    bench.add_commands(commands)
    train.add_train_command(commands)
    train.add_scan_command(commands)
    tune.add_tune_command(commands)
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
    except FloatingPointError as err:  # training that went non-finite (czjax.jobs.loop.NonFiniteTraining)
        print(f"czjax: error: {err}", file=sys.stderr)
        return 1
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
