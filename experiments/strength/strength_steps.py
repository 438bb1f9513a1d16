"""The campaign's steps of the strength recipe on a GPU (``docs/results/strength/``):

- ``strength-10min``: the recipe (preset gumbel-az-gpu, seed 0) for seven minutes, one call; the
  shipped model ``czjax@4`` came from it;
- ``strength-ptemp``: the same with the search's prior at temperature 1.5, the ablations'
  clearest gain (docs/strength.md), to be shipped if it beats czjax@4 under the protocol;
- ``strength-seeds``: the recipe for 30 minutes of one GPU per seed, three seeds, over calls of
  at most ``--max-seconds`` whose state moves between machines (docs/results/README.md).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

from czjax.players.loading import load_params
from steps import Context, Step, machine, write_rows

PRESET = "gumbel-az-gpu"

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

# Seconds of training (compiling included, as in the strength step) per seed, and the seeds.
STRENGTH_SEED_S = 1800
STRENGTH_SEEDS = (0, 1, 2)
# A seed that is not the first of its call starts only with this much of the call left (at full
# scale): compiling (29 s on an H200), rebuilding the replay buffer from the portable state (about
# 15 batches of 2,048 games, under a minute at the recipe's 545 games/s there) and one chunk of 5
# batches (19 s) come before any progress.
STRENGTH_PIECE_S = 120
CALLS = "calls.jsonl"  # the step's record of its calls, one line per seed worked on in a call


def strength_config(scale: float, search_options: str = ""):
    """The strength recipe's config: preset gumbel-az-gpu (its tiny version below full scale),
    ``search_options`` appended to its search's."""
    from czjax.jobs import presets

    config = presets.get_preset(PRESET).config
    config = config if scale == 1 else config.override(SMALL_STRENGTH)
    return config.override({"search": f"{config.search},{search_options}"}) if search_options else config


def recipe_hparams():
    from czjax.jobs import presets
    from czjax.learn.settings import HParams

    return HParams.create(**presets.get_preset(PRESET).hparams)


# --- The strength recipe for seven minutes ------------------------------------------------------


def strength_run(ctx: Context, search_options: str = "") -> dict:
    """The strength recipe (preset gumbel-az-gpu, seed 0) for STRENGTH_BUDGET_S of training,
    ``search_options`` appended to its search's (``prior_temperature=1.5``: the improved recipe)."""
    from czjax.jobs import loop

    config = strength_config(ctx.scale, search_options)
    recipe = f"{PRESET}{f' with {search_options}' if search_options else ''}"
    budget = STRENGTH_BUDGET_S * ctx.scale
    out = ctx.work / "run"
    left = max(1.0, ctx.stop_at - time.monotonic())
    summary = loop.run_training(
        config,
        recipe_hparams(),
        out,
        seed=0,
        time_budget_s=min(budget, _elapsed(out) + left),
        resume=(out / "checkpoint.msgpack").exists(),
        log=ctx.log,
        title=f"the strength recipe ({recipe}) for {STRENGTH_BUDGET_S} s (seed 0)",
    )
    rows = loop.read_metrics(out / "metrics.jsonl")
    last = rows[-1] if rows else {}
    elapsed = last.get("elapsed_s", 0.0)
    write_run_results(ctx, config, recipe, rows)
    return {
        "done": elapsed >= budget - 1,
        "progress": min(1.0, elapsed / budget),
        "elapsed_s": elapsed,
        "summary": summary,
        "last_row": last,
    }


def write_run_results(ctx: Context, config, recipe: str, rows: list[dict]) -> None:
    """The seven minutes' results: metrics, dashboard, the weights (``czjax.msgpack``) and
    ``results.md`` with the last row's solver errors."""
    from czjax.jobs import plots
    from czjax.util import checkpoint

    last = rows[-1] if rows else {}
    elapsed = last.get("elapsed_s", 0.0)
    write_rows(ctx.results / "metrics.jsonl.gz", rows)
    plots.dashboard(rows, ctx.results / "dashboard.png", f"{recipe}, seed 0")
    _, params, _ = load_params(ctx.work / "run" / "checkpoint.msgpack")
    extra = {"preset": PRESET, "search": config.search, "seed": 0, "games": last.get("games", 0), "elapsed_s": elapsed}
    checkpoint.save_weights(ctx.results / "czjax.msgpack", config.model, params, extra)
    keys = [k for k in last if k.startswith("pons_") or k.startswith("public_")]
    (ctx.results / "results.md").write_text(
        f"# Gumbel AlphaZero for {STRENGTH_BUDGET_S} s ({recipe}, seed 0)\n\n"
        f"{last.get('games', 0):,} games in {elapsed:.0f} s of training.\n\n"
        + "\n".join(f"- {k}: {last[k]:.3f}" for k in sorted(keys))
        + "\n"
    )


