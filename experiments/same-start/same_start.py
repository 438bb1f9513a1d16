"""czjax and the PyTorch project's own training loop from the same initial weights, side by side.

For each seed the initial weights are drawn once (czjax's PyTorch-style initialisation, the
very weights ``czjax train --seed S`` starts from) and written as a PyTorch ``.pth``. Then both
sides train from that file with the preset's settings:

- examples 1-3 (``ex1-collapse``, ``ex2-entropy``, ``ex3-rwb``, the default: Mk4 with value head,
  50 games per batch, AdamW lr 1e-4, entropy 0.05, value weight 0.5, gamma 0.9): self-play
  against a frozen copy promoted every 100 batches when the learner's last 1,000 games score over
  52%;
- examples 4 and 5 (``ex4-a2c``, ``ex5-ppo``: Mk4 with value head, 50 games per batch, lr 1e-4,
  entropy 0.05, value weight 1.5, gamma 0.9): A2C, or PPO (clip 0.2, 4 epochs, target KL 0.01,
  one-step TD targets), against RandomPunisher; also ``default`` (REINFORCE against it).

The sides:

- czjax: ``loop.run_training(..., init_from=<the .pth>)`` with the seed's own random stream;
- PyTorch: ``czjax.bench.torch_peer`` with ``torch.manual_seed(seed)``: ``self_play`` (the
  project's ``self_play_loop`` and ``update_policy``) for self-play presets, ``train_against``
  with its ``RandomPunisher`` (the project's ``train_against_opponents``, AdamW without weight
  decay as the project makes it there) for the others; PyTorch's sampling throughout.

Both log every 20 batches: entropy, win rate against the training opponent, value loss, game
length (plies), promotions, and the win rate in 100 games against RandomPunisher (for PyTorch: its
weights imported into czjax and played with czjax's RandomPunisher, the same evaluation as
czjax's). Outputs in ``--out``: ``seed<S>/init.pth``, ``seed<S>/czjax/`` (a czjax run folder),
``seed<S>/torch/metrics.jsonl`` (and ``batches.jsonl``, one row per batch), ``same_start.png``
(curves per seed, czjax against PyTorch) and ``summary.json`` (milestones, wall times).

    python experiments/same-start/same_start.py --games 12000 --seeds 2                 # ~40 min on a 2-core CPU
    python experiments/same-start/same_start.py --games 100000 --seeds 4 --out runs/ss4  # a longer comparison
    python experiments/same-start/same_start.py --preset ex4-a2c --games 10000 --seeds 2 --out runs/ss-ex4
    python experiments/same-start/same_start.py --preset ex5-ppo --games 10000 --seeds 2 --out runs/ss-ex5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from czjax.players.loading import load_weights

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: curves
from curves import equivalence_verdict, format_interval, mean_interval, per_seed, seed_band, trailing_mean, value_at

SIDES = ("czjax", "torch")
LABELS = {"czjax": "czjax (JAX)", "torch": "PyTorch project loop"}
# (metric, panel title) in the figure and the milestone table
METRICS = [
    ("entropy", "policy entropy (nats)"),
    ("win_rate", "win rate vs training opponent"),
    ("value_loss", "value loss (per position)"),
    ("game_length", "game length (plies)"),
    ("eval_win_rate", "win rate vs RandomPunisher (100 games)"),
    ("promotions", "checkpoint promotions"),
]
# Equivalence margins of the verdicts (TOST at alpha 0.05), fixed before the comparisons they judge
# were analysed: how far apart the two sides' seed means may be and still count as the
# same result. Entropy: 0.1 nats (the issue's example; example 2 settles near 1.3, example 1
# collapses towards 0); win rate against RandomPunisher: 0.05 (5 points); game length: 1 ply.
EQUIVALENCE_MARGINS = {"entropy": 0.1, "eval_win_rate": 0.05, "game_length": 1.0}
VERDICT_AT = (25_000, 50_000, 100_000, 200_000)  # games: the blog's milestones where the run reaches them
VERDICT_WINDOW = 5_000  # games: a seed's reading at a milestone is its mean over the 5,000 games before it
SUMMARY_KEYS = (
    "preset",
    "config",
    "hparams",
    "seeds",
    "batches",
    "games",
    "runs",
    "start_check",
    "milestones",
    "verdicts",
    "figure",
    "band_figure",
)


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """What each side runs: the games, seeds and preset, and the preset's overrides."""
    parser.add_argument("--games", type=int, default=12000, help="games per side per seed (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 (default: %(default)s)")
    parser.add_argument("--out", default="runs/same-start", help="output folder (default: %(default)s)")
    parser.add_argument(
        "--preset",
        default="ex3-rwb",
        help="a preset the PyTorch peer runs: ex1-collapse, ex2-entropy, ex3-rwb (self-play), ex4-a2c, ex5-ppo "
        "(against RandomPunisher), default (default: %(default)s)",
    )
    parser.add_argument("--games-per-batch", type=int, default=None, help="(default: the preset's)")
    parser.add_argument("--model", default=None, help="(default: the preset's; a small one for tests)")
    parser.add_argument(
        "--log-every",
        type=int,
        default=None,
        metavar="BATCHES",
        help="batches per logged row and evaluation (default: the preset's chunk, 20)",
    )
    parser.add_argument(
        "--eval-opponent",
        default=None,
        metavar="PLAYER",
        help="both sides' evaluation opponent (default: the preset's, the project's RandomPunisher; "
        "random-punisher: as the comparisons before 2026-11-26 measured)",
    )


