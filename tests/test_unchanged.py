"""Results unchanged (issue 27's reshaping must not change one): fixed-seed runs of a few presets
(every metric, a hash of the final parameters) and the program of a rollout, recorded with the
code as it was before anything moved (tests/data/unchanged.json), come out the same.

The record holds for the platform it was taken on (the backend, the pinned jax of
constraints/cpu.txt and the processor, as on CI); elsewhere (a GPU, another jax or processor)
floating point may differ, and the test checks what must hold everywhere: the same seed gives
the same run twice.

Record again (only when a change is meant to change results, and say so in the commit):
    python tests/test_unchanged.py --record
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import jax
import numpy as np

RECORD = Path(__file__).parent / "data" / "unchanged.json"
TINY = dict(games_per_batch=4, batches_per_chunk=2, eval_games=2, solver_eval="off")
CASES = {  # preset: settings over it (small shapes; the program is the preset's)
    "ex2-entropy": {},
    "ex5-ppo": {"model": "mlp3"},  # PPO over a small network with a value head (the CNN compiles for 20 s)
    "gumbel-az": {"replay.capacity": 256, "replay.batch": 32, "replay.steps": 2},
}
BATCHES = 4


def params_hash(tree) -> str:
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return digest.hexdigest()


def run_case(preset_name: str, out_dir: Path) -> dict:
    from czjax import checkpoint, loop, presets
    from czjax.train import HParams, make_trainer

    preset = presets.get_preset(preset_name)
    config = preset.config.override({**TINY, **CASES[preset_name]})
    summary = loop.run(config, HParams.create(**preset.hparams), out_dir, seed=11, batches=BATCHES, log=lambda m: None)
    state, _ = checkpoint.load(Path(summary["checkpoint"]), make_trainer(config).init(0), expected_model=config.model)
    rows = [loop.deterministic(r) for r in loop.read_metrics(Path(summary["metrics"]))]
    return {"metrics": rows, "params_sha256": params_hash(state.params)}


def rollout_program() -> str:
    """The StableHLO of 8 games of RandomPunisher against random, names of private functions
    numbered in order of appearance (a moved or renamed helper is the same program)."""
    from czjax.players import random_player, random_punisher
    from czjax.rollout import play_games

    lowered = jax.jit(lambda key: play_games(key, random_punisher, None, random_player, None, 8)).lower(jax.random.key(0))
    text = lowered.as_text()
    names: dict[str, str] = {}
    return re.sub(r"@[\w.$-]+", lambda m: names.setdefault(m.group(0), f"@f{len(names)}"), text)


def cpu_model() -> str:
    """The processor's name: XLA's CPU code, so the last bits of a float, may differ on another."""
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


def platform() -> dict:
    return {"backend": jax.default_backend(), "jax": jax.__version__, "cpu": cpu_model()}


def fingerprint(folder: Path) -> dict:
    return {"rollout_sha256": hashlib.sha256(rollout_program().encode()).hexdigest(),
            "runs": {name: run_case(name, folder / name) for name in CASES}}


def test_results_unchanged(tmp_path):
    record = json.loads(RECORD.read_text())
    now = fingerprint(tmp_path / "a")
    if record["platform"] == platform():
        assert now["rollout_sha256"] == record["rollout_sha256"], "the rollout's program changed"
        for name, recorded in record["runs"].items():
            assert now["runs"][name]["metrics"] == recorded["metrics"], f"{name}: the metrics changed"
            assert now["runs"][name]["params_sha256"] == recorded["params_sha256"], f"{name}: the final parameters changed"
    else:  # another platform: the record does not apply; the same seed must still give the same run
        again = {name: run_case(name, tmp_path / "b" / name) for name in CASES}
        assert again == now["runs"]
    assert sorted(record["runs"]) == sorted(CASES)


if __name__ == "__main__" and "--record" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        RECORD.write_text(json.dumps({"platform": platform(), **fingerprint(Path(folder))}, indent=1) + "\n")
    print(f"recorded {RECORD}")
