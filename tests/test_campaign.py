"""experiments/campaign.py: the step table built from the studies' modules, status read from
the results folder, a step stopped at its time limit and resumed equal to one run straight
through, results copied where asked; and the studies' steps it runs (experiments/<study>/*_steps.py)."""

import gzip
import importlib
import json
import sys
import time
from pathlib import Path

import pytest

import campaign
import common
import steps
from czjax.players.loading import load_agent

common.use("strength", "benchmarks")
import benchmark_steps
import strength_steps

DETERMINISTIC = ("batches", "games", "seed", "entropy", "win_rate", "eval_win_rate", "game_length", "policy_loss")


def test_steps_in_the_issues_order_and_status_from_the_results(tmp_path):
    assert list(campaign.STEPS)[:9] == [
        "profile",  # first: on a GPU, `run next` says where the time goes before the rest
        "strength-10min",
        "strength-ptemp",
        "strength-seeds",
        "ex3-8seeds",
        "ex1-8seeds",
        "ex2-8seeds",
        "ex4-8seeds",
        "ex5-8seeds",
    ]
    assert {"suite-gpu", "bench", "same-start", "soft-vs-hard"} <= set(campaign.STEPS)
    assert campaign.next_step(tmp_path) == "profile" == campaign.next_step(tmp_path, on_gpu=True)
    assert campaign.next_step(tmp_path, on_gpu=False) != "profile"
    for name, summary in [
        ("profile", {"done": True, "progress": 1.0, "scale": 1.0}),
        ("strength-10min", {"done": True, "progress": 1.0, "scale": 1.0}),
        ("strength-ptemp", {"done": True, "progress": 1.0, "scale": 1.0}),
        ("strength-seeds", {"done": True, "progress": 1.0, "scale": 1.0}),
        ("ex3-8seeds", {"done": False, "progress": 0.4, "scale": 1.0}),
        ("ex1-8seeds", {"done": True, "progress": 1.0, "scale": 0.01}),
    ]:
        folder = campaign.results_folder(tmp_path, name)  # docs/results/<study>/<step>/
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({**summary, "finished": "today", "machine": "cpu"}))
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


def test_each_step_is_defined_in_the_folder_of_its_study():
    """A reader of experiments/<study>/ finds the study's steps there: each study's module of
    steps sits in its folder and defines only steps of that study, and together they are the table."""
    defined = []
    for study, name in campaign.STEP_MODULES.items():
        module = importlib.import_module(name)
        assert Path(module.__file__).parent == common.folder(study)
        assert {step.study for step in module.STEPS.values()} == {study}
        defined += list(module.STEPS)
    assert sorted(defined) == sorted(campaign.STEPS) == sorted(campaign.ORDER)


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
    a = rows_of(campaign.results_folder(tmp_path / "a" / "results", "ex1-8seeds") / "metrics.jsonl.gz")
    b = rows_of(campaign.results_folder(tmp_path / "b" / "results", "ex1-8seeds") / "metrics.jsonl.gz")
    assert len(a) == 16 and a == b
    results = tmp_path / "b" / "results" / "blog-examples" / "ex1-8seeds"  # beside its study's other results
    assert {"summary.json", "results.md", "metrics.jsonl.gz", "ex1-collapse.png"} <= {p.name for p in results.iterdir()}
    out = tmp_path / "out" / "ex1-8seeds"
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in results.iterdir())
    assert json.loads((out / "summary.json").read_text())["done"]
    assert "run at scale 0.01 only" in campaign.status(tmp_path / "b" / "results")


def test_metrics_are_decimated_per_configuration(tmp_path):
    rows = [{"config": c, "batches": b} for c in range(2) for b in range(1000)]
    steps.write_rows(tmp_path / "m.jsonl.gz", rows)
    kept = [json.loads(line) for line in gzip.open(tmp_path / "m.jsonl.gz", "rt")]
    for c in range(2):
        mine = [r["batches"] for r in kept if r["config"] == c]
        assert len(mine) <= steps.METRICS_ROWS + 1 and mine[0] == 0 and mine[-1] == 999


def test_unknown_step_is_one_line(capsys):
    with pytest.raises(SystemExit):
        campaign.main(["run", "ex9-8seeds"])
    assert "unknown step 'ex9-8seeds'" in capsys.readouterr().err


