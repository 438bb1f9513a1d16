"""The platform a program is built for: one table of choices (czjax.util.platforms.CHOICES), the
one docs/gpu.md shows, and a trainer built for a platform is that platform's program on any
machine. The trainer is built for a GPU and for the CPU on this machine and exported for CUDA and
the CPU (jax.export lowers for CUDA without a GPU): each program holds its platform's choices, and
the build for this machine's platform is the one made by default (on the CPU, the one whose
results are the records of tests/test_unchanged.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import pytest

from czjax import models
from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import build_model, make_setup, make_trainer, static_control_flow
from czjax.util import compiling, platforms

GPU_MD = Path(__file__).resolve().parent.parent / "docs" / "gpu.md"
YNNPACK = "YNNPACK for matrix products only"  # the CPU's compiler options, as the table says them
# A search-based config whose games are self-play of one player (merged halves on a GPU)
SEARCHED = TrainConfig(
    model="mlp3",
    algorithm="alphazero",
    opponent="current",
    search="mcts:sims=4",
    games_per_batch=4,
    eval_games=2,
    batches_per_chunk=1,
    solver_eval="off",
).override({"replay.capacity": 64, "replay.batch": 8})


def documented_table() -> dict[str, dict[str, str]]:
    """docs/gpu.md's per-platform table: platform -> choice -> the value as written."""
    section = GPU_MD.read_text().split("## Per-platform choices", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    header = next(line for line in section.splitlines() if line.startswith("| choice"))
    columns = [c.strip() for c in header.strip("|").split("|")][2:]
    table: dict[str, dict[str, str]] = {platform: {} for platform in columns}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for platform, value in zip(columns, cells[2:]):
            table[platform][cells[0].strip("`")] = value
    return table


def as_written(field: str, value) -> str:
    """A choice's value as the table writes it."""
    if field == "convolution_options":
        return YNNPACK if value == ((platforms.YNN_FUSIONS, "LIBRARY_FUSION_TYPE_DOT"),) else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        return ", ".join(value) or "none"
    if isinstance(value, float):
        return f"{value:.0e}"
    return str(value)


def test_the_choices_are_the_documented_table():
    """Every platform's row of CHOICES is docs/gpu.md's column, field by field, so the GPU's
    choices differ from the CPU's exactly where the table says."""
    table = documented_table()
    assert set(table) == set(platforms.PLATFORMS)
    fields = list(platforms.Choices.__dataclass_fields__)
    for platform in platforms.PLATFORMS:
        choices = platforms.choices_for(platform)
        assert list(table[platform]) == fields, platform
        assert {f: as_written(f, getattr(choices, f)) for f in fields} == table[platform], platform
    differ = {f for f in fields if table["cpu"][f] != table["gpu"][f]}
    cpu, gpu = platforms.choices_for("cpu"), platforms.choices_for("gpu")
    assert differ == {f for f in fields if getattr(cpu, f) != getattr(gpu, f)}


def test_a_platform_is_named_once_and_read_where_a_program_is_built(monkeypatch):
    """JAX's names of a GPU are "gpu"; a name czjax does not know is refused; the platform being
    built for is the machine's outside building_for and the given one inside it."""
    assert [platforms.platform_of(n) for n in ("cuda", "ROCM", "gpu", "cpu", "tpu")] == ["gpu"] * 3 + ["cpu", "tpu"]
    with pytest.raises(ValueError, match="unknown platform 'gpus'; choose one of cpu, gpu, tpu"):
        platforms.checked("gpus")
    assert platforms.target() == platforms.machine() == platforms.checked(None)
    with platforms.building_for("cuda") as built:
        assert built == platforms.target() == "gpu"
        with platforms.building_for("cpu"):
            assert platforms.target() == "cpu"
        assert platforms.choices_for().descend_levels == platforms.CHOICES["gpu"].descend_levels
    assert platforms.target() == platforms.machine()
    monkeypatch.setattr(jax, "default_backend", lambda: "cuda")  # a machine with a GPU
    assert platforms.machine() == "gpu" and make_setup(TrainConfig(), None).platform == "gpu"


def test_the_set_up_resolves_a_configs_auto_settings_for_its_platform():
    """One config, two platforms: the network's methods, the compaction, the control flow and the
    compiler options each the platform's row; the config itself the same data."""
    config = TrainConfig(model="cnn-mk4", games_per_batch=50)
    assert (build_model(config, "cpu").conv, build_model(config, "cpu").norm) == ("canonical", "grouped")
    assert (build_model(config, "gpu").conv, build_model(config, "gpu").norm) == ("im2col", "onepass")
    assert build_model(TrainConfig(model="resnet"), "cpu").conv == "im2col"
    assert build_model(config.override({"conv": "xla"}), "cpu").conv == "xla"  # a choice given is kept
    cpu, gpu = make_setup(config, None, platform="cpu"), make_setup(config, None, platform="gpu")
    assert (cpu.platform, gpu.platform) == ("cpu", "gpu")
    assert cpu.rollout_chunks is None and gpu.rollout_chunks == 1  # 25 boards a call: compacted on a CPU only
    # the update's 1,050 positions of 19 MFLOP: chunked on a CPU, one plain gradient on a GPU; at
    # 4,096 games chunked on both
    assert (cpu.ctx.num_chunks, gpu.ctx.num_chunks) == (8, 1)
    bigger = config.override({"games_per_batch": 4096})
    assert make_setup(bigger, None, platform="gpu").ctx.num_chunks == 8
    # 8 seeds of the 50-game config as one scan: 8,400 positions in one program, chunked on a GPU
    # (its threshold counts a scan's configurations together) in 2 chunks of at least 5e10
    # FLOPs each; the CPU's count stays per config
    assert make_setup(config, "c", platform="gpu", configurations=8).ctx.num_chunks == 2
    assert make_setup(config, "c", platform="gpu", configurations=2).ctx.num_chunks == 1
    mlp = TrainConfig(model="mlp", games_per_batch=50, control_flow="cond")  # 3e7 FLOPs alone
    assert make_setup(mlp, "c", platform="cpu", configurations=64).ctx.num_chunks == 1
    assert static_control_flow(TrainConfig(), "gpu") and not static_control_flow(TrainConfig(), "cpu")
    assert compiling.compiler_options(True, "gpu") is None
    assert TrainConfig.from_dict(config.to_dict()) == config


def descent_loops(jaxpr) -> list[int]:
    """For every ``while`` loop of a program whose body picks a child by PUCT (a search's walk
    down its trees: PUCT's exploration term takes a square root, no other loop's body does), the
    square roots its body takes: one per level it goes down per test of its predicate."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "while":
            roots = sum(e.primitive.name == "sqrt" for e in eqn.params["body_jaxpr"].jaxpr.eqns)
            found += [roots] if roots else []
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(sub, "jaxpr", sub)
                found += descent_loops(inner) if hasattr(inner, "eqns") else []
    return found


def test_a_trainer_built_for_a_gpu_is_the_gpus_program_on_any_machine():
    """The search-based self-play trainer built for a GPU on this CPU: it exports for CUDA, and its
    program holds the GPU's choices: its searches' small trees descended without a loop (pointer
    jumping, ``jump_max_nodes``), where the CPU's build, this machine's default, walks them one
    level a test, two walks a ply (its halves' movers each a call); with jumping off, the GPU's
    walks go several levels a test, one a ply (the halves' movers one vmapped call)."""
    from czjax.learn import trainer as trainer_module

    def build(platform: str):
        trainer = make_trainer(SEARCHED, platform=platform.split("-")[0])
        if platform == "gpu-walked":  # built afresh: make_trainer caches by config and platform
            trainer = trainer_module._trainer.__wrapped__(SEARCHED, None, 1, "gpu", 1)
        args = (trainer.init(0), HParams.create(), jax.random.key(1))
        exported = jax.export.export(trainer.train_step, platforms=["cuda" if trainer.platform == "gpu" else "cpu"])(
            *args
        )
        return trainer, exported, descent_loops(jax.make_jaxpr(trainer.train_step)(*args).jaxpr)

    built = {platform: build(platform) for platform in ("cpu", "gpu")}
    with pytest.MonkeyPatch.context() as patch:  # the choice is read while the program is traced
        patch.setitem(platforms.CHOICES, "gpu", dataclasses.replace(platforms.CHOICES["gpu"], jump_max_nodes=0))
        jax.clear_caches()  # play_games is one jitted function: traced anew under the patched choice
        built["gpu-walked"] = build("gpu-walked")
    jax.clear_caches()
    assert make_trainer(SEARCHED) is built[platforms.machine()][0] and built["gpu"][0].platform == "gpu"
    assert built["gpu"][1].platforms == ("cuda",) and built["cpu"][1].platforms == ("cpu",)
    assert built["gpu"][1].mlir_module() != built["cpu"][1].mlir_module()
    cpu_walks, gpu_walks, gpu_walked = built["cpu"][2], built["gpu"][2], built["gpu-walked"][2]
    assert cpu_walks and len(set(cpu_walks)) == 1 and gpu_walks == []
    levels = platforms.CHOICES["gpu"].descend_levels // platforms.CHOICES["cpu"].descend_levels
    assert gpu_walked == [cpu_walks[0] * levels] * (len(cpu_walks) // 2)  # merged halves: one walk for two


def test_a_gpu_compacts_a_rollout_from_the_flops_of_a_call():
    """On a GPU the rollout skips finished games where a player call's FLOPs (its boards times the
    player's FLOPs a board) reach the platform's rollout_min_flops: Mk4 from 2,048 boards a call
    (measured), a searched player, a network call a simulation, from far fewer; on a CPU always."""
    from czjax.jobs.presets import get_preset
    from czjax.row_skipping import flops_per_board

    mk4 = TrainConfig(model="cnn-mk4", games_per_batch=2048)  # 1,024 boards a call, 19 MFLOP a board
    assert make_setup(mk4, None, platform="gpu").rollout_chunks == 1
    assert make_setup(mk4.override({"games_per_batch": 4096}), None, platform="gpu").rollout_chunks is None
    assert make_setup(mk4, None, platform="cpu").rollout_chunks is None
    recipe = get_preset("gumbel-az-gpu").config  # 2,048 games, Gumbel's 32 simulations over a ResNet
    setup = make_setup(recipe, None, platform="gpu")
    shapes = jax.eval_shape(lambda: models.init_params(setup.model, jax.random.key(0)))
    assert 1024 * flops_per_board(setup.actor, shapes) >= platforms.CHOICES["gpu"].rollout_min_flops
    assert setup.rollout_chunks is None and setup.eval_chunks == 1  # its evaluation plays the network alone
