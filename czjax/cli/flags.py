"""Flags and argument types shared by the commands, each declared once."""

from __future__ import annotations

import argparse
import dataclasses
import functools
from typing import Any

from czjax.util.specs import PlayerSpec

# JAX's integers are 32-bit unless x64 is enabled: a count or seed beyond this does not fit.
INT32_MAX = 2**31 - 1


def int_at_least(text: str, low: int, what: str) -> int:
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


def positive_int(text: str) -> int:
    return int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    return int_at_least(text, 0, "an integer >= 0")


seed = non_negative_int


def port(text: str) -> int:
    value = non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def game_batch(text: str) -> int:
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("a batch needs at least 2 games (half with each side first)")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


# Flags of the settings beside the scheme's (--NAME, --GROUP-NAME for a nested setting): the
# shorter or earlier names users type, accepted as well.
FLAG_ALIASES = {
    "batches_per_chunk": ("--eval-every",),
    "ppo.target_kl": ("--target-kl",),
    "pool.members": ("--pool",),
    "pool.league": ("--league",),
    "learning_rate": ("--lr",),
    "discount": ("--gamma",),
}
# How a flag reads its value, by the kind a field's metadata names (czjax.util.fields.setting).
VALUE_TYPES = {"positive": positive_int, "games": game_batch, "count": non_negative_int}


def flag_name(name: str) -> str:
    """The flag of a setting or hyperparameter: ``ppo.clip`` -> ``--ppo-clip``."""
    return "--" + name.replace(".", "-").replace("_", "-")


def setting_flags() -> dict[str, dataclasses.Field]:
    """The static settings (TrainConfig and its nested groups) that have a flag, all of them, by
    their override name (``"ppo.clip"``): the flag's ``dest``. With --resume they come from the run
    folder instead."""
    from czjax.learn.settings import setting_fields

    return setting_fields()


def hparam_flags() -> tuple[str, ...]:
    from czjax.learn.settings import hparam_names

    return hparam_names()


def setting_argument(name: str, field: dataclasses.Field) -> tuple[list[str], dict[str, Any]]:
    """``(option strings, add_argument keywords)`` of the flag of the setting ``field`` named
    ``name``, from its metadata (help, type, metavar, choices) and its default's type; every value
    defaults to None (not given: the preset's)."""
    meta = field.metadata
    keywords: dict[str, Any] = {"dest": name, "default": None, "help": meta.get("help", "").replace("%", "%%")}
    if isinstance(field.default, bool):
        keywords["action"] = argparse.BooleanOptionalAction
    elif isinstance(field.default, tuple):
        keywords["nargs"] = "+"
    elif "type" in meta or isinstance(field.default, int):
        keywords["type"] = VALUE_TYPES[meta.get("type", "count")]
    elif isinstance(field.default, float):
        keywords["type"] = non_negative_float
    if "choices" not in meta and "action" not in keywords:
        keywords["metavar"] = name.replace(".", "_").upper()
    from czjax.learn import migration

    if name in migration.RENAMED_VALUES:  # an old name typed still reads, with a warning
        keywords["type"] = functools.partial(migration.current_value, name, warn=True)
    for key in ("metavar", "choices"):
        if key in meta:
            keywords[key] = list(meta[key]) if key == "choices" else meta[key]
    return [flag_name(name), *FLAG_ALIASES.get(name, ())], keywords


def setting_words(overrides: dict) -> list[str]:
    """The command-line words that give ``overrides`` (settings by their override name), as a
    command printed for the user to run: ``{"ppo.clip": 0.1}`` -> ``["--ppo-clip", "0.1"]``."""
    words: list[str] = []
    for name, value in overrides.items():
        flag = flag_name(name)
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (tuple, list)):
            words += [flag, *map(str, value)]
        else:
            words += [flag, str(value)]
    return words


def add_setting_flag(parser, name: str, **changes: Any) -> None:
    """One setting's flag (:func:`setting_argument`), ``changes`` replacing its keywords (a
    benchmark's list of values and its defaults)."""
    names, keywords = setting_argument(name, setting_flags()[name])
    parser.add_argument(*names, **{**keywords, **changes})


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """A flag for every static setting (:func:`setting_flags`), to override a preset: train and scan."""
    for name, field in setting_flags().items():
        names, keywords = setting_argument(name, field)
        parser.add_argument(*names, **keywords)


def add_hparam_flags(parser: argparse.ArgumentParser) -> None:
    """A flag for every traced hyperparameter (czjax.learn.settings.HParams), its help from the field."""
    from czjax.learn.settings import HParams

    for field in dataclasses.fields(HParams):
        parser.add_argument(
            flag_name(field.name),
            *FLAG_ALIASES.get(field.name, ()),
            dest=field.name,
            type=non_negative_float,
            default=None,
            help=field.metadata.get("help", "(default: the preset's)").replace("%", "%%"),
        )