def _elapsed(out: Path) -> float:
    from czjax.jobs import loop

    rows = loop.read_metrics(out / "metrics.jsonl")
    return rows[-1]["elapsed_s"] if rows else 0.0


# --- The strength recipe for 30 minutes a seed, three seeds, in short calls ---------------------


def strength_seeds(ctx: Context) -> dict:
    """The strength recipe (preset gumbel-az-gpu) for STRENGTH_SEED_S of training per seed, over
    STRENGTH_SEEDS one after another, each call doing what fits before its deadline. A seed's run
    folder (``<work>/seed-N``) keeps a portable checkpoint (``portable.msgpack``: the state without
    its replay buffer's rows, about 6 MB), so the folder moves to another machine without its
    checkpoints (about 170 MB each) and the next call resumes there, its buffer rebuilt. Every call
    adds a line per seed it worked on to ``<work>/calls.jsonl`` (seconds, batches, the rebuild),
    from which the results say how many calls and device minutes each seed used."""
    budget = STRENGTH_SEED_S * ctx.scale
    calls = read_calls(ctx.work / CALLS)
    call = 1 + max((c["call"] for c in calls), default=0)
    worked = 0
    for seed in STRENGTH_SEEDS:
        rows = saved_rows(ctx.work / f"seed-{seed}")
        if rows and rows[-1]["elapsed_s"] >= budget:
            continue
        if worked and ctx.stop_at - time.monotonic() < STRENGTH_PIECE_S * ctx.scale:
            break
        entry = train_seed(ctx, seed, budget, call)
        worked += 1
        calls.append(entry)
        with (ctx.work / CALLS).open("a") as f:
            f.write(json.dumps(entry) + "\n")
        save_seed_weights(ctx, entry)
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


def train_seed(ctx: Context, seed: int, budget: float, call: int) -> dict:
    """One seed trained towards ``budget`` until the call's deadline, resumed from its portable
    state; the call's line for ``calls.jsonl``."""
    from czjax.jobs import loop

    config = strength_config(ctx.scale)
    out = ctx.work / f"seed-{seed}"
    start = time.monotonic()
    summary = loop.run_training(
        config,
        recipe_hparams(),
        out,
        seed=seed,
        time_budget_s=budget,
        resume=out.exists(),
        portable=True,
        stop_at=ctx.stop_at,
        log=ctx.log,
        title=f"the strength recipe ({PRESET}) for {STRENGTH_SEED_S} s, seed {seed}",
    )
    return {
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


def save_seed_weights(ctx: Context, entry: dict) -> None:
    """A seed's network from its portable state as ``seed-N.msgpack``, the call's line with it."""
    from czjax.jobs import folders
    from czjax.util import checkpoint

    config, seed = strength_config(ctx.scale), entry["seed"]
    _, params, _ = load_params(ctx.work / f"seed-{seed}" / folders.PORTABLE)
    extra = {"preset": PRESET, "search": config.search, "seed": seed, **entry}
    checkpoint.save_weights(ctx.results / f"seed-{seed}.msgpack", config.model, params, extra)


def saved_rows(out: Path) -> list[dict]:
    """A run folder's metrics rows up to its newest saved state (rows a killed call logged after
    its last save are not the run's: the next call trains those batches again)."""
    from czjax.jobs import loop

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
    from czjax.jobs import plots

    every = []
    for seed in seeds:
        rows = saved_rows(ctx.work / f"seed-{seed}")
        every += [{**r, "seed": seed, "config": seed} for r in rows]
        if rows:
            plots.dashboard(rows, ctx.results / f"dashboard-seed-{seed}.png", f"{PRESET}, seed {seed}")
    write_rows(ctx.results / "metrics.jsonl.gz", every)
    (ctx.results / "results.md").write_text(seeds_page(seeds, budget))


def seeds_page(seeds: dict, budget: float) -> str:
    """``strength-seeds``' results.md: a row per seed, its calls, device minutes, training, games,
    rebuilds and last readings."""
    lines = [
        f"# Gumbel AlphaZero for {STRENGTH_SEED_S:g} s a seed ({PRESET}, seeds "
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
    return "\n".join(lines) + "\n"


STEPS = {
    "strength-10min": Step(
        f"czjax train --preset {PRESET} --time-budget {STRENGTH_BUDGET_S} (seed 0): the strength recipe for seven "
        "minutes, one call",
        strength_run,
        "strength",
    ),
    "strength-ptemp": Step(
        f"the strength recipe with prior_temperature=1.5 for {STRENGTH_BUDGET_S} s (seed 0), one call",
        functools.partial(strength_run, search_options="prior_temperature=1.5"),
        "strength",
    ),
    "strength-seeds": Step(
        f"the strength recipe for {STRENGTH_SEED_S} s of training per seed, seeds "
        f"{', '.join(map(str, STRENGTH_SEEDS))}, over as many calls as it takes",
        strength_seeds,
        "strength",
    ),
}
