"""The soft-targets note's comparison: AlphaZero's soft targets (the search's visit counts) against hard
targets (the move the search played), at equal compute.

Both train the same model from the same seeds with the same search (PUCT with root noise)
playing both sides with the current network; the only difference is the policy target
(`--algorithm alphazero` against `--algorithm alphazero-hard`). Each side is one vmapped scan over the
seeds. Every final network is then scored on the shipped solver-labelled positions, which
training never looked up: policy loss (cross-entropy to the uniform distribution over the
optimal columns), value loss (squared error to the outcome for the side to move), move
accuracy (the greedy move is optimal / keeps the outcome), value-sign accuracy (on decided
positions) and policy entropy; mean and standard deviation over seeds. The note saw soft
targets give lower losses, higher accuracy (0.417 against 0.404) and higher entropy (1.83
against 1.67).

    python experiments/soft-vs-hard/soft_vs_hard.py --batches 150 --seeds 3          # CPU scale
    python experiments/soft-vs-hard/soft_vs_hard.py --batches 5000 --seeds 8 --sims 64   # a GPU

``--recipe gumbel`` runs the comparison in the Gumbel AlphaZero recipe (preset gumbel-az: random
openings, both sides, replay): soft = Gumbel's completed-Q improved policy, hard = sequential
halving's chosen action (one-hot). Both sides play the chosen action (``move=action``), so the
games are played alike and only the target differs.

    python experiments/soft-vs-hard/soft_vs_hard.py --recipe gumbel --batches 300 --seeds 4 --sims 16   # CPU scale

``--question search`` asks the entropy-guided PUCT proposal's question the same way: entropy-guided PUCT against plain
PUCT as the training search (the puct recipe, soft targets, the same simulations).

Each final network is also scored by AlphaZero.jl's Pons protocol (its MCTS with 600
simulations over the network, the most visited column) and alone (its greedy move on Pons'
sets). The report gives each arm's mean with its 95% interval over the seeds and the difference
between the arms with Welch's 95% interval; a difference is called only where that interval
excludes 0. ``--results DIR`` also writes ``report.json`` and ``results.md`` there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: curves
from curves import difference_interval, mean_interval
from czjax import models, search
from czjax.evaluate.pons import load_pons, pons
from czjax.evaluate.positions import good_columns, load_positions
from czjax.evaluate.protocol import PROTOCOLS
from czjax.jobs import presets, scan
from czjax.players import masked_log_probs
from czjax.players.loading import network_agent, with_search
from czjax.util import checkpoint
from czjax.util.specs import PlayerSpec

# each question: its two arms, each the settings it changes over the recipe
QUESTIONS = {
    # the soft-targets note: the search's improved policy (visit counts) against the move it chose (one-hot)
    "targets": {"soft": {"algorithm": "alphazero"}, "hard": {"algorithm": "alphazero-hard"}},
    # the entropy-guided PUCT proposal: entropy-guided PUCT against PUCT as the training search ({sims}: --sims)
    "search": {
        "mcts": {"search": "mcts:sims={sims},noise=0.25"},
        "entropy-mcts": {"search": "entropy-mcts:sims={sims},noise=0.25"},
    },
}
METRICS = ("policy_loss", "value_loss", "optimal", "keeps_outcome", "value_sign", "entropy")
# Pons' move error (%), under AlphaZero.jl's protocol and of the network alone: lower is better
PONS_METRICS = ("protocol_mean", "network_pons_mean")


def final_params(folder: Path, model_name: str) -> list:
    """Each configuration's final parameters from a one-group scan's checkpoint."""
    _, raw = checkpoint.read_meta(scan.group_checkpoint(folder, 0))
    template = jax.eval_shape(lambda k: models.init_params(models.get_model(model_name), k), jax.random.key(0))
    from flax import serialization

    stacked = serialization.from_state_dict(
        jax.tree.map(lambda t: jnp.zeros((1,) + t.shape, t.dtype), template), raw["params"]
    )
    count = jax.tree.leaves(stacked)[0].shape[0]
    return [jax.tree.map(lambda x, i=i: jnp.asarray(x[i]), stacked) for i in range(count)]


def solver_scores(model_name: str, params, positions: dict) -> dict:
    """The network alone on solver-labelled positions (see the module docstring)."""
    logits, values = models.apply_model(models.get_model(model_name), params, jnp.asarray(positions["boards"]))
    legal = positions["boards"][:, 0, :] == 0
    log_p = np.asarray(masked_log_probs(jnp.asarray(legal), logits), np.float64)
    optimal, keeps, value = good_columns(positions["scores"])
    target = optimal / optimal.sum(1, keepdims=True)
    greedy = np.where(legal, log_p, -np.inf).argmax(1)
    rows = np.arange(len(greedy))
    values = np.asarray(values, np.float64)
    outcome = np.sign(value)
    decided = outcome != 0
    return {
        "policy_loss": float(-(target * np.where(legal, log_p, 0.0)).sum(1).mean()),
        "value_loss": float(((values - outcome) ** 2).mean()),
        "optimal": float(optimal[rows, greedy].mean()),
        "keeps_outcome": float(keeps[rows, greedy].mean()),
        "value_sign": float((np.sign(values[decided]) == outcome[decided]).mean()),
        "entropy": float(-(np.exp(log_p) * np.where(legal, log_p, 0.0)).sum(1).mean()),
    }


def pons_scores(model_name: str, params, sets: dict, name: str) -> dict:
    """Pons' move error (%) under AlphaZero.jl's protocol (per set and mean) and of the network alone."""
    network = network_agent(name, model_name, params)
    settings = search.search_of(PlayerSpec.parse(PROTOCOLS["alphazero.jl"]))
    protocol = pons(with_search(network, settings, f"protocol:{name}"), sets, protocol="alphazero.jl")
    alone = pons(network, sets)
    return {
        **{f"protocol_{r['set']}": r["move_error"] for r in protocol["sets"]},
        "protocol_mean": protocol["mean_move_error"],
        "network_pons_mean": alone["mean_move_error"],
    }


def arm_config(preset, question: str, arm: str, args):
    """The arm's training settings over the recipe (its ``search`` is what the arm plays with)."""
    common = (
        f"mcts:sims={args.sims},noise=0.25"
        if args.recipe == "puct"
        else str(preset.config.search).replace("move=policy", "move=action").replace("sims=16", f"sims={args.sims}")
    )
    changes = {k: v.format(sims=args.sims) for k, v in QUESTIONS[question][arm].items()}
    return preset.config.override(
        {
            "model": args.model,
            "games_per_batch": args.games_per_batch,
            "search": common,
            "batches_per_chunk": min(10, args.batches),
            **changes,
        }
    )


