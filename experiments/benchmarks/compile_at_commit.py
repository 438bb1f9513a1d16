"""Compile one row of the H100's `bench` step for an H100, with the code of the commit it was
measured at: run from a checkout of that commit (``git worktree add``), it builds the program as
that commit's ``czjax bench`` built it (its API, not today's) and writes XLA's optimised program
as text, for ``calibrate_at_commits.py`` to read with today's reader.

    PYTHONPATH=CHECKOUT:.plugins/cuda python experiments/benchmarks/compile_at_commit.py OUT.hlo \
        rollout PLAYER BATCH | search ALGO BATCH SIMS | train MODEL GAMES STEPS CONTROL_FLOW

Before ``czjax.util.platforms`` the code chose each GPU path by ``jax.default_backend()``, asked
while it set up and traced: here it answers "gpu", so that the program built on the CPU is the
one the GPU ran. Written against commits 0fc36d2 and cc7d890.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "czjax" / "data" / "targets" / "h100.txtpb"
OPTIONS = {"xla_gpu_autotune_level": "0", "xla_gpu_enable_triton_gemm": False}  # as czjax bench kernels


def build(kind: str, words: list[str]):
    """``(fn, args)``: the row's program as the commit's ``czjax bench`` ran it."""
    if kind == "rollout":
        from czjax import players, rollout

        player, batch = players.BUILTIN_PLAYERS[words[0]], int(words[1])
        return (lambda key: rollout.play_games(key, player, None, player, None, batch)), (jax.random.key(0),)
    if kind == "search":
        from czjax.bench import search_bench

        algo, batch, sims = words[0], int(words[1]), int(words[2])
        boards = jnp.zeros((batch, 6, 7), jnp.int8)
        return search_bench._czjax_search(algo, sims), (search_bench.search_network_params(), boards, jax.random.key(0))
    from czjax.learn.settings import HParams, TrainConfig
    from czjax.learn.trainer import make_trainer

    model, games, steps, control_flow = words[0], int(words[1]), int(words[2]), words[3]
    config = TrainConfig(
        model=model,
        games_per_batch=games,
        opponent="self",
        eval_games=2,
        batches_per_chunk=steps,
        control_flow=control_flow,
    )
    trainer = make_trainer(config, None, 1)
    state = jax.eval_shape(lambda: trainer.init(0))
    return (lambda st, hp: trainer.run_chunk(st, hp, steps)), (state, HParams.create())


def main(argv: list[str]) -> int:
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    out, kind, words = Path(argv[0]), argv[1], argv[2:]
    jax.default_backend = lambda: "gpu"  # the commit's choices, made for the GPU
    topology = topologies.get_topology_desc(platform="cuda", target_config=TARGET.read_text(), topology="1x1x1")
    place = NamedSharding(Mesh(topology.devices[:1], ("device",)), PartitionSpec())
    fn, args = build(kind, words)

    def abstract(x):
        x = x if hasattr(x, "shape") and hasattr(x, "dtype") else jnp.asarray(x)
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=place)

    shapes = jax.tree.map(abstract, args)
    text = jax.jit(fn).lower(*shapes).compile(compiler_options=OPTIONS).as_text()
    out.write_text(str(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
