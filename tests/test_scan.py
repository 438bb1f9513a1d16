"""A vmapped scan equals the configurations run alone; --chunk and resume change nothing."""

import dataclasses
import json

import numpy as np
import pytest

from czjax import cli
from czjax.jobs import loop, scan
from czjax.jobs.spec import ScanSpec
from czjax.learn.settings import HParams, PromotionSettings, TrainConfig
from tests.test_train import OLD_STORED_CONFIG

CONFIG = TrainConfig(
    model="mlp",
    games_per_batch=8,
    opponent="self",
    promotion=PromotionSettings(every_games=16, window_games=16),
    eval_games=4,
    batches_per_chunk=2,
)
BASE = dict(learning_rate=1e-3, entropy_bonus=0.05, value_weight=0.0, discount=0.9)
SETTINGS = scan.grid_settings({"entropy_bonus": [0.0, 0.1], "learning_rate": [1e-3]})
SEEDS = [3, 4]
BATCHES = 4
EXACT = (
    "batches",
    "games",
    "promotions",
    "positions",
    "win_rate",
    "draw_rate",
    "game_length",
    "eval_win_rate",
    "eval_draw_rate",
)


def quiet(message):
    pass


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    out = tmp_path_factory.mktemp("scan")
    return scan.run_scan(CONFIG, BASE, SETTINGS, SEEDS, out, BATCHES, log=quiet), out


def assert_rows_match(a: dict, b: dict, label):
    for key in EXACT:
        assert a[key] == b[key], (label, key)
    for key in ("loss", "policy_loss", "value_loss", "entropy", "returns_std", "advantage_std"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-6, err_msg=f"{label} {key}")


def test_scan_grid_and_configurations():
    assert scan.parse_grid(["entropy_bonus=0,0.05", "learning-rate=1e-3"]) == {
        "entropy_bonus": [0.0, 0.05],
        "learning_rate": [1e-3],
    }
    configs = scan.configurations(scan.grid_settings({"entropy_bonus": [0.0, 0.05], "discount": [0.9, 1.0]}), [0, 1])
    assert len(configs) == 8 and configs[3] == {
        "config": 3,
        "setting": 1,
        "seed": 1,
        "entropy_bonus": 0.0,
        "discount": 1.0,
    }
    for bad, message in (
        (["gamma=0.9"], "cannot scan"),
        (["entropy_bonus"], "NAME=V1"),
        (["entropy_bonus=a"], "numbers"),
    ):
        with pytest.raises(ValueError, match=message):
            scan.parse_grid(bad)