def add_comparison_flags(parser: argparse.ArgumentParser) -> None:
    """How the comparison runs and reads: its table, the sides and seeds run here, resuming."""
    parser.add_argument(
        "--milestones", type=int, default=4, help="table rows: the run in this many equal parts (default: %(default)s)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="PyTorch threads (default: %(default)s: with 2 on a busy 2-core CPU PyTorch ran 5-10x slower)",
    )
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES, help="run only these (default: both)")
    parser.add_argument(
        "--only-seeds",
        nargs="+",
        type=int,
        default=None,
        metavar="S",
        help="run only these of the seeds, the others kept where finished (to share a comparison's seeds "
        "among processes or machines; a final --resume without it writes the whole table) (default: all)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the finished runs in --out, finish the rest (or add seeds)"
    )
    parser.add_argument("--overwrite", action="store_true", help="start again where --out holds a comparison")
    parser.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="also write what to commit here: results.md (the verdicts), summary.json, the figures and "
        "every side's metrics (metrics.jsonl.gz)",
    )


def parse_args(argv=None):
    from czjax.jobs import presets

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_flags(parser)
    add_comparison_flags(parser)
    args = parser.parse_args(argv)
    if args.only_seeds is not None and not set(args.only_seeds) <= set(range(args.seeds)):
        parser.error(f"--only-seeds must be among the seeds 0..{args.seeds - 1}")
    try:
        preset = presets.get_preset(args.preset)
    except ValueError as err:
        parser.error(str(err))
    refusal = peer_refusal(preset.config)
    if refusal is not None:
        runnable = ", ".join(name for name, p in presets.PRESETS.items() if peer_refusal(p.config) is None)
        parser.error(f"{args.preset}: {refusal}; the PyTorch peer runs {runnable}")
    if args.seeds < 1 or args.milestones < 1 or args.threads < 1:
        parser.error("--seeds, --milestones and --threads must be at least 1")
    return args, preset


