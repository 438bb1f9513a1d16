"""Seed 002's comparison: AlphaZero's soft targets (the search's visit counts) against hard
targets (the move the search played), at equal compute.

Both train the same model from the same seeds with the same search (PUCT with root noise)
playing both sides with the current network; the only difference is the policy target
(`--algorithm alphazero` against `--algorithm alpha`). Each side is one vmapped scan over the
seeds. Every final network is then scored on the shipped solver-labelled positions, which
training never looked up: policy loss (cross-entropy to the uniform distribution over the
optimal columns), value loss (squared error to the outcome for the side to move), move
accuracy (the greedy move is optimal / keeps the outcome), value-sign accuracy (on decided
positions) and policy entropy; mean and standard deviation over seeds. Seed 002 saw soft
targets give lower losses, higher accuracy (0.417 against 0.404) and higher entropy (1.83
against 1.67).

    python experiments/soft_vs_hard.py --batches 150 --seeds 3          # CPU scale
    python experiments/soft_vs_hard.py --batches 5000 --seeds 8 --sims 64   # a GPU

``--recipe gumbel`` runs the comparison in the Gumbel AlphaZero recipe (preset gumbel-az: random
openings, both sides, replay): soft = Gumbel's completed-Q improved policy, hard = sequential
halving's chosen action (one-hot). Both sides play the chosen action (``move=action``), so the
games are played alike and only the target differs.

    python experiments/soft_vs_hard.py --recipe gumbel --batches 300 --seeds 4 --sims 16   # CPU scale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from czjax import models
from czjax.evaluate import solver
from czjax.players import masked_log_probs
from czjax.run import presets, scan
from czjax.util import checkpoint

TARGETS = {"soft": "alphazero", "hard": "alpha"}
METRICS = ("policy_loss", "value_loss", "optimal", "keeps_outcome", "value_sign", "entropy")


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
    optimal, keeps, value = solver.good_columns(positions["scores"])
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
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
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    preset = presets.get_preset("alphazero" if args.recipe == "puct" else "gumbel-az")
    searched = (
        f"mcts:sims={args.sims},noise=0.25"
        if args.recipe == "puct"
        else f"gumbel:sims={args.sims},considered=4,rescale=0,move=action"
    )
    positions = solver.load_positions()
    report: dict = {"settings": vars(args), "seeds": list(range(args.seeds))}
    for name, algorithm in TARGETS.items():
        config = preset.config.override(
            {
                "algorithm": algorithm,
                "model": args.model,
                "games_per_batch": args.games_per_batch,
                "search": searched,
                "batches_per_chunk": min(10, args.batches),
            }
        )
        folder = out / name
        resume = args.resume and (folder / "scan.json").exists()
        print(
            f"== {name} targets ({algorithm}): {args.seeds} seeds of {args.model}, {args.batches:,} batches of "
            f"{args.games_per_batch} games, {searched}",
            flush=True,
        )
        scan.run_scan(
            config,
            preset.hparams,
            [{}],
            list(range(args.seeds)),
            folder,
            args.batches,
            resume=resume,
            overwrite=args.overwrite,
            log=lambda m: print(m, flush=True),
        )
        per_seed = [solver_scores(args.model, p, positions) for p in final_params(folder, args.model)]
        report[name] = {
            "per_seed": per_seed,
            **{
                k: {
                    "mean": float(np.mean([s[k] for s in per_seed])),
                    "std": float(np.std([s[k] for s in per_seed], ddof=1)) if len(per_seed) > 1 else None,
                }
                for k in METRICS
            },
        }
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(f"\non {len(positions['boards'])} solver-labelled positions, mean +- std over {args.seeds} seeds:")
    print(f"{'':14s} {'soft':>16s} {'hard':>16s}")
    for k in METRICS:
        cells = [f"{report[n][k]['mean']:.3f} +- {report[n][k]['std'] or 0:.3f}" for n in TARGETS]
        print(f"{k:14s} {cells[0]:>16s} {cells[1]:>16s}")
    print(f"written {out / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
