"""Benchmarks (host side): ``czjax bench rollout``, ``train`` and ``scan``, with pgx's games and
the PyTorch project's iteration timed in the same process. Speed is measured here, never in tests.

Each setting is compiled once (``compile_s``, reported separately) and then timed over
``runs`` calls with different keys (:mod:`czjax.bench.timing`); the figure reported is the
median. Each row counts its network's FLOPs (:mod:`czjax.bench.roofline`).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from czjax import rollout, row_skipping
from czjax.bench import profiling, torch_peer
from czjax.bench.roofline import format_fraction, network_fields, network_flops
from czjax.bench.timing import peak_bytes, step_fields, time_compiled
from czjax.jobs import scan
from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import build_search, make_trainer
from czjax.players.loading import load_agent
from czjax.players.searched import search_player
from czjax.util import devices, precision

# The PyTorch project's RandomPunisher-vs-RandomPunisher games on its reference 2-core CPU: the
# figure czjax's RandomPunisher games are compared with (docs/benchmarks.md).
PYTORCH_PUNISHER_GAMES_PER_S = 250.0


def bench_rollout_czjax(player_spec: str, batch: int, runs: int, profile: str | Path | None = None) -> dict:
    """Whole games between two copies of a player (a spec of czjax.players.loading.load_agent: a built-in
    player, ``untrained:MODEL``, a checkpoint, a search over one); ``profile`` as in
    :func:`bench_train`. A network's FLOPs are its forward pass's per board times the moves
    played (each move one board its mover evaluated; a search's player counts its root's and
    its simulations' evaluations), a lower bound where finished games' boards are evaluated too
    (czjax.row_skipping); a built-in player has none. The compiled step is the ply: the loop runs
    until the batch's last game has ended (``plies``: its longest game's length)."""
    agent = load_agent(player_spec)

    def run(key):
        return rollout.play_games(
            key, rollout.Side(agent.player, agent.params), rollout.Side(agent.player, agent.params), batch
        )

    compile_s, times, (traj, results), phases, kinds = time_compiled(run, lambda i: (jax.random.key(i),), runs, profile)
    median = statistics.median(times)
    lengths = np.asarray(results.length)
    moves = int(lengths.sum())
    plies = int(lengths.max())
    forward = row_skipping.flops_per_board(agent.player, agent.params)
    return {
        "impl": "czjax",
        "player": player_spec,
        "batch": batch,
        "games_per_s": batch / median,
        "moves_per_s": moves / median,
        "median_s": median,
        "times_s": times,
        "compile_s": compile_s,
        "mean_length": moves / batch,
        **step_fields("ply", median, plies),
        "plies": plies,
        "precision": "default",
        **network_fields(forward, forward * moves, median),
        **({"phases": dict(phases)} if phases is not None else {}),
        **({"op_kinds": kinds} if kinds is not None else {}),
    }


def bench_rollout_pgx(batch: int, runs: int) -> dict | None:
    """pgx's Connect Four, random vs random, the same whole-game ``lax.scan`` over 42 plies."""
    try:
        import pgx
    except ImportError:
        return None
    env = pgx.make("connect_four")
    step = jax.vmap(env.step)

    def run(key):
        init_key, play_key = jax.random.split(key)
        state = jax.vmap(env.init)(jax.random.split(init_key, batch))

        def body(state, key):
            logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(key, logits)
            moved = ~(state.terminated | state.truncated)
            return step(state, action), moved.sum()

        state, moved = lax.scan(body, state, jax.random.split(play_key, rollout.PLIES))
        return state.rewards, moved.sum()

    compile_s, times, (_, moves), _, _ = time_compiled(run, lambda i: (jax.random.key(i),), runs)
    median = statistics.median(times)
    return {
        "impl": "pgx",
        "player": "random",
        "batch": batch,
        "games_per_s": batch / median,
        "moves_per_s": int(moves) / median,
        "median_s": median,
        "times_s": times,
        "compile_s": compile_s,
        "mean_length": int(moves) / batch,
        **step_fields("ply", median, rollout.PLIES),  # its scan runs every ply
        "plies": rollout.PLIES,
        "precision": "default",
        **network_fields(0.0, 0.0, median),
    }


