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

import dataclasses
import itertools
import json
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

from czjax import models
from czjax.jobs import folders, stops
from czjax.jobs.folders import METRICS, SCAN, SCAN_REPORT, group_checkpoint, read_metrics, write_metrics
from czjax.jobs.loop import TIMING_KEYS, ChunkProgram, check_finite, metric_row, run_chunk_once
from czjax.jobs.plots import PANELS, Figure, save_figure
from czjax.jobs.sinks import log_rows
from czjax.jobs.spec import ScanSpec
from czjax.learn.settings import HParams, TrainConfig, hparam_names
from czjax.learn.trainer import make_trainer
from czjax.util import checkpoint, compiling, devices
from czjax.util.progress import Pace, eta_text

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


def make_scan_fns(config: TrainConfig, configurations: int = 1):
    """``(init(seeds) -> stacked state, chunk(states, hparams, num_batches, bench=None) -> (states,
    metrics))`` for ``configurations`` at once in a program; ``bench`` is the trainer's solver
    benchmark (``make_trainer(config, AXIS).solver_bench``), shared by the configurations."""
    trainer = make_trainer(config, axis_name=AXIS, configurations=configurations)
    convolutions, platform = models.convolves(trainer.model), trainer.platform
    init = compiling.jit(jax.vmap(trainer.init), convolutions=convolutions, platform=platform)

    def chunk(states, hparams, num_batches, bench=None):
        return jax.vmap(lambda s, h: trainer.run_chunk(s, h, num_batches, bench), axis_name=AXIS)(states, hparams)

    return init, compiling.jit(chunk, convolutions=convolutions, platform=platform, static_argnums=2)


def open_scan(out_dir: Path, description: dict, resume: bool, words: folders.Spelling = folders.FLAGS) -> list[dict]:
    """The rows already logged in ``out_dir`` when resuming a scan with the same description
    (settings, seeds and config), else none; writes ``scan.json``. The folder has been prepared
    (:func:`czjax.jobs.folders.prepare`)."""
    rows: list[dict] = []
    if resume:
        previous = json.loads((out_dir / SCAN).read_text())
        previous["config"] = TrainConfig.from_dict(previous["config"]).to_dict()  # an older scan.json's settings
        differ = differences(previous, description, skip=("batches", "chunk"))
        if differ:
            name, before, now = differ[0]
            raise ValueError(
                f"{words.resume} must use the same settings, seeds and config as the scan in the folder: {name} was "
                f"{before!r}, now {now!r}" + (f" (and {len(differ) - 1} more)" if len(differ) > 1 else "")
            )
        if previous["chunk"] != description["chunk"]:
            raise ValueError(f"{words.resume} must use the same {words.chunk} as before ({previous['chunk']})")
        rows = read_metrics(out_dir / METRICS)
    (out_dir / SCAN).write_text(json.dumps(description, indent=1))
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


def scan_time_left(pace: Pace, batch: int, batches: int, later_batches: int) -> float | None:
    """Seconds left in a scan from ``batch`` at a group's ``pace``: its remaining batches and
    every batch of the groups after it (the same size, so the same pace)."""
    return pace.time_left(batches - batch + later_batches)


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


@dataclasses.dataclass
class _Group:
    """One group of a scan's configurations (``configs``, group ``index`` of ``count``), run as one
    vmapped program to the scan's target, its configurations spread over up to ``num_devices``
    devices; ``done``, the batches its configurations have done."""

    spec: ScanSpec
    index: int
    count: int
    configs: list[dict]
    rule: stops.StopRule
    num_devices: int
    done: int = 0

    @property
    def label(self) -> str:
        return f"group {self.index + 1}/{self.count}"

    @property
    def ids(self) -> list[int]:
        return [c["config"] for c in self.configs]

    def run(self, rows: list[dict]) -> None:
        """Run (or continue) the group to the scan's target, its rows appended to ``rows``;
        checkpoints after every chunk; stops before a chunk when the stop rule says so."""
        spec, config, size = self.spec, self.spec.config, len(self.configs)
        spread = devices.largest_divisor(size, self.num_devices)  # configurations split evenly
        per_program = size // spread  # the configurations each device's program holds
        init, run_chunk = make_scan_fns(config, per_program)
        hparams = stacked_hparams(spec.base_hparams, self.configs)
        states = self.resumed(init(jnp.asarray([c["seed"] for c in self.configs])), rows)
        start = time.perf_counter()
        # the first chunk counts its own time (its compile left out), each later one the wall time since the last
        pace, last_chunk_end = Pace(), start
        while (done := int(np.asarray(states.step)[0])) < spec.batches and not self.rule.due():
            num_batches = min(config.batches_per_chunk, spec.batches - done)
            program = ChunkProgram(
                run_chunk,
                config,
                ("scan", config, num_batches, size, spread),
                f"for {size} configurations",
                lambda tree: devices.spread_configurations(tree, spread),
                devices.replicate(make_trainer(config, AXIS, configurations=per_program).solver_bench, spread),
            )
            label = f"{self.label}: {num_batches} batches"
            states, metrics, seconds = run_chunk_once(program, states, hparams, num_batches, self.rule.log, label)
            check_finite(metrics, done + 1, f"{self.label}'s last checkpoint untouched")
            speed = size * num_batches * config.games_per_batch / seconds
            new_rows = group_rows(self.configs, metrics, speed, time.perf_counter() - start)
            rows.extend(new_rows)
            self.save(states, new_rows)
            self.done, self.rule.chunks = done + num_batches, self.rule.chunks + 1
            now = time.perf_counter()
            pace = pace.add(num_batches, seconds if pace.steps == 0 else now - last_chunk_end)
            last_chunk_end = now
            later = (self.count - self.index - 1) * spec.batches
            left_s = scan_time_left(pace, self.done, spec.batches, later)
            self.rule.log(group_progress(self.label, size, new_rows, spec.batches, left_s))

    def resumed(self, states, rows: list[dict]):
        """The states to continue from when the scan resumes: the group's checkpoint's (if it has
        one), its rows logged after the checkpoint dropped from ``rows`` (all of them when it has
        none) and the metrics file rewritten to match; else ``states`` unchanged."""
        spec, ckpt = self.spec, group_checkpoint(self.spec.out_dir, self.index)
        if not spec.resume:
            return states
        if ckpt.exists():
            states, _ = checkpoint.load(ckpt, states, expected_model=spec.config.model)
            self.done = int(np.asarray(states.step)[0])
            rows[:] = [r for r in rows if r["config"] not in self.ids or r["batches"] <= self.done]
            self.rule.log(f"{self.label}: resuming at batch {self.done:,}")
        else:
            rows[:] = [r for r in rows if r["config"] not in self.ids]
        write_metrics(spec.out_dir / METRICS, rows)
        return states

    def save(self, states, new_rows: list[dict]) -> None:
        """After a chunk: its rows appended to the metrics file and the sinks, then the group's
        checkpoint."""
        spec = self.spec
        with (spec.out_dir / METRICS).open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in new_rows)
        log_rows(spec.sinks, new_rows)
        description = {"scan_group": self.index, "configs": self.ids}
        path = group_checkpoint(spec.out_dir, self.index)
        checkpoint.save(path, states, spec.config.to_dict(), spec.base_hparams, description)


