"""experiments/campaign.py: the step table, status read from the results folder, a step stopped
at its time limit and resumed equal to one run straight through, results copied where asked."""

import gzip
import json
import sys
import time

import pytest

import campaign

DETERMINISTIC = ("batches", "games", "seed", "entropy", "win_rate", "eval_win_rate", "game_length", "policy_loss")


def test_steps_in_the_issues_order_and_status_from_the_results(tmp_path):
    assert list(campaign.STEPS)[:7] == [
        "strength-10min",
        "strength-ptemp",
        "ex3-8seeds",
        "ex1-8seeds",
        "ex2-8seeds",
        "ex4-8seeds",
        "ex5-8seeds",
    ]
    assert {"suite-gpu", "bench", "same-start", "soft-vs-hard"} <= set(campaign.STEPS)
    assert campaign.next_step(tmp_path) == "strength-10min"
    for name, summary in [
        ("strength-10min", {"done": True, "progress": 1.0, "scale": 1.0}),
        ("strength-ptemp", {"done": True, "progress": 1.0, "scale": 1.0}),
        ("ex3-8seeds", {"done": False, "progress": 0.4, "scale": 1.0}),
        ("ex1-8seeds", {"done": True, "progress": 1.0, "scale": 0.01}),
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({**summary, "finished": "today", "machine": "cpu"}))
    text = campaign.status(tmp_path)
    assert (
        "strength-10min   done" in text
        and "partial (40%)" in text
        and "scale 0.01 only" in text
        and "next: ex3-8seeds" in text
    )
    assert campaign.next_step(tmp_path) == "ex3-8seeds"  # a partial step comes before the ones after it
    # examples 1 and 2 (the SimpleMLP) run as fast on a CPU, examples 3-5 (Mk4) need the GPU
    assert [name for name, step in campaign.STEPS.items() if name.startswith("ex") and step.gains_from_gpu] == [
        "ex3-8seeds",
        "ex4-8seeds",
        "ex5-8seeds",
    ]
    assert campaign.next_step(tmp_path, on_gpu=True) == "ex3-8seeds"
    assert campaign.next_step(tmp_path, on_gpu=False) == "ex1-8seeds"  # done at 1% scale only
    assert "next on a GPU: python experiments/campaign.py run ex3-8seeds" in text


def rows_of(path):
    with gzip.open(path, "rt") as f:
        return [{k: r[k] for k in DETERMINISTIC} for r in map(json.loads, f)]


def test_a_step_stopped_at_its_time_limit_resumes_to_the_same_result(tmp_path):
    """Example 1 at 1% of its length (2 chunks of 20 batches, 8 seeds): a first call too short
    for more than one chunk stops after it (checkpoint written, results partial); the next call
    finishes; rows and results equal a run straight through. With copy_to the files also land there."""
    logs = []
    straight = campaign.run_step(
        "ex1-8seeds", 600, 0.01, tmp_path / "a" / "results", tmp_path / "a" / "work", log=logs.append
    )
    assert straight["done"] and straight["batches_done"] == 40
    first = campaign.run_step(
        "ex1-8seeds", 0.1, 0.01, tmp_path / "b" / "results", tmp_path / "b" / "work", log=logs.append
    )
    assert not first["done"] and first["batches_done"] == 20 and first["progress"] == 0.5
    second = campaign.run_step(
        "ex1-8seeds",
        600,
        0.01,
        tmp_path / "b" / "results",
        tmp_path / "b" / "work",
        log=logs.append,
        copy_to=str(tmp_path / "out"),
    )
    assert second["done"] and second["calls"] == 2
    a = rows_of(tmp_path / "a" / "results" / "ex1-8seeds" / "metrics.jsonl.gz")
    b = rows_of(tmp_path / "b" / "results" / "ex1-8seeds" / "metrics.jsonl.gz")
    assert len(a) == 16 and a == b
    results = tmp_path / "b" / "results" / "ex1-8seeds"
    assert {"summary.json", "results.md", "metrics.jsonl.gz", "ex1-collapse.png"} <= {p.name for p in results.iterdir()}
    out = tmp_path / "out" / "ex1-8seeds"
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in results.iterdir())
    assert json.loads((out / "summary.json").read_text())["done"]
    assert "run at scale 0.01 only" in campaign.status(tmp_path / "b" / "results")


def test_metrics_are_decimated_per_configuration(tmp_path):
    rows = [{"config": c, "batches": b} for c in range(2) for b in range(1000)]
    campaign.write_rows(tmp_path / "m.jsonl.gz", rows)
    kept = [json.loads(line) for line in gzip.open(tmp_path / "m.jsonl.gz", "rt")]
    for c in range(2):
        mine = [r["batches"] for r in kept if r["config"] == c]
        assert len(mine) <= campaign.METRICS_ROWS + 1 and mine[0] == 0 and mine[-1] == 999


def test_unknown_step_is_one_line(capsys):
    with pytest.raises(SystemExit):
        campaign.main(["run", "ex9-8seeds"])
    assert "unknown step 'ex9-8seeds'" in capsys.readouterr().err


def test_the_strength_step_leaves_a_playable_model(tmp_path):
    """A strength step at 1% (4.2 s of training, one chunk of the tiny recipe): its weights are a
    player, its metrics carry the solver errors, and its search is the step's (strength-ptemp:
    the recipe's with the prior at temperature 1.5; strength-10min runs the same function
    without it)."""
    from czjax import agents
    from czjax.run import presets
    from czjax.util import checkpoint

    summary = campaign.run_step("strength-ptemp", 600, 0.01, tmp_path / "results", tmp_path / "work", log=print)
    results = tmp_path / "results" / "strength-ptemp"
    assert summary["done"] and {"czjax.msgpack", "dashboard.png", "results.md", "metrics.jsonl.gz", "summary.json"} <= {
        p.name for p in results.iterdir()
    }
    agent = agents.load_agent(str(results / "czjax.msgpack"))
    assert agent.model_name == "resnet:blocks=1,channels=8" and agent.has_value
    assert "pons_mean_error" in summary["last_row"]
    meta, _ = checkpoint.read_meta(results / "czjax.msgpack")
    assert meta["extra"]["search"] == "gumbel:sims=4,considered=4,move=policy,rescale=0,prior_temperature=1.5"
    full = presets.get_preset("gumbel-az-gpu").config
    assert campaign.strength_config(1.0) == full
    assert campaign.strength_config(1.0, "prior_temperature=1.5").search == full.search + ",prior_temperature=1.5"
    assert campaign.strength_config(0.01).search == campaign.SMALL_STRENGTH["search"]


def test_a_command_step_keeps_json_from_stdout_alone(tmp_path):
    """A command run with --json prints its JSON on stdout and its table on stderr: the step's
    .json holds stdout (parseable), its .log both; a command that prints no JSON gets no .json."""
    emit = "import json, sys; print(json.dumps({'rows': [1, 2]})); print('a table', file=sys.stderr)"
    step = campaign.command_step(
        "two commands",
        lambda ctx: [("both", [sys.executable, "-c", emit]), ("plain", [sys.executable, "-c", "print('rows: 1 2')"])],
    )
    results = tmp_path / "results"
    results.mkdir()
    ctx = campaign.Context(work=tmp_path, results=results, stop_at=time.monotonic() + 60, scale=1.0, log=print)
    summary = step.run(ctx)
    assert summary["done"]
    assert json.loads((results / "both.json").read_text()) == {"rows": [1, 2]}
    assert "a table" in (results / "both.log").read_text()
    assert not (results / "plain.json").exists() and "rows: 1 2" in (results / "plain.log").read_text()