ROLLOUT_HEADER = (
    f"{'impl':6s} {'player':16s} {'batch':>7s} {'games/s':>12s} {'moves/s':>13s} {'median s':>9s} {'s/ply':>9s} "
    f"{'net GFLOP/s':>11s} {'of roof':>7s} {'compile s':>9s}"
)


def format_rollout_row(row: dict) -> str:
    return (
        f"{row['impl']:6s} {row['player']:16s} {row['batch']:7d} {row['games_per_s']:12,.0f} "
        f"{row['moves_per_s']:13,.0f} {row['median_s']:9.4f} {row['step_s']:9.6f} "
        f"{row['network_flops_per_s'] / 1e9:11.2f} {format_fraction(row)} {row['compile_s']:9.2f}"
    )


def stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# The PyTorch project's published training-iteration throughput on its reference 2-core CPU,
# shown beside czjax's figures: games per second of a whole iteration (games and update).
PYTORCH_TRAIN_GAMES_PER_S = {("mlp", 50): 950.0, ("mlp", 4096): 14000.0, ("cnn-mk4", 50): 145.0}


def bench_train(
    model: str,
    games_per_batch: int,
    runs: int,
    steps: int = 5,
    num_devices: int = 1,
    profile: str | Path | None = None,
    **settings,
) -> dict:
    """One compiled chunk of ``steps`` training iterations (self-play against a frozen copy, as
    in the blog's examples, and one AdamW update each), timed per iteration, each batch's games
    split over ``num_devices``. ``settings``: TrainConfig fields that change how the iteration
    is computed, not what (``precision``, ``compaction``, ``conv``, ``norm``, ``unroll``), kept
    in the row; the rest are the defaults. ``profile``: as in :func:`bench_config`."""
    config = bench_train_config(model, games_per_batch, steps, **settings)
    return _with_pytorch_reference(bench_config(config, runs, num_devices, profile))


def bench_train_config(model: str, games_per_batch: int, steps: int, **settings) -> TrainConfig:
    """The config :func:`bench_train` times: self-play against a frozen copy, ``steps`` iterations
    a chunk, 2 evaluation games, ``settings`` as given."""
    return TrainConfig(
        model=model, games_per_batch=games_per_batch, opponent="self", eval_games=2, batches_per_chunk=steps, **settings
    )


def bench_config(
    config: TrainConfig,
    runs: int,
    num_devices: int = 1,
    profile: str | Path | None = None,
    each_kernel: bool = False,
) -> dict:
    """One compiled chunk of ``config``'s training iterations (``batches_per_chunk`` of them,
    then its evaluation games), timed per iteration, each batch's games split over
    ``num_devices``; ``config`` is run as given (a solver evaluation, if on, is left out).
    ``profile``: a folder for a profiler trace of one more chunk (``runs=0``: that chunk is the
    timed one), split into phases (``row["phases"]``: seconds per iteration per phase) and
    kinds of operation (``row["op_kinds"]``, per iteration, czjax.bench.profiling; its step is
    the search's simulation, or without a search the rollout's pair of plies). ``each_kernel``: compiled
    so that each of a GPU's kernels names its own instruction in the trace
    (:data:`czjax.bench.profiling.EACH_KERNEL_OPTIONS`; its times are then the program's run
    that way). ``row["peak_bytes"]``: the device's peak memory in use, where the backend reports
    it (GPUs do, the CPU does not)."""
    if config.solver_eval != "off":
        config = config.override({"solver_eval": "off"})
    steps = config.batches_per_chunk
    num_devices = devices.available(num_devices)
    trainer = make_trainer(config, None, num_devices)
    hparams = devices.replicate(HParams.create(), num_devices)
    state = trainer.init(0)
    searcher = build_search(config)
    with precision.matmul(config.precision):
        compile_s, times, (_, metrics), phases, kinds = time_compiled(
            lambda st: trainer.run_chunk(st, hparams, steps),
            lambda i: (devices.replicate(state.replace(key=jax.random.key(i)), num_devices),),
            runs,
            profile,
            profiling.PLY_PAIR if searcher is None else profiling.SIMULATION,
            profiling.EACH_KERNEL_OPTIONS.get(jax.default_backend()) if each_kernel else None,
        )
    forward_flops = row_skipping.flops_per_board(trainer.learner, state.params)
    actor = trainer.learner if searcher is None else search_player(searcher, trainer.learner)
    acting_flops = row_skipping.flops_per_board(actor, state.params)
    row = _train_row(config, num_devices, compile_s, times, metrics, forward_flops, acting_flops)
    if phases is not None:
        row["phases"] = {name: seconds / steps for name, seconds in phases}
    if kinds is not None:
        row["op_kinds"] = per_iteration_kinds(kinds, steps)
    peak = peak_bytes()
    if peak is not None:
        row["peak_bytes"] = peak
    return row