def test_the_strength_step_leaves_a_playable_model(tmp_path):
    """A strength step at 1% (4.2 s of training, one chunk of the tiny recipe): its weights are a
    player, its metrics carry the solver errors, and its search is the step's. strength-ptemp
    runs the same function with the search's prior at temperature 1.5 appended (its program is
    the recipe's, which the seeds step below compiles too: run here is strength-10min's)."""
    from czjax.jobs import presets
    from czjax.util import checkpoint

    summary = campaign.run_step("strength-10min", 600, 0.01, tmp_path / "results", tmp_path / "work", log=print)
    results = campaign.results_folder(tmp_path / "results", "strength-10min")
    assert summary["done"] and {"czjax.msgpack", "dashboard.png", "results.md", "metrics.jsonl.gz", "summary.json"} <= {
        p.name for p in results.iterdir()
    }
    agent = load_agent(str(results / "czjax.msgpack"))
    assert agent.model_name == "resnet:blocks=1,channels=8" and agent.has_value
    assert "pons_mean_error" in summary["last_row"]
    meta, _ = checkpoint.read_meta(results / "czjax.msgpack")
    assert meta["extra"]["search"] == strength_steps.SMALL_STRENGTH["search"]
    ptemp = campaign.STEPS["strength-ptemp"].run
    assert ptemp.func is strength_steps.strength_run and ptemp.keywords == {"search_options": "prior_temperature=1.5"}
    full = presets.get_preset("gumbel-az-gpu").config
    assert strength_steps.strength_config(1.0) == full
    assert str(strength_steps.strength_config(1.0, "prior_temperature=1.5").search) == (
        f"{full.search},prior_temperature=1.5"
    )
    assert str(strength_steps.strength_config(0.01, "prior_temperature=1.5").search) == (
        "gumbel:sims=4,considered=4,move=policy,rescale=0,prior_temperature=1.5"
    )


def test_the_seeds_step_continues_each_seed_over_calls_from_its_portable_state(tmp_path, monkeypatch):
    """strength-seeds with two seeds of the tiny recipe: a first call past its deadline trains one
    chunk of seed 0 and leaves seed 1 for later; its work folder moves without the checkpoints; the
    second call resumes seed 0 from its portable state (the buffer rebuilt, its games not counted),
    and a last call, with a budget seed 0 has reached and seed 1 reaches in a chunk or a few, finishes
    seed 1 and skips seed 0. The results count each seed's calls and device seconds, hold every
    finished batch once, and a player per seed."""

    monkeypatch.setattr(strength_steps, "STRENGTH_SEEDS", (0, 1))
    monkeypatch.setattr(strength_steps, "STRENGTH_SEED_S", 1e6)  # not reached by the first two calls
    results, work = tmp_path / "results", tmp_path / "work"
    first = campaign.run_step("strength-seeds", 1e-3, 0.01, results, work, log=print)
    assert not first["done"] and [(c["seed"], c["batches"]) for c in first["this_call"]] == [(0, 1)]
    assert first["seeds"][1]["calls"] == 0 and not (work / "strength-seeds" / "seed-1").exists()
    for path in (work / "strength-seeds" / "seed-0").glob("checkpoint*.msgpack"):  # moved without them
        path.unlink()
    second = campaign.run_step("strength-seeds", 1e-3, 0.01, results, work, log=print)
    (piece,) = second["this_call"]
    assert piece["seed"] == 0 and piece["batches"] == 2 and piece["replay_rebuilt"]["games"] > 0
    assert piece["games"] == 2 * strength_steps.SMALL_STRENGTH["games_per_batch"]  # the rebuild's are not counted
    monkeypatch.setattr(strength_steps, "STRENGTH_SEED_S", min(second["seeds"][0]["elapsed_s"], 0.5) / 0.01)
    last = campaign.run_step("strength-seeds", 600, 0.01, results, work, log=print)
    assert last["done"] and last["calls"] == 3 and [c["seed"] for c in last["this_call"]] == [1]
    summary = json.loads((results / "strength" / "strength-seeds" / "summary.json").read_text())
    seeds = {int(k): v for k, v in summary["seeds"].items()}
    assert [seeds[s]["calls"] for s in (0, 1)] == [2, 1] and [seeds[s]["rebuilds"] for s in (0, 1)] == [1, 0]
    assert seeds[0]["batches"] == 2 and seeds[1]["batches"] >= 1 and all(seeds[s]["device_s"] > 0 for s in (0, 1))
    rows = [json.loads(line) for line in gzip.open(results / "strength" / "strength-seeds" / "metrics.jsonl.gz", "rt")]
    for seed in (0, 1):  # every finished batch once, in order (a chunk is one batch here)
        assert [r["batches"] for r in rows if r["seed"] == seed] == list(range(1, seeds[seed]["batches"] + 1))
    for seed in (0, 1):
        agent = load_agent(str(results / "strength" / "strength-seeds" / f"seed-{seed}.msgpack"))
        assert agent.model_name == "resnet:blocks=1,channels=8"
    text = (results / "strength" / "strength-seeds" / "results.md").read_text()
    assert "| 0 | 2 |" in text and "| 1 | 1 |" in text