def peer_refusal(config) -> str | None:
    """Why the PyTorch peer cannot run ``config``'s training, in a few words, or None when it can:
    self-play with REINFORCE (``torch_peer.self_play``), or REINFORCE, A2C or PPO against
    RandomPunisher (``torch_peer.train_against``), PPO with the project's KL stop, no mirroring."""
    from czjax.bench import torch_peer
    from czjax.jobs.presets import PROJECT_PUNISHER

    if config.opponent not in ("self", PROJECT_PUNISHER):
        return (
            f"trains against {config.opponent}, not a frozen copy or the project's RandomPunisher ({PROJECT_PUNISHER}, "
            "ties to the leftmost column)"
        )
    if config.algorithm not in torch_peer.ALGORITHMS:
        return f"trains with {config.algorithm}, not {', '.join(torch_peer.ALGORITHMS)}"
    if config.opponent == "self" and config.algorithm != "reinforce":
        return f"trains {config.algorithm} in self-play; the peer's self-play is REINFORCE"
    if config.algorithm == "ppo" and config.settings_of("ppo").kl_stop != "after-step":
        return "stops PPO before the step, where the project stops after it"
    if config.mirror:
        return "mirrors the positions, which the project's loops do not"
    return None


def torch_update(config, hparams: dict):
    """The preset's algorithm, hyperparameters and PPO settings as ``torch_peer.Update``."""
    from czjax.bench import torch_peer

    ppo = config.settings_of("ppo")
    return torch_peer.Update(
        algorithm=config.algorithm,
        entropy_bonus=hparams["entropy_bonus"],
        value_weight=hparams["value_weight"],
        gamma=hparams["discount"],
        ppo=torch_peer.PPO(clip=ppo.clip, epochs=ppo.epochs, target_kl=ppo.target_kl, bootstrap=ppo.bootstrap),
    )


def run_config(args, preset):
    """The TrainConfig both sides follow (the preset's, with the command line's overrides)."""
    changes = {
        k: v
        for k, v in (
            ("games_per_batch", args.games_per_batch),
            ("model", args.model),
            ("batches_per_chunk", args.log_every),
            ("eval_opponent", args.eval_opponent),
        )
        if v is not None
    }
    try:
        return dataclasses.replace(preset.config, **changes)
    except ValueError as err:
        raise SystemExit(f"same_start.py: {err}") from None


def initial_weights(config, seed: int, path: Path) -> dict:
    """Write the weights czjax's run with ``seed`` starts from as a PyTorch ``.pth``; returns the state dict."""
    from czjax.learn.trainer import make_trainer
    from czjax.models import torch_layout

    state_dict = torch_layout.to_state_dict(config.model, make_trainer(config).init(seed).params)
    torch_layout.write_pth(path, state_dict)
    return state_dict


def start_check(model_name: str, pth: Path, torch_model) -> float:
    """The largest difference between czjax's and PyTorch's logits and values on the same
    boards at the start: both sides must begin as the same network."""
    import torch

    from czjax import models
    from czjax.util import precision

    params = load_weights(str(pth), model_name)
    boards = np.random.default_rng(0).integers(-1, 2, size=(64, 6, 7)).astype(np.int8)
    with precision.parity():  # a parity path: full float32 on every backend
        logits, value = models.apply_model(models.get_model(model_name), params, boards)
    with torch.no_grad():
        t_logits, t_value = torch_model(torch.from_numpy(boards))
    diff = float(np.abs(np.asarray(logits) - t_logits.numpy()).max())
    if value is not None:
        diff = max(diff, float(np.abs(np.asarray(value) - t_value.numpy()).max()))
    return diff


def punisher_evaluator(model_name: str, games: int, seed: int, opponent: str):
    """``evaluate(torch_model) -> {eval_win_rate, eval_draw_rate}``: the PyTorch model's weights
    imported into czjax and played against ``opponent`` (the config's ``eval_opponent``) at
    temperature 1, as czjax evaluates its own learner (a stream of keys of its own)."""
    import jax

    from czjax import models, rollout
    from czjax.learn.trainer import eval_opponent
    from czjax.models import torch_layout

    punisher = eval_opponent(opponent)

    learner = models.model_player(models.get_model(model_name))
    key = [jax.random.key(1_000_003 + seed)]

    @jax.jit
    def play(params, key):
        _, results = rollout.play_games(key, rollout.Side(learner, params), rollout.Side(punisher), games)
        return (results.outcome == 1).mean(), (results.outcome == 0).mean()

    def evaluate(torch_model) -> dict:
        params = torch_layout.from_state_dict(model_name, torch_model.state_dict())
        key[0], k = jax.random.split(key[0])
        win, draw = play(params, k)
        return {"eval_win_rate": float(win), "eval_draw_rate": float(draw)}

    return evaluate


