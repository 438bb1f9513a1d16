"""The host-side training loop: compiled chunks, metrics, dashboard, checkpoints, resume.

A run's folder holds ``checkpoint.msgpack`` (written atomically every few chunks, at the end,
and when the run is interrupted), ``metrics.jsonl`` (one object per chunk) and
``dashboard.png`` (refreshed during the run). ``resume=True`` continues from the checkpoint
with the checkpoint's settings; rows logged after it are dropped first, so a resumed run gives
the same metrics and parameters as an uninterrupted one with the same seed. ``init_from`` starts
a run from given weights (a PyTorch ``.pth`` or a czjax checkpoint) instead of fresh ones; the
source is recorded in ``run.json`` and in the checkpoint, and a resumed run does not read it again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from czjax import agents, checkpoint, plots
from czjax.train import HParams, TrainConfig, make_trainer

CHECKPOINT = checkpoint.FILENAME
METRICS = "metrics.jsonl"
DASHBOARD = "dashboard.png"

# Compiled chunks, by what determines the program (config, number of batches, and for scans
# the number of configurations); hyperparameters are traced.
_COMPILED: dict = {}


def compiled_chunk(cache_key, chunk: Callable, args: tuple, num_steps: int, log: Callable[[str], None], what: str) -> Callable:
    """``chunk`` (jitted, ``num_steps`` static) compiled ahead of time for ``args``, once per
    ``cache_key``; logs the compile time, which progress figures then leave out."""
    if cache_key not in _COMPILED:
        start = time.perf_counter()
        _COMPILED[cache_key] = chunk.lower(*args, num_steps).compile()
        log(f"compiled a chunk of {num_steps} batches {what} in {time.perf_counter() - start:.1f} s")
    return _COMPILED[cache_key]

# Keys whose values depend on the machine's speed, not on the run.
TIMING_KEYS = ("games_per_s", "elapsed_s", "chunk_s")


def read_metrics(path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_metrics(path, rows: list[dict]) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(path)


def format_progress(row: dict, total_batches: int | None) -> str:
    batches = f"{row['batches']:,}" + (f"/{total_batches:,}" if total_batches else "")
    return (
        f"batch {batches} | {row['games']:,} games | {row['games_per_s']:,.0f} games/s | "
        f"win {row['win_rate']:.2f} | vs punisher {row['eval_win_rate']:.2f} | "
        f"entropy {row['entropy']:.2f} | length {row['game_length']:.1f} | promotions {row['promotions']}"
    )


def run(
    config: TrainConfig,
    hparams: HParams,
    out_dir,
    seed: int = 0,
    batches: int | None = None,
    time_budget_s: float | None = None,
    resume: bool = False,
    checkpoint_every: int = 10,
    plot_every_s: float = 20.0,
    log: Callable[[str], None] = print,
    title: str = "",
    init_from: str | None = None,
) -> dict:
    """Train until ``batches`` batches in all (counting those before a resume) or
    ``time_budget_s`` seconds of this invocation, whichever comes first; returns a summary.

    ``init_from``: a ``.pth`` / ``.pt`` file or czjax checkpoint whose weights the learner and
    its frozen opponent start from (with a fresh optimizer state). Ignored with ``resume``: the
    run continues from its own checkpoint, which names the source it started from."""
    if batches is None and time_budget_s is None:
        raise ValueError("give a number of batches or a time budget")
    # the starting weights are read first: a bad file leaves the output folder as it was
    start_params = agents.load_weights(init_from, config.model) if init_from is not None and not resume else None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ckpt_path, metrics_path, dash_path = out_dir / CHECKPOINT, out_dir / METRICS, out_dir / DASHBOARD
    trainer = make_trainer(config)
    rows: list[dict] = []
    elapsed_before = 0.0
    if resume:
        state, meta = checkpoint.load(ckpt_path, trainer.init(seed), expected_model=config.model)
        init_from = meta.get("extra", {}).get("init_from")  # already in the checkpoint's weights
        done = int(state.step)
        rows = [r for r in read_metrics(metrics_path) if r["batches"] <= done]
        write_metrics(metrics_path, rows)
        elapsed_before = rows[-1]["elapsed_s"] if rows else 0.0
        log(f"resuming {ckpt_path} at batch {done:,} ({int(state.games):,} games)")
    else:
        state = trainer.init(seed, start_params)
        for p in (metrics_path, ckpt_path):
            p.unlink(missing_ok=True)
    origin = {"seed": seed, **({"init_from": str(init_from)} if init_from is not None else {})}
    (out_dir / "run.json").write_text(json.dumps({"config": config.to_dict(), "hparams": hparams.to_dict(), **origin}, indent=1))

    def save_checkpoint():
        checkpoint.save(ckpt_path, state, config.to_dict(), hparams.to_dict(), origin)

    def save_dashboard():
        if rows:
            plots.dashboard(rows, dash_path, title=title)

    k = config.batches_per_chunk

    def chunk_fn(num_steps: int):
        return compiled_chunk((config, num_steps), trainer.run_chunk, (state, hparams), num_steps, log,
                              f"of {config.games_per_batch} games")

    start = time.perf_counter()
    last_print = last_plot = 0.0
    chunks = 0
    interrupted = False
    try:
        while True:
            done = int(state.step)
            if batches is not None and done >= batches:
                break
            if time_budget_s is not None and time.perf_counter() - start >= time_budget_s:
                break
            num_steps = k if batches is None else min(k, batches - done)
            fn = chunk_fn(num_steps)
            t0 = time.perf_counter()
            new_state, metrics = fn(state, hparams)
            metrics = jax.device_get(metrics)
            state = new_state
            chunk_s = time.perf_counter() - t0
            row = {key: (int(v) if key in ("batches", "games", "promotions", "positions") else float(v)) for key, v in metrics.items()}
            row.update(
                games_per_s=num_steps * config.games_per_batch / chunk_s,
                chunk_s=chunk_s,
                elapsed_s=elapsed_before + time.perf_counter() - start,
            )
            rows.append(row)
            with metrics_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            chunks += 1
            now = time.perf_counter() - start
            if now - last_print >= 2.0 or chunks == 1:
                log(format_progress(row, batches))
                last_print = now
            if chunks % checkpoint_every == 0:
                save_checkpoint()
            if now - last_plot >= plot_every_s:
                save_dashboard()
                last_plot = now
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: saving the last completed chunk")
    save_checkpoint()
    save_dashboard()
    summary = {
        "out_dir": str(out_dir),
        "batches": int(state.step),
        "games": int(state.games),
        "promotions": int(state.promotions),
        "elapsed_s": rows[-1]["elapsed_s"] if rows else 0.0,
        "interrupted": interrupted,
        "last": rows[-1] if rows else {},
        "checkpoint": str(ckpt_path),
        "metrics": str(metrics_path),
        "dashboard": str(dash_path),
    }
    return summary


def deterministic(row: dict) -> dict:
    """A metrics row without its timing keys (what a resumed run must reproduce)."""
    return {k: v for k, v in row.items() if k not in TIMING_KEYS}


def params_equal(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