def test_the_profile_grid_runs_smaller_batches_first():
    cells = benchmark_steps.profile_cells(1.0)
    assert len(cells) == 4 * 3 * 2 and len(set(cells)) == len(cells)
    assert [games for _, games, _ in cells] == sorted(games for _, games, _ in cells)
    assert {program for program, _, _ in cells} == {"strength", "mk4", "strength-pallas", "mk4-pallas"}
    assert benchmark_steps.profile_programs(1.0)["mk4-pallas"].conv == "pallas"
    assert {precision for _, _, precision in cells} == {"default", "mixed"}
    assert benchmark_steps.profile_programs(1.0)["mk4"].model == "cnn-mk4"
    assert benchmark_steps.profile_programs(1.0)["strength"] == strength_steps.strength_config(1.0)


def test_the_profile_step_tabulates_each_programs_time_by_kind(tmp_path):
    """The profile step at a tiny scale (each program's tiny version, 2 games, float32): a row per
    program with its roof fraction and its trace's kinds of operation; the strength recipe's
    launches are counted per simulation of its searches (4 per search, two searches a ply: one
    per half of the games), Mk4's per pair of plies. A second call finds every cell done."""
    results, work = tmp_path / "results", tmp_path / "work"
    summary = campaign.run_step("profile", 600, 1e-3, results, work, log=print)
    assert summary["done"] and summary["cells_done"] == summary["cells"] == 2
    document = json.loads((results / "benchmarks" / "profile" / "profile.json").read_text())
    assert {"command", "commit", "machine", "date"} <= set(document)
    rows = {row["program"]: row for row in document["rows"]}
    strength, mk4 = rows["strength"], rows["mk4"]
    for row in (strength, mk4):
        kinds = row["op_kinds"]
        assert row["games_per_batch"] == 2 and row["precision"] == "default" and row["roof"] == "float32"
        assert 0 < row["roof_fraction"] == pytest.approx(row["network_flops_per_s"] / row["roof_flops_per_s"])
        assert sum(kinds["launches"].values()) == kinds["total_launches"] > 0
        assert 0 <= kinds["idle_s"] <= kinds["span_s"] and kinds["launches_per_step"] > 0
    sims = 4  # SMALL_STRENGTH's search: its root and 4 simulations a move
    assert strength["acting_flops_per_board"] == (sims + 1) * strength["forward_flops_per_board"]
    # one replay step of 64 positions a batch (SMALL_STRENGTH)
    assert strength["learner_positions_per_iteration"] == 64
    # a game of 2 lasts 7 to 42 plies; each ply searches both halves of the batch
    steps = strength["op_kinds"]["steps"]
    assert strength["op_kinds"]["step"] == "simulation" and 2 * sims * 7 <= steps <= 2 * sims * 42 and steps % sims == 0
    assert mk4["op_kinds"]["step"] == "pair of plies" and 4 <= mk4["op_kinds"]["steps"] <= 21
    text = (results / "benchmarks" / "profile" / "results.md").read_text()
    assert "2 of 2 cells" in text and text.count("| strength | 2 | default |") == 1 and "| mk4 | 2 |" in text
    again = campaign.run_step("profile", 600, 1e-3, results, work, log=print)
    assert (
        again["done"]
        and json.loads((results / "benchmarks" / "profile" / "profile.json").read_text())["rows"] == document["rows"]
    )


def test_a_profile_cell_that_fails_is_a_row_and_the_step_goes_on(tmp_path, monkeypatch):
    """A program that does not run on this machine (a kernel its GPU refuses) fails its cell
    alone: the row says why in one line, the table shows it, the other cells run, and the step
    is done (a later call does not try it again)."""
    real = benchmark_steps.profile_cell

    def refusing(ctx, cell, roofs, start):
        if cell[0] == "mk4":
            raise RuntimeError("Triton refused the kernel\nsecond line")
        return real(ctx, cell, roofs, start)

    monkeypatch.setattr(benchmark_steps, "profile_cell", refusing)
    results, work = tmp_path / "results", tmp_path / "work"
    summary = campaign.run_step("profile", 600, 1e-3, results, work, log=print)
    assert summary["done"] and summary["cells_done"] == summary["cells"] == 2
    rows = {
        r["program"]: r for r in json.loads((results / "benchmarks" / "profile" / "profile.json").read_text())["rows"]
    }
    assert rows["mk4"]["error"] == "RuntimeError: Triton refused the kernel" and "op_kinds" in rows["strength"]
    text = (results / "benchmarks" / "profile" / "results.md").read_text()
    assert "| mk4 | 2 | default | failed: RuntimeError: Triton refused the kernel |" in text
    assert campaign.run_step("profile", 600, 1e-3, results, work, log=print)["done"]