class ScanResult(NamedTuple):
    """A scan's metric rows (one per configuration per chunk) and why it stopped before its
    target (:mod:`czjax.jobs.stops`; False when it did not)."""

    rows: list[dict]
    interrupted: str | bool


def run_scan(
    config: TrainConfig, base_hparams: dict, settings: list[dict], seeds: list[int], out_dir, batches: int, **options
) -> list[dict]:
    """Train every configuration (each setting times each seed) as one vmapped program.

    Args:
        config: what is compiled, shared by every configuration.
        base_hparams: the hyperparameters every setting starts from (a preset's ``hparams``).
        settings: dicts of :class:`~czjax.learn.settings.HParams` values over ``base_hparams``
            (``[{}]`` for the base alone).
        seeds: the seeds each setting runs with.
        out_dir: the scan's folder (``scan.json``, ``metrics.jsonl``, a checkpoint per group).
        batches: batches per configuration.
        **options: the rest of a :class:`~czjax.jobs.spec.ScanSpec`: ``chunk`` (configurations
            per compiled group), ``resume``, ``overwrite``, ``num_devices``, ``stop_at``, ``log``.

    Returns:
        The metric rows, one per configuration per chunk (``config``, ``seed`` and the
        setting's values in each), as written to ``out_dir/metrics.jsonl``.
    """
    return train_scan(ScanSpec(config, base_hparams, settings, seeds, out_dir, batches, **options)).rows


def train_scan(spec: ScanSpec) -> ScanResult:
    """Run the scan ``spec`` describes, group after group, to its target or a stop (the rule
    training runs follow too: :mod:`czjax.jobs.stops`; every chunk is saved as it completes)."""
    num_devices = devices.available(spec.num_devices)
    out_dir = spec.out_dir
    # the lock creates the folder (gone if refused)
    with folders.locked(out_dir, "scan", spec.spelling), stops.sigterm_as_stop():
        folders.prepare(spec)
        rows = open_scan(out_dir, spec.description(), spec.resume, spec.spelling)
        rule = stops.stop_rule(spec.log, spec.notice, spec.stop_at)
        configs, size = configurations(spec.settings, spec.seeds), spec.group_size
        groups = [configs[i : i + size] for i in range(0, len(configs), size)]
        # a fresh scan that fails before its first group's checkpoint (memory, disk) leaves no scan.json behind
        unsaved = lambda: not spec.resume and not any(out_dir.glob("checkpoint-group*.msgpack"))  # noqa: E731
        current = None
        with folders.discarded_on_failure(out_dir, [METRICS, SCAN], unsaved), rule.watching():
            for g, group in enumerate(groups):
                current = _Group(spec, g, len(groups), group, rule, num_devices)
                current.run(rows)
                if rule.reason:
                    break
        if current is not None:
            rule.report(f"the last completed chunk ({current.label}, batch {current.done:,})")
    return ScanResult(rows, rule.reason)


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


def files_written(out_dir: Path) -> list[str]:
    """The names of the scan's files that ``out_dir`` holds (:func:`czjax.jobs.folders.scan_files`)."""
    return [name for name in folders.scan_files(out_dir) if (out_dir / name).exists()]


def write_report(
    rows: list[dict], out_dir, grid_names: list[str], sort_by: str = "eval_win_rate", title: str = ""
) -> str:
    """Writes ``scan.png`` and ``summary.json`` (per setting, over seeds, the last 20% of each
    run) into ``out_dir``; returns the summary as a text table, then an ``outputs:`` line that
    names every file of the scan in ``out_dir``."""
    out_dir = Path(out_dir)
    figure, summary = SCAN_REPORT
    scan_figure(rows, out_dir / figure, title=title)
    table = summary_table(rows, sort_by=sort_by)
    (out_dir / summary).write_text(json.dumps(table, indent=1))
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
    lines.append(f"outputs: {', '.join(str(out_dir / name) for name in files_written(out_dir))}")
    return "\n".join(lines)
