"""Hyperparameter scans as one compiled program: the training chunk vmapped over configurations.

A scan is a list of settings (each a dict of :class:`~czjax.learn.settings.HParams` values, e.g. a grid
over the entropy bonus) times a list of seeds. Each configuration has its own parameters,
optimizer state, opponent and PRNG stream: a leading axis on the :class:`TrainState` and on
``HParams``. Model, batch size and opponent kind are shared (they are compiled in).

``--chunk N`` on the host runs the configurations N at a time (one group after another, each
for the whole run) when they do not fit in memory together; every configuration's results are
the same as in one group, because each carries its own state and key.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

from czjax.learn.settings import HParams, TrainConfig, hparam_names
from czjax.learn.trainer import make_trainer
from czjax.run.loop import (
    METRICS,
    TIMING_KEYS,
    discarded_on_failure,
    guard_fresh,
    locked,
    metric_row,
    read_metrics,
    run_chunk_once,
    write_metrics,
)
from czjax.run.plots import PANELS, Figure, save_figure
from czjax.run.sinks import log_rows
from czjax.util import checkpoint, devices
from czjax.util.progress import eta_text, time_left_after_compile

AXIS = "configuration"  # the vmapped axis: skips (lax.cond) hold for all configurations at once
SCANNABLE = hparam_names()  # every traced hyperparameter


def parse_grid(items: list[str]) -> dict[str, list[float]]:
    """``["entropy_bonus=0,0.01", "learning_rate=1e-3,1e-4"]`` -> ``{name: [values]}``."""
    grid: dict[str, list[float]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not values.strip():
            raise ValueError(f"bad grid item {item!r}: expected NAME=V1,V2,...")
        if name not in SCANNABLE:
            raise ValueError(f"cannot scan {name!r}; scannable: {', '.join(SCANNABLE)}")
        if name in grid:
            raise ValueError(f"{name} appears twice in the grid")
        try:
            grid[name] = [float(v) for v in values.split(",")]
        except ValueError:
            raise ValueError(f"bad grid item {item!r}: values must be numbers") from None
    return grid


def grid_settings(grid: dict[str, list[float]]) -> list[dict]:
    """The Cartesian product of a grid, first name slowest."""
    names = list(grid)
    return [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))] or [{}]


def configurations(settings: list[dict], seeds: list[int]) -> list[dict]:
    """One entry per (setting, seed): ``{"config": id, "setting": i, "seed": s, **values}``."""
    out: list[dict] = []
    for i, setting in enumerate(settings):
        for seed in seeds:
            out.append({"config": len(out), "setting": i, "seed": seed, **setting})
    return out


def stacked_hparams(base: dict, configs: list[dict]) -> HParams:
    per_config = [HParams.create(**{**base, **{k: c[k] for k in SCANNABLE if k in c}}) for c in configs]
    return jax.tree.map(lambda *xs: jnp.stack(xs), *per_config)


def make_scan_fns(config: TrainConfig):
    """``(init(seeds) -> stacked state, chunk(states, hparams, num_batches, bench=None) -> (states,
    metrics))``; ``bench`` is the trainer's solver benchmark (``make_trainer(config,
    AXIS).solver_bench``), shared by the configurations."""
    trainer = make_trainer(config, axis_name=AXIS)
    init = jax.jit(jax.vmap(trainer.init))

    def chunk(states, hparams, num_batches, bench=None):
        return jax.vmap(lambda s, h: trainer.run_chunk(s, h, num_batches, bench), axis_name=AXIS)(states, hparams)

    return init, jax.jit(chunk, static_argnums=2)


def group_checkpoint(out_dir: Path, group: int) -> Path:
    return out_dir / f"checkpoint-group{group}.msgpack"


def check_resumable(out_dir: Path) -> None:
    """A one-line ValueError when ``out_dir`` holds no scan to resume."""
    if not (Path(out_dir) / "scan.json").exists():
        raise ValueError(f"nothing to resume in {out_dir}: it holds no scan.json")


def open_scan(out_dir: Path, description: dict, resume: bool, overwrite: bool) -> list[dict]:
    """The rows already logged in ``out_dir`` when resuming a scan with the same description
    (settings, seeds and config), else none, refusing a folder that holds a scan unless
    ``overwrite``; writes ``scan.json``."""
    if resume:
        check_resumable(out_dir)
        previous = json.loads((out_dir / "scan.json").read_text())
        previous["config"] = TrainConfig.from_dict(previous["config"]).to_dict()  # an older scan.json's settings
        differ = differences(previous, description, skip=("batches", "chunk"))
        if differ:
            name, before, now = differ[0]
            raise ValueError(
                f"--resume must use the same settings, seeds and config as the scan in the folder: {name} was "
                f"{before!r}, now {now!r}" + (f" (and {len(differ) - 1} more)" if len(differ) > 1 else "")
            )
        if previous["chunk"] != description["chunk"]:
            raise ValueError(f"--resume must use the same --chunk as before ({previous['chunk']})")
        rows = read_metrics(out_dir / METRICS)
    else:
        rows = []
        guard_fresh(
            out_dir,
            [METRICS, "scan.json", *(p.name for p in sorted(out_dir.glob("checkpoint-group*.msgpack")))],
            overwrite,
        )
    (out_dir / "scan.json").write_text(json.dumps(description, indent=1))
    return rows


def differences(before: dict, now: dict, skip=(), prefix: str = "") -> list[tuple[str, object, object]]:
    """``(dotted name, before, now)`` for every entry of two nested descriptions that differs."""
    found = []
    for key in sorted(set(before) | set(now)):
        if key in skip:
            continue
        a, b = before.get(key), now.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += differences(a, b, (), f"{prefix}{key}.")
        elif a != b:
            found.append((prefix + key, a, b))
    return found


SORT_KEYS = ("eval_win_rate", "win_rate", "entropy", "game_length")


def check_sort(sort_by: str, grid_names) -> None:
    """A one-line ValueError for a --sort key the summary table will not have (checked before
    the scan runs)."""
    if sort_by not in (*SORT_KEYS, *grid_names):
        raise ValueError(f"cannot sort by {sort_by!r}; choose one of {', '.join((*SORT_KEYS, *grid_names))}")


def group_rows(group: list[dict], metrics: dict, games_per_s: float, elapsed_s: float) -> list[dict]:
    """One metrics row per configuration of a group, labelled with its setting and seed."""
    rows = []
    for j, c in enumerate(group):
        row = {
            "config": c["config"],
            "setting": c["setting"],
            "seed": c["seed"],
            **{n: c[n] for n in c if n in SCANNABLE},
        }
        rows.append(dict(row, **metric_row(metrics, j), games_per_s=games_per_s, elapsed_s=elapsed_s))
    return rows


def scan_time_left(pace_from: tuple | None, batch: int, chunk: tuple, batches: int, later_batches: int) -> float | None:
    """Seconds left in a scan from ``batch``: this group's remaining batches and every batch of
    the groups after it (the same size, so the same pace), at the wall-clock pace since
    ``pace_from = (batch, time)`` after the group's first chunk, or at that first chunk's own
    pace (``chunk = (batches, seconds)``) while it is the only one."""
    since_first = (batch - pace_from[0], time.perf_counter() - pace_from[1]) if pace_from else None
    return time_left_after_compile(chunk, since_first, batches - batch + later_batches)


def run_group(
    config: TrainConfig,
    base_hparams: dict,
    group: list[dict],
    g: int,
    num_groups: int,
    out_dir: Path,
    batches: int,
    rows: list[dict],
    resume: bool,
    log,
    num_devices: int = 1,
    stop_at: float | None = None,
    sinks=(),
) -> list[dict]:
    """Run (or continue) one group of configurations as one vmapped program to ``batches``, the
    configurations spread over up to ``num_devices`` devices; returns every row, this group's
    appended. Checkpoints after every chunk; starts no chunk past ``stop_at`` (a
    ``time.monotonic()`` deadline) but the first, so that every call makes progress; resumed
    with ``resume=True``."""
    init, run_chunk = make_scan_fns(config)
    ids = [c["config"] for c in group]
    hparams = stacked_hparams(base_hparams, group)
    states = init(jnp.asarray([c["seed"] for c in group]))
    ckpt, metrics_path, label = group_checkpoint(out_dir, g), out_dir / METRICS, f"group {g + 1}/{num_groups}"
    states, rows = resume_group(config, states, rows, ids, ckpt, metrics_path, resume, log, label)
    start = time.perf_counter()
    spread = devices.largest_divisor(len(group), num_devices)  # configurations split evenly
    first, pace_from = True, None  # pace_from: (batch, time) after the first chunk (which compiles)
    while (done := int(np.asarray(states.step)[0])) < batches:
        if stop_at is not None and time.monotonic() >= stop_at and not first:
            log(f"{label}: stopping at batch {done:,} of {batches:,} (time limit); --resume continues it")
            break
        num_batches = min(config.batches_per_chunk, batches - done)
        states, metrics, seconds = run_group_chunk(
            run_chunk, states, hparams, num_batches, config, len(group), spread, log, label
        )
        first = False
        new_rows = group_rows(
            group, metrics, len(group) * num_batches * config.games_per_batch / seconds, time.perf_counter() - start
        )
        rows = rows + new_rows
        save_group_chunk(config, base_hparams, g, ids, states, new_rows, ckpt, metrics_path, sinks)
        left_s = scan_time_left(
            pace_from, done + num_batches, (num_batches, seconds), batches, (num_groups - g - 1) * batches
        )
        log(group_progress(label, len(group), new_rows, batches, left_s))
        pace_from = pace_from or (done + num_batches, time.perf_counter())
    return rows


def run_group_chunk(
    run_chunk, states, hparams, num_batches: int, config: TrainConfig, size: int, spread: int, log, label: str
):
    """The compiled chunk of ``num_batches`` batches for a group of ``size`` configurations,
    spread over ``spread`` devices: ``(states, metrics, seconds)``."""
    return run_chunk_once(
        run_chunk,
        states,
        hparams,
        num_batches,
        config,
        ("scan", config, num_batches, size, spread),
        log,
        f"for {size} configurations",
        f"{label}: {num_batches} batches",
        lambda tree: devices.spread_configurations(tree, spread),
        devices.replicate(make_trainer(config, axis_name=AXIS).solver_bench, spread),
    )


def resume_group(
    config: TrainConfig,
    states,
    rows: list[dict],
    ids: list[int],
    ckpt: Path,
    metrics_path: Path,
    resume: bool,
    log,
    label: str,
) -> tuple[Any, list[dict]]:
    """A group's ``(states, rows)`` to continue from on ``resume``: its checkpoint's states (if it
    has one) and the rows without the group's ones logged after it (all of them when it has
    none), the metrics file rewritten to match; else ``(states, rows)`` unchanged."""
    if resume and ckpt.exists():
        states, _ = checkpoint.load(ckpt, states, expected_model=config.model)
        done = int(np.asarray(states.step)[0])
        rows = [r for r in rows if r["config"] not in ids or r["batches"] <= done]
        log(f"{label}: resuming at batch {done:,}")
    elif resume:
        rows = [r for r in rows if r["config"] not in ids]
    if resume:
        write_metrics(metrics_path, rows)
    return states, rows


def save_group_chunk(
    config: TrainConfig,
    base_hparams: dict,
    g: int,
    ids: list[int],
    states,
    new_rows: list[dict],
    ckpt: Path,
    metrics_path: Path,
    sinks,
) -> None:
    """After a group's chunk: its rows appended to the metrics file and the sinks, then the
    group's checkpoint."""
    with metrics_path.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in new_rows)
    log_rows(sinks, new_rows)
    checkpoint.save(ckpt, states, config.to_dict(), base_hparams, {"scan_group": g, "configs": ids})


