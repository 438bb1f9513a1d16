"""Where a benchmark's figures come from: the command, the commit of the checkout czjax runs
from, the machine and the date, the first fields of every ``czjax bench ... --json`` document.
"""

from __future__ import annotations

import datetime
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax


def machine_description() -> str:
    found = jax.devices()
    return f"{platform.machine()} {found[0].platform}:{found[0].device_kind} x{len(found)}, jax {jax.__version__}"


def command_line(argv: list[str] | None = None) -> str:
    """The command that ran (``sys.argv``), quoted for a shell; czjax's own entry points
    (``.venv/bin/czjax``, ``python -m czjax`` or ``-m czjax.cli``) read as ``czjax``."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ""
    program = Path(argv[0])
    if program.name == "czjax" or (program.name == "__main__.py" and program.parent.name in ("czjax", "cli")):
        argv[0] = "czjax"
    return shlex.join(argv)


def source_commit() -> str | None:
    """``git rev-parse --short HEAD`` of the checkout czjax is imported from, or None when it is
    not one (an installed package, no git)."""
    package = Path(__file__).resolve().parent.parent
    try:
        found = [
            subprocess.run(
                ["git", "-C", str(package), "rev-parse", *query],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            for query in (["--show-toplevel"], ["--short", "HEAD"])
        ]
    except (OSError, subprocess.SubprocessError):
        return None
    top, commit = found
    # a package installed under some other repository's folder (a venv inside a checkout) is not that checkout's
    return commit if top and Path(top).resolve() / "czjax" == package else None


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """Where a benchmark's figures come from, the first fields of ``czjax bench ... --json``:
    ``command``, ``commit``, ``machine`` (:func:`machine_description`) and ``date`` (UTC, ISO 8601)."""
    return {
        "command": command_line(argv),
        "commit": source_commit(),
        "machine": machine_description(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