def per_iteration_kinds(kinds: dict, steps: int) -> dict:
    """czjax.bench.profiling.kind_table's figures for a chunk of ``steps`` iterations, per
    iteration (the launches per loop step as they are)."""
    per = dict(kinds)
    per["seconds"] = {kind: seconds / steps for kind, seconds in kinds["seconds"].items()}
    per["launches"] = {kind: count / steps for kind, count in kinds["launches"].items()}
    for name in ("span_s", "busy_s", "idle_s", "total_launches", "unnamed_launches"):
        per[name] = kinds[name] / steps
    if "steps" in kinds:
        per["steps"] = kinds["steps"] / steps
    return per


def _train_row(
    config, num_devices: int, compile_s: float, times: list[float], metrics, forward_flops: float, acting_flops: float
) -> dict:
    """:func:`bench_config`'s row from its timings: the median chunk's speed per iteration, the
    learner's real positions per second, the network's FLOPs per iteration and per second
    (:func:`network_flops`, from ``forward_flops``, the model's per board, and
    ``acting_flops``, the player's that made the moves per board: the model's, or a search's
    over it), and the settings of ``config`` that change how the iteration is computed."""
    steps, games_per_batch = config.batches_per_chunk, config.games_per_batch
    per_iteration = statistics.median(times) / steps
    # the learner's real positions per batch; with a replay buffer, per step of its `replay.steps`
    positions = float(metrics["positions"]) / steps * (config.replay.steps if config.replay.capacity else 1)
    # every ply of every game is one board its mover's player evaluated; game_length is the
    # mean over the batch's games (averaged over the chunk's equal-sized batches)
    played = games_per_batch * float(metrics["game_length"])
    flops = network_flops(forward_flops, played, positions, acting_flops)
    return {
        "model": config.model,
        "search": str(config.search or ""),
        "games_per_batch": games_per_batch,
        "games_per_s": games_per_batch / per_iteration,
        "positions_per_s": positions / per_iteration,
        "iteration_s": per_iteration,
        **step_fields("iteration", per_iteration, 1),
        "forward_flops_per_board": forward_flops,
        "acting_flops_per_board": acting_flops,
        "positions_played_per_iteration": played,
        "learner_positions_per_iteration": positions,
        "network_flops_per_iteration": flops,
        "network_flops_per_s": flops / per_iteration,
        "compile_s": compile_s,
        "times_s": times,
        "steps_per_run": steps,
        **{
            name: getattr(config, name)
            for name in ("precision", "compaction", "conv", "norm", "unroll", "control_flow")
        },
        "devices": num_devices,
    }


def _with_pytorch_reference(row: dict) -> dict:
    """``row`` with the PyTorch project's published figure for its setting and czjax's ratio to
    it, where there is one."""
    reference = PYTORCH_TRAIN_GAMES_PER_S.get((row["model"].replace("-value", ""), row["games_per_batch"]))
    if reference:
        row["pytorch_games_per_s"] = reference
        row["vs_pytorch"] = row["games_per_s"] / reference
    return row