def group_progress(label: str, size: int, new_rows: list[dict], batches: int, left_s: float | None) -> str:
    """A group's progress line after a chunk: the batch, speed, mean entropy and mean win rate
    against the punisher over its configurations, and the time left."""
    mean_entropy = np.mean([r["entropy"] for r in new_rows])
    mean_win = np.mean([r["eval_win_rate"] for r in new_rows])
    return (
        f"{label} ({size} configurations) | "
        f"batch {new_rows[0]['batches']:,}/{batches:,} | "
        f"{new_rows[0]['games_per_s']:,.0f} games/s in all | mean entropy {mean_entropy:.2f} | "
        f"mean win vs punisher {mean_win:.2f} | " + eta_text(left_s)
    )


def run_scan(
    config: TrainConfig,
    base_hparams: dict,
    settings: list[dict],
    seeds: list[int],
    out_dir,
    batches: int,
    chunk: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    log: Callable[[str], None] = print,
    num_devices: int | None = 1,
    stop_at: float | None = None,
    sinks=(),
) -> list[dict]:
    """Run every configuration for ``batches`` batches; returns the metric rows (one per
    configuration per logging interval), also written to ``out_dir/metrics.jsonl``. A group's
    configurations are spread over up to ``num_devices`` local devices (None: all of them).
    ``stop_at``: a ``time.monotonic()`` deadline after which no new chunk starts (the scan is
    then resumed with ``resume=True``)."""
    num_devices = devices.available(num_devices)
    out_dir = Path(out_dir)
    with locked(out_dir, "scan"):  # creates the folder (and removes it again if the scan is refused)
        return _run_scan(
            config,
            base_hparams,
            settings,
            seeds,
            out_dir,
            batches,
            chunk,
            resume,
            overwrite,
            log,
            num_devices,
            stop_at,
            sinks,
        )


