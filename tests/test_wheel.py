"""The wheel on its own: `python -m build` makes the sdist from a copy of the files a clone holds
(those git tracks, and new ones it does not ignore) and the wheel from that sdist; the wheel is
installed into a new virtual environment in a temporary folder, and `czjax play`, `czjax eval pons`
and `czjax serve` run there, from a folder outside the checkout, on the models, Pons' sets and web
page the wheel carries.

The new environment borrows the test environment's dependencies (jax, flax, ...) instead of
downloading them: a .pth file in its site-packages names the test environment's site-packages.
A folder named in a .pth file is only added to ``sys.path``; the .pth files inside it are not
run, among them the editable install's hook that finds the checkout's czjax, so the only czjax
the new environment can import is the wheel's (checked before the wheel is installed).
"""

import io
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import threading
import time
import urllib.request
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
VERSION = "0.1.0"
TIMEOUT = 240  # seconds for one command on a busy 2-core CPU (each takes 2-10 s of CPU)
# What the installed package reads at run time (the rest of czjax/data comes with them)
READ_AT_RUN_TIME = [
    "czjax/data/c4_eval_public.jsonl",  # czjax.evaluate.positions
    "czjax/data/pons_moves.jsonl.gz",  # czjax.evaluate.pons
    "czjax/data/pons/Test_L1_R1",
    "czjax/data/puzzles.jsonl",  # czjax.evaluate.puzzles
    "czjax/data/models/czjax-4.msgpack",  # czjax.agents.SHIPPED_MODELS
    "czjax/web/play.html",  # czjax.evaluate.serve
]


def clone_files() -> list[str]:
    """The files a clone of this checkout holds (with the changes not yet committed)."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"the wheel test builds from the files git lists, and git could not list them: {err}")
    return [name for name in listing.split("\0") if name and (REPO / name).is_file()]


def run(command, what, **kwargs):
    """``command`` run to its end; a failure shows its output."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)
    assert result.returncode == 0, (
        f"{what} failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    )
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    pytest.importorskip("build", reason="the wheel test builds with `python -m build` (pip install 'czjax[test]')")
    files = clone_files()
    root = tmp_path_factory.mktemp("wheel")
    assert REPO not in root.resolve().parents, f"the temporary folder {root} is inside the checkout"
    source, dist, work, venv = root / "source", root / "dist", root / "work", root / "venv"
    for name in files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    work.mkdir()

    # the sdist from the copy, then the wheel from the unpacked sdist, with this environment's setuptools
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)], "python -m build")
    (sdist,) = dist.glob("czjax-*.tar.gz")
    (wheel,) = dist.glob("czjax-*.whl")
    shutil.rmtree(source)  # built: the installed wheel is all that runs from here

    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], "python -m venv")
    scripts = venv / ("Scripts" if os.name == "nt" else "bin")
    python = scripts / ("python.exe" if os.name == "nt" else "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(PYTHONNOUSERSITE="1", PATH=f"{scripts}{os.pathsep}{env.get('PATH', '')}")
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], "site-packages", env=env)
    ours = dict.fromkeys(sysconfig.get_path(key) for key in ("purelib", "platlib"))
    (Path(site.stdout.strip()) / "czjax-test-dependencies.pth").write_text("".join(f"{path}\n" for path in ours))

    found = "import importlib.util as u; print(u.find_spec('czjax') is not None, u.find_spec('jax') is not None)"
    before = run([str(python), "-c", found], "looking for czjax", cwd=work, env=env).stdout.split()
    if before[0] == "True":
        pytest.skip(f"the test environment's czjax is installed into {', '.join(ours)} itself (not editable)")
    assert before == ["False", "True"], "the new environment does not see the test environment's jax"

    # --ignore-installed: pip sees the test environment's czjax metadata and must leave it alone
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check", "install"]
        + ["--no-deps", "--no-index", "--ignore-installed", "--quiet", str(wheel)],
        "pip install",
        env=env,
    )
    return SimpleNamespace(
        files=files, sdist=sdist, wheel=wheel, venv=venv, python=python, czjax=scripts / "czjax", work=work, env=env
    )


