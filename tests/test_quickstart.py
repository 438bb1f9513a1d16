"""The Quick start: ./run.sh ends with the next commands to try, naming the run it trained, and
the README says how to run czjax afterwards; the known-good versions are what setup installs."""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_run_sh_ends_with_the_next_commands(tmp_path):
    out = tmp_path / "quick"
    proc = subprocess.run(
        [
            "./run.sh",
            "--games-per-batch",
            "4",
            "--batches-per-chunk",
            "1",
            "--eval-games",
            "2",
            "--batches",
            "1",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    tail = proc.stdout[proc.stdout.index("next, with the model in") :]
    assert f"next, with the model in {out}:" in tail
    for command in (f".venv/bin/czjax play {out}", f".venv/bin/czjax serve {out}", f".venv/bin/czjax eval pons {out}"):
        assert command in tail
    assert (out / "checkpoint.msgpack").exists()
    refused = subprocess.run(
        ["./run.sh", "--batches", "1", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert refused.returncode == 2 and "next, with the model" not in refused.stdout  # a refused command: no advice


def test_the_quick_start_says_how_to_run_czjax_afterwards():
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quick start") : readme.index("\n## ", readme.index("## Quick start") + 5)]
    assert ".venv/bin/czjax play" in quick and "source .venv/bin/activate" in quick


def pins(path):
    return dict(line.split("==") for line in path.read_text().splitlines() if line and not line.startswith("#"))


def test_setup_installs_the_known_good_versions():
    """constraints/cpu.txt pins every package exactly, within what pyproject.toml allows, and
    scripts/setup-venv.sh installs with it unless told otherwise."""
    import tomllib
    from packaging.requirements import Requirement

    known = pins(ROOT / "constraints" / "cpu.txt")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]
    for requirement in needed:
        name = next((k for k in known if k.lower().replace("_", "-") == requirement.name.lower()), None)
        assert name is not None, f"{requirement.name} has no pin in constraints/cpu.txt"
        assert requirement.specifier.contains(known[name].split("+")[0], prereleases=True), (requirement, known[name])

    def dry_run(**env):
        return subprocess.run(
            ["scripts/setup-venv.sh", "test"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "CZJAX_SETUP_DRY_RUN": "1", **env},
        ).stdout

    assert re.search(r"-c constraints/cpu\.txt$", dry_run().strip())
    assert "-c" not in dry_run(CZJAX_CONSTRAINTS="none")
    assert "-c constraints/gpu-h100.txt" in dry_run(CZJAX_CONSTRAINTS="constraints/gpu-h100.txt")