JSON_TO_STDOUT = "print the results as JSON on stdout (progress goes to stderr)"
JSON_OBJECT = "print the results as one JSON object"


def add_json_flag(parser: argparse.ArgumentParser, help: str = JSON_OBJECT) -> None:
    """--json: the report as JSON, for scripts."""
    parser.add_argument("--json", action="store_true", help=help)


def add_sink_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tensorboard",
        default=None,
        metavar="DIR",
        help="also log every metrics.jsonl row to TensorBoard event files in DIR (a scan: a subfolder per "
        "configuration); needs pip install 'czjax[tensorboard]'; to view them, pip install tensorboard, then "
        "tensorboard --logdir DIR",
    )
    parser.add_argument(
        "--wandb",
        default=None,
        metavar="PROJECT",
        help="also log every metrics.jsonl row to a Weights & Biases run in PROJECT (a scan: one run, a series "
        "per configuration; --resume logs to the same run); needs pip install 'czjax[wandb]' and a W&B login "
        "(wandb login, or WANDB_API_KEY) or WANDB_MODE=offline (files under --out, wandb sync uploads them)",
    )


TEMPERATURE_HELP = (
    "the opponent's sampling temperature; 0 plays its most likely column, 1 samples its policy "
    "(default: 0 for a checkpoint, 1 for the built-in random and random-punisher)"
)


def player_help() -> str:
    from czjax.search import search_options

    return (
        "a checkpoint (run folder or .msgpack file), random, random-punisher, czjax (the model shipped with czjax), "
        "or a "
        "search over one: "
        "SEARCH[:OPTIONS]:PLAYER, e.g. mcts:sims=64:runs/ex3 or playouts:width=4,depth=4:runs/ex3; "
        f"searches and their options (defaults): {search_options()}"
    )


def load_player(spec: PlayerSpec):
    """The agent ``spec`` names (:func:`czjax.players.loading.load_agent`; a search's sizes are
    checked where the search is made, before its network is loaded), JAX imported only now."""
    from czjax.players.loading import load_agent

    return load_agent(spec)


def add_player_arg(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """The positional PLAYER, parsed here, once, into a :class:`czjax.util.specs.PlayerSpec`."""
    if default is None:
        parser.add_argument("player", metavar="PLAYER", type=PlayerSpec.parse, help=player_help())
    else:
        parser.add_argument(
            "player",
            metavar="PLAYER",
            nargs="?",
            type=PlayerSpec.parse,
            default=default,
            help=f"{player_help()} (default: {default})",
        )


def add_launcher_flags(parser: argparse.ArgumentParser, jobs: str) -> None:
    """--launcher and SLURM's options, for commands whose work can run as an array of jobs
    (``jobs``: what one job of the array is, for the help)."""
    group = parser.add_argument_group(
        "beyond one machine (submitit: pip install 'czjax[cluster]')",
        f"With --launcher the work runs as an array of jobs, {jobs}, each requeued after preemption or a "
        "time-out and continued from its last checkpoint; jobs' logs in OUT/jobs/.",
    )
    group.add_argument(
        "--launcher",
        choices=("local", "slurm"),
        default=None,
        help="run as submitit jobs: on this machine (local) or as a SLURM array (default: in this process)",
    )
    group.add_argument("--partition", default=None, help="SLURM's partition (default: the cluster's)")
    group.add_argument("--gpus-per-task", type=positive_int, default=None, metavar="N", help="GPUs per job on SLURM")
    group.add_argument(
        "--time", type=positive_int, default=60, metavar="MINUTES", help="a job's time limit (default: %(default)s)"
    )
    group.add_argument(
        "--array-parallelism", type=positive_int, default=None, metavar="N", help="jobs running at once on SLURM"
    )
    group.add_argument(
        "--no-wait", action="store_true", help="submit and return, without waiting for the jobs to finish"
    )


def launcher(args):
    """The :class:`~czjax.jobs.launch.Launcher` the flags describe, or None without --launcher
    (SLURM's options without it: a one-line error)."""
    from czjax.jobs import launch

    if args.launcher is None:
        if args.partition or args.gpus_per_task or args.array_parallelism or args.no_wait:
            raise ValueError("--partition, --gpus-per-task, --array-parallelism and --no-wait go with --launcher")
        return None
    launch.import_submitit()  # the install named before anything is written
    return launch.Launcher(args.launcher, args.partition, args.gpus_per_task, args.time, args.array_parallelism)