def test_vmapped_scan_equals_each_configuration_alone(scanned, tmp_path):
    rows, _ = scanned
    got = scan.deterministic_rows(rows)
    assert len(got) == len(SETTINGS) * len(SEEDS) * (BATCHES // CONFIG.batches_per_chunk)
    for c in scan.configurations(SETTINGS, SEEDS):
        hp = HParams.create(**{**BASE, **{k: c[k] for k in scan.SCANNABLE if k in c}})
        loop.run_training(CONFIG, hp, tmp_path / str(c["config"]), seed=c["seed"], batches=BATCHES, log=quiet)
        for alone in loop.read_metrics(tmp_path / str(c["config"]) / loop.METRICS):
            assert_rows_match(got[c["config"], alone["batches"]], alone, c)
    # the settings differ in entropy bonus, so their losses differ
    assert got[0, 4]["loss"] != got[2, 4]["loss"]


def test_chunked_scan_equals_unchunked(scanned, tmp_path):
    rows, _ = scanned
    chunked = scan.run_scan(CONFIG, BASE, SETTINGS, SEEDS, tmp_path, BATCHES, chunk=2, log=quiet)  # 2 groups of 2
    a, b = scan.deterministic_rows(rows), scan.deterministic_rows(chunked)
    assert a.keys() == b.keys()
    for key in a:
        assert_rows_match(a[key], b[key], key)


def test_scan_resumes(scanned, tmp_path):
    rows, _ = scanned
    scan.run_scan(CONFIG, BASE, SETTINGS, SEEDS, tmp_path, BATCHES // 2, chunk=2, log=quiet)
    resumed = scan.run_scan(CONFIG, BASE, SETTINGS, SEEDS, tmp_path, BATCHES, chunk=2, resume=True, log=quiet)
    a, b = scan.deterministic_rows(rows), scan.deterministic_rows(resumed)
    assert a.keys() == b.keys()
    for key in a:
        assert_rows_match(a[key], b[key], key)
    with pytest.raises(ValueError, match=r"^resume=True must use the same chunk as before"):  # the API's words
        scan.run_scan(CONFIG, BASE, SETTINGS, SEEDS, tmp_path, BATCHES, chunk=1, resume=True, log=quiet)
    # a scan.json written before the init field existed (flat settings) describes a scan with
    # Flax's initialisation (and PPO's stop before the step)
    description = json.loads((tmp_path / "scan.json").read_text())
    description["config"] = OLD_STORED_CONFIG
    (tmp_path / "scan.json").write_text(json.dumps(description))
    with pytest.raises(ValueError, match="same settings"):
        scan.run_scan(CONFIG, BASE, SETTINGS, SEEDS, tmp_path, BATCHES, chunk=2, resume=True, log=quiet)
    flax_config = CONFIG.override({"init": "flax", "ppo.kl_stop": "before-step", "promotion.draws_count_half": False})
    scan.run_scan(
        flax_config, BASE, SETTINGS, SEEDS, tmp_path, BATCHES, chunk=2, resume=True, log=quiet
    )  # done: nothing to run
    assert json.loads((tmp_path / "scan.json").read_text())["config"] == flax_config.to_dict()


def test_summary_and_figure(scanned):
    rows, out = scanned
    table = scan.summary_table(rows, sort_by="entropy")
    assert [e["entropy"] for e in table] == sorted((e["entropy"] for e in table), reverse=True)
    assert {e["seeds"] for e in table} == {2}
    scan.scan_figure(rows, out / "scan.png")
    assert (out / "scan.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="cannot sort"):
        scan.summary_table(rows, sort_by="elo")


def test_cli_scan_bad_grid_is_a_one_line_error(tmp_path, capsys):
    assert cli.main(["scan", "--grid", "gamma=0.9", "--out", str(tmp_path)]) == 2
    assert "cannot scan 'gamma'" in capsys.readouterr().err


def test_a_folder_that_holds_a_scan_is_never_overwritten(scanned, capsys):
    _, out = scanned
    before = (out / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match="already holds a run .*resume=True.*overwrite=True"):  # the API's words
        scan.run_scan(CONFIG, BASE, SETTINGS, SEEDS, out, BATCHES, log=quiet)
    assert cli.main(["scan", "--preset", "ex2-entropy", "--batches", "1", "--out", str(out)]) == 2
    assert "already holds a run" in (err := capsys.readouterr().err) and "--resume" in err  # the CLI's
    assert (out / "metrics.jsonl").read_text() == before


def test_scan_arguments_are_checked_before_anything_is_written(tmp_path, capsys):
    """--sort with a key the table will not have: one line, and no scan.json left behind to
    refuse the corrected command; --resume with another setting names the setting."""
    from czjax import cli

    out = tmp_path / "scan"
    assert (
        cli.main(
            [
                "scan",
                "--preset",
                "default",
                "--grid",
                "learning_rate=1e-3,2e-3",
                "--seeds",
                "1",
                "--batches",
                "1",
                "--sort",
                "elo",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert (
        "cannot sort by 'elo'; choose one of eval_win_rate, win_rate, entropy, game_length, learning_rate"
        in capsys.readouterr().err
    )
    assert not out.exists()
    scan.check_sort("learning_rate", ["learning_rate"])  # a grid name sorts too
    out.mkdir()
    from czjax.learn.settings import TrainConfig

    first = {"config": TrainConfig().to_dict(), "seeds": [0, 1], "batches": 4, "chunk": 2}
    scan.open_scan(out, first, resume=False)
    other = TrainConfig().override({"ppo.clip": 0.3}).to_dict()
    with pytest.raises(ValueError, match=r"config.ppo.clip was 0.2, now 0.3$"):
        scan.open_scan(out, {**first, "config": other}, resume=True)


def test_a_scan_stops_by_the_rule_of_runs(scanned, tmp_path, monkeypatch):
    """A deadline, then Ctrl-C: the scan stops after its last completed chunk (saved), its result
    says why, one line says what was saved; resumed, it ends as the uninterrupted scan."""
    rows, _ = scanned
    notices: list[str] = []
    spec = ScanSpec(CONFIG, BASE, SETTINGS, SEEDS, tmp_path, BATCHES, log=quiet, notice=notices.append, stop_at=0.0)
    result = scan.train_scan(spec)  # the deadline has passed: one chunk (every call makes progress), then a stop
    assert result.interrupted == "time limit" and {r["batches"] for r in result.rows} == {2}
    assert notices == ["time limit: saved the last completed chunk (group 1/1, batch 2)"]
    real = scan.run_chunk_once

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(scan, "run_chunk_once", ctrl_c)
    result = scan.train_scan(dataclasses.replace(spec, resume=True, stop_at=None))
    assert result.interrupted == "interrupt" and {r["batches"] for r in result.rows} == {2}
    assert notices[-1] == "interrupt: saved the last completed chunk (group 1/1, batch 2)"
    monkeypatch.setattr(scan, "run_chunk_once", real)
    resumed = scan.run_scan(CONFIG, BASE, SETTINGS, SEEDS, tmp_path, BATCHES, resume=True, log=quiet)
    a, b = scan.deterministic_rows(rows), scan.deterministic_rows(resumed)
    assert a.keys() == b.keys()
    for key in a:
        assert_rows_match(a[key], b[key], key)


def test_the_outputs_line_names_every_file_the_scan_wrote(tmp_path, capsys):
    out = tmp_path / "scan"
    small = ["--preset", "default", "--games-per-batch", "4", "--batches-per-chunk", "1", "--eval-games", "2"]
    assert cli.main(["scan", *small, "--batches", "1", "--grid", "learning_rate=1e-3", "--out", str(out)]) == 0
    [outputs] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("outputs: ")]
    listed = outputs.removeprefix("outputs: ").split(", ")
    assert sorted(listed) == sorted(str(p) for p in out.iterdir() if not p.name.startswith("."))  # not the lock
    assert {"scan.json", "checkpoint-group0.msgpack", "metrics.jsonl", "scan.png", "summary.json"} <= {
        p.name for p in out.iterdir()
    }
