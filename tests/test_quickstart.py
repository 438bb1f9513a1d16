"""The Quick start: ./run.sh ends with the next commands to try, naming the run it trained, and
the README says how to run czjax afterwards; the known-good versions are what setup installs."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ./run.sh at the smallest scale: one batch of 4 games, one evaluation game a side
TINY_RUN = ["--games-per-batch", "4", "--batches-per-chunk", "1", "--eval-games", "2", "--batches", "1"]


def quick_start_copy(folder: Path) -> Path:
    """A copy of run.sh in ``folder`` whose set-up step is a no-op and whose .venv/bin/czjax runs this
    interpreter's czjax: the repository's runs/ and .venv are left alone, and a machine with no
    .venv and no network to make one (such as the GPU's) runs it too. The set-up itself is
    tested by CI, whose ./test.sh makes .venv with it, and by the dry runs below."""
    czjax_command = (
        f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -m czjax "$@"\n'
    )
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / "scripts").mkdir()
    for script, text in (
        ("run.sh", (ROOT / "run.sh").read_text()),
        ("scripts/setup-venv.sh", "#!/bin/sh\n"),
        (".venv/bin/czjax", czjax_command),
    ):
        (folder / script).write_text(text)
        (folder / script).chmod(0o755)
    return folder


def test_run_sh_ends_with_the_next_commands(tmp_path):
    root = quick_start_copy(tmp_path / "repo")
    out = tmp_path / "quick"
    proc = subprocess.run(
        ["./run.sh", *TINY_RUN, "--out", str(out)],
        cwd=root,
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
        ["./run.sh", "--batches", "1", "--out", str(out)], cwd=root, capture_output=True, text=True, timeout=600
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


def setup_dry_run(*extras, **env) -> list[str]:
    """The pip commands scripts/setup-venv.sh would run, one a line."""
    return subprocess.run(
        ["scripts/setup-venv.sh", *extras],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CZJAX_SETUP_DRY_RUN": "1", **env},
    ).stdout.splitlines()


def test_the_cpu_set_up_takes_torch_s_cpu_build():
    """With torch in the extras, the CPU set-up first installs torch alone from PyTorch's CPU index
    (the plain index's torch is the CUDA build, with GB of NVIDIA packages), at the version the
    test extra pins; a mirror replaces that index."""
    cpu_index = "--index-url https://download.pytorch.org/whl/cpu"
    torch, czjax = setup_dry_run("test")
    assert torch == f"pip install --no-deps {cpu_index} torch==2.13.0 -c constraints/cpu.txt"
    assert czjax == "pip install -e .[test] -c constraints/cpu.txt"
    assert setup_dry_run("torch")[0] == f"pip install --no-deps {cpu_index} torch>=2.1 -c constraints/cpu.txt"
    assert setup_dry_run() == ["pip install -e . -c constraints/cpu.txt"]  # no torch: no torch step
    mirror = setup_dry_run("test", CZJAX_TORCH_INDEX="https://mirror.example/torch-cpu")
    assert mirror[0].startswith("pip install --no-deps --index-url https://mirror.example/torch-cpu torch==2.13.0")
    assert setup_dry_run("test", CZJAX_TORCH_INDEX="none") == [czjax]


def test_the_gpu_set_up_says_its_cuda_step():
    """GPU=1 installs jax's CUDA plugin after czjax (and torch from the ordinary index: its CUDA build)."""
    czjax = "pip install -e .[test] -c constraints/cpu.txt"
    for gpu, plugin in (("1", "cuda12"), ("cuda13", "cuda13")):
        assert setup_dry_run("test", GPU=gpu) == [czjax, f"pip install --upgrade jax[{plugin}] -c constraints/cpu.txt"]


def test_run_sh_on_a_finished_run_says_so(tmp_path):
    """A second ./run.sh on the default run that has reached its target says it has finished and
    how to train it further, trains nothing, and still shows what to do with the model (in
    ``quick_start_copy``)."""
    quick_start_copy(tmp_path)
    out = tmp_path / "runs" / "default-seed0"
    first = subprocess.run(
        ["./run.sh", *TINY_RUN],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 0, first.stderr
    saved = (out / "checkpoint.msgpack").read_bytes()
    again = subprocess.run(["./run.sh"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "continuing" not in again.stdout and "resuming" not in again.stdout
    assert "runs/default-seed0 holds a finished run: its target (until 1 batches) is reached" in again.stdout
    assert "--resume --out runs/default-seed0 and a larger --batches" in again.stdout and "--overwrite" in again.stdout
    assert "next, with the model in runs/default-seed0:" in again.stdout
    assert (out / "checkpoint.msgpack").read_bytes() == saved