def add_torch_peer(row: dict, runs: int, steps: int) -> bool:
    """Time czjax.bench.torch_peer's PyTorch iteration for the same setting, in this process;
    False when PyTorch is not installed."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False

    peer = torch_peer.bench_train(row["model"], row["games_per_batch"], runs, steps)
    row["torch_games_per_s"] = peer["games_per_s"]
    row["torch_positions_per_s"] = peer["positions_per_s"]
    row["torch_version"] = peer["torch"]
    row["torch_device"] = peer["device"]
    row["vs_torch"] = row["games_per_s"] / peer["games_per_s"]
    return True


TRAIN_HEADER = (
    f"{'model':14s} {'devices':>7s} {'games/batch':>11s} {'games/s':>10s} {'positions/s':>12s} "
    f"{'s/iteration':>11s} {'net GFLOP/s':>11s} {'of roof':>7s} {'compile s':>9s}"
    f"  {'PyTorch here':>12s} {'ratio':>6s}  vs PyTorch's published figure"
)


def format_train_row(row: dict) -> str:
    ref = f"{row['vs_pytorch']:.1f}x of {row['pytorch_games_per_s']:,.0f}" if "vs_pytorch" in row else ""
    here = (
        f"{row['torch_games_per_s']:12,.0f} {row['vs_torch']:5.1f}x" if "vs_torch" in row else f"{'-':>12s} {'-':>6s}"
    )
    roof = format_fraction(row)
    flow = row.get("control_flow", "auto")
    model = row["model"] + ("" if flow == "auto" else " " + flow)
    return (
        f"{model:14s} {row['devices']:7d} {row['games_per_batch']:11d} {row['games_per_s']:10,.0f} "
        f"{row['positions_per_s']:12,.0f} "
        f"{row['iteration_s']:11.4f} {row['network_flops_per_s'] / 1e9:11.2f} {roof} {row['compile_s']:9.1f}  "
        f"{here}  {ref}"
    )


def bench_scan(k: int, games_per_batch: int, steps: int, runs: int, model: str = "mlp") -> dict:
    """K configurations (entropy bonus spread over [0, 0.1], one seed each) for ``steps``
    batches: one vmapped compiled chunk, against the same K chunks run one after another."""

    config = TrainConfig(
        model=model, games_per_batch=games_per_batch, opponent="self", eval_games=2, batches_per_chunk=steps
    )
    base = dict(learning_rate=1e-3, entropy_bonus=0.05, value_weight=0.0, discount=0.9)
    settings = [{"entropy_bonus": 0.1 * i / max(1, k - 1)} for i in range(k)]
    configs = scan.configurations(settings, [0])
    init, chunk = scan.make_scan_fns(config, k)
    states, hparams = init(jnp.arange(k)), scan.stacked_hparams(base, configs)
    start = time.perf_counter()
    vmapped = chunk.lower(states, hparams, steps).compile()
    vmapped_compile_s = time.perf_counter() - start

    trainer = make_trainer(config)
    singles = [(jax.tree.map(lambda x, i=i: x[i], states), HParams.create(**{**base, **settings[i]})) for i in range(k)]
    start = time.perf_counter()
    single = cast(jax.stages.Wrapped, trainer.run_chunk).lower(*singles[0], steps).compile()  # jitted by make_trainer
    single_compile_s = time.perf_counter() - start

    jax.block_until_ready(vmapped(states, hparams))
    jax.block_until_ready(single(*singles[0]))
    vmapped_times, sequential_times = [], []
    for _ in range(runs):  # interleaved, so both see the same machine load
        t = time.perf_counter()
        jax.block_until_ready(vmapped(states, hparams))
        vmapped_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        for st, hp in singles:
            jax.block_until_ready(single(st, hp))
        sequential_times.append(time.perf_counter() - t)
    vmapped_s, sequential_s = statistics.median(vmapped_times), statistics.median(sequential_times)
    return {
        "k": k,
        "model": model,
        "games_per_batch": games_per_batch,
        "batches": steps,
        "vmapped_s": vmapped_s,
        "sequential_s": sequential_s,
        "speedup": sequential_s / vmapped_s,
        "vmapped_games_per_s": k * steps * games_per_batch / vmapped_s,
        "sequential_games_per_s": k * steps * games_per_batch / sequential_s,
        "vmapped_compile_s": vmapped_compile_s,
        "single_compile_s": single_compile_s,
        "vmapped_times_s": vmapped_times,
        "sequential_times_s": sequential_times,
    }


SCAN_HEADER = (
    f"{'K':>4s} {'model':6s} {'games/batch':>11s} {'batches':>7s} {'vmapped s':>10s} {'sequential s':>12s} "
    f"{'speedup':>8s} {'compile s (vmap/single)':>24s}"
)


def format_scan_row(row: dict) -> str:
    return (
        f"{row['k']:4d} {row['model']:6s} {row['games_per_batch']:11d} {row['batches']:7d} {row['vmapped_s']:10.3f} "
        f"{row['sequential_s']:12.3f} {row['speedup']:7.2f}x {row['vmapped_compile_s']:11.1f} / "
        f"{row['single_compile_s']:.1f}"
    )
