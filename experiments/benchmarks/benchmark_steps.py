"""The campaign's steps of the benchmarks (``docs/results/benchmarks/``):

- ``profile``: where the time goes, the strength recipe's iteration and Mk4's (each also with
  `--conv pallas`, and how far its network is from im2col's there) under jax.profiler at three
  batch sizes and two precisions, time by kind of operation; first in the campaign, so that on a
  GPU it says where the time of the steps after it goes;
- ``bench``: the benchmark tables (``czjax bench train``, ``search``, ``rollout``) as they are.
"""

from __future__ import annotations

import json
import time

import common
from steps import Context, Step, command_step, czjax, machine

common.use("strength")
from strength_steps import SMALL_STRENGTH, strength_config

# The profile step's grid: each program at each batch size (games) and precision, the smaller
# batches first, so that a call that stops early has measured every program at them.
PROFILE_GAMES = (2048, 8192, 32768)
PROFILE_PRECISIONS = ("default", "mixed")
# Seconds of a call in which the profile step starts cells: it starts none past them, nor one
# that its program's last cell in the call, scaled by the games, says would end past them
# (the call's first cell excepted, so that every cell is reached).
PROFILE_BUDGET_S = 240
# Each cell's iteration predicted on an H100 without one (predict_profile.py, `czjax bench kernels`),
# shown beside what the step measures.
PREDICTIONS = common.EXPERIMENTS.parent / "docs" / "results" / "benchmarks" / "kernels" / "profile-predictions.json"
# XLA's CUDA graphs over loops and branches too (the `profile-graphs` step's arm), where the
# installed jaxlib accepts the flag.
GRAPHS_FLAGS = "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL"


def profile_programs(scale: float) -> dict:
    """The profile step's programs by name: the strength recipe's iteration (preset
    gumbel-az-gpu) and Mk4's (self-play against a frozen copy and one AdamW update, as `czjax
    bench train` times it), and at full scale each again with its 3x3 convolutions as Pallas
    kernels (``-pallas``: `--conv pallas`, which writes no patches; a GPU measures what the
    count predicts); below full scale, the first two with the tiny strength recipe's network."""
    from czjax.learn.settings import TrainConfig

    mk4 = TrainConfig(model="cnn-mk4" if scale == 1 else SMALL_STRENGTH["model"], opponent="self")
    programs = {"strength": strength_config(scale), "mk4": mk4}
    if scale == 1:
        programs.update({f"{name}-pallas": config.override({"conv": "pallas"}) for name, config in programs.items()})
    return programs


def profile_cells(scale: float) -> list[tuple[str, int, str]]:
    """``(program, games, precision)`` in the order the step runs them. Below full scale, a
    smoke run of the step's code: the smallest batch, scaled, at the default precision only."""
    if scale == 1:
        return [(p, g, prec) for g in PROFILE_GAMES for p in profile_programs(scale) for prec in PROFILE_PRECISIONS]
    return [(p, max(2, round(PROFILE_GAMES[0] * scale)), "default") for p in profile_programs(scale)]


def cell_name(cell: tuple[str, int, str]) -> str:
    program, games, precision = cell
    return f"{program}-{games}-{precision}"


def cell_config(cell: tuple[str, int, str], scale: float):
    """The config a cell runs: its program's, one iteration a chunk, no solver evaluation."""
    program, games, precision = cell
    return profile_programs(scale)[program].override(
        {
            "games_per_batch": games,
            "precision": precision,
            "batches_per_chunk": 1,
            "eval_games": 2,
            "solver_eval": "off",
        }
    )


def profile_cell(ctx: Context, cell: tuple[str, int, str], roofs: dict, start: float) -> dict:
    """One cell's row: an iteration of its program compiled (the GPU's kernels each naming their
    instruction, czjax.bench.profiling), run once, then once more under jax.profiler, the traced
    call timed; `czjax bench train`'s row with the roof of its precision and the trace's kinds
    of operation, and the cell's seconds since ``start`` (the roofs' measuring included, for the
    call's first cell)."""
    from czjax.bench import harness, roofline

    program, games, precision = cell
    ctx.log(f"profile: {program}, {games:,} games, precision {precision}")
    config = cell_config(cell, ctx.scale)
    row = harness.bench_config(config, 0, profile=ctx.work / "traces" / cell_name(cell), each_kernel=True)
    row = roofline.with_roof(row, roofs)
    if program.endswith("-pallas") and precision == "default":
        row["pallas_difference"] = pallas_difference(config.model)
    row.update(program=program, cell_s=time.monotonic() - start, machine=machine(), date=time.strftime("%Y-%m-%d"))
    return row


