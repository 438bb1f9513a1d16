"""Messages: errors speak the caller's language (the Python API's name its keyword arguments
``resume=True``, ``overwrite=True``, the command line's its flags); a usage error is one
line plus where to read more, not the whole usage block; a refused tournament says nothing
before its error; counts agree with their nouns."""

import argparse
import dataclasses
from pathlib import Path

import pytest

import czjax
from czjax import cli
from czjax.jobs import folders, presets
from czjax.jobs.spec import RunSpec, ScanSpec


@pytest.fixture
def run_folder(tmp_path):
    """A folder that holds a run (its description), as a finished or stopped run leaves it."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")
    return out


def preset_args():
    preset = presets.get_preset("ex2-entropy")
    return preset.config, czjax.HParams.create(**preset.hparams)


def test_the_python_api_names_its_own_arguments(run_folder):
    config, hparams = preset_args()
    with pytest.raises(ValueError) as refused:
        czjax.run_training(config, hparams, run_folder, seed=0, batches=2)
    message = str(refused.value)
    assert "resume=True" in message and "overwrite=True" in message and "--" not in message
    with pytest.raises(ValueError) as both:
        czjax.run_training(config, hparams, run_folder, batches=2, resume=True, overwrite=True)
    assert "resume=True" in str(both.value) and "--" not in str(both.value)
    with pytest.raises(ValueError, match=r"\(batches\) or a time budget \(time_budget_s\)"):
        czjax.run_training(config, hparams, run_folder)


def test_the_command_line_names_its_flags(run_folder, capsys):
    assert cli.main(["train", "--preset", "ex2-entropy", "--out", str(run_folder), "--batches", "2"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--resume" in line and "--overwrite" in line and "=True" not in line


@pytest.mark.parametrize(
    "argv, prog",
    [
        (["train", "--seed", "-1"], "czjax train"),
        (["bench", "train", "--no-such-flag"], "czjax bench train"),
        (["eval", "pons"], "czjax eval pons"),
        ([], "czjax"),
    ],
)
def test_a_usage_error_is_one_line_and_where_to_read_more(argv, prog, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith(f"{prog}: error: ") and err[1] == f"see {prog} --help"


def test_both_spellings_name_options_that_exist():
    """Each spelling's words are the command line's flags, and the specs' fields."""
    assert set(vars(folders.FLAGS)) == set(vars(folders.KEYWORDS))
    flags = {option for name in ("train", "scan") for a in _command(name)._actions for option in a.option_strings}
    assert set(vars(folders.FLAGS).values()) <= flags
    fields = {f.name for spec in (RunSpec, ScanSpec) for f in dataclasses.fields(spec)}
    assert {word.split("=")[0] for word in vars(folders.KEYWORDS).values()} <= fields


def _command(name):
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


def test_a_tournament_of_one_is_refused_before_a_word_or_a_load(capsys):
    assert cli.main(["tournament", "czjax"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == "czjax: error: a tournament needs at least two players, got 1"


@pytest.mark.parametrize(
    "count, text", [(0, "0 checkpoint promotions"), (1, "1 checkpoint promotion"), (2, "2 checkpoint promotions")]
)
def test_counts_agree_with_their_nouns(count, text):
    from czjax.cli import output

    assert output.counted(count, "checkpoint promotion") == text


def test_the_readmes_python_snippet_runs_twice(tmp_path, monkeypatch, capsys):
    """The front page's Python example, as a user pastes it, a second time too (at 1 batch)."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    snippet = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert "batches=200" in snippet
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        exec(compile(snippet.replace("batches=200", "batches=1"), "README.md", "exec"), {})
    assert "error" not in capsys.readouterr().err.lower()