# which way is better, per score (entropy: neither)
LOWER_IS_BETTER = {"protocol_mean", "network_pons_mean", "policy_loss", "value_loss"}
HIGHER_IS_BETTER = {"optimal", "keeps_outcome", "value_sign"}


def verdict(key: str, diff: dict | None, first: str, second: str) -> str:
    """Which arm the difference ``first - second`` favours, only where its interval excludes 0."""
    if diff is None or key not in LOWER_IS_BETTER | HIGHER_IS_BETTER:
        return ""
    if diff["low"] <= 0 <= diff["high"]:
        return "no difference resolved"
    return f"{first if (diff['diff'] < 0) == (key in LOWER_IS_BETTER) else second} better"


def summarise(report: dict, arms: list[str]) -> str:
    """The report as a markdown table: each arm's mean and interval, the difference, the verdict."""
    first, second = arms

    def band(b: dict | None) -> str:
        if b is None:
            return "-"
        interval = f" [{b['low']:.3f}, {b['high']:.3f}]" if b.get("low") is not None else ""
        return f"{b['mean']:.3f}{interval}"

    lines = [
        f"| score | {first}: mean [95% interval] | {second} | {first} - {second} [Welch 95%] | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key in [k for k in (*PONS_METRICS, *METRICS) if k in report["difference"]]:
        diff = report["difference"][key]
        shown = f"{diff['diff']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}]" if diff else "-"
        lines.append(
            f"| {key} | {band(report[first][key])} | {band(report[second][key])} | {shown} | "
            f"{verdict(key, diff, first, second)} |"
        )
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument(
        "--question",
        choices=tuple(QUESTIONS),
        default="targets",
        help="targets: the soft-targets note, soft against hard policy targets; search: the entropy-guided PUCT proposal, entropy-mcts against mcts "
        "as the training search (default: %(default)s)",
    )
    parser.add_argument("--model", default="mlp3", help="a model with a value head (default: %(default)s)")
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--games-per-batch", type=int, default=50)
    parser.add_argument("--sims", type=int, default=16, help="simulations per move (default: %(default)s)")
    parser.add_argument(
        "--recipe",
        choices=("puct", "gumbel"),
        default="puct",
        help="puct: the alphazero preset with PUCT and root noise; gumbel: the gumbel-az preset (default: %(default)s)",
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default="runs/soft-vs-hard")
    parser.add_argument("--results", default=None, help="also write report.json and results.md here")
    parser.add_argument(
        "--no-protocol", action="store_true", help="skip the Pons scores (AlphaZero.jl's protocol is slow)"
    )
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    if args.question == "search" and args.recipe != "puct":
        parser.error("--question search compares PUCT searches: use --recipe puct")
    if args.batches < 1 or args.seeds < 1 or args.sims < 1 or args.games_per_batch < 1:
        parser.error("--batches, --seeds, --sims and --games-per-batch must be positive")
    return args


def train_arm(args: argparse.Namespace, preset, name: str, folder: Path) -> None:
    """Arm ``name``'s scan over the seeds in ``folder`` (resumed with --resume where it began)."""
    config = arm_config(preset, args.question, name, args)
    print(
        f"== {name} ({config.algorithm}, {config.search}): {args.seeds} seeds of {args.model}, {args.batches:,} "
        f"batches of {args.games_per_batch} games",
        flush=True,
    )
    scan.run_scan(
        config,
        preset.hparams,
        [{}],
        list(range(args.seeds)),
        folder,
        args.batches,
        resume=args.resume and (folder / "scan.json").exists(),
        overwrite=args.overwrite,
        log=lambda m: print(m, flush=True),
    )


def score_arm(model: str, name: str, folder: Path, positions: dict, sets: dict | None) -> dict:
    """Arm ``name``'s final networks scored, each seed's on the solver-labelled positions and,
    with ``sets``, under AlphaZero.jl's Pons protocol: the scores per seed, each one's mean and
    interval over the seeds."""
    per_seed = []
    for seed, params in enumerate(final_params(folder, model)):
        scores = solver_scores(model, params, positions)
        if sets is not None:
            print(f"   {name} seed {seed}: Pons under AlphaZero.jl's protocol ...", flush=True)
            scores.update(pons_scores(model, params, sets, f"{name}-seed{seed}"))
        per_seed.append(scores)
    return {"per_seed": per_seed, **{k: mean_interval([s[k] for s in per_seed]) for k in per_seed[0]}}


def write_results(results: Path, report: dict, table: str, argv) -> None:
    """What to commit: ``report.json`` and ``results.md`` (the command and the table)."""
    args, arms = report["settings"], report["arms"]
    results.mkdir(parents=True, exist_ok=True)
    (results / "report.json").write_text(json.dumps(report, indent=1))
    command = "python experiments/soft-vs-hard/soft_vs_hard.py " + " ".join(argv if argv is not None else sys.argv[1:])
    (results / "results.md").write_text(f"# {args['question']}: {' against '.join(arms)}\n\n`{command}`\n\n{table}\n")


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    preset = presets.get_preset("alphazero" if args.recipe == "puct" else "gumbel-az")
    positions = load_positions()
    sets = None if args.no_protocol else load_pons()
    arms = list(QUESTIONS[args.question])
    report: dict = {"settings": vars(args), "seeds": list(range(args.seeds)), "arms": arms}
    for name in arms:
        train_arm(args, preset, name, out / name)
        report[name] = score_arm(args.model, name, out / name, positions, sets)
    report["difference"] = {
        k: difference_interval([s[k] for s in report[arms[0]]["per_seed"]], [s[k] for s in report[arms[1]]["per_seed"]])
        for k in report[arms[0]]["per_seed"][0]
    }
    table = summarise(report, arms)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(f"\nmean and 95% interval over {args.seeds} seeds; Pons errors in %, lower is better:\n{table}")
    if args.results:
        write_results(Path(args.results), report, table, argv)
    print(f"written {out / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