def torch_logging(config, seed: int, batches: int, folder: Path, batch_file, log):
    """The peer's ``torch_peer.Logging``: a row every chunk, evaluated as czjax evaluates its
    learner, appended to ``folder/metrics.jsonl`` and logged; every batch's metrics to ``batch_file``."""
    from czjax.bench import torch_peer

    def on_row(row):
        row["seed"] = seed
        with (folder / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        log(
            f"torch seed {seed} | batch {row['batches']:,}/{batches:,} | {row['games_per_s']:.0f} games/s | win {row['win_rate']:.2f} | "
            f"vs punisher {row['eval_win_rate']:.2f} | entropy {row['entropy']:.2f} | length {row['game_length']:.1f} | "
            f"promotions {row['promotions']}"
        )

    return torch_peer.Logging(
        every=config.batches_per_chunk,
        evaluate=punisher_evaluator(config.model, config.eval_games, seed, config.eval_opponent),
        on_batch=lambda m: batch_file.write(json.dumps(m) + "\n"),
        on_row=on_row,
    )


def train_torch(config, hparams: dict, model, state_dict: dict, optimizer, batches: int, rows_as) -> list[dict]:
    """The PyTorch project's loop for ``batches``: self-play against a frozen copy of the start
    (``state_dict``), promoted as the preset says, or training against RandomPunisher; its rows."""
    from czjax.bench import torch_peer

    settings = torch_update(config, hparams)
    if config.opponent != "self":
        learner = torch_peer.Learner(model, torch_peer.RandomPunisher(), optimizer)
        return torch_peer.train_against(learner, batches, config.games_per_batch, settings, rows_as)
    opponent = torch_peer.build_model(config.model)
    opponent.load_state_dict(state_dict)
    promotion = torch_peer.Promotion(
        every=config.promote_every, window=config.window_batches, threshold=config.promotion.threshold
    )
    learner = torch_peer.Learner(model, opponent, optimizer)
    return torch_peer.self_play(learner, batches, config.games_per_batch, settings, promotion, rows_as)


def run_torch(config, hparams: dict, seed: int, pth: Path, folder: Path, batches: int, threads: int, log) -> dict:
    """The PyTorch project's loop from ``pth``: self-play, or training against RandomPunisher;
    rows in ``folder/metrics.jsonl``."""
    import torch

    from czjax.bench import torch_peer
    from czjax.models import torch_layout

    folder.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    state_dict = {k: torch.from_numpy(v) for k, v in torch_layout.read_pth(pth).items()}
    model = torch_peer.build_model(config.model)
    model.load_state_dict(state_dict)
    check = start_check(config.model, pth, model)
    # self-play: torch.optim.AdamW's default weight decay (0.01) is the project's and czjax's;
    # against RandomPunisher the project's train_against_opponents sets none (as czjax's ex4/ex5 presets now do)
    weight_decay = config.weight_decay if config.opponent == "self" else torch_peer.AGAINST_OPPONENTS_WEIGHT_DECAY
    optimizer = torch.optim.AdamW(model.parameters(), lr=hparams["learning_rate"], weight_decay=weight_decay)
    for name in ("metrics.jsonl", "batches.jsonl", "done.json"):
        (folder / name).unlink(missing_ok=True)
    with (folder / "batches.jsonl").open("a") as batch_file:
        rows_as = torch_logging(config, seed, batches, folder, batch_file, log)
        start = time.perf_counter()
        rows = train_torch(config, hparams, model, state_dict, optimizer, batches, rows_as)
    wall = time.perf_counter() - start
    torch_layout.write_pth(folder / "final.pth", {k: v.detach().numpy() for k, v in model.state_dict().items()})
    done = {
        "wall_s": wall,
        "games_per_s": batches * config.games_per_batch / wall,
        "promotions": rows[-1]["promotions"],
        "batches": batches,
        "start_max_abs_diff": check,
        "weight_decay": weight_decay,
        "threads": threads,
        "torch": torch.__version__,
    }
    (folder / "done.json").write_text(json.dumps(done, indent=1))
    return done


def run_czjax(config, hparams: dict, seed: int, pth: Path, folder: Path, batches: int, resume: bool, log) -> dict:
    """czjax's loop from ``pth`` with ``seed``'s random stream; a czjax run folder."""
    import jax

    from czjax.jobs import loop
    from czjax.learn.settings import HParams

    start = time.perf_counter()
    summary = loop.run_training(
        config,
        HParams.create(**hparams),
        folder,
        seed=seed,
        batches=batches,
        resume=resume,
        overwrite=not resume,
        plot_every_s=600.0,
        log=lambda m: log(f"czjax seed {seed} | {m}"),
        init_from=str(pth),
        title=f"same start, czjax, seed {seed}",
    )
    wall = time.perf_counter() - start
    if summary["interrupted"] or summary["batches"] < batches:
        # a stopped run is saved, not finished: done.json would make --resume keep it as it is
        raise SystemExit(
            f"same_start.py: czjax seed {seed} stopped at batch {summary['batches']:,} of {batches:,} "
            f"({summary['interrupted'] or 'early'}); run the same command with --resume to finish it"
        )
    # speed over the compiled chunks only (training and evaluation games, no compile time)
    chunk_s = sum(r["chunk_s"] for r in loop.read_metrics(folder / loop.METRICS))
    done = {
        "wall_s": wall,
        "games_per_s": summary["games"] / max(chunk_s, 1e-9),
        "promotions": summary["promotions"],
        "batches": summary["batches"],
        "backend": jax.default_backend(),
    }
    (folder / "done.json").write_text(json.dumps(done, indent=1))
    return done


def read_rows(out: Path, seeds: list[int]) -> dict[str, list[dict]]:
    """``{side: rows of every seed}`` (each row with its ``seed``)."""
    from czjax.jobs.loop import read_metrics

    rows = {side: [] for side in SIDES}
    for seed in seeds:
        for side in SIDES:
            for r in read_metrics(out / f"seed{seed}" / side / "metrics.jsonl"):
                rows[side].append({**r, "seed": seed})
    return rows


def milestones(batches: int, log_every: int, games_per_batch: int, parts: int) -> list[int]:
    """The ends, in games, of ``parts`` about equal parts of a run, each at a logged row (rows
    come every ``log_every`` batches and at the last batch)."""
    logged = sorted({min(b, batches) for b in range(log_every, batches + log_every, log_every)})
    parts = min(parts, len(logged))
    return [logged[round(len(logged) * i / parts) - 1] * games_per_batch for i in range(1, parts + 1)]


def milestone_table(rows: dict[str, list[dict]], ends: list[int]) -> list[dict]:
    """Per milestone (the end of each part of the run) and metric: each side's per-seed mean
    over that part (since the previous milestone; promotions: the count at the milestone) and
    the seed band (mean +- 2 standard errors)."""
    table = []
    for before, at in zip([0] + ends[:-1], ends):
        for key, _ in METRICS:
            entry = {"games": at, "metric": key}
            for side in SIDES:
                # a count (promotions so far) is read at the milestone, a rate averaged over the part
                window = 1 if key == "promotions" else at - before
                per = {seed: value_at(g, v, at, window) for seed, (g, v) in per_seed(rows[side], key).items()}
                entry[side] = {"per_seed": {str(s): v for s, v in per.items()}, "band": seed_band(list(per.values()))}
            table.append(entry)
    return table


def verdicts(rows: dict[str, list[dict]], at: list[int], window: int = VERDICT_WINDOW) -> list[dict]:
    """Per milestone and metric of :data:`EQUIVALENCE_MARGINS`: each side's seed mean with its
    95% interval, the difference czjax - PyTorch with Welch's 95% and 90% intervals, and the
    TOST verdict (``curves.equivalence_verdict``); a seed's reading is its mean over the
    ``window`` games before the milestone."""
    table = []
    for games in at:
        for key, margin in EQUIVALENCE_MARGINS.items():
            per = {
                side: [value_at(g, v, games, window) for g, v in per_seed(rows[side], key).values()] for side in SIDES
            }
            per = {side: [v for v in values if v is not None] for side, values in per.items()}
            entry = {"games": games, "metric": key, "margin": margin}
            entry.update({side: mean_interval(per[side]) for side in SIDES})
            entry["test"] = equivalence_verdict(per["czjax"], per["torch"], margin)
            table.append(entry)
    return table


def format_verdicts(table: list[dict]) -> str:
    """The verdicts as a Markdown table."""
    lines = [
        "| games | metric | czjax mean [95% CI] | PyTorch mean [95% CI] | difference [95% CI] | margin | verdict (TOST) "
        "| rank test p |",
        "| ---: | --- | --- | --- | --- | ---: | --- | ---: |",
    ]
    for e in table:
        t = e["test"]
        diff = "-" if t is None else f"{t['diff']:+.3f} [{t['ci95'][0]:+.3f}, {t['ci95'][1]:+.3f}]"
        lines.append(
            f"| {e['games']:,} | {e['metric']} | {format_interval(e['czjax'])} | {format_interval(e['torch'])} | {diff} | "
            f"{e['margin']:g} | {'-' if t is None else t['verdict']} | {'-' if t is None else format(t['rank_p'], '.3f')} |"
        )
    return "\n".join(lines)


def band_figure(rows: dict[str, list[dict]], path: Path, title: str, window: int = VERDICT_WINDOW) -> None:
    """Each side's seed mean and 95% band per metric, on one axis per metric (readings smoothed
    over ``window`` games, as the verdicts read them)."""
    from czjax.jobs.plots import plt, save_figure

    keys = [
        k
        for k, _ in METRICS
        if k != "promotions"
        and any(r.get(k) for side in SIDES for r in rows[side])  # a model without a value head: no value loss
    ]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.8), constrained_layout=True)
    colors = {"czjax": "tab:blue", "torch": "tab:orange"}
    for ax, key in zip(axes, keys):
        for side in SIDES:
            seeds = per_seed(rows[side], key)
            if not seeds:
                continue
            grid = sorted(set(int(g) for g, _ in seeds.values() for g in g))
            bands = [mean_interval([value_at(g, v, at, window) for g, v in seeds.values()]) for at in grid]
            xs = [at for at, b in zip(grid, bands) if b is not None]
            bands = [b for b in bands if b is not None]
            ax.plot(xs, [b["mean"] for b in bands], color=colors[side], label=f"{LABELS[side]} ({len(seeds)} seeds)")
            if all(b["low"] is not None for b in bands):
                ax.fill_between(
                    xs, [b["low"] for b in bands], [b["high"] for b in bands], color=colors[side], alpha=0.25
                )
        ax.set_title(dict(METRICS)[key])
        ax.set_xlabel("games (per run)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    save_figure(fig, path)


def figure(rows: dict[str, list[dict]], path: Path, title: str, smoothing: int) -> None:
    from czjax.jobs.plots import plt, save_figure

    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5), constrained_layout=True)
    colors = {"czjax": "tab:blue", "torch": "tab:orange"}
    styles = ["-", "--", ":", "-."]
    for ax, (key, label) in zip(axes.flat, METRICS):
        for side in SIDES:
            for i, (seed, (games, values)) in enumerate(per_seed(rows[side], key).items()):
                width = 1 if key == "promotions" else smoothing
                ax.plot(
                    games,
                    trailing_mean(values, width),
                    color=colors[side],
                    ls=styles[i % len(styles)],
                    lw=1.4,
                    label=f"{LABELS[side]}, seed {seed}",
                )
        ax.set_title(label)
        ax.set_xlabel("games (per run)")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(title)
    save_figure(fig, path)


