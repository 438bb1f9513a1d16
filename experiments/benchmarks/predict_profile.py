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
    args = parser.parse_args(argv)
    kernels.prepare_environment()
    from czjax.bench import provenance

    target = kernels.get_target(args.target)
    kernels.check_installed(target)
    out = Path(args.out)
    found = json.loads(out.read_text())["cells"] if out.exists() else {}
    for cell in profile_cells(1.0):
        name = cell_name(cell)
        if name in found:
            continue
        row = kernels.report(kernels.train_program(cell_config(cell, 1.0), target.platform), target)
        per = row["iterations"]
        found[name] = {
            "predicted_s": row["predicted_s"] / per,
            "kernels": row["kernels"] / per,
            "host_waits": row["host_waits"] / per,
            "flops": row["flops"] / per,
            "calibrated": row["calibrated"],
        }
        print(f"{name}: {found[name]['predicted_s']:.4f} s an iteration predicted", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        document = {**provenance.provenance(), "target": target.name, "per": "iteration", "cells": found}
        out.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
