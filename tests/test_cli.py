"""The command line: help texts, one-line errors, flags, and the benchmark's JSON contract (not its speed)."""

import json

import pytest

from czjax import cli
from czjax.jobs import loop
from czjax.util.specs import PlayerSpec


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["train"],
        ["scan"],
        ["bench"],
        ["bench", "rollout"],
        ["bench", "train"],
        ["bench", "scan"],
        ["bench", "search"],
        ["eval"],
        ["eval", "accuracy"],
        ["eval", "puzzles"],
        ["eval", "make-puzzles"],
        ["eval", "pons"],
        ["distill"],
        ["tournament"],
        ["play"],
        ["analyze"],
        ["openings"],
    ],
)
def test_help_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([*command, "--help"])
    assert exc.value.code == 0
    assert "usage: czjax" in capsys.readouterr().out


def every_parser(parser, path=("czjax",)):
    """``(command path, parser)`` of ``parser`` and every (sub)command under it."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from every_parser(sub, (*path, name))


def test_no_help_shows_a_doubled_percent_sign():
    """argparse formats help strings with %, not descriptions: a "%%" in a description is printed as is."""
    helps = {" ".join(path): parser.format_help() for path, parser in every_parser(cli.build_parser())}
    assert len(helps) > 20 and {"czjax tournament", "czjax distill"} <= set(helps)
    assert [name for name, text in helps.items() if "%%" in text] == []
    assert "95% intervals" in helps["czjax tournament"] and "10% of the positions" in helps["czjax distill"]


def test_bench_rollout_json_has_the_documented_keys(capsys):
    assert (
        cli.main(
            ["bench", "rollout", "--batch", "8", "--player", "random", "--runs", "1", "--no-peer", "--roof-size", "64"]
            + ["--json"]
        )
        == 0
    )
    captured = capsys.readouterr()
    rows = json.loads(captured.out)["rows"]
    assert len(rows) == 1
    assert {"player", "batch", "games_per_s", "moves_per_s", "compile_s"} <= set(rows[0])
    assert (
        rows[0]["batch"] == 8 and rows[0]["player"] == "random" and rows[0]["moves_per_s"] >= 7 * rows[0]["games_per_s"]
    )
    assert "games/s" in captured.err  # the table goes to stderr with --json


def test_bench_search_json_has_the_documented_keys(capsys):
    # czjax's row only: mctx's recurrent function over czjax's rules is the one test_search checks
    assert (
        cli.main(
            ["bench", "search", "--algo", "mcts", "--batch", "4", "--sims", "4", "--runs", "1", "--no-peer", "--json"]
            + ["--roof-size", "64"]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["impl"] for r in rows] == ["czjax"]
    for row in rows:
        assert {"algo", "batch", "sims", "searches_per_s", "simulations_per_s", "compile_s"} <= set(row)
        assert (row["algo"], row["batch"], row["sims"]) == ("mcts", 4, 4)
        assert row["simulations_per_s"] == pytest.approx(4 * row["searches_per_s"])


def test_bench_rejects_bad_batches(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", "rollout", "--batch", "1"])
    assert "at least 2 games" in capsys.readouterr().err


def test_eval_accuracy_json_has_the_documented_keys(capsys):
    assert cli.main(["eval", "accuracy", "random", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"n", "greedy_optimal", "greedy_keeps_outcome", "sampled_optimal", "sampled_keeps_outcome"} <= set(report)
    assert report["n"] == 1000


def test_tournament_json_and_unknown_players(capsys):
    assert cli.main(["tournament", "random", "random-punisher", "--games", "20", "--anchor", "random", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["players"] == ["random", "random-punisher"] and len(report["results"]) == 1
    assert cli.main(["eval", "puzzles", "nobody"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("czjax: error:") and "neither a built-in player" in err and len(err.strip().splitlines()) == 1


def test_train_flags_for_algorithms_pools_and_leagues():
    parser = cli.build_parser()
    args = parser.parse_args(
        [
            "train",
            "--preset",
            "ex5-ppo",
            "--model",
            "mlp3",
            "--mirror",
            "--pool",
            "random-punisher",
            "random",
            "--league",
        ]
    )
    spec = cli.train_spec(args)
    config, hparams = spec.config, spec.hparams
    assert (config.algorithm, config.mirror, config.opponent, config.pool.members, config.pool.league) == (
        "ppo",
        True,
        "pool",
        (PlayerSpec("random-punisher"), PlayerSpec("random")),  # the flags' text, parsed once
        True,
    )
    ppo = config.settings_of("ppo")
    assert (ppo.clip, ppo.epochs, ppo.target_kl, ppo.kl_stop) == (
        0.2,
        4,
        0.01,
        "after-step",
    ) and spec.batches == 20000
    config = cli.train_spec(parser.parse_args(["train", "--preset", "ex5-ppo", "--ppo-kl-stop", "before-step"])).config
    assert config.settings_of("ppo").kl_stop == "before-step"
    assert float(hparams.value_weight) == 1.5
    args = parser.parse_args(["train", "--preset", "ex4-a2c"])
    config = cli.train_spec(args).config
    assert (config.algorithm, config.mirror, config.opponent, config.pool.league, config.eval_opponent) == (
        "a2c",
        False,
        "random-punisher-leftmost",  # the PyTorch project's RandomPunisher, as the blog trains
        False,
        PlayerSpec("random-punisher-leftmost"),
    )
    # the flags still choose either tie rule
    args = parser.parse_args(["train", "--preset", "ex4-a2c", "--opponent", "random-punisher"])
    assert cli.train_spec(args).config.opponent == "random-punisher"
    with pytest.raises(ValueError, match="value head"):
        cli.train_spec(parser.parse_args(["train", "--algorithm", "a2c", "--model", "mlp"]))


def test_init_flags(tmp_path):
    parser = cli.build_parser()
    assert cli.train_spec(parser.parse_args(["train"])).config.init == "torch"  # the PyTorch project's initialisation
    assert cli.train_spec(parser.parse_args(["train", "--init", "flax"])).config.init == "flax"
    assert parser.parse_args(["scan", "--init", "flax"]).init == "flax"
    args = parser.parse_args(["train", "--init-from", "start.pth"])
    assert args.init_from == "start.pth" and cli.train_spec(args).config.init == "torch"
    # --resume continues from the checkpoint: a starting point or an init scheme is the run's, not the flag's
    for flag in (["--init-from", "start.pth"], ["--init", "flax"]):
        with pytest.raises(ValueError, match=f"drop {flag[0]}"):
            cli.train_spec(parser.parse_args(["train", "--resume", "--out", str(tmp_path), *flag]))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--preset", "ex9"], "unknown preset 'ex9'"),
        (["--model", "transformer"], "unknown model 'transformer'"),
        (["--opponent", "god"], "unknown opponent 'god'"),
    ],
)
def test_cli_train_bad_settings_are_one_line_errors(tmp_path, capsys, args, message):
    assert cli.main(["train", "--out", str(tmp_path), "--batches", "1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_train_rejects_bad_numbers_and_checkpoints(tmp_path, capsys):
    for bad in (
        ["--games-per-batch", "0"],
        ["--games-per-batch", "-5"],
        ["--batches", "0"],
        ["--learning-rate", "nan"],
    ):
        with pytest.raises(SystemExit) as exc:
            cli.main(["train", *bad])
        assert exc.value.code == 2
    (tmp_path / loop.CHECKPOINT).write_bytes(b"\x00garbage")
    assert cli.main(["train", "--resume", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "czjax: error:" in err and "checkpoint" in err


def test_precision_setting():
    from czjax.learn.settings import TrainConfig
    from czjax.util import precision

    parser = cli.build_parser()
    config = cli.train_spec(parser.parse_args(["train", "--precision", "highest"])).config
    assert config.precision == "highest" and TrainConfig.from_dict(config.to_dict()).precision == "highest"
    assert cli.train_spec(parser.parse_args(["train"])).config.precision == "default"  # the backend's own
    with pytest.raises(ValueError, match="unknown precision 'fp8'; choose one of default, highest, bf16"):
        TrainConfig(precision="fp8")
    import jax

    with precision.matmul("bf16"):
        assert jax.config.jax_default_matmul_precision == "bfloat16"
    with precision.parity():
        assert jax.config.jax_default_matmul_precision == "highest"


def _flag_dests(parser) -> set:
    train = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog == "czjax train")
    return {action.dest for action in train._actions}


def _settings(cls, prefix=""):
    """Every setting of a settings dataclass by its override name, walking nested groups."""
    import dataclasses

    from czjax.learn.algorithms import ALGORITHMS

    found = {}
    for field in dataclasses.fields(cls):
        value = field.default
        if field.name == "algorithm_settings":  # each algorithm's own settings, named after it
            for name, algorithm in ALGORITHMS.items():
                if algorithm.settings is not None:
                    found.update(_settings(algorithm.settings, f"{name}."))
        elif dataclasses.is_dataclass(value) and not isinstance(value, PlayerSpec):  # a group; a spec is one setting
            found.update(_settings(type(value), f"{prefix}{field.name}."))
        else:
            found[prefix + field.name] = field
    return found


def test_every_setting_and_hyperparameter_has_a_flag():
    """A field added to TrainConfig (or a group of it) or to HParams gets a flag with help text."""
    from czjax.cli import flags
    from czjax.learn.settings import HParams, TrainConfig

    settings = _settings(TrainConfig)
    assert {"weight_decay", "promotion.every_games", "pool.ema", "pool.league_slots", "ppo.clip"} <= set(settings)
    missing = (set(settings) | set(_settings(HParams))) - _flag_dests(cli.build_parser())
    assert not missing, f"settings without a flag: {sorted(missing)}"
    for name, field in {**settings, **_settings(HParams)}.items():
        assert field.metadata.get("help"), f"{name} has no help text"
    assert set(flags.setting_flags()) == set(settings)


def _other_value(field):
    """A value of the setting other than its default, and the flag's words for it."""
    default, meta = field.default, field.metadata
    if isinstance(default, bool):
        return not default, []
    if "choices" in meta:
        value = next(c for c in meta["choices"] if c != default)
    elif isinstance(default, tuple):
        return ("random", "random-punisher"), ["random", "random-punisher"]
    elif isinstance(default, float):
        value = default / 2
    elif isinstance(default, int) or meta.get("type"):
        value = (default or 1) + 2
    else:
        value = "x"
    return value, [str(value)]


