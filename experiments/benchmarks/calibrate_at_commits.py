"""Fit the cost model of ``czjax bench kernels`` on the H100's `bench` rows, each row's program
compiled at the commit it was measured at: a checkout of each commit (``git worktree add``,
under ``--checkouts``) builds the program as that commit's ``czjax bench`` did
(``compile_at_commit.py``), and today's reader counts it. Writes the calibration table (as
``czjax bench kernels calibrate`` does, each row's ``compiled_at`` its commit) and the package's
model.

    PYTHONPATH=.plugins/cuda python experiments/benchmarks/calibrate_at_commits.py

``czjax bench kernels calibrate`` compiles every row at the checkout it runs in: right for rows
measured there (the next GPU's), not for these, whose programs have changed since.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / ".plugins" / "cuda"
# At 0fc36d2 a search's walk went one level down its trees a test of its loop (the GPU's four came
# later): its loop's tests are measured at one level a test.
LEVELS_THEN = 1


def program_words(measured) -> list[str]:
    """compile_at_commit.py's words for a measured row."""
    row, kind = measured.row, measured.source.split("/")[-1].split(" ")[0]
    if kind == "bench-rollout.json":
        return ["rollout", row["player"], str(row["batch"])]
    if kind == "bench-search.json":
        return ["search", row["algo"], str(row["batch"]), str(row["sims"])]
    changed = {
        k: row[k] for k in ("precision", "compaction", "conv", "norm", "unroll") if row[k] not in ("auto", "default", 1)
    }
    if changed:
        raise ValueError(f"{measured.source}: settings compile_at_commit.py does not set: {changed}")
    return ["train", row["model"], str(row["games_per_batch"]), str(row["steps_per_run"]), row["control_flow"]]


def checkout(commit: str, folder: Path) -> Path:
    """A checkout of ``commit`` under ``folder`` (made once)."""
    path = folder / f"at-{commit}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(path), commit], check=True)
    return path


def compiled_text(measured, folder: Path) -> str:
    """XLA's optimised program of a measured row, built by its commit's code for an H100."""
    at = checkout(measured.commit, folder)
    out = folder / f"{measured.commit}-{'-'.join(program_words(measured))}.hlo"
    if not out.exists():
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(at), str(PLUGIN)])}
        script = Path(__file__).with_name("compile_at_commit.py")
        subprocess.run([sys.executable, str(script), str(out), *program_words(measured)], cwd=at, env=env, check=True)
    return out.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--measured",
        default="docs/results/benchmarks/bench",
        help="the bench step's JSON files (from the checkout's root)",
    )
    parser.add_argument(
        "--out", default="docs/results/benchmarks/kernels/calibration.json", help="the table (default: %(default)s)"
    )
    parser.add_argument(
        "--checkouts",
        default=str(Path(tempfile.gettempdir()) / "czjax-calibration"),
        help="where the commits' checkouts and compiled programs go (kept: a second run compiles nothing)",
    )
    args = parser.parse_args(argv)
    from czjax.bench import kernels, provenance

    kernels.prepare_environment()
    target = kernels.get_target("h100")
    kernels.check_installed(target)
    folder = Path(args.checkouts)
    folder.mkdir(parents=True, exist_ok=True)
    read = []
    for measured in kernels.measured_rows(Path(args.measured)):
        words, assumed = program_words(measured), measured.built.assumed
        if words[0] == "search":  # its descent's tests as the commit's walk took them
            row = measured.row
            assumed = (kernels.descent_tests(row["algo"], row["batch"], row["sims"], LEVELS_THEN),)
        program = kernels.read_program(compiled_text(measured, folder), assumed, target.platform)
        read.append((measured, kernels.totals_an_iteration(program.totals(), measured.built)))
        print(f"  {measured.built.program} at {measured.commit}: {read[-1][1].kernels:,.0f} kernels", flush=True)
    found = {**provenance.provenance(), **kernels.fitted_table(read, target), "compiled_at": "each row's measured_at"}
    print(kernels.format_calibration(found))
    Path(args.out).write_text(json.dumps(found, indent=1) + "\n")
    model = {key: found[key] for key in ("target", "seconds", "commit")}
    kernels.CALIBRATION.write_text(json.dumps({**model, "table": args.out}, indent=1) + "\n")
    print(f"table: {args.out}; model: {kernels.CALIBRATION}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