def print_table(table: list[dict]) -> None:
    def fmt(band):
        if band is None:
            return "-"
        return f"{band['mean']:.3f}" + (f" +- {2 * band['se']:.3f}" if band["se"] is not None else "")

    print(f"{'games':>8} {'metric':>14} {'czjax (mean +- 2 SE)':>22} {'PyTorch (mean +- 2 SE)':>24}")
    for e in table:
        print(f"{e['games']:>8,} {e['metric']:>14} {fmt(e['czjax']['band']):>22} {fmt(e['torch']['band']):>24}")


def same_comparison(stored: dict, description: dict, config) -> bool:
    """Whether a stored comparison's description is this one: the same preset and batches, its
    seeds a prefix of these (a resumed comparison may add seeds), and the same config once read
    back (a setting added since it was written reads as its default, which is what that
    comparison ran)."""
    from czjax.learn.settings import TrainConfig

    def rest(d: dict) -> dict:
        return {k: v for k, v in d.items() if k not in ("config", "seeds")}

    return (
        description["seeds"][: len(stored["seeds"])] == stored["seeds"]
        and rest(stored) == rest(description)
        and TrainConfig.from_dict(stored["config"]) == config
    )


def write_results(folder: Path, out: Path, summary: dict, rows: dict[str, list[dict]], title: str) -> None:
    """What to commit of a comparison: the verdicts as results.md, summary.json, the figures, and
    every logged row of both sides (each with its seed and side) gzipped."""
    import gzip
    import shutil

    folder.mkdir(parents=True, exist_ok=True)

    def where(runs: dict) -> str:  # runs recorded before the backend was: the CPU
        return ", ".join(sorted({r.get("backend", "cpu") for r in runs.values()}))

    speed = " ".join(
        f"{LABELS[side]} ({where(summary['runs'][side])}): "
        f"{np.mean([r['games_per_s'] for r in summary['runs'][side].values()]):,.0f} games/s;"
        for side in SIDES
        if summary["runs"][side]
    )
    text = [
        f"# {title}",
        "",
        f"Seeds {summary['seeds'][0]}-{summary['seeds'][-1]}, {summary['games']:,} games per side per seed. A "
        f"seed's reading at a milestone is its mean over the {VERDICT_WINDOW:,} games before it; intervals are "
        "95% (Student's t over the seeds; Welch's for the difference czjax - PyTorch); the verdict is TOST at "
        "alpha 0.05 against the margin (equivalent: the 90% interval of the difference inside +-margin; "
        "different: the 95% interval excludes 0); the rank test is Mann-Whitney U, two-sided.",
        "",
        format_verdicts(summary["verdicts"]),
        "",
        f"Speed over the runs (a CPU side on one core, shared with the other side): {speed}",
        "",
        "![seed bands](same_start_bands.png)",
        "",
        "![every seed](same_start.png)",
        "",
    ]
    (folder / "results.md").write_text("\n".join(text))
    (folder / "summary.json").write_text(json.dumps(summary, indent=1))
    for name in ("same_start.png", "same_start_bands.png"):
        shutil.copy(out / name, folder / name)
    with gzip.open(folder / "metrics.jsonl.gz", "wt") as f:
        for side in SIDES:
            for r in rows[side]:
                f.write(json.dumps({"side": side, **r}) + "\n")


