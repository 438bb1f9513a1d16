"""The campaign's step of the same-start comparison at the GPU's scale: ``same-start``, czjax's
side of ``same_start.py`` for 100,000 games and 4 seeds, resumed across calls
(``docs/results/same-start/``)."""

from __future__ import annotations

from steps import Context, command_step, python

GAMES = 100_000


def same_start_commands(ctx: Context) -> list[tuple[str, list[str]]]:
    games = str(max(2, round(GAMES * ctx.scale)))
    out = str(ctx.work / "same-start")
    script = "experiments/same-start/same_start.py"
    return [
        ("same-start", python(script, "--games", games, "--seeds", "4", "--sides", "czjax", "--out", out, "--resume"))
    ]


STEPS = {
    "same-start": command_step(
        "same_start.py --games 100000 --seeds 4 --sides czjax", "same-start", same_start_commands
    )
}
