"""Results recorded on named machines, and the one rule every test that compares with them follows.

A record holds the platform it was taken on: the backend, jax's version, the processor's name and
a digest of its instruction-set flags (XLA compiles for the processor it runs on, so two of the
same name may differ in the last bits), the cores it used (XLA's CPU backend splits a reduction by
its threads) and the XLA_FLAGS in force ("" for XLA's defaults: the suite's own faster compiling,
tests/conftest.py, changes the last bits too). A test compares with the nearest record
(:func:`nearest`):

* on the very platform of a record, every bit must agree, and the run is made at the record's
  XLA_FLAGS, in a subprocess (:func:`run_at_flags`), whatever flags the suite compiles with;
* elsewhere, the run is made at the nearest record's flags and its numbers must lie within
  ``RTOL``/``ATOL`` of it (float noise of float32 training over a few batches).

Either way the test says which record it compared with (the ``recorded`` fixture in conftest
prints it at the suite's end), and a test that asked for a comparison and made none fails. How to
add a machine: docs/testing.md, "Records".
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PLATFORM_KEYS = ("backend", "jax", "cpu", "cpu_flags", "cores", "xla_flags")
# float32 training over four batches on two processors or at two optimisation levels: measured
# relative differences up to 2e-5 (PPO's KL); absolute ones below 1e-8 on values near zero
RTOL, ATOL = 1e-4, 1e-6


def cpu_model() -> tuple[str, str]:
    """The processor's name and a digest of its instruction-set flags (x86's ``flags``, ARM's
    ``Features``)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown", "unknown"

    def field(*names: str) -> str | None:
        return next((line.split(":", 1)[1].strip() for line in lines if line.split(":")[0].strip() in names), None)

    name = field("model name", "Model", "Hardware") or "unknown"
    flags = (field("flags", "Features") or "").split()
    return name, hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16]


def cores() -> int:
    """The cores this process may run on (macOS has no affinity: all of them)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def suite_flags() -> str:
    """XLA_FLAGS as a recorded run has them: those of this process (the suite's, or none)."""
    return " ".join(os.environ.get("XLA_FLAGS", "").split())


def platform(xla_flags: str | None = None) -> dict:
    """This machine as a record names it, at ``xla_flags`` (default: this process's)."""
    import jax

    name, flags = cpu_model()
    return {
        "backend": jax.default_backend(),
        "jax": jax.__version__,
        "cpu": name,
        "cpu_flags": flags,
        "cores": cores(),
        "xla_flags": suite_flags() if xla_flags is None else xla_flags,
    }


def same_machine(record: dict, here: dict) -> bool:
    """Whether ``record`` was taken on this machine, whatever the flags."""
    return all(record["platform"].get(k) == here[k] for k in PLATFORM_KEYS if k != "xla_flags")


@dataclass(frozen=True)
class Choice:
    """The record a test compares with, and how: ``exact`` (every bit) or within RTOL/ATOL."""

    record: dict
    exact: bool

    @property
    def flags(self) -> str:
        """The XLA_FLAGS the comparison's run is made at: the record's."""
        return self.record["platform"]["xla_flags"]

    def describe(self) -> str:
        p = self.record["platform"]
        machine = f"{p['cpu']} (flags {p['cpu_flags']}, {p['cores']} cores, jax {p['jax']}, {p['backend']})"
        how = "bit for bit" if self.exact else f"within rtol={RTOL:g}, atol={ATOL:g}"
        return f"{how} with the record of {machine}"


def nearest(records: list[dict], here: dict) -> Choice | None:
    """The record to compare with on ``here``: one taken on this machine (exact), else the
    nearest of the same backend (same jax first, then the processor's name, its flags, its
    cores); None where no record shares the backend (a GPU: the records are the CPU's)."""
    candidates = [r for r in records if r["platform"]["backend"] == here["backend"]]
    if not candidates:
        return None

    def closeness(record: dict) -> tuple:
        p = record["platform"]
        return tuple(p.get(k) == here[k] for k in ("jax", "cpu", "cpu_flags", "cores"))

    best = max(candidates, key=closeness)  # the first of equals: the records' order
    return Choice(best, exact=same_machine(best, here))


def run_at_flags(module: str, args: list[str], flags: str, timeout: float = 600) -> str:
    """``python -m module *args`` from the repository root with XLA_FLAGS set to ``flags``
    (the record's), the rest of the environment (the compilation cache) inherited; its output."""
    env = {**os.environ, "XLA_FLAGS": flags}
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{module} {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def assert_metrics_close(now: list, recorded: list, name: str) -> None:
    """Rows of metrics with the same keys and each number within RTOL/ATOL."""
    assert [sorted(row) for row in now] == [sorted(row) for row in recorded], f"{name}: other metrics"
    for a, b in zip(now, recorded):
        for key in b:
            assert np.isclose(a[key], b[key], rtol=RTOL, atol=ATOL), f"{name}: {key} changed: {a[key]} != {b[key]}"
