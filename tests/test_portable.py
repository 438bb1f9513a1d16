"""A run's portable checkpoint (the state without its replay buffer's rows): small, and a run
stopped, moved without its checkpoints and resumed from it continues the schedule of a run straight
through (batches, games, learning rate, promotions, keys) with no finished batch lost or repeated,
its replay buffer rebuilt from games that count as nothing."""

import json

import jax
import numpy as np
import pytest

from czjax.jobs import folders, loop
from czjax.learn.replay import ReplaySettings
from czjax.learn.settings import HParams, PromotionSettings, TrainConfig
from czjax.learn.trainer import make_trainer, portable
from czjax.util import checkpoint

# The strength recipe's shape, tiny: search-based training from a replay buffer that fills and
# wraps within a few batches, a learning rate decaying over the run, and self-play against a frozen
# copy promoted at every check (a threshold below any score), so the promotions follow the batches.
CONFIG = TrainConfig(
    model="mlp3",
    games_per_batch=8,
    algorithm="alphazero",
    search="gumbel:sims=4,considered=4,move=policy,rescale=0",
    opponent="self",
    promotion=PromotionSettings(every_games=16, window_games=16, threshold=-1.0),
    replay=ReplaySettings(capacity=256, batch=32, steps=2),
    lr_decay_games=64,
    eval_games=2,
    batches_per_chunk=2,
)
HP = HParams.create(learning_rate=1e-3, value_weight=1.0, discount=1.0)
BATCHES = 8


def run(out, **kw):
    return loop.run_training(CONFIG, HP, out, **{"seed": 5, "batches": BATCHES, "log": lambda m: None, **kw})


def saved_state(path, template=None):
    template = make_trainer(CONFIG).init(0) if template is None else template
    state, _ = checkpoint.load(path, template, CONFIG.model)
    return state


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The run straight through, a checkpoint after every chunk."""
    out = tmp_path_factory.mktemp("straight") / "run"
    run(out, checkpoint_every=1)
    return out


def adam_steps(state) -> int:
    return int(state.opt_state[0].count)


def test_a_portable_checkpoint_is_the_state_without_the_replay_rows(tmp_path):
    summary = run(tmp_path / "run", portable=True, checkpoint_every=1, batches=2)
    full_path, small_path = tmp_path / "run" / loop.CHECKPOINT, tmp_path / "run" / folders.PORTABLE
    full = saved_state(full_path)
    small = saved_state(small_path, portable(make_trainer(CONFIG).init(0)))
    assert summary["batches"] == 2 and int(full.replay.filled) > 0
    assert small.replay.boards.shape[0] == 0 and int(small.replay.filled) == int(full.replay.filled)
    assert int(small.replay.cursor) == int(full.replay.cursor)
    for field in ("params", "opt_state", "opponent_params", "step", "games", "window_wins", "window_games"):
        assert loop.params_equal(getattr(small, field), getattr(full, field)), field
    np.testing.assert_array_equal(jax.random.key_data(small.key), jax.random.key_data(full.key))
    # the buffer's 256 rows of 86 bytes are most of the full checkpoint
    assert small_path.stat().st_size < full_path.stat().st_size - 200 * 86


def test_a_run_moved_without_its_checkpoints_continues_the_same_schedule(tmp_path, straight):
    """Stopped by its deadline after the first chunk, its folder moved without the checkpoints
    (portable.msgpack, metrics.jsonl, run.json), killed after logging a row its portable
    checkpoint does not have, and resumed: the rebuild fills the buffer to the rows it held without
    counting a game, and the rows and final counters are the straight run's."""
    out = tmp_path / "run"
    first = run(out, portable=True, stop_at=0.0)
    assert first["interrupted"] == "time limit" and first["batches"] == 2 and first["replay_rebuilt"] is None
    held = int(saved_state(out / loop.CHECKPOINT).replay.filled)
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in (folders.PORTABLE, folders.METRICS, folders.RUN):
        (moved / name).write_bytes((out / name).read_bytes())
    straight_rows = loop.read_metrics(straight / loop.METRICS)
    with (moved / folders.METRICS).open("a") as f:  # a row logged after the last save
        f.write(json.dumps(straight_rows[1]) + "\n")

    summary = run(moved, resume=True, portable=True)

    rebuilt = summary["replay_rebuilt"]
    assert rebuilt["rows"] == held and rebuilt["games"] == rebuilt["batches"] * CONFIG.games_per_batch > 0
    rows = loop.read_metrics(moved / loop.METRICS)
    assert [r["batches"] for r in rows] == list(range(2, BATCHES + 1, 2))  # none lost, none repeated
    for key in ("batches", "games", "promotions"):
        assert [r[key] for r in rows] == [r[key] for r in straight_rows], key
    assert loop.deterministic(rows[0]) == loop.deterministic(straight_rows[0])  # before the stop: the same run
    resumed, reference = saved_state(moved / loop.CHECKPOINT), saved_state(straight / loop.CHECKPOINT)
    assert int(resumed.games) == BATCHES * CONFIG.games_per_batch == int(reference.games)
    assert int(resumed.promotions) == BATCHES * CONFIG.games_per_batch // 16 == int(reference.promotions)
    # the learning rate follows the games played (CONFIG.lr_decay_games), and Adam's bias
    # correction its steps: both as straight through
    assert adam_steps(resumed) == BATCHES * CONFIG.replay.steps == adam_steps(reference)
    assert loop.params_equal(resumed.window_games, reference.window_games)
    # the rebuild drew no key from the run's stream: training drew the keys it would have
    np.testing.assert_array_equal(jax.random.key_data(resumed.key), jax.random.key_data(reference.key))
    assert int(saved_state(moved / folders.PORTABLE, portable(resumed)).step) == BATCHES  # kept current


def test_the_rebuilt_buffer_holds_positions_of_real_games(straight):
    """A rebuild from a portable state: exactly the rows it held, each a position that can arise
    (pieces of the side to move equal to the other side's or one fewer), with legal moves and a
    policy target on them; nothing else in the state moves."""
    trainer = make_trainer(CONFIG)
    small = portable(saved_state(straight / loop.CHECKPOINT))
    rebuilt, record = loop.rebuild_replay(trainer, small, HP, lambda m: None)
    buffer = rebuilt.replay
    rows = int(small.replay.filled)
    assert int(buffer.filled) == rows == record["rows"] and int(np.asarray(buffer.inputs.valid).sum()) == rows
    boards = np.asarray(buffer.boards)[:rows].astype(int)
    own, other = (boards == 1).sum((1, 2)), (boards == -1).sum((1, 2))
    assert np.all((other == own) | (other == own + 1))
    legal = np.asarray(buffer.inputs.legal)[:rows]
    np.testing.assert_array_equal(legal, boards[:, 0, :] == 0)
    targets = np.asarray(buffer.inputs.policy_targets)[:rows]
    np.testing.assert_allclose(targets.sum(-1), 1.0, atol=1e-5)
    assert np.all(targets[~legal] == 0)
    for field in ("params", "opt_state", "opponent_params", "step", "games", "window_wins", "promotions"):
        assert loop.params_equal(getattr(rebuilt, field), getattr(small, field)), field
    np.testing.assert_array_equal(jax.random.key_data(rebuilt.key), jax.random.key_data(small.key))
