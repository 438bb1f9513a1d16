"""No run continues from damaged state: a checkpoint whose bytes changed after it was written is
refused in one line naming the newest intact checkpoint kept beside it, and a batch whose loss,
gradient or parameters are not finite stops the run with one line, its last checkpoint untouched.

The damage is made here as a disk or a copy would make it (bytes overwritten in the middle of
the file, the file cut short), and the non-finite batch by a fault put into a run's state
(the optimizer's second moments made negative, so the next step takes a square root of a
negative number), by weights holding a NaN, or by a learning rate that overflows float32.
"""

import json
import re

import jax
import numpy as np
import pytest

from czjax import cli
from czjax.jobs import loop, presets
from czjax.jobs.spec import RunSpec
from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import make_trainer
from czjax.util import checkpoint

SMALL = ["--preset", "default", "--games-per-batch", "4", "--batches-per-chunk", "1", "--eval-games", "2"]


def train(out, *flags):
    return cli.main(["train", *SMALL, "--out", str(out), *flags])


def resume(out, batches):
    return cli.main(["train", "--resume", "--out", str(out), "--batches", str(batches)])


def error_lines(capsys):
    return capsys.readouterr().err.strip().splitlines()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run of 3 batches, a checkpoint after each (the newest and the two before it kept)."""
    out = tmp_path_factory.mktemp("run")
    assert train(out, "--batches", "3", "--checkpoint-every", "1") == 0
    return out


def copy_run(trained, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for path in trained.iterdir():
        if path.is_file() and path.name != ".lock":
            (out / path.name).write_bytes(path.read_bytes())
    return out


def batch_of(path) -> int:
    _, raw = checkpoint.read_meta(path)
    return checkpoint.stored_count(raw["step"])


def test_a_run_keeps_its_two_earlier_checkpoints(trained):
    kept = checkpoint.kept(trained / "checkpoint.msgpack")
    assert [p.name for p in kept] == ["checkpoint.msgpack", "checkpoint.1.msgpack", "checkpoint.2.msgpack"]
    assert [batch_of(p) for p in kept] == [3, 2, 1]


@pytest.mark.parametrize("damage", ["bytes overwritten in the middle", "cut short"])
def test_a_damaged_checkpoint_is_refused_naming_the_newest_intact_one(trained, tmp_path, capsys, damage):
    out = copy_run(trained, tmp_path)
    path = out / "checkpoint.msgpack"
    data = bytearray(path.read_bytes())
    if damage == "cut short":
        data = data[: len(data) - 100]
    else:
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(255 - b for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))
    metrics_before = (out / "metrics.jsonl").read_text()

    assert resume(out, 5) == 2
    (line,) = error_lines(capsys)
    assert "damaged" in line and f"{out / 'checkpoint.1.msgpack'} (batch 2)" in line
    assert (out / "metrics.jsonl").read_text() == metrics_before  # nothing trained on, nothing dropped
    # every command that reads it refuses it the same way
    assert cli.main(["eval", "accuracy", str(out)]) == 2
    (line,) = error_lines(capsys)
    assert "damaged" in line

    # following the line: the intact one copied over the damaged one, the run goes on from batch 2
    path.write_bytes((out / "checkpoint.1.msgpack").read_bytes())
    assert resume(out, 3) == 0
    assert batch_of(path) == 3


def test_every_kept_checkpoint_damaged_is_said(trained, tmp_path):
    out = copy_run(trained, tmp_path)
    for path in checkpoint.kept(out / "checkpoint.msgpack"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    with pytest.raises(checkpoint.CheckpointError, match="no earlier checkpoint kept beside it is intact"):
        checkpoint.read_meta(out / "checkpoint.msgpack")


def test_a_checkpoint_written_before_checksums_still_loads(trained, tmp_path):
    """A file without the footer (as every checkpoint was before) reads as it did."""
    data = (trained / "checkpoint.msgpack").read_bytes()
    assert data[-checkpoint.FOOTER_BYTES :].startswith(checkpoint.CHECKSUM_TAG)
    old = tmp_path / "old.msgpack"
    old.write_bytes(data[: -checkpoint.FOOTER_BYTES])
    assert checkpoint.read_meta(old)[0] == checkpoint.read_meta(trained / "checkpoint.msgpack")[0]


def test_a_non_finite_batch_stops_the_run_and_leaves_its_checkpoint_untouched(trained, tmp_path, capsys):
    out = copy_run(trained, tmp_path)
    path = out / "checkpoint.msgpack"
    meta, _ = checkpoint.read_meta(path)
    config = TrainConfig.from_dict(meta["config"])
    template = make_trainer(config).init(0)
    state, _ = checkpoint.load(path, template, expected_model=config.model)
    # a finite state whose next step is not: Adam's second moments negative (sqrt of a negative)
    negative = jax.tree.map(lambda x: -np.abs(x) - 1.0, state.opt_state[0].nu)
    state = state.replace(opt_state=(state.opt_state[0]._replace(nu=negative), *state.opt_state[1:]))
    assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves((state.params, state.opt_state)))
    checkpoint.save(path, state, meta["config"], meta["hparams"], meta["extra"])
    saved = path.read_bytes()
    rows_before = (out / "metrics.jsonl").read_text()

    assert resume(out, 5) == 1
    (line,) = [line for line in error_lines(capsys) if "error" in line]
    assert line.startswith("czjax: error: batch 4 gave a non-finite loss, gradient or parameter")
    assert f"its last checkpoint ({path}, batch 3) untouched" in line
    assert path.read_bytes() == saved
    assert (out / "metrics.jsonl").read_text() == rows_before  # the non-finite chunk's row is not written


def test_weights_holding_a_nan_stop_the_first_batch_and_leave_nothing_behind(tmp_path):
    preset = presets.get_preset("default")
    config = preset.config.override({"games_per_batch": 4, "batches_per_chunk": 1, "eval_games": 2})
    params = make_trainer(config).init(0).params
    leaves, treedef = jax.tree.flatten(params)
    leaves[0] = np.asarray(leaves[0]).copy()
    leaves[0].flat[0] = np.nan
    weights = tmp_path / "weights.msgpack"
    checkpoint.save_weights(weights, config.model, jax.tree.unflatten(treedef, leaves))
    spec = RunSpec(config, HParams.create(**preset.hparams), tmp_path / "run", batches=2, init_from=str(weights))
    with pytest.raises(loop.NonFiniteTraining, match=r"^batch 1 gave a non-finite .* nothing saved$"):
        loop.train(spec)
    run = tmp_path / "run"
    assert not run.exists() or [p.name for p in run.iterdir() if p.name != ".lock"] == []


def test_a_scan_names_the_configuration_that_went_non_finite(tmp_path, capsys):
    out = tmp_path / "scan"
    code = cli.main(["scan", *SMALL, "--batches", "4", "--grid", "learning_rate=0.001,1e38", "--out", str(out)])
    assert code == 1
    (line,) = [line for line in error_lines(capsys) if "error" in line]
    assert re.search(r"batch \d of configuration 1 gave a non-finite loss", line)
    rows = (
        [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
        if (out / "metrics.jsonl").exists()
        else []
    )
    assert all(np.isfinite(r["loss"]) for r in rows)
