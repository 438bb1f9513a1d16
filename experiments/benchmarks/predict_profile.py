"""Predict the profile step's cells on an H100 without one: each cell's iteration (the strength
recipe's and Mk4's, as ``benchmark_steps.profile_cell`` runs it) compiled for an H100 and read by
``czjax bench kernels`` (its kernels, host waits and FLOPs an iteration, and the cost model's
time), written beside the step's measurements so that its table shows both.

    PYTHONPATH=.plugins/cuda python experiments/benchmarks/predict_profile.py

A prediction is not a measurement: the GPU's profile step measures the same cells.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: common, steps
import common

common.use("benchmarks")
from benchmark_steps import PREDICTIONS, cell_config, cell_name, profile_cells


def main(argv: list[str] | None = None) -> int:
    from czjax.bench import kernels

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--target", default="h100", choices=[n for n, t in kernels.TARGETS.items() if t.platform == "gpu"]
    )
    parser.add_argument("--out", default=str(PREDICTIONS), help="the predictions' file (default: %(default)s)")
    parser.add_argument(
        "--reprice",
        action="store_true",
        help="compile nothing: each stored cell's time again from its counts with the package's cost model "
        "(after a new calibration)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="compile every cell again, the file's provenance this checkout's (after the programs changed; "
        "without it the cells the file holds are kept, so that an interrupted run resumes)",
    )
    args = parser.parse_args(argv)
    kernels.prepare_environment()
    from czjax.bench import provenance

    target = kernels.get_target(args.target)
    kernels.check_installed(target)
    out = Path(args.out)
    fresh = args.fresh or not out.exists()
    document = {**provenance.provenance(), "target": target.name} if fresh else json.loads(out.read_text())
    found = document.setdefault("cells", {})
    model = kernels.load_model(target)
    if model is None:
        raise SystemExit("predict_profile: no cost model: run `czjax bench kernels calibrate` first")
    for cell in [] if args.reprice else profile_cells(1.0):
        name = cell_name(cell)
        if name in found:
            continue
        found[name] = per_iteration(
            kernels.report(kernels.train_program(cell_config(cell, 1.0), target.platform), target)
        )
        print(f"{name}: {found[name]['kernels']:,.0f} kernels an iteration", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, indent=1) + "\n")
    for name, cell in found.items():  # each time from its counts, with the cost model as it is now
        cell["predicted_s"] = sum(count * model.seconds.get(term, 0.0) for term, count in cell["terms"].items())
        print(f"{name}: {cell['predicted_s']:.4f} s an iteration predicted", flush=True)
    document.update(per="iteration", model=model.seconds)
    out.write_text(json.dumps(document, indent=1) + "\n")
    return 0


def per_iteration(row: dict) -> dict:
    """A ``czjax bench kernels`` row's counts an iteration, with the cost model's terms."""
    per = row["iterations"]
    return {
        "kernels": row["kernels"] / per,
        "host_waits": row["host_waits"] / per,
        "flops": row["flops"] / per,
        "terms": {term: count / per for term, count in row["terms"].items()},
        "calibrated": row["calibrated"],
    }


if __name__ == "__main__":
    raise SystemExit(main())
