"""The campaign's step of soft against hard targets at scale: ``soft-vs-hard``, the Gumbel
recipe's arms for 5,000 batches, 4 seeds and 32 simulations, resumed across calls
(``docs/results/soft-vs-hard/``)."""

from __future__ import annotations

from steps import Context, command_step, python

BATCHES = 5000


def soft_vs_hard_commands(ctx: Context) -> list[tuple[str, list[str]]]:
    batches = str(max(2, round(BATCHES * ctx.scale)))
    out = str(ctx.work / "soft-vs-hard")
    script = "experiments/soft-vs-hard/soft_vs_hard.py"
    argv = [script, "--recipe", "gumbel", "--batches", batches, "--seeds", "4", "--sims", "32", "--out", out]
    return [("soft-vs-hard", python(*argv, "--resume"))]


STEPS = {
    "soft-vs-hard": command_step("soft_vs_hard.py --recipe gumbel at scale", "soft-vs-hard", soft_vs_hard_commands)
}
