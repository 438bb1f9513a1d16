"""Named experiment steps, each resumable within a time limit: ``run`` works on a step for at
most ``--max-seconds``, stops cleanly (its checkpoint written) and continues where it stopped the
next time, so a long experiment runs as a series of short calls on whatever machine is at hand.

Every step
- keeps its state in its work folder ``runs/campaign/<step>/`` (a later call continues from it,
  on this machine or on another one the folder is copied to);
- after every call, done or not, writes its results to ``docs/results/<study>/<step>/``, beside
  the rest of its study's (``experiments/<study>/README.md``):
  ``summary.json`` (state, progress, command, wall time, machine), ``results.md`` (the milestone
  table), figures, and metrics small enough to commit (gzipped, decimated); ``--copy-to DIR``
  also copies those files to ``DIR/<step>/`` (for a machine whose outputs are read from one folder).

    python experiments/campaign.py status                    # what is done, what is next
    python experiments/campaign.py run next --max-seconds 540  # on a GPU, the next step that gains from one
    python experiments/campaign.py run ex1-8seeds --max-seconds 540 --copy-to /tmp/results

``--scale F`` runs F of each step's work (a test or a CPU smoke run); a step's results record
the scale they were run at, and ``status`` counts only full-scale results as done.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import common
from czjax.cli import flags

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
WORK = ROOT / "runs" / "campaign"
METRICS_ROWS = 400  # rows of metrics kept per configuration when they are committed


class Context(NamedTuple):
    work: Path  # the step's work folder (resumable state)
    results: Path  # docs/results/<study>/<step>/
    stop_at: float  # time.monotonic() after which no new piece of work starts
    scale: float
    log: Callable[[str], None]


class Step(NamedTuple):
    description: str
    run: Callable[[Context], dict]  # returns the summary: at least {"done": bool, "progress": float}
    study: str  # the study it belongs to: experiments/<study>/, its results in docs/results/<study>/<step>/
    # False where a CPU does the step as fast as a GPU, measured: `run next` on a GPU skips it
    gains_from_gpu: bool = True


# --- The blog's examples, 8 seeds each, as one vmapped scan ----------------------------------


def blog_example(number: int, seeds: int = 8) -> Step:
    from czjax.run import presets

    common.use("blog-examples")
    from blog_examples import EXAMPLES

    preset_name = EXAMPLES[number]
    preset = presets.get_preset(preset_name)

    def run(ctx: Context) -> dict:
        from blog_examples import BLOG, figure, format_table, milestone_rows

        from czjax.run import scan

        batches = max(1, round(preset.batches * ctx.scale))
        folder = ctx.work / preset_name
        resume = (folder / "scan.json").exists()
        start = time.perf_counter()
        rows = scan.run_scan(
            preset.config,
            preset.hparams,
            [{}],
            list(range(seeds)),
            folder,
            batches,
            resume=resume,
            log=ctx.log,
            stop_at=ctx.stop_at,
        )
        done_batches = min(
            (max((r["batches"] for r in rows if r["seed"] == s), default=0) for s in range(seeds)), default=0
        )
        config = preset.config
        window = 10 * config.batches_per_chunk * config.games_per_batch
        table = milestone_rows(
            rows,
            BLOG[preset_name],
            preset.batches * config.games_per_batch,
            done_batches * config.games_per_batch,
            window,
        )
        if rows:
            figure(preset_name, preset.description, rows, table, ctx.results / f"{preset_name}.png", 10)
        write_rows(ctx.results / "metrics.jsonl.gz", rows)
        (ctx.results / "results.md").write_text(
            f"# Example {number} ({preset_name}), {seeds} seeds\n\n{preset.description}\n\n"
            f"{done_batches:,} of {batches:,} batches of {config.games_per_batch} games per seed.\n\n```\n{format_table(preset_name, table)}\n```\n"
        )
        return {
            "done": done_batches >= batches,
            "progress": done_batches / batches,
            "batches": batches,
            "batches_done": done_batches,
            "seeds": seeds,
            "games_per_seed": done_batches * config.games_per_batch,
            "milestones": table,
            "call_wall_s": time.perf_counter() - start,
            "preset": preset_name,
        }

    # Examples 1 and 2 (the SimpleMLP) run on this 2-core CPU at ~7,900 games/s over the 8
    # seeds; examples 3-5 (Mk4) at ~60-90 games/s a seed there, where one H200 ran examples 4 and
    # 5 at ~12,000 and ~5,000 games/s over the 8 seeds (2026-11-26): the convnets need the GPU.
    convnet = preset.config.model.startswith("cnn")
    return Step(
        f"example {number} ({preset_name}) x {seeds} seeds vmapped, the preset's full length",
        run,
        "blog-examples",
        gains_from_gpu=convnet,
    )


# --- The strength recipe for seven minutes ------------------------------------------------------


# Seconds of training (compiling included) in the strength step: a call with the default
# --max-seconds 540 starts no work after 459 s, and on an H200 the recipe took 29 s to compile.
# (The first call, 2026-11-26, trained 507 s of a 540-s budget before its call's limit.)
STRENGTH_BUDGET_S = 420

# The strength step below full scale (tests, CPU smoke runs): the same recipe, tiny.
SMALL_STRENGTH = {
    "model": "resnet:blocks=1,channels=8",
    "games_per_batch": 8,
    "search": "gumbel:sims=4,considered=4,move=policy,rescale=0",
    "replay.capacity": 4096,
    "replay.batch": 64,
    "replay.steps": 1,
    "eval_games": 4,
    "batches_per_chunk": 1,
}


def strength_config(scale: float, search_options: str = ""):
    """The strength recipe's config: preset gumbel-az-gpu (its tiny version below full scale),
    ``search_options`` appended to its search's."""
    from czjax.run import presets

    config = presets.get_preset("gumbel-az-gpu").config
    config = config if scale == 1 else config.override(SMALL_STRENGTH)
    return config.override({"search": f"{config.search},{search_options}"}) if search_options else config