def claim_out(args, out: Path, description: dict, config) -> None:
    """``out`` holds this comparison from now on: refused where it holds another (or this one
    without --resume or --overwrite); its description written."""
    marker = out / "same_start.json"
    if marker.exists() and not (args.resume or args.overwrite):
        raise SystemExit(
            f"same_start.py: {out} already holds a comparison: --resume to finish it, --overwrite to start again, or another --out"
        )
    if args.resume and marker.exists() and not same_comparison(json.loads(marker.read_text()), description, config):
        raise SystemExit(
            "same_start.py: --resume must use the same settings, seeds and games as the comparison in --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(description, indent=1))


def run_seeds(args, config, hparams: dict, out: Path, batches: int, log) -> tuple[dict, dict]:
    """Every seed's sides run here (the finished ones kept with --resume): ``(runs, checks)``,
    each side's done.json by seed and the PyTorch side's start check by seed."""
    runs = {side: {} for side in SIDES}
    checks = {}
    for seed in range(args.seeds):
        folder = out / f"seed{seed}"
        pth = folder / "init.pth"
        runs_here = args.only_seeds is None or seed in args.only_seeds
        if runs_here and not (args.resume and pth.exists()):
            initial_weights(config, seed, pth)
        for side in SIDES:
            done_path = folder / side / "done.json"
            if args.resume and done_path.exists():
                runs[side][str(seed)] = json.loads(done_path.read_text())
                log(f"{side} seed {seed}: finished before, kept")
            elif side in args.sides and runs_here:
                log(f"== {LABELS[side]}, seed {seed}")
                if side == "czjax":
                    runs[side][str(seed)] = run_czjax(
                        config, hparams, seed, pth, folder / side, batches, args.resume, log
                    )
                else:
                    runs[side][str(seed)] = run_torch(
                        config, hparams, seed, pth, folder / side, batches, args.threads, log
                    )
        if str(seed) in runs["torch"]:
            checks[str(seed)] = runs["torch"][str(seed)]["start_max_abs_diff"]
    return runs, checks


def read_comparison(args, config, batches: int, rows: dict[str, list[dict]], out: Path, title: str) -> dict:
    """The comparison read from both sides' rows: the milestone table, the verdicts, and the
    figures (every seed; the seed bands) written to ``out``."""
    run_games = batches * config.games_per_batch
    table = milestone_table(
        rows, milestones(batches, config.batches_per_chunk, config.games_per_batch, args.milestones)
    )
    fig_path = out / "same_start.png"
    figure(rows, fig_path, title, smoothing=1)
    band_path = out / "same_start_bands.png"
    band_figure(rows, band_path, title + " (seed mean, 95% band)")
    verdict_table = verdicts(rows, [g for g in VERDICT_AT if g <= run_games] or [run_games])
    return {"milestones": table, "verdicts": verdict_table, "figure": str(fig_path), "band_figure": str(band_path)}


def main(argv=None) -> dict:
    args, preset = parse_args(argv)
    config = run_config(args, preset)
    out = Path(args.out)
    batches = args.games // config.games_per_batch
    if batches < 1:
        raise SystemExit(f"same_start.py: --games {args.games} is less than one batch of {config.games_per_batch}")
    seeds = list(range(args.seeds))
    description = {
        "preset": args.preset,
        "config": config.to_dict(),
        "hparams": preset.hparams,
        "seeds": seeds,
        "batches": batches,
    }
    claim_out(args, out, description, config)
    log = lambda m: print(m, flush=True)  # noqa: E731
    log(
        f"same start: {args.preset} ({config.model}, {config.games_per_batch} games per batch), {batches:,} batches = "
        f"{batches * config.games_per_batch:,} games per side per seed, seeds {seeds}; outputs in {out}/"
    )
    runs, checks = run_seeds(args, config, preset.hparams, out, batches, log)
    rows = read_rows(out, seeds)
    run_games = batches * config.games_per_batch
    title = (
        f"same initial weights, {args.preset} ({config.model}, {config.games_per_batch} games per batch): czjax vs the PyTorch "
        f"project's loop, {len(seeds)} seed(s), {run_games:,} games each"
    )
    read = read_comparison(args, config, batches, rows, out, title)
    summary = {**description, "games": run_games, "runs": runs, "start_check": checks, **read}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "verdicts.md").write_text(format_verdicts(read["verdicts"]) + "\n")
    if args.results:
        write_results(Path(args.results), out, summary, rows, title)
    print_table(read["milestones"])
    print(format_verdicts(read["verdicts"]))
    log(f"figure: {read['figure']}; summary: {out / 'summary.json'}")
    return summary


if __name__ == "__main__":
    main()
