"""Results unchanged: fixed-seed runs of a few presets (every metric, a hash of the final
parameters) and the program of a rollout, recorded per machine (tests/data/unchanged.json), come
out the same.

The comparison follows tests/records.py: on a machine with a record, bit for bit, the runs made
at the record's XLA_FLAGS in a subprocess; elsewhere within float noise of the nearest record.
The rollout's StableHLO does not depend on the processor: it must equal the nearest record's
wherever jax is the record's version. Either way the same seed gives the same run twice.

Record again only when a change is meant to change results, with the evidence in its commit; add
this machine with the code from before the change checked out (docs/testing.md, "Records"):
    python -m tests.test_unchanged --record
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import jax
import numpy as np

from tests import records

RECORD = Path(__file__).parent / "data" / "unchanged.json"
TINY = dict(games_per_batch=4, batches_per_chunk=2, eval_games=2, solver_eval="off")
# the RandomPunisher the records were taken with (the blog's presets play the project's, ties
# to the leftmost column, since 2026-11-26)
SPREAD_TIES = {"opponent": "random-punisher", "eval_opponent": "random-punisher"}
CASES = {  # preset: settings over it (small shapes; the program is the preset's)
    "ex2-entropy": {"eval_opponent": "random-punisher"},
    # PPO over a small network with a value head (the CNN compiles for 20 s); the weight decay the
    # records were taken with (the preset's was 0.01 until it followed the project's 0)
    "ex5-ppo": {"model": "mlp3", "weight_decay": 0.01, **SPREAD_TIES},
    # the search the records were taken with (the preset's prior temperature was 1 until ptemp15)
    "gumbel-az": {
        "replay.capacity": 256,
        "replay.batch": 32,
        "replay.steps": 2,
        "search": "gumbel:sims=16,considered=4,move=policy,rescale=0",
    },
}
BATCHES = 4


def params_hash(tree) -> str:
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        digest.update(np.ascontiguousarray(np.asarray(leaf)).tobytes())
    return digest.hexdigest()


def run_case(preset_name: str, out_dir: Path) -> dict:
    from czjax.jobs import loop, presets
    from czjax.learn.settings import HParams
    from czjax.learn.trainer import make_trainer
    from czjax.util import checkpoint

    preset = presets.get_preset(preset_name)
    config = preset.config.override({**TINY, **CASES[preset_name]})
    summary = loop.run_training(
        config, HParams.create(**preset.hparams), out_dir, seed=11, batches=BATCHES, log=lambda m: None
    )
    state, _ = checkpoint.load(Path(summary["checkpoint"]), make_trainer(config).init(0), expected_model=config.model)
    rows = [loop.deterministic(r) for r in loop.read_metrics(Path(summary["metrics"]))]
    return {"metrics": rows, "params_sha256": params_hash(state.params)}


def rollout_program() -> str:
    """The StableHLO of 8 games of RandomPunisher against random, names of private functions
    numbered in order of appearance (a moved or renamed helper is the same program)."""
    from czjax.players import random_player, random_punisher
    from czjax.rollout import Side, play_games

    lowered = jax.jit(lambda key: play_games(key, Side(random_punisher), Side(random_player), 8)).lower(
        jax.random.key(0)
    )
    text = lowered.as_text()
    names: dict[str, str] = {}
    return re.sub(r"@[\w.$-]+", lambda m: names.setdefault(m.group(0), f"@f{len(names)}"), text)


def fingerprint(folder: Path) -> dict:
    return {
        "rollout_sha256": hashlib.sha256(rollout_program().encode()).hexdigest(),
        "runs": {name: run_case(name, folder / name) for name in CASES},
    }


def fingerprint_at_flags(folder: Path, flags: str) -> dict:
    """:func:`fingerprint` made in a subprocess at XLA_FLAGS ``flags`` (a record's), with the
    same runs made a second time in that process as ``again``."""
    out = folder / "fingerprint.json"
    records.run_at_flags("tests.test_unchanged", ["--fingerprint", str(out)], flags)
    return json.loads(out.read_text())


def test_results_unchanged(tmp_path, recorded):
    stored = json.loads(RECORD.read_text())["records"]
    for record in stored:
        assert sorted(record["runs"]) == sorted(CASES)
        assert sorted(record["platform"]) == sorted(records.PLATFORM_KEYS)
    choice = records.nearest(stored, records.platform())
    if choice is None:  # no record of this backend (a GPU): the same seed gives the same run twice
        now = {name: run_case(name, tmp_path / "a" / name) for name in CASES}
        assert {name: run_case(name, tmp_path / "b" / name) for name in CASES} == now
        recorded.said("results unchanged", f"no record for the {jax.default_backend()} backend: run twice, the same")
        return
    now = fingerprint_at_flags(tmp_path, choice.flags)
    assert now["again"] == now["runs"], "the same seed gave another run"
    record = choice.record
    if record["platform"]["jax"] == jax.__version__:  # StableHLO: the same on every processor
        assert now["rollout_sha256"] == record["rollout_sha256"], "the rollout's program changed"
    for name, recorded_run in record["runs"].items():
        if choice.exact:
            assert now["runs"][name]["metrics"] == recorded_run["metrics"], f"{name}: the metrics changed"
            assert now["runs"][name]["params_sha256"] == recorded_run["params_sha256"], (
                f"{name}: the final parameters changed"
            )
        else:
            records.assert_metrics_close(now["runs"][name]["metrics"], recorded_run["metrics"], name)
    recorded.said("results unchanged", choice.describe())


def main(argv: list[str]) -> None:
    """``--fingerprint OUT``: this process's fingerprint (and its runs again) as JSON in OUT;
    ``--record``: this machine's record, at this process's XLA_FLAGS, replacing its earlier one."""
    import tempfile

    if argv[:1] == ["--fingerprint"]:
        with tempfile.TemporaryDirectory() as folder:
            now = fingerprint(Path(folder) / "a")
            now["again"] = {name: run_case(name, Path(folder) / "b" / name) for name in CASES}
        Path(argv[1]).write_text(json.dumps(now))
    elif argv[:1] == ["--record"]:
        with tempfile.TemporaryDirectory() as folder:
            new = {"platform": records.platform(), **fingerprint(Path(folder))}
        kept = json.loads(RECORD.read_text())["records"] if RECORD.exists() else []
        kept = [r for r in kept if r["platform"] != new["platform"]]
        RECORD.write_text(json.dumps({"records": [*kept, new]}, indent=1) + "\n")
        print(f"recorded {RECORD} for {records.Choice(new, exact=True).describe()}")
    else:
        sys.exit("usage: python -m tests.test_unchanged --record | --fingerprint OUT")


if __name__ == "__main__":
    main(sys.argv[1:])