def strength_run(ctx: Context, search_options: str = "") -> dict:
    """The strength recipe (preset gumbel-az-gpu, seed 0) for STRENGTH_BUDGET_S of training,
    ``search_options`` appended to its search's (``prior_temperature=1.5``: the improved recipe)."""
    from czjax.agents import load_params
    from czjax.learn.settings import HParams
    from czjax.run import loop, plots, presets
    from czjax.util import checkpoint

    preset = presets.get_preset("gumbel-az-gpu")
    config = strength_config(ctx.scale, search_options)
    recipe = f"gumbel-az-gpu{f' with {search_options}' if search_options else ''}"
    budget = STRENGTH_BUDGET_S * ctx.scale
    out = ctx.work / "run"
    resume = (out / "checkpoint.msgpack").exists()
    left = max(1.0, ctx.stop_at - time.monotonic())
    summary = loop.run_training(
        config,
        HParams.create(**preset.hparams),
        out,
        seed=0,
        time_budget_s=min(budget, _elapsed(out) + left),
        resume=resume,
        log=ctx.log,
        title=f"the strength recipe ({recipe}) for {STRENGTH_BUDGET_S} s (seed 0)",
    )
    rows = loop.read_metrics(out / "metrics.jsonl")
    elapsed = rows[-1]["elapsed_s"] if rows else 0.0
    write_rows(ctx.results / "metrics.jsonl.gz", rows)
    plots.dashboard(rows, ctx.results / "dashboard.png", f"{recipe}, seed 0")
    _, params, _ = load_params(out / "checkpoint.msgpack")
    checkpoint.save_weights(
        ctx.results / "czjax.msgpack",
        config.model,
        params,
        {
            "preset": "gumbel-az-gpu",
            "search": config.search,
            "seed": 0,
            "games": rows[-1]["games"] if rows else 0,
            "elapsed_s": elapsed,
        },
    )
    last = rows[-1] if rows else {}
    keys = [k for k in last if k.startswith("pons_") or k.startswith("public_")]
    (ctx.results / "results.md").write_text(
        f"# Gumbel AlphaZero for {STRENGTH_BUDGET_S} s ({recipe}, seed 0)\n\n"
        f"{last.get('games', 0):,} games in {elapsed:.0f} s of training.\n\n"
        + "\n".join(f"- {k}: {last[k]:.3f}" for k in sorted(keys))
        + "\n"
    )
    return {
        "done": elapsed >= budget - 1,
        "progress": min(1.0, elapsed / budget),
        "elapsed_s": elapsed,
        "summary": summary,
        "last_row": last,
    }


def _elapsed(out: Path) -> float:
    from czjax.run import loop

    rows = loop.read_metrics(out / "metrics.jsonl")
    return rows[-1]["elapsed_s"] if rows else 0.0


# --- The strength recipe for 30 minutes a seed, three seeds, in short calls ---------------------


# Seconds of training (compiling included, as in the strength step) per seed, and the seeds.
STRENGTH_SEED_S = 1800
STRENGTH_SEEDS = (0, 1, 2)
# A seed that is not the first of its call starts only with this much of the call left (at full
# scale): compiling (29 s on an H200), rebuilding the replay buffer from the portable state (about
# 15 batches of 2,048 games, under a minute at the recipe's 545 games/s there) and one chunk of 5
# batches (19 s) come before any progress.
STRENGTH_PIECE_S = 120
CALLS = "calls.jsonl"  # the step's record of its calls, one line per seed worked on in a call


