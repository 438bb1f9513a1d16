"""What a campaign step is, and what the studies' steps share.

A step is a :class:`Step` (what it does, the study it belongs to, whether a GPU speeds it up)
whose ``run`` takes a :class:`Context` (its work folder, its results folder, the time by which
it starts no new piece of work, the fraction of its work to do) and returns its summary. Each
study defines its steps in its own folder, ``experiments/<study>/<name>_steps.py`` (a ``STEPS``
table, step name -> Step), and ``campaign.py`` runs them. The records live here rather than in
``campaign.py`` because the studies' modules import them and ``campaign.py`` imports the
studies' modules: run as ``python experiments/campaign.py`` it is ``__main__``, and a study
importing ``campaign`` would load it a second time.

Shared by the steps: their metrics rows written small enough to commit (:func:`write_rows`),
the machine they ran on (:func:`machine`), and a step that runs commands as they are
(:func:`command_step`: the suite, the benchmark tables, the comparison scripts at scale).
"""

from __future__ import annotations

import gzip
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
METRICS_ROWS = 400  # rows of metrics kept per configuration when they are committed
LOG_CHARS = 2_000_000  # the tail of a command's output kept in its .log


class Context(NamedTuple):
    work: Path  # the step's work folder (resumable state)
    results: Path  # docs/results/<study>/<step>/
    stop_at: float  # time.monotonic() after which no new piece of work starts
    scale: float
    log: Callable[[str], None]


class Step(NamedTuple):
    description: str
    run: Callable[[Context], dict]  # returns the summary: at least {"done": bool, "progress": float}
    study: str  # the study it belongs to: experiments/<study>/, its results in docs/results/<study>/<step>/
    # False where a CPU does the step as fast as a GPU, measured: `run next` on a GPU skips it
    gains_from_gpu: bool = True


def write_rows(path: Path, rows: list[dict]) -> None:
    """Metrics rows, gzipped, at most METRICS_ROWS per configuration (evenly spaced, the last kept)."""
    by_config: dict = {}
    for row in rows:
        by_config.setdefault(row.get("config", 0), []).append(row)
    kept = []
    for group in by_config.values():
        step = max(1, -(-len(group) // METRICS_ROWS))
        kept.extend(group[::step] + ([group[-1]] if (len(group) - 1) % step else []))
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in kept)


def machine() -> str:
    """The accelerator the step ran on, as ``platform: kind x count``."""
    try:
        import jax

        devices = jax.devices()
        return f"{devices[0].platform}: {devices[0].device_kind} x {len(devices)}"
    except Exception:  # noqa: BLE001 - a description only
        return platform.machine()


# --- Commands run as they are ------------------------------------------------------------------


Commands = Callable[[Context], list[tuple[str, list[str]]]]  # (name, argv) pairs, run in order


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def czjax(*args: str) -> list[str]:
    return python("-m", "czjax.cli", *args)


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def run_command(ctx: Context, name: str, argv: list[str]) -> dict:
    """One command of a command step, given what is left of the call: its output saved as
    ``<name>.log`` (and stdout as ``<name>.json`` when it is JSON); its record for the summary."""
    left = ctx.stop_at - time.monotonic()
    if left <= 5:
        return {"returncode": None, "note": "not run: no time left in this call"}
    ctx.log(f"$ {' '.join(argv)}")
    start = time.perf_counter()
    stdout = ""
    try:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=left)
        code, stdout, text = proc.returncode, proc.stdout, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as err:
        text = "".join(o if isinstance(o, str) else o.decode(errors="replace") for o in (err.stdout, err.stderr) if o)
        code, text = None, f"{text}\n(stopped at the call's time limit)"
    (ctx.results / f"{name}.log").write_text(text[-LOG_CHARS:])
    if code == 0 and is_json(stdout):  # --json prints JSON on stdout, its table on stderr
        (ctx.results / f"{name}.json").write_text(stdout)
    return {"returncode": code, "wall_s": time.perf_counter() - start, "command": " ".join(argv)}


def commands_page(description: str, results: dict) -> str:
    """A command step's results.md: each command, and whether it succeeded and in how long."""
    lines = []
    for name, r in results.items():
        state = "ok" if r["returncode"] == 0 else (r.get("note") or f"exit {r['returncode']}")
        took = f" ({r['wall_s']:.0f} s)" if "wall_s" in r else ""
        lines.append(f"- `{r.get('command', name)}`: {state}{took}")
    return f"# {description}\n\n" + "\n".join(lines) + "\n"


def command_step(description: str, study: str, commands: Commands) -> Step:
    """A step that runs commands one after another, each output saved as ``<name>.log`` (and
    ``<name>.json`` when the command prints JSON); done when every command succeeded."""

    def run(ctx: Context) -> dict:
        results = {name: run_command(ctx, name, argv) for name, argv in commands(ctx)}
        ok = sum(r["returncode"] == 0 for r in results.values())
        (ctx.results / "results.md").write_text(commands_page(description, results))
        return {"done": ok == len(results), "progress": ok / max(1, len(results)), "commands": results}

    return Step(description, run, study)
