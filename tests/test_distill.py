"""Distillation: the teacher's labels are its own policy targets and values, the student learns
them, the job writes a player and refuses to overwrite one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, search
from czjax.jobs import distill
from czjax.players import random_player
from czjax.players.loading import load_agent


def test_labels_are_the_teachers_policy_target_and_value():
    """A PUCT teacher without root noise is a function of the board: its labels equal its
    visit distribution and root value computed again, and are 0 on full columns."""
    teacher = load_agent("mcts:sims=8:random")
    boards = distill.teacher_positions(load_agent("random"), 6, seed=1)  # positions from a cheap player's games
    assert boards.shape[1:] == (6, 7) and len(boards) >= 6 * 7
    targets, values = distill.label(teacher, boards, batch_size=16)
    out = jax.jit(lambda b: search.PUCT(sims=8).run(random_player, None, b, jax.random.key(0)))(jnp.asarray(boards))
    np.testing.assert_allclose(targets, np.asarray(out.policy), atol=1e-6)
    np.testing.assert_allclose(values, np.asarray(out.value), atol=1e-6)
    assert (targets[~np.asarray(game.legal_mask(jnp.asarray(boards)))] == 0).all()
    # a teacher without a policy target or value: its softmax, NaN values
    t, v = distill.label(load_agent("random-punisher"), boards[:5])
    np.testing.assert_allclose(t.sum(1), 1.0, atol=1e-6)
    assert np.isnan(v).all()


def test_the_student_learns_and_the_job_writes_a_player(tmp_path):
    teacher = load_agent("random-punisher")
    report = distill.distill(
        teacher, "mlp", tmp_path, games=64, epochs=6, batch_size=64, learning_rate=3e-3, log=lambda m: None
    )
    assert report["losses"][-1] < report["losses"][0]
    student = load_agent(str(tmp_path))
    assert student.model_name == "mlp" and 0 <= report["held_out_agreement"] <= 1
    with pytest.raises(ValueError, match="--overwrite"):
        distill.distill(teacher, "mlp", tmp_path, games=64, log=lambda m: None)