def _run_scan(
    config,
    base_hparams,
    settings,
    seeds,
    out_dir,
    batches,
    chunk,
    resume,
    overwrite,
    log,
    num_devices,
    stop_at,
    sinks=(),
) -> list[dict]:
    configs = configurations(settings, seeds)
    size = len(configs) if chunk is None else max(1, min(chunk, len(configs)))
    groups = [configs[i : i + size] for i in range(0, len(configs), size)]
    description = {
        "config": config.to_dict(),
        "hparams": base_hparams,
        "settings": settings,
        "seeds": seeds,
        "batches": batches,
        "chunk": size,
    }
    rows = open_scan(out_dir, description, resume, overwrite)
    # a fresh scan that fails before its first group's checkpoint (memory, disk) leaves no scan.json behind
    unsaved = lambda: not resume and not any(out_dir.glob("checkpoint-group*.msgpack"))  # noqa: E731
    with discarded_on_failure(out_dir, [METRICS, "scan.json"], unsaved):
        for g, group in enumerate(groups):
            rows = run_group(
                config,
                base_hparams,
                group,
                g,
                len(groups),
                out_dir,
                batches,
                rows,
                resume,
                log,
                num_devices,
                stop_at,
                sinks,
            )
    return rows


def deterministic_rows(rows: list[dict]) -> dict[tuple, dict]:
    """Rows keyed by (config, batches), timing keys dropped."""
    return {(r["config"], r["batches"]): {k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows}


def summary_table(rows: list[dict], sort_by: str = "eval_win_rate", tail: float = 0.2) -> list[dict]:
    """Per setting, over seeds: the mean of the last ``tail`` fraction of intervals; sorted."""
    by_setting: dict[int, list[dict]] = {}
    for r in rows:
        by_setting.setdefault(r["setting"], []).append(r)
    table = []
    for setting, srows in by_setting.items():
        seeds = sorted({r["seed"] for r in srows})
        finals = []
        for seed in seeds:
            seq = sorted((r for r in srows if r["seed"] == seed), key=lambda r: r["batches"])
            finals.extend(seq[-max(1, int(len(seq) * tail)) :])
        entry = {"setting": setting, **{k: srows[0][k] for k in SCANNABLE if k in srows[0]}, "seeds": len(seeds)}
        for key in SORT_KEYS:
            values = [r[key] for r in finals]
            entry[key] = float(np.mean(values))
            entry[key + "_std"] = float(np.std(values))
        table.append(entry)
    if table and sort_by not in table[0]:
        raise ValueError(f"cannot sort by {sort_by!r}; choose one of {', '.join(SORT_KEYS)}")
    return sorted(table, key=lambda e: -e[sort_by])


def scan_figure(rows: list[dict], path, title: str = "") -> None:
    """One figure, a panel per metric: a thin line per configuration, and per setting the mean
    over seeds with a band from the lowest to the highest seed."""

    fig = Figure(figsize=(17, 7.5), constrained_layout=True)
    axes = fig.subplots(2, 4)
    settings = sorted({r["setting"] for r in rows})
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (panel, series) in zip(axes.flat, PANELS):
        key = series[-1][0] if panel == "win rate" else series[0][0]
        for s in settings:
            color = colors[s % len(colors)]
            srows = [r for r in rows if r["setting"] == s]
            label = ", ".join(f"{k}={srows[0][k]:g}" for k in SCANNABLE if k in srows[0]) or f"setting {s}"
            seeds = sorted({r["seed"] for r in srows})
            curves = []
            for seed in seeds:
                seq = sorted((r for r in srows if r["seed"] == seed), key=lambda r: r["games"])
                curves.append([r.get(key, np.nan) for r in seq])
                ax.plot([r["games"] for r in seq], curves[-1], color=color, lw=0.5, alpha=0.35)
            length = min(len(c) for c in curves)
            data = np.array([c[:length] for c in curves])
            games = [r["games"] for r in sorted((r for r in srows if r["seed"] == seeds[0]), key=lambda r: r["games"])][
                :length
            ]
            ax.plot(games, data.mean(0), color=color, lw=1.8, label=label)
            if len(seeds) > 1:
                ax.fill_between(games, data.min(0), data.max(0), color=color, alpha=0.12)
        ax.set_title(panel + (" (vs RandomPunisher)" if panel == "win rate" else ""))
        ax.set_xlabel("games per configuration")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    save_figure(fig, path)


def write_report(
    rows: list[dict], out_dir, grid_names: list[str], sort_by: str = "eval_win_rate", title: str = ""
) -> str:
    """Writes ``scan.png`` and ``summary.json`` (per setting, over seeds, the last 20% of each
    run) into ``out_dir``; returns the summary as a text table."""
    out_dir = Path(out_dir)
    scan_figure(rows, out_dir / "scan.png", title=title)
    table = summary_table(rows, sort_by=sort_by)
    (out_dir / "summary.json").write_text(json.dumps(table, indent=1))
    names = [k for k in SCANNABLE if k in grid_names]
    seeds = len({r["seed"] for r in rows})
    lines = [
        f"\nlast 20% of each run, mean (std) over {seeds} seeds, sorted by {sort_by}:",
        "  ".join(f"{n:>14s}" for n in names) + f"  {'vs punisher':>14s}  {'entropy':>12s}  {'game length':>12s}",
    ]
    for e in table:
        lines.append(
            "  ".join(f"{e[n]:14g}" for n in names)
            + f"  {e['eval_win_rate']:7.3f} ({e['eval_win_rate_std']:.3f})"
            + f"  {e['entropy']:6.2f} ({e['entropy_std']:.2f})"
            + f"  {e['game_length']:6.1f} ({e['game_length_std']:.1f})"
        )
    lines.append(f"outputs: {out_dir / METRICS}, {out_dir / 'scan.png'}, {out_dir / 'summary.json'}")
    return "\n".join(lines)