def strength_seeds(ctx: Context) -> dict:
    """The strength recipe (preset gumbel-az-gpu) for STRENGTH_SEED_S of training per seed, over
    STRENGTH_SEEDS one after another, each call doing what fits before its deadline. A seed's run
    folder (``<work>/seed-N``) keeps a portable checkpoint (``portable.msgpack``: the state without
    its replay buffer's rows, about 6 MB), so the folder moves to another machine without its
    checkpoints (about 170 MB each) and the next call resumes there, its buffer rebuilt. Every call
    adds a line per seed it worked on to ``<work>/calls.jsonl`` (seconds, batches, the rebuild),
    from which the results say how many calls and device minutes each seed used."""
    from czjax.agents import load_params
    from czjax.learn.settings import HParams
    from czjax.run import folders, loop, presets
    from czjax.util import checkpoint

    preset = presets.get_preset("gumbel-az-gpu")
    config = strength_config(ctx.scale)
    budget = STRENGTH_SEED_S * ctx.scale
    calls = read_calls(ctx.work / CALLS)
    call = 1 + max((c["call"] for c in calls), default=0)
    worked = 0
    for seed in STRENGTH_SEEDS:
        out = ctx.work / f"seed-{seed}"
        rows = saved_rows(out)
        if rows and rows[-1]["elapsed_s"] >= budget:
            continue
        if worked and ctx.stop_at - time.monotonic() < STRENGTH_PIECE_S * ctx.scale:
            break
        start = time.monotonic()
        summary = loop.run_training(
            config,
            HParams.create(**preset.hparams),
            out,
            seed=seed,
            time_budget_s=budget,
            resume=out.exists(),
            portable=True,
            stop_at=ctx.stop_at,
            log=ctx.log,
            title=f"the strength recipe (gumbel-az-gpu) for {STRENGTH_SEED_S} s, seed {seed}",
        )
        worked += 1
        entry = {
            "call": call,
            "seed": seed,
            "seconds": time.monotonic() - start,
            "batches": summary["batches"],
            "games": summary["games"],
            "elapsed_s": summary["elapsed_s"],
            "replay_rebuilt": summary["replay_rebuilt"],
            "stopped": summary["interrupted"] or "target",
            "machine": machine(),
        }
        calls.append(entry)
        with (ctx.work / CALLS).open("a") as f:
            f.write(json.dumps(entry) + "\n")
        _, params, _ = load_params(out / folders.PORTABLE)
        checkpoint.save_weights(
            ctx.results / f"seed-{seed}.msgpack",
            config.model,
            params,
            {"preset": "gumbel-az-gpu", "search": config.search, "seed": seed, **entry},
        )
    seeds = {
        seed: seed_record(ctx.work / f"seed-{seed}", [c for c in calls if c["seed"] == seed]) for seed in STRENGTH_SEEDS
    }
    write_seed_results(ctx, seeds, budget)
    progress = sum(min(1.0, s["elapsed_s"] / budget) for s in seeds.values()) / len(seeds)
    return {
        "done": all(s["elapsed_s"] >= budget for s in seeds.values()),
        "progress": progress,
        "budget_s_per_seed": budget,
        "seeds": seeds,
        "this_call": [c for c in calls if c["call"] == call],
    }


def saved_rows(out: Path) -> list[dict]:
    """A run folder's metrics rows up to its newest saved state (rows a killed call logged after
    its last save are not the run's: the next call trains those batches again)."""
    from czjax.run import loop

    done = loop.saved_batches(out) if out.exists() else None
    return [r for r in loop.read_metrics(out / "metrics.jsonl") if done is not None and r["batches"] <= done]