def czjax(installed, *args, stdin=None):
    return run(
        [str(installed.czjax), *args], f"czjax {' '.join(args)}", input=stdin, cwd=installed.work, env=installed.env
    )


def test_the_sdist_and_the_wheel_hold_the_package_and_its_data(installed):
    package = [name for name in installed.files if name.startswith("czjax/")]
    assert set(READ_AT_RUN_TIME) <= set(package)
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        info = f"czjax-{VERSION}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert not set(package) - names, "the wheel misses files of the package"
    assert f"{info}/licenses/LICENSE" in names
    assert "License-Expression: MIT" in metadata and f"Version: {VERSION}" in metadata
    assert "czjax = czjax.cli:main" in entry_points
    with tarfile.open(installed.sdist) as sdist:
        listed = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert not set(package) - listed, "the sdist misses files of the package"
    assert {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md"} <= listed
    assert not any(name.startswith("tests/") for name in listed)  # MANIFEST.in: the suite runs from a clone
    print(f"wheel {installed.wheel.stat().st_size:,} bytes, sdist {installed.sdist.stat().st_size:,} bytes")


def test_the_new_environment_runs_the_wheel_s_czjax(installed):
    code = (
        "import json, importlib.metadata as m, czjax\n"
        "from importlib import resources\n"
        "root = resources.files('czjax')\n"
        f"print(json.dumps([czjax.__file__, m.version('czjax'), [root.joinpath(p[6:]).is_file() for p in {READ_AT_RUN_TIME!r}]]))"
    )
    path, version, present = json.loads(
        run([str(installed.python), "-c", code], "import czjax", cwd=installed.work, env=installed.env).stdout
    )
    assert Path(path).is_relative_to(installed.venv) and not Path(path).is_relative_to(REPO), path
    assert version == VERSION and all(present)


def test_play_answers_with_the_shipped_model(installed):
    """czjax@4 alone at temperature 0 answers 4 to 4 (probability 0.89) and 4 to 444 (1.00)."""
    out = czjax(installed, "play", "czjax@4", "--temperature", "0", stdin="4\n4\nq\n").stdout
    assert re.findall(r"^czjax@4 plays (\d)", out, re.M) == ["4", "4"], out
    assert "game over: abandoned after 4 moves; moves 4444" in out


def test_eval_pons_reads_the_shipped_sets(installed):
    """czjax@3 alone errs on 17.0% of Pons' positions (docs/strength.md, the CPU hour's 60 minutes)."""
    report = json.loads(czjax(installed, "eval", "pons", "czjax@3", "--json").stdout)
    assert [(s["set"], s["n"]) for s in report["sets"]] == [
        (name, 1000) for name in ("Test_L1_R1", "Test_L2_R1", "Test_L3_R1", "Test_L1_R2", "Test_L2_R2", "Test_L1_R3")
    ]
    assert report["mean_move_error"] == pytest.approx(17.0, abs=0.5)


def test_serve_answers_the_page_and_a_move(installed):
    server = subprocess.Popen(
        [str(installed.czjax), "serve", "czjax@4", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=installed.work,
        env=installed.env,
    )
    lines: queue.Queue = queue.Queue()
    seen: list[str] = []

    def read():
        for line in server.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline, url = time.monotonic() + TIMEOUT, None
        while url is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail("czjax serve did not say where it serves within the time:\n" + "".join(seen))
            assert line is not None, "czjax serve ended:\n" + "".join(seen)
            seen.append(line)
            match = re.search(r" at (http://127\.0\.0\.1:\d+/)", line)
            url = match and match.group(1)
        with urllib.request.urlopen(url, timeout=60) as response:
            assert response.status == 200
            assert "<title>czjax: play czjax@4</title>" in response.read().decode()
        request = urllib.request.Request(
            url + "api/model-move", data=json.dumps({"moves": "4"}).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            state = json.load(io.TextIOWrapper(response, encoding="utf-8"))
        assert response.status == 200 and state["move"] == 4 and state["moves"] == "44", state
        server.terminate()  # not SIGINT: a process started where SIGINT is ignored (`pytest &`) inherits that
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=60)