def test_a_command_step_keeps_json_from_stdout_alone(tmp_path):
    """A command run with --json prints its JSON on stdout and its table on stderr: the step's
    .json holds stdout (parseable), its .log both; a command that prints no JSON gets no .json."""
    emit = "import json, sys; print(json.dumps({'rows': [1, 2]})); print('a table', file=sys.stderr)"
    step = steps.command_step(
        "two commands",
        "benchmarks",
        lambda ctx: [("both", [sys.executable, "-c", emit]), ("plain", [sys.executable, "-c", "print('rows: 1 2')"])],
    )
    results = tmp_path / "results"
    results.mkdir()
    ctx = steps.Context(work=tmp_path, results=results, stop_at=time.monotonic() + 60, scale=1.0, log=print)
    summary = step.run(ctx)
    assert summary["done"]
    assert json.loads((results / "both.json").read_text()) == {"rows": [1, 2]}
    assert "a table" in (results / "both.log").read_text()
    assert not (results / "plain.json").exists() and "rows: 1 2" in (results / "plain.log").read_text()


def test_a_convnet_examples_scan_takes_the_convolutions_the_profile_measured_faster(tmp_path, monkeypatch):
    """Examples 3-5 on a GPU run Mk4's 3x3 convolutions as the profile step measured them
    fastest there (its Mk4 cells at 2,048 games in float32), Pallas's only where it computed
    what im2col computes; without those cells, with one that failed, measured on a CPU or run on
    one, `--conv auto`; a scan resumed keeps its choice."""
    common.use("blog-examples")
    import blog_steps

    profile = tmp_path / "benchmarks" / "profile" / "profile.json"
    profile.parent.mkdir(parents=True)
    gpu = "gpu: NVIDIA H100 80GB HBM3 x 1"

    def measured(pallas_s, im2col_s=0.5, machine=gpu, **pallas_row):
        cell = {"games_per_batch": 2048, "precision": "default", "machine": machine}
        rows = [{**cell, "program": "mk4", "iteration_s": im2col_s}]
        pallas = {**cell, "program": "mk4-pallas", "iteration_s": pallas_s, "pallas_difference": 1e-3, **pallas_row}
        rows += [{key: value for key, value in pallas.items() if value is not None}]
        rows += [{**cell, "program": "mk4-pallas", "precision": "mixed", "iteration_s": 0.01}]
        profile.write_text(json.dumps({"rows": rows}))
        return blog_steps.measured_conv(profile, gpu)

    assert blog_steps.measured_conv(profile, gpu) == "auto"  # no profile yet
    assert measured(0.2) == "pallas"
    assert measured(0.7) == "auto"  # slower than im2col; the mixed cell's time is not float32's
    assert measured(0.2, error="XlaRuntimeError: out of shared memory") == "auto"
    assert measured(0.2, pallas_difference=0.3) == "auto"  # fast, and wrong
    assert measured(0.2, pallas_difference=None) == "auto"  # its agreement not measured
    assert measured(0.2, machine="cpu: cpu x 1") == "auto"
    assert blog_steps.measured_conv(profile, "cpu: cpu x 1") == "auto"
    # the step's config: the choice made when the scan starts, then the scan's own
    from czjax.jobs import presets

    measured(0.2)
    ctx = steps.Context(tmp_path / "work", tmp_path / "blog-examples" / "ex3-8seeds", 0.0, 1.0, print)
    folder = tmp_path / "work" / "ex3-rwb"
    mk4, mlp = presets.get_preset("ex3-rwb").config, presets.get_preset("ex1-collapse").config
    monkeypatch.setattr(blog_steps, "machine", lambda: gpu)
    assert blog_steps.scan_config(ctx, mk4, folder).conv == "pallas"
    assert blog_steps.scan_config(ctx, mlp, folder) == mlp
    folder.mkdir(parents=True)
    (folder / "scan.json").write_text(json.dumps({"config": mk4.to_dict()}))
    assert blog_steps.scan_config(ctx, mk4, folder).conv == mk4.conv == "auto"


def test_the_profile_measures_how_far_pallas_is_from_im2col(monkeypatch):
    """The check the examples' choice of `--conv pallas` rests on: a small ResNet whose kernels
    compute what they should is within float32 rounding and a ReLU's kink of im2col's; with its
    trunk's GroupNorm left out of the kernel (a kernel that misbehaves), far from it."""
    from czjax.models import pallas_trunk

    common.use("blog-examples")
    import blog_steps

    model = "resnet:blocks=1,channels=16"
    assert benchmark_steps.pallas_difference(model, boards=8) < blog_steps.PALLAS_TOLERANCE
    monkeypatch.setattr(pallas_trunk, "_group_norm", lambda total, *rest: total)
    assert benchmark_steps.pallas_difference(model, boards=8) > 10 * blog_steps.PALLAS_TOLERANCE
