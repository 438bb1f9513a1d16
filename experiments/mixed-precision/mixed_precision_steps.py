"""The campaign's step of mixed precision at the GPU's scale: ``mixed-ex3``, example 3 in mixed
precision against float32 from the same start, 100,000 games and 8 seeds
(``docs/results/mixed-precision/``); the CPU's comparison is 4 seeds x 25,000 games."""

from __future__ import annotations

from steps import Context, command_step, python

GAMES = 100_000


def mixed_commands(ctx: Context) -> list[tuple[str, list[str]]]:
    games = str(max(100, round(GAMES * ctx.scale)))
    root, out = str(ctx.work / "mixed-precision"), str(ctx.results / "verdicts")
    script = "experiments/mixed-precision/mixed_precision.py"
    return [("mixed-ex3", python(script, "ex3", "--games", games, "--seeds", "8", "--root", root, "--out", out))]


STEPS = {
    "mixed-ex3": command_step(
        "mixed_precision.py ex3 --games 100000 --seeds 8: example 3 in mixed precision against float32",
        "mixed-precision",
        mixed_commands,
    )
}
