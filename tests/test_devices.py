"""Several devices: the same run and the same scan on 1 and on 4 devices (forced host devices
on the CPU, in a subprocess, since XLA reads the device count once per process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from czjax.util import devices

REPO = Path(__file__).resolve().parents[1]

# Run in a fresh process with 4 host devices: a training run and a scan, each on 1 and on 4
# devices, and the benchmark for both counts; prints one JSON object.
SCRIPT = r"""
import json, sys
import jax
from czjax import cli
from czjax.jobs import loop
from czjax.jobs import scan
from czjax.learn.settings import HParams, PromotionSettings, TrainConfig

out = sys.argv[1]
assert jax.local_device_count() == 4, jax.devices()
# 18 games: halves of 9, which 4 devices do not divide (XLA pads the last part)
config = TrainConfig(model="mlp", games_per_batch=18, opponent="self", promotion=PromotionSettings(every_games=36, window_games=36),
                     eval_games=6, batches_per_chunk=2)
hp = HParams.create(learning_rate=1e-3, entropy_bonus=0.05, value_weight=0.0, discount=0.9)
runs = {n: loop.read_metrics(loop.run_training(config, hp, f"{out}/run{n}", seed=3, batches=6, log=lambda m: None, num_devices=n)["metrics"])
        for n in (1, 4)}
settings = scan.grid_settings({"entropy_bonus": [0.0, 0.02, 0.05, 0.1]})
scans = {n: scan.run_scan(config, dict(learning_rate=1e-3, value_weight=0.0, discount=0.9), settings, [0, 1], f"{out}/scan{n}", 4,
                          log=lambda m: None, num_devices=n) for n in (1, 4)}
cli.main(["bench", "train", "--model", "mlp", "--games-per-batch", "16", "--devices", "1", "4", "--runs", "1", "--steps", "2", "--roof-size", "64",
          "--no-peer", "--json"])
# the programs that ran on 4 devices did take all 4: their inputs are placed on each of them
spans = sorted({len(jax.tree.leaves(c.input_shardings)[0].device_set) for key, c in loop._COMPILED.items() if key[-1] == 4})
print("RESULT " + json.dumps({"runs": runs, "scans": scans, "spans": spans}))
"""

EXACT = (
    "batches",
    "games",
    "promotions",
    "positions",
    "win_rate",
    "draw_rate",
    "game_length",
    "eval_win_rate",
    "eval_draw_rate",
)


def assert_rows_agree(a: dict, b: dict, label):
    for key in EXACT:  # the same games on any number of devices
        assert a[key] == b[key], (label, key, a[key], b[key])
    for key in (
        "loss",
        "policy_loss",
        "value_loss",
        "entropy",
        "returns_std",
        "advantage_std",
    ):  # sums in another order
        assert abs(a[key] - b[key]) <= 1e-4 * max(1.0, abs(b[key])), (label, key, a[key], b[key])


def cpu_devices_env(count: int) -> dict:
    """The environment of a subprocess that runs this checkout's czjax on ``count`` CPU devices,
    keeping the suite's own XLA_FLAGS (tests/conftest.py)."""
    return dict(
        os.environ,
        XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}",
        JAX_PLATFORMS="cpu",
        PYTHONPATH=str(REPO),
    )


@pytest.fixture(scope="module")
def four_devices(tmp_path_factory):
    out = tmp_path_factory.mktemp("devices")
    env = cpu_devices_env(4)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT ", 1)[1])
    bench = json.loads(proc.stdout.split("RESULT ", 1)[0])
    return result, bench


def test_a_run_is_the_same_on_one_and_on_four_devices(four_devices):
    result, _ = four_devices
    one, four = result["runs"]["1"], result["runs"]["4"]
    assert [r["batches"] for r in one] == [r["batches"] for r in four] == [2, 4, 6]
    assert result["spans"] == [4]  # the run's and the scan's programs compiled for 4 devices
    for a, b in zip(four, one):
        assert_rows_agree(a, b, a["batches"])


def test_a_scan_is_the_same_on_one_and_on_four_devices(four_devices):
    result, _ = four_devices
    one, four = result["scans"]["1"], result["scans"]["4"]
    assert len(one) == len(four) == 8 * 2  # 8 configurations, 2 chunks each
    key = lambda r: (r["config"], r["batches"])  # noqa: E731
    for a, b in zip(sorted(four, key=key), sorted(one, key=key)):
        assert key(a) == key(b)
        assert_rows_agree(a, b, key(a))


def test_the_benchmark_measures_each_device_count(four_devices):
    _, bench = four_devices
    assert [(r["devices"], r["games_per_batch"]) for r in bench["rows"]] == [(1, 16), (4, 16)]
    assert all(r["games_per_s"] > 0 for r in bench["rows"])


def test_device_counts_are_checked():
    assert devices.available(None) == jax.local_device_count()
    with pytest.raises(ValueError, match=r"--devices 99: this machine has \d+"):
        devices.available(99)
    assert devices.largest_divisor(8, 4) == 4 and devices.largest_divisor(6, 4) == 3


def test_a_run_over_two_hosts_is_the_run_on_one(tmp_path):
    """Two `czjax train` processes joined by jax.distributed (2 forced host devices each, gloo
    between them: 4 devices over 2 "hosts") play the same games as one process on one device;
    process 0 alone writes the run's files."""
    import socket

    from czjax.jobs import loop

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    args = [
        "train",
        "--preset",
        "ex2-entropy",
        "--games-per-batch",
        "18",
        "--eval-every",
        "2",
        "--eval-games",
        "6",
        "--batches",
        "4",
        "--seed",
        "3",
        "--out",
        str(tmp_path / "hosts"),
        "--coordinator",
        f"localhost:{port}",
        "--num-processes",
        "2",
    ]
    env = cpu_devices_env(2)
    commands = [[*args, "--process-id", str(i)] for i in (0, 1)]
    commands.append(
        [*args[: args.index("--out")], "--out", str(tmp_path / "one"), "--devices", "1"]
    )  # the CPU, whatever runs the tests
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "czjax", *command],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for command in commands
    ]
    try:  # a bound for a hang: the three processes compile at once, slowly on a busy 2-core machine
        outputs = [p.communicate(timeout=900)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0, 0], "\n".join(out[-1500:] for out in outputs)
    hosts, one = (loop.read_metrics(tmp_path / name / loop.METRICS) for name in ("hosts", "one"))
    assert [r["batches"] for r in hosts] == [r["batches"] for r in one] == [2, 4]
    for a, b in zip(hosts, one):
        assert_rows_agree(a, b, a["batches"])


def test_a_coordinator_needs_the_process_count_and_id():
    with pytest.raises(ValueError, match="--coordinator HOST:PORT needs --num-processes and --process-id"):
        devices.initialize_hosts("localhost:1234", 2, None)