def read_calls(path: Path) -> list[dict]:
    """The lines of a step's ``calls.jsonl`` (none before its first call)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def seed_record(out: Path, calls: list[dict]) -> dict:
    """What one seed of ``strength-seeds`` has used and reached: its calls and their device
    seconds (from the call's start on the seed to its end: compiling, the buffer's rebuild,
    training and saving), its training time, games and last metrics, and its rebuilds."""
    rows = saved_rows(out)
    rebuilds = [c["replay_rebuilt"] for c in calls if c["replay_rebuilt"]]
    return {
        "calls": len(calls),
        "device_s": sum(c["seconds"] for c in calls),
        "elapsed_s": rows[-1]["elapsed_s"] if rows else 0.0,
        "batches": rows[-1]["batches"] if rows else 0,
        "games": rows[-1]["games"] if rows else 0,
        "rebuilds": len(rebuilds),
        "rebuild_games": sum(r["games"] for r in rebuilds),
        "rebuild_s": sum(r["seconds"] for r in rebuilds),
        "last_row": rows[-1] if rows else {},
    }


def write_seed_results(ctx: Context, seeds: dict, budget: float) -> None:
    """``results.md`` (a row per seed), ``metrics.jsonl.gz`` (every seed's rows, marked with
    their seed) and a dashboard per seed."""
    from czjax.run import plots

    every = []
    for seed in seeds:
        rows = saved_rows(ctx.work / f"seed-{seed}")
        every += [{**r, "seed": seed, "config": seed} for r in rows]
        if rows:
            plots.dashboard(rows, ctx.results / f"dashboard-seed-{seed}.png", f"gumbel-az-gpu, seed {seed}")
    write_rows(ctx.results / "metrics.jsonl.gz", every)
    lines = [
        f"# Gumbel AlphaZero for {STRENGTH_SEED_S:g} s a seed (gumbel-az-gpu, seeds "
        f"{', '.join(map(str, seeds))}), in short calls\n",
        "Each seed trains in calls of at most `--max-seconds`, resumed from its portable state (the "
        "replay buffer rebuilt by games that are not counted); device minutes are the calls' time on "
        "the seed: compiling, rebuilding, training, saving.\n",
        "| seed | calls | device minutes | training s | games | rebuilds (games, s) | Pons mean error "
        "| vs RandomPunisher | weights |",
        "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for seed, s in seeds.items():
        last = s["last_row"]
        pons = f"{last['pons_mean_error']:.1f}" if "pons_mean_error" in last else ""
        punisher = f"{last['eval_win_rate']:.3f}" if "eval_win_rate" in last else ""
        weights = f"`seed-{seed}.msgpack`" if s["calls"] else ""
        lines.append(
            f"| {seed} | {s['calls']} | {s['device_s'] / 60:.1f} | {s['elapsed_s']:.0f} of {budget:g} "
            f"| {s['games']:,} | {s['rebuilds']} ({s['rebuild_games']:,}, {s['rebuild_s']:.0f}) | {pons} "
            f"| {punisher} | {weights} |"
        )
    (ctx.results / "results.md").write_text("\n".join(lines) + "\n")


# --- Where the time goes: the two programs under the profiler ----------------------------------


# The profile step's grid: each program at each batch size (games) and precision, the smaller
# batches first, so that a call that stops early has measured every program at them.
PROFILE_GAMES = (2048, 8192, 32768)
PROFILE_PRECISIONS = ("default", "mixed")
# Seconds of a call in which the profile step starts cells: it starts none past them, nor one
# that its program's last cell in the call, scaled by the games, says would end past them
# (the call's first cell excepted, so that every cell is reached).
PROFILE_BUDGET_S = 240


def profile_programs(scale: float) -> dict:
    """The profile step's programs by name: the strength recipe's iteration (preset
    gumbel-az-gpu) and Mk4's (self-play against a frozen copy and one AdamW update, as `czjax
    bench train` times it); below full scale, both with the tiny strength recipe's network."""
    from czjax.learn.settings import TrainConfig

    mk4 = TrainConfig(model="cnn-mk4" if scale == 1 else SMALL_STRENGTH["model"], opponent="self")
    return {"strength": strength_config(scale), "mk4": mk4}


def profile_cells(scale: float) -> list[tuple[str, int, str]]:
    """``(program, games, precision)`` in the order the step runs them. Below full scale, a
    smoke run of the step's code: the smallest batch, scaled, at the default precision only."""
    if scale == 1:
        return [(p, g, prec) for g in PROFILE_GAMES for p in profile_programs(scale) for prec in PROFILE_PRECISIONS]
    return [(p, max(2, round(PROFILE_GAMES[0] * scale)), "default") for p in profile_programs(scale)]


def profile_run(ctx: Context) -> dict:
    """Each cell of the grid (:func:`profile_cells`): one iteration of its program compiled
    (the GPU's kernels each naming their instruction, czjax.bench.profiling), run once, then run
    once more under jax.profiler, the traced call timed; its row is `czjax bench train`'s with
    the roof of its precision (measured once a call) and the trace's kinds of operation. A
    cell's row is kept in the work folder, so a later call runs only the cells left; the
    results (``profile.json``, ``results.md``) hold every cell run so far."""
    from czjax.bench import harness, provenance, roofline

    cells = profile_cells(ctx.scale)
    programs = profile_programs(ctx.scale)
    rows_folder = ctx.work / "rows"
    rows_folder.mkdir(parents=True, exist_ok=True)
    deadline = min(ctx.stop_at, time.monotonic() + PROFILE_BUDGET_S)
    roofs: dict = {}
    last: dict[str, tuple[int, float]] = {}  # program -> (games, seconds) of its last cell in this call
    for program, games, precision_name in cells:
        path = rows_folder / f"{program}-{games}-{precision_name}.json"
        if path.exists():
            continue
        now = time.monotonic()
        expected = last[program][1] * games / last[program][0] if program in last else 0.0
        if now > deadline or (last and now + expected > deadline):
            continue
        precisions = tuple(dict.fromkeys(prec for _, _, prec in cells))
        roofs = roofs or roofline.measure_roofs(max(64, round(roofline.ROOF_SIZE * ctx.scale)), precisions)
        ctx.log(f"profile: {program}, {games:,} games, precision {precision_name}")
        config = programs[program].override(
            {
                "games_per_batch": games,
                "precision": precision_name,
                "batches_per_chunk": 1,
                "eval_games": 2,
                "solver_eval": "off",
            }
        )
        row = harness.bench_config(config, 0, profile=ctx.work / "traces" / path.stem, each_kernel=True)
        row = roofline.with_roof(row, roofs)
        row.update(program=program, cell_s=time.monotonic() - now, machine=machine(), date=time.strftime("%Y-%m-%d"))
        path.write_text(json.dumps(row, default=str))
        last[program] = (games, time.monotonic() - now)
    rows = [
        json.loads(path.read_text())
        for path in (rows_folder / f"{p}-{g}-{prec}.json" for p, g, prec in cells)
        if path.exists()
    ]
    (ctx.results / "profile.json").write_text(json.dumps({**provenance.provenance(), "rows": rows}, indent=1))
    (ctx.results / "results.md").write_text(profile_table(rows, len(cells)))
    return {
        "done": len(rows) == len(cells),
        "progress": len(rows) / len(cells),
        "cells": len(cells),
        "cells_done": len(rows),
    }


def profile_table(rows: list[dict], cells: int) -> str:
    """The profile step's results.md: a row per cell, each kind of operation's share of the
    traced iteration's span (summed over streams, or a CPU's threads), the idle share, the
    launches per iteration and per step of the program's innermost loop."""
    from czjax.bench import profiling

    kinds = profiling.KINDS
    columns = [
        ("program", "---"),
        ("games", "---:"),
        ("precision", "---"),
        ("s/iteration", "---:"),
        ("net GFLOP/s", "---:"),
        ("roof", "---"),
        ("of roof", "---:"),
        *((kind, "---:") for kind in kinds),
        ("idle", "---:"),
        ("launches/iteration", "---:"),
        ("launches/step", "---:"),
        ("step", "---"),
    ]
    lines = ["| " + " | ".join(name for name, _ in columns) + " |", "| " + " | ".join(a for _, a in columns) + " |"]
    for row in rows:
        table = row["op_kinds"]
        span = table["span_s"] or 1.0
        per_step = table.get("launches_per_step")
        values = [
            row["program"],
            f"{row['games_per_batch']:,}",
            row["precision"],
            f"{row['iteration_s']:.4f}",
            f"{row['network_flops_per_s'] / 1e9:,.1f}",
            row["roof"],
            f"{100 * row['roof_fraction']:.1f}%",
            *(f"{100 * table['seconds'][kind] / span:.1f}%" for kind in kinds),
            f"{100 * table['idle_s'] / span:.1f}%",
            f"{table['total_launches']:,.0f}",
            "-" if per_step is None else f"{per_step:,.1f}",
            table.get("step", "-"),
        ]
        lines.append("| " + " | ".join(values) + " |")
    machines = sorted({row["machine"] for row in rows})
    return (
        "# Where the time goes: the strength recipe's iteration and Mk4's under jax.profiler\n\n"
        f"{len(rows)} of {cells} cells (program x games x precision), one traced iteration each"
        f"{' on ' + ', '.join(machines) if machines else ''}; `profile.json` holds every row "
        "(`czjax bench train`'s keys, its `op_kinds` and `phases`; docs/benchmarks.md).\n\n"
        "A kind's share is its operations' time over the traced iteration's span, summed over streams "
        "(a CPU's threads), so kinds running side by side can add up past 100%; `host` holds transfers "
        "between host and device and the control of loops and branches; idle is the span's time with no "
        "operation running. net GFLOP/s and of roof: the network's FLOPs counted from the boards played and "
        "trained on, over the roof of the row's precision measured in the same call.\n\n" + "\n".join(lines) + "\n"
    )


# --- Commands run as they are: the suite, the benchmarks, the comparisons -------------------


# The suite is compile-bound: one xdist worker a core, two cores left to the driver and pytest.
SUITE_WORKERS = max(2, min(14, (os.cpu_count() or 4) - 2))


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def command_step(description: str, study: str, commands: Callable[[Context], list[tuple[str, list[str]]]]) -> Step:
    """A step that runs commands one after another, each output saved as ``<name>.log`` (and
    ``<name>.json`` when the command prints JSON); done when every command succeeded."""

    def run(ctx: Context) -> dict:
        results = {}
        for name, argv in commands(ctx):
            left = ctx.stop_at - time.monotonic()
            if left <= 5:
                results[name] = {"returncode": None, "note": "not run: no time left in this call"}
                continue
            ctx.log(f"$ {' '.join(argv)}")
            start = time.perf_counter()
            stdout = ""
            try:
                proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=left)
                code, stdout, text = proc.returncode, proc.stdout, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as err:
                text = "".join(
                    o if isinstance(o, str) else o.decode(errors="replace") for o in (err.stdout, err.stderr) if o
                )
                code, text = None, f"{text}\n(stopped at the call's time limit)"
            (ctx.results / f"{name}.log").write_text(text[-2_000_000:])
            if code == 0 and is_json(stdout):  # --json prints JSON on stdout, its table on stderr
                (ctx.results / f"{name}.json").write_text(stdout)
            results[name] = {"returncode": code, "wall_s": time.perf_counter() - start, "command": " ".join(argv)}
        ok = sum(r["returncode"] == 0 for r in results.values())
        lines = []
        for name, r in results.items():
            state = "ok" if r["returncode"] == 0 else (r.get("note") or f"exit {r['returncode']}")
            took = f" ({r['wall_s']:.0f} s)" if "wall_s" in r else ""
            lines.append(f"- `{r.get('command', name)}`: {state}{took}")
        (ctx.results / "results.md").write_text(f"# {description}\n\n" + "\n".join(lines) + "\n")
        return {"done": ok == len(results), "progress": ok / max(1, len(results)), "commands": results}

    return Step(description, run, study)


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def czjax(*args: str) -> list[str]:
    return python("-m", "czjax.cli", *args)


STEPS: dict[str, Step] = {
    # first: on a GPU it says where the time of the steps after it goes (`run next` picks it there)
    "profile": Step(
        f"the strength recipe's iteration and Mk4's at {', '.join(f'{g:,}' for g in PROFILE_GAMES)} games, "
        f"{' and '.join(PROFILE_PRECISIONS)} precision, under jax.profiler: time by kind of operation",
        profile_run,
        "benchmarks",
    ),
    "strength-10min": Step(
        f"czjax train --preset gumbel-az-gpu --time-budget {STRENGTH_BUDGET_S} (seed 0): the strength recipe for seven "
        "minutes, one call",
        strength_run,
        "strength",
    ),
    # the strength issue's item 7: the same with the ablations' clearest gain, the search's prior
    # at temperature 1.5 (docs/strength.md); shipped if it beats czjax@4 under the protocol
    "strength-ptemp": Step(
        f"the strength recipe with prior_temperature=1.5 for {STRENGTH_BUDGET_S} s (seed 0), one call",
        functools.partial(strength_run, search_options="prior_temperature=1.5"),
        "strength",
    ),
    # the strength issue's goal at full length: the recipe for 30 minutes of one GPU per seed,
    # over calls of at most --max-seconds whose state moves between machines (docs/results/README.md)
    "strength-seeds": Step(
        f"the strength recipe for {STRENGTH_SEED_S} s of training per seed, seeds "
        f"{', '.join(map(str, STRENGTH_SEEDS))}, over as many calls as it takes",
        strength_seeds,
        "strength",
    ),
    "ex3-8seeds": blog_example(3),
    "ex1-8seeds": blog_example(1),
    "ex2-8seeds": blog_example(2),
    "ex4-8seeds": blog_example(4),
    "ex5-8seeds": blog_example(5),
    # the versions it passed with become constraints/gpu-h100.txt (scripts/refresh-constraints.sh gpu FILE)
    "suite-gpu": command_step(
        "the test suite on the GPU",
        "test-suite",
        lambda ctx: [
            ("versions", python("-m", "pip", "freeze", "--exclude-editable")),
            # -v: a run stopped at the call's limit still names the tests that failed so far
            ("pytest", python("-m", "pytest", "-v", "-n", str(SUITE_WORKERS), "tests")),
        ],
    ),
    "bench": command_step(
        "benchmark tables",
        "benchmarks",
        lambda ctx: [
            (
                "bench-train",
                czjax(
                    "bench",
                    "train",
                    "--model",
                    "mlp",
                    "cnn-mk4",
                    "--games-per-batch",
                    "50",
                    "4096",
                    "--control-flow",
                    "cond",
                    "static",
                    "--json",
                ),
            ),
            ("bench-search", czjax("bench", "search", "--json")),
            ("bench-rollout", czjax("bench", "rollout", "--json")),
        ],
    ),
    "same-start": command_step(
        "same_start.py --games 100000 --seeds 4 --sides czjax",
        "same-start",
        lambda ctx: [
            (
                "same-start",
                python(
                    "experiments/same-start/same_start.py",
                    "--games",
                    str(max(2, round(100_000 * ctx.scale))),
                    "--seeds",
                    "4",
                    "--sides",
                    "czjax",
                    "--out",
                    str(ctx.work / "same-start"),
                    "--resume",
                ),
            )
        ],
    ),
    # mixed precision against float32 from the same start at the GPU's scale (issue: mixed
    # precision that learns the same); the CPU's comparison is 4 seeds x 25,000 games
    "mixed-ex3": command_step(
        "mixed_precision.py ex3 --games 100000 --seeds 8: example 3 in mixed precision against float32",
        "mixed-precision",
        lambda ctx: [
            (
                "mixed-ex3",
                python(
                    "experiments/mixed-precision/mixed_precision.py",
                    "ex3",
                    "--games",
                    str(max(100, round(100_000 * ctx.scale))),
                    "--seeds",
                    "8",
                    "--root",
                    str(ctx.work / "mixed-precision"),
                    "--out",
                    str(ctx.results / "verdicts"),
                ),
            )
        ],
    ),
    "soft-vs-hard": command_step(
        "soft_vs_hard.py --recipe gumbel at scale",
        "soft-vs-hard",
        lambda ctx: [
            (
                "soft-vs-hard",
                python(
                    "experiments/soft-vs-hard/soft_vs_hard.py",
                    "--recipe",
                    "gumbel",
                    "--batches",
                    str(max(2, round(5000 * ctx.scale))),
                    "--seeds",
                    "4",
                    "--sims",
                    "32",
                    "--out",
                    str(ctx.work / "soft-vs-hard"),
                    "--resume",
                ),
            )
        ],
    ),
}


# --- Results: files, status, the copy ---------------------------------------------------------


def write_rows(path: Path, rows: list[dict]) -> None:
    """Metrics rows, gzipped, at most METRICS_ROWS per configuration (evenly spaced, the last kept)."""
    by_config: dict = {}
    for row in rows:
        by_config.setdefault(row.get("config", 0), []).append(row)
    kept = []
    for group in by_config.values():
        step = max(1, -(-len(group) // METRICS_ROWS))
        kept.extend(group[::step] + ([group[-1]] if (len(group) - 1) % step else []))
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept)


def results_folder(results_root: Path, name: str) -> Path:
    """Where step ``name`` writes its results: ``<results_root>/<study>/<step>/``."""
    return results_root / STEPS[name].study / name


def read_summary(results_root: Path, name: str) -> dict | None:
    path = results_folder(results_root, name) / "summary.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def state_of(summary: dict | None) -> str:
    if summary is None:
        return "not started"
    if summary.get("scale", 1.0) != 1.0:
        return f"run at scale {summary['scale']} only ({100 * summary.get('progress', 0):.0f}%)"
    return "done" if summary.get("done") else f"partial ({100 * summary.get('progress', 0):.0f}%)"


def next_step(results_root: Path, on_gpu: bool | None = None) -> str | None:
    """The first step not done; with ``on_gpu`` True only those that gain from a GPU, with False
    only those that do not (None: any)."""
    return next(
        (
            name
            for name, step in STEPS.items()
            if state_of(read_summary(results_root, name)) != "done" and on_gpu in (None, step.gains_from_gpu)
        ),
        None,
    )


def status(results_root: Path) -> str:
    lines = [f"{'step':16s} {'state':34s} what"]
    for name, step in STEPS.items():
        summary = read_summary(results_root, name)
        when = f" (last run {summary['finished']}, {summary.get('machine', '?')})" if summary else ""
        lines.append(f"{name:16s} {state_of(summary):34s} {step.description}{when}")
    upcoming = next_step(results_root)
    lines.append(f"next: {upcoming}" if upcoming else "every step is done")
    for where, on_gpu in (("a GPU", True), ("the CPU", False)):
        name = next_step(results_root, on_gpu)
        if name:
            lines.append(f"  next on {where}: python experiments/campaign.py run {name} --max-seconds 540")
    return "\n".join(lines)


def machine() -> str:
    try:
        import jax

        devices = jax.devices()
        return f"{devices[0].platform}: {devices[0].device_kind} x {len(devices)}"
    except Exception:  # noqa: BLE001 - a description only
        return platform.machine()


def running_on_gpu() -> bool:
    import jax

    return jax.default_backend() == "gpu"


def copy_out(results: Path, name: str, copy_to: str | None) -> None:
    """The step's result files also to ``copy_to/<step>/`` (None: nowhere)."""
    if not copy_to:
        return
    target = Path(copy_to) / name
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(results.iterdir()):
        if path.is_file():
            shutil.copy2(path, target / path.name)


def run_step(
    name: str,
    max_seconds: float,
    scale: float,
    results_root: Path,
    work_root: Path,
    log=print,
    copy_to: str | None = None,
) -> dict:
    step = STEPS[name]
    results = results_folder(results_root, name)
    results.mkdir(parents=True, exist_ok=True)
    work = work_root / name
    work.mkdir(parents=True, exist_ok=True)
    begun = time.monotonic()
    # no new piece of work (a chunk, a command) starts in the last 15% of the call: a chunk
    # started before that point ends inside it
    ctx = Context(work=work, results=results, stop_at=begun + 0.85 * max_seconds, scale=scale, log=log)
    log(f"campaign: {name}: {step.description} (at most {max_seconds:.0f} s{'' if scale == 1 else f', scale {scale}'})")
    summary = step.run(ctx)
    previous = read_summary(results_root, name) or {}
    summary.update(
        step=name,
        description=step.description,
        scale=scale,
        machine=machine(),
        finished=time.strftime("%Y-%m-%d %H:%M:%S"),
        call_s=time.monotonic() - begun,
        calls=previous.get("calls", previous.get("slots", 0)) + 1,
        command=f"python experiments/campaign.py run {name} --max-seconds {max_seconds:.0f}",
    )
    (results / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    copy_out(results, name, copy_to)
    log(f"campaign: {name}: {state_of(summary)}; results in {results}")
    return summary


def launch_step(launcher, name: str, args, argv) -> int:
    """``run STEP --launcher ...``: the step as one submitit job that calls this script for the
    step (at most --max-seconds a call, exit 3 while not done) until it is done, requeued after
    preemption or its time limit; waits for it unless --no-wait."""
    from czjax.run import launch

    again = ["--results", args.results, "--work", args.work, "run", name, "--max-seconds", str(args.max_seconds)]
    again += ["--scale", str(args.scale)] + (["--copy-to", args.copy_to] if args.copy_to else [])
    job_folder = Path(args.work) / name / launch.JOBS
    executor = launcher.executor(job_folder)
    job = executor.submit(launch.CommandJob([sys.executable, str(Path(__file__).resolve()), *again], os.getcwd(), (3,)))
    print(f"campaign: {name}: submitted as job {job.job_id} ({launcher.kind}); its log in {job_folder}/", flush=True)
    if args.no_wait:
        return 0
    launch.wait([job])
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--results", default=str(RESULTS), help="where results are written and read (default: docs/results)"
    )
    parser.add_argument("--work", default=str(WORK), help="the steps' work folders (default: runs/campaign)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="every step: done, partial or not started; and the next")
    run = commands.add_parser("run", help="run a step (or 'next') for at most --max-seconds")
    run.add_argument("step", help=f"'next' or one of: {', '.join(STEPS)}")
    run.add_argument(
        "--max-seconds", type=float, default=540.0, help="stop cleanly before this many seconds (default: %(default)s)"
    )
    run.add_argument(
        "--copy-to", metavar="DIR", default=None, help="also copy the step's results to DIR/<step>/ (default: no copy)"
    )
    run.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="fraction of the step's work, for tests and CPU smoke runs (default: 1)",
    )
    flags.add_launcher_flags(run, "one: the step, run in calls of at most --max-seconds until it is done")
    args = parser.parse_args(argv)
    results_root, work_root = Path(args.results), Path(args.work)
    if args.command == "status":
        try:
            print(status(results_root), flush=True)
        except BrokenPipeError:  # `status | head`: as a process ended by SIGPIPE
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141
        return 0
    name = next_step(results_root, running_on_gpu()) if args.step == "next" else args.step
    if name is None:
        print("campaign: every step is done")
        return 0
    if name not in STEPS:
        parser.error(f"unknown step {name!r}; choose 'next' or one of {', '.join(STEPS)}")
    if not args.max_seconds > 0 or not 0 < args.scale <= 1:
        parser.error("--max-seconds must be positive and --scale in (0, 1]")
    try:
        launcher = flags.launcher(args)
        if launcher is not None:
            return launch_step(launcher, name, args, argv)
        summary = run_step(
            name,
            args.max_seconds,
            args.scale,
            results_root,
            work_root,
            log=lambda m: print(m, flush=True),
            copy_to=args.copy_to,
        )
    except (ValueError, OSError) as err:
        print(f"campaign: {name}: {err}", file=sys.stderr)
        return 2
    return 0 if summary.get("done") else 3


if __name__ == "__main__":
    sys.exit(main())
