"""The campaign's steps of the blog's examples: ``ex1-8seeds`` ... ``ex5-8seeds``, each example's
preset at its full length with 8 seeds vmapped as one compiled scan, resumed across calls; its
results the milestone table and figure of ``blog_examples.py`` (``docs/results/blog-examples/``).
"""

from __future__ import annotations

import functools
import time

from blog_examples import BLOG, EXAMPLES, figure, format_table, milestone_rows

from steps import Context, Step, write_rows

SEEDS = 8
SMOOTHING = 10  # rows of the figure's trailing means


def scan_seeds(ctx: Context, name: str, seeds: int, batches: int) -> list[dict]:
    """Preset ``name``'s scan over ``seeds`` for ``batches`` batches a seed, resumed from its
    work folder (``<work>/<name>``); its metrics rows so far."""
    from czjax.jobs import presets, scan

    preset = presets.get_preset(name)
    folder = ctx.work / name
    return scan.run_scan(
        preset.config,
        preset.hparams,
        [{}],
        list(range(seeds)),
        folder,
        batches,
        resume=(folder / "scan.json").exists(),
        log=ctx.log,
        stop_at=ctx.stop_at,
    )


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
    rows = scan_seeds(ctx, name, seeds, batches)
    done = batches_done(rows, seeds)
    window = 10 * config.batches_per_chunk * config.games_per_batch
    full_games, run_games = preset.batches * config.games_per_batch, done * config.games_per_batch
    table = milestone_rows(rows, BLOG[name], full_games, run_games, window)
    if rows:
        figure(name, preset.description, rows, table, ctx.results / f"{name}.png", SMOOTHING)
    write_rows(ctx.results / "metrics.jsonl.gz", rows)
    (ctx.results / "results.md").write_text(
        f"# Example {number} ({name}), {seeds} seeds\n\n{preset.description}\n\n"
        f"{done:,} of {batches:,} batches of {config.games_per_batch} games per seed.\n\n```\n{format_table(name, table)}\n```\n"
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
