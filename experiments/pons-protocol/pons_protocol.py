"""Players scored on Pons' six sets by AlphaZero.jl's protocol (`czjax eval pons --protocol
alphazero.jl`), beside the figures read off AlphaZero.jl's own plot: the calibration of the
protocol player (MCTS-600 over an untrained network against AlphaZero.jl's iteration 0), the
minimax baseline against its depth-5 row, and the shipped models.

    python experiments/pons-protocol/pons_protocol.py --out docs/results/pons-protocol/calibration
    python experiments/pons-protocol/pons_protocol.py random untrained:mlp3 --out runs/pp   # chosen players

A network (or built-in player) is scored under AlphaZero.jl's MCTS with 600 simulations; a
search or ``minimax:depth=N`` as given. Rows already in ``--out/results.json`` are kept (the
command resumes), so a long table can be built in several sittings.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

PLAYERS = (
    "random",
    "azjl:sims=600,c=2.0,transpositions=0:random",
    "mcts:sims=600,c=2.0:random",
    "untrained:mlp",
    "untrained:mlp3",
    "untrained:mlp3:1",
    "minimax:depth=5",
    "czjax@1",
    "czjax@2",
)
NOTES = {
    "random": "uniform prior, value 0: AlphaZero.jl's RandomOracle",
    "azjl:sims=600,c=2.0,transpositions=0:random": "its MCTS without transpositions",
    "mcts:sims=600,c=2.0:random": "czjax's mcts (mctx's conventions), as first tried",
    "untrained:mlp": "an untrained SimpleMLP (seed 0)",
    "untrained:mlp3": "an untrained MLP3 (seed 0)",
    "untrained:mlp3:1": "an untrained MLP3 (seed 1)",
    "minimax:depth=5": "AlphaZero.jl's MinMax.Player(depth=5), its heuristic",
    "czjax@1": "shipped model 1: example 3, Mk4, 61k games on the CPU",
    "czjax@2": "shipped model 2: gumbel-az, MLP3, one CPU hour",
}


def score(spec: str) -> dict:
    from czjax.evaluate import pons
    from czjax.evaluate.protocol import protocol_agent

    start = time.perf_counter()
    player = protocol_agent("alphazero.jl", spec)
    report = pons.pons(player, pons.load_pons(), protocol="alphazero.jl")
    return {
        "spec": spec,
        "player": player.name,
        "note": NOTES.get(spec, ""),
        "error": {r["set"]: r["move_error"] for r in report["sets"]},
        "mean": report["mean_move_error"],
        "seconds": time.perf_counter() - start,
    }


def markdown(rows: list[dict]) -> str:
    from czjax.evaluate.pons import PONS_REFERENCE, PONS_REFERENCE_LABELS, PONS_REFERENCE_ORDER

    sets = list(PONS_REFERENCE_ORDER)
    lines = [
        "Move error (%) on Pons' sets, AlphaZero.jl's protocol (`czjax eval pons --protocol alphazero.jl`).",
        "",
        "| player | " + " | ".join(s.replace("Test_", "") for s in sets) + " | mean |",
        "| --- | " + " | ".join("---:" for _ in sets) + " | ---: |",
    ]
    for key, label in PONS_REFERENCE_LABELS.items():
        ref = PONS_REFERENCE[key]
        lines.append(
            f"| {label} (its plot) | "
            + " | ".join(f"~{ref[s]:.1f}" for s in sets)
            + f" | ~{sum(ref.values()) / len(ref):.1f} |"
        )
    for r in rows:
        lines.append(
            f"| `{r['player']}`: {r['note']} | "
            + " | ".join(f"{r['error'][s]:.1f}" for s in sets)
            + f" | {r['mean']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("players", nargs="*", default=list(PLAYERS), metavar="PLAYER")
    parser.add_argument("--out", default=None, metavar="DIR", help="write results.json and results.md here")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else None
    done = {}
    if out is not None and (out / "results.json").exists():
        done = {r["spec"]: r for r in json.loads((out / "results.json").read_text())}
    rows = []
    for spec in args.players:
        if spec not in done:
            print(f"{spec} ...", file=sys.stderr, flush=True)
            done[spec] = score(spec)
            print(f"  mean {done[spec]['mean']:.1f}% ({done[spec]['seconds']:.0f} s)", file=sys.stderr, flush=True)
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                (out / "results.json").write_text(json.dumps(list(done.values()), indent=1))
        rows.append(done[spec])
    text = markdown(rows)
    print(text)
    if out is not None:
        (out / "results.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
