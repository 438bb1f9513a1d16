"""The campaign's steps of the blog's examples: ``ex1-8seeds`` ... ``ex5-8seeds``, each example's
preset at its full length with 8 seeds vmapped as one compiled scan, resumed across calls; its
results the milestone table and figure of ``blog_examples.py`` (``docs/results/blog-examples/``).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

from blog_examples import BLOG, EXAMPLES, figure, format_table, milestone_rows

from steps import Context, Step, machine, write_rows

SEEDS = 8
SMOOTHING = 10  # rows of the figure's trailing means
# The profile step's cells that say how a GPU runs Mk4's 3x3 convolutions fastest: its Mk4
# iteration at 2,048 games in float32, as im2col (`--conv auto` on a GPU) and as Pallas kernels.
PROFILE_CELLS = {"auto": "mk4", "pallas": "mk4-pallas"}
PROFILE_GAMES = 2048
# The most a Pallas cell's network may differ from im2col's there (its `pallas_difference`:
# outputs and gradients, relative) for the examples to run it: a ReLU's kink gives ~1e-3,
# kernels that misbehave on a GPU far more.
PALLAS_TOLERANCE = 1e-2


def measured_conv(profile: Path, here: str) -> str:
    """``--conv`` for a convnet example's scan on this machine (``here``, as steps.machine says
    it): "pallas" where the profile step (``profile``, its profile.json) measured Mk4's Pallas
    convolutions faster than im2col on a GPU, and computing what im2col computes there
    (``pallas_difference`` within :data:`PALLAS_TOLERANCE`), the step on a GPU too; else "auto"."""
    try:
        rows = json.loads(profile.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return "auto"
    timed = {
        row["program"]: row["iteration_s"]
        for row in rows
        if "error" not in row
        and row.get("games_per_batch") == PROFILE_GAMES
        and row.get("precision") == "default"
        and str(row.get("machine", "")).startswith("gpu")
        and (row["program"] != PROFILE_CELLS["pallas"] or row.get("pallas_difference", 1.0) <= PALLAS_TOLERANCE)
    }
    if not here.startswith("gpu") or not all(cell in timed for cell in PROFILE_CELLS.values()):
        return "auto"
    return min(PROFILE_CELLS, key=lambda conv: timed[PROFILE_CELLS[conv]])


def scan_config(ctx: Context, config, folder: Path):
    """The config a convnet example's scan runs: the preset's, its 3x3 convolutions as the
    profile step measured them fastest here (:func:`measured_conv`), decided when the scan
    starts and kept by a scan resumed (its folder's scan.json)."""
    if not config.model.startswith("cnn"):
        return config
    if (folder / "scan.json").exists():
        conv = json.loads((folder / "scan.json").read_text())["config"].get("conv", config.conv)
    else:
        conv = measured_conv(ctx.results.parents[1] / "benchmarks" / "profile" / "profile.json", machine())
    return config.override({"conv": conv})


def scan_seeds(ctx: Context, name: str, seeds: int, batches: int) -> tuple[list[dict], str]:
    """Preset ``name``'s scan over ``seeds`` for ``batches`` batches a seed, resumed from its
    work folder (``<work>/<name>``): its metrics rows so far, and the ``--conv`` it runs."""
    from czjax.jobs import presets, scan

    preset = presets.get_preset(name)
    folder = ctx.work / name
    config = scan_config(ctx, preset.config, folder)
    rows = scan.run_scan(
        config,
        preset.hparams,
        [{}],
        list(range(seeds)),
        folder,
        batches,
        resume=(folder / "scan.json").exists(),
        log=ctx.log,
        stop_at=ctx.stop_at,
    )
    return rows, config.conv


def batches_done(rows: list[dict], seeds: int) -> int:
    """The batches every seed has reached."""
    return min((max((r["batches"] for r in rows if r["seed"] == s), default=0) for s in range(seeds)), default=0)


def run_example(ctx: Context, number: int, seeds: int = SEEDS) -> dict:
    """Example ``number``'s preset for its full length (scaled), ``seeds`` seeds: its milestone
    table and figure beside the blog's figures, and its metrics."""
    from czjax.jobs import presets

    name = EXAMPLES[number]
    preset = presets.get_preset(name)
    config = preset.config
    batches = max(1, round(preset.batches * ctx.scale))
    start = time.perf_counter()
    rows, conv = scan_seeds(ctx, name, seeds, batches)
    done = batches_done(rows, seeds)
    window = 10 * config.batches_per_chunk * config.games_per_batch
    full_games, run_games = preset.batches * config.games_per_batch, done * config.games_per_batch
    table = milestone_rows(rows, BLOG[name], full_games, run_games, window)
    if rows:
        figure(name, preset.description, rows, table, ctx.results / f"{name}.png", SMOOTHING)
    write_rows(ctx.results / "metrics.jsonl.gz", rows)
    (ctx.results / "results.md").write_text(
        f"# Example {number} ({name}), {seeds} seeds\n\n{preset.description}\n\n"
        f"{done:,} of {batches:,} batches of {config.games_per_batch} games per seed"
        + (f", `--conv {conv}`" if config.model.startswith("cnn") else "")
        + f".\n\n```\n{format_table(name, table)}\n```\n"
    )
    return {
        "done": done >= batches,
        "progress": done / batches,
        "batches": batches,
        "batches_done": done,
        "seeds": seeds,
        "games_per_seed": run_games,
        "milestones": table,
        "call_wall_s": time.perf_counter() - start,
        "preset": name,
        "conv": conv,
    }


def example_step(number: int, seeds: int = SEEDS) -> Step:
    from czjax.jobs import presets

    name = EXAMPLES[number]
    # Examples 1 and 2 (the SimpleMLP) run on this 2-core CPU at ~7,900 games/s over the 8
    # seeds; examples 3-5 (Mk4) at ~60-90 games/s a seed there, where one H200 ran examples 4 and
    # 5 at ~12,000 and ~5,000 games/s over the 8 seeds (2026-11-26): the convnets need the GPU.
    convnet = presets.get_preset(name).config.model.startswith("cnn")
    return Step(
        f"example {number} ({name}) x {seeds} seeds vmapped, the preset's full length",
        functools.partial(run_example, number=number, seeds=seeds),
        "blog-examples",
        gains_from_gpu=convnet,
    )


STEPS = {f"ex{number}-8seeds": example_step(number) for number in EXAMPLES}