def pallas_difference(model_name: str, boards: int = 64) -> float:
    """How far network ``model_name`` with its 3x3 convolutions (and trunk) as Pallas kernels is
    from im2col's on this machine, from the same weights: the largest difference of their
    outputs and of their parameters' gradients over ``boards`` random positions, each relative to
    the largest value, in full float32 products. Pallas kernels that compute what they should
    give float32 rounding in the outputs (~1e-6) and, in the gradients, about 1e-3 where a
    ReLU's input near zero falls on the other side of it (Mk4's, interpreted on the CPU); a GPU
    whose Triton kernels misbehave, far more. The campaign takes `--conv pallas` for the
    examples only where this is under blog_steps.PALLAS_TOLERANCE (measured_conv)."""
    import jax
    import jax.numpy as jnp

    from czjax.models import get_model
    from czjax.util import precision

    positions = jax.random.randint(jax.random.key(0), (boards, 6, 7), -1, 2).astype(jnp.int8)
    im2col, pallas = get_model(model_name, conv="im2col"), get_model(model_name, conv="pallas")
    params = im2col.init(jax.random.key(1), positions)

    def outputs_and_gradients(model):
        def loss(p):
            return sum(jnp.sum(leaf.astype(jnp.float32) ** 2) for leaf in jax.tree.leaves(model.apply(p, positions)))

        return model.apply(params, positions), jax.grad(loss)(params)

    with precision.parity():
        got, want = (jax.jit(outputs_and_gradients, static_argnums=0)(m) for m in (pallas, im2col))
    pairs = zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True)
    return max(float(jnp.abs(g - w).max() / jnp.maximum(jnp.abs(w).max(), 1.0)) for g, w in pairs)


def profile_run(ctx: Context) -> dict:
    """Each cell of the grid (:func:`profile_cells`) that fits in the call: its row kept in the
    work folder, so a later call runs only the cells left; the roofs measured once a call. The
    results (``profile.json``, ``results.md``) hold every cell run so far."""
    from czjax.bench import provenance, roofline

    cells = profile_cells(ctx.scale)
    rows_folder = ctx.work / "rows"
    rows_folder.mkdir(parents=True, exist_ok=True)
    deadline = min(ctx.stop_at, time.monotonic() + PROFILE_BUDGET_S)
    roofs: dict = {}
    last: dict[str, tuple[int, float]] = {}  # program -> (games, seconds) of its last cell in this call
    for cell in cells:
        program, games, _ = cell
        path = rows_folder / f"{cell_name(cell)}.json"
        if path.exists():
            continue
        now = time.monotonic()
        expected = last[program][1] * games / last[program][0] if program in last else 0.0
        if now > deadline or (last and now + expected > deadline):
            continue
        precisions = tuple(dict.fromkeys(prec for _, _, prec in cells))
        roofs = roofs or roofline.measure_roofs(max(64, round(roofline.ROOF_SIZE * ctx.scale)), precisions)
        try:
            row = profile_cell(ctx, cell, roofs, now)
        except Exception as error:  # a program this machine will not run is a row too, the step goes on
            row = failed_cell(cell, error)
        path.write_text(json.dumps(row, default=str))
        last[program] = (games, time.monotonic() - now)
    paths = (rows_folder / f"{cell_name(cell)}.json" for cell in cells)
    rows = [json.loads(path.read_text()) for path in paths if path.exists()]
    (ctx.results / "profile.json").write_text(json.dumps({**provenance.provenance(), "rows": rows}, indent=1))
    (ctx.results / "results.md").write_text(profile_table(rows, len(cells)))
    return {
        "done": len(rows) == len(cells),
        "progress": len(rows) / len(cells),
        "cells": len(cells),
        "cells_done": len(rows),
    }


def failed_cell(cell: tuple[str, int, str], error: Exception) -> dict:
    """The row of a cell whose program did not compile or run here: what it was, and why, in
    one line (a kernel that no GPU has run before may fail on this one); its machine as the
    other cells' rows say it."""
    program, games, precision = cell
    why = (str(error).strip().splitlines() or [""])[0][:300]
    return {
        "program": program,
        "games_per_batch": games,
        "precision": precision,
        "machine": machine(),
        "error": f"{type(error).__name__}: {why}",
    }


PROFILE_COLUMNS = (  # (header, alignment) before and after the kinds of operation
    (("program", "---"), ("games", "---:"), ("precision", "---"), ("s/iteration", "---:"), ("predicted", "---:")),
    (("net GFLOP/s", "---:"), ("roof", "---"), ("of roof", "---:")),
    (("idle", "---:"), ("launches/iteration", "---:"), ("launches/step", "---:"), ("step", "---")),
)


def predictions() -> dict:
    """Each cell's predicted seconds an iteration on an H100, by cell name (predict_profile.py)."""
    return json.loads(PREDICTIONS.read_text())["cells"] if PREDICTIONS.exists() else {}