def test_every_setting_flag_round_trips():
    from czjax.cli import flags
    from czjax.cli.train import setting_overrides

    parser = cli.build_parser()
    for name, field in flags.setting_flags().items():
        value, words = _other_value(field)
        flag = flags.flag_name(name)
        if isinstance(value, bool):
            flag = flag if value else "--no-" + flag[2:]
        overrides = setting_overrides(parser.parse_args(["train", flag, *words]))
        assert overrides[name] == value, name
    assert setting_overrides(parser.parse_args(["train"])) == {}


def test_the_settings_that_had_no_flag_reach_the_config():
    parser = cli.build_parser()
    config = cli.train_spec(
        parser.parse_args(
            "train --weight-decay 0.002 --promotion-every-games 700 --promotion-window-games 300 "
            "--promotion-threshold 0.6 --no-promotion-draws-count-half --pool random --league --pool-ema 0.3 "
            "--pool-league-slots 3 --pool-league-threshold 0.7 --eval-every 5 --target-kl 0.02 --lr 0.01".split()
        )
    ).config
    assert (
        config.weight_decay == 0.002 and config.batches_per_chunk == 5 and config.settings_of("ppo").target_kl == 0.02
    )
    assert (config.promotion.every_games, config.promotion.window_games, config.promotion.threshold) == (700, 300, 0.6)
    assert not config.promotion.draws_count_half
    assert (config.opponent, config.pool.members, config.pool.league) == ("pool", (PlayerSpec("random"),), True)
    assert (config.pool.ema, config.pool.league_slots, config.pool.league_threshold) == (0.3, 3, 0.7)
    with pytest.raises(ValueError, match="drop --pool-ema"):
        cli.train_spec(parser.parse_args(["train", "--resume", "--out", "x", "--pool-ema", "0.2"]))