def profile_row(row: dict, kinds, predicted: dict | None = None) -> str:
    """A cell's line of the profile table: its measured and predicted seconds an iteration, each
    kind's share of the traced span, the idle share, the launches."""
    guess = (predicted or {}).get(cell_name((row["program"], row["games_per_batch"], row["precision"])))
    if "error" in row:
        return f"| {row['program']} | {row['games_per_batch']:,} | {row['precision']} | failed: {row['error']} |"
    table = row["op_kinds"]
    span = table["span_s"] or 1.0
    per_step = table.get("launches_per_step")
    difference = row.get("pallas_difference")  # how far from im2col's network, relative
    values = [
        row["program"] + ("" if difference is None else f" (from im2col {difference:.0e})"),
        f"{row['games_per_batch']:,}",
        row["precision"],
        f"{row['iteration_s']:.4f}",
        "-" if guess is None else f"{guess['predicted_s']:.4f}",
        f"{row['network_flops_per_s'] / 1e9:,.1f}",
        row["roof"],
        f"{100 * row['roof_fraction']:.1f}%",
        *(f"{100 * table['seconds'][kind] / span:.1f}%" for kind in kinds),
        f"{100 * table['idle_s'] / span:.1f}%",
        f"{table['total_launches']:,.0f}",
        "-" if per_step is None else f"{per_step:,.1f}",
        table.get("step", "-"),
    ]
    return "| " + " | ".join(values) + " |"


def profile_table(rows: list[dict], cells: int) -> str:
    """The profile step's results.md: a row per cell, each kind of operation's share of the
    traced iteration's span (summed over streams, or a CPU's threads), the idle share, the
    launches per iteration and per step of the program's innermost loop."""
    from czjax.bench import profiling

    kinds = profiling.KINDS
    before, roof, after = PROFILE_COLUMNS
    columns = [*before, *roof, *((kind, "---:") for kind in kinds), *after]
    lines = ["| " + " | ".join(name for name, _ in columns) + " |", "| " + " | ".join(a for _, a in columns) + " |"]
    predicted = predictions()
    lines += [profile_row(row, kinds, predicted) for row in rows]
    machines = sorted({row["machine"] for row in rows})
    return (
        "# Where the time goes: the strength recipe's iteration and Mk4's under jax.profiler\n\n"
        f"{len(rows)} of {cells} cells (program x games x precision), one traced iteration each"
        f"{' on ' + ', '.join(machines) if machines else ''}; `profile.json` holds every row "
        "(`czjax bench train`'s keys, its `op_kinds` and `phases`; docs/benchmarks.md). predicted: the "
        "cell's iteration compiled for an H100 without one and read by `czjax bench kernels` "
        "(`docs/results/benchmarks/kernels/profile-predictions.json`), a prediction beside the measurement.\n\n"
        "A kind's share is its operations' time over the traced iteration's span, summed over streams "
        "(a CPU's threads), so kinds running side by side can add up past 100%; `host` holds transfers "
        "between host and device and the control of loops and branches; idle is the span's time with no "
        "operation running. net GFLOP/s and of roof: the network's FLOPs counted from the boards played and "
        "trained on, over the roof of the row's precision measured in the same call.\n\n" + "\n".join(lines) + "\n"
    )


# The bench step's training table, and the profile-graphs step's (the same rows with CUDA graphs).
BENCH_TRAIN = ("--model", "mlp", "cnn-mk4", "--games-per-batch", "50", "4096", "--control-flow", "cond", "static")


def bench_commands(ctx: Context) -> list[tuple[str, list[str]]]:
    return [
        ("bench-train", czjax("bench", "train", *BENCH_TRAIN, "--json")),
        ("bench-search", czjax("bench", "search", "--json")),
        ("bench-rollout", czjax("bench", "rollout", "--json")),
    ]


def graphs_commands(ctx: Context) -> list[tuple[str, list[str]]]:
    """The bench step's training table again with XLA's CUDA graphs over loops and branches too."""
    return [
        ("bench-train-graphs", ["env", f"XLA_FLAGS={GRAPHS_FLAGS}", *czjax("bench", "train", *BENCH_TRAIN, "--json")])
    ]


STEPS = {
    "profile": Step(
        f"the strength recipe's iteration and Mk4's at {', '.join(f'{g:,}' for g in PROFILE_GAMES)} games, "
        f"{' and '.join(PROFILE_PRECISIONS)} precision, under jax.profiler: time by kind of operation",
        profile_run,
        "benchmarks",
    ),
    "bench": command_step("benchmark tables", "benchmarks", bench_commands),
    "profile-graphs": command_step(
        "the training table with CUDA graphs over loops and branches (XLA_FLAGS=" + GRAPHS_FLAGS + ")",
        "benchmarks",
        graphs_commands,
    ),
}
