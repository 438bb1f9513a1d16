"""`czjax bench kernels` compiling for a TPU v5e without one (libtpu): the rollout, the Gumbel
search and example 3's and the strength recipe's training chunks, every loop and branch on the
chip. A file of its own so that the suite's workers share the compiles with test_kernels.py's
for an H100 (each takes a worker's file whole)."""

from __future__ import annotations

import pytest

from tests.test_kernels import compiled


def test_a_rollout_and_a_search_compiled_for_a_tpu_run_their_loops_on_the_chip():
    rows = compiled("tpu", "rollout", "--batch", "1024", "--target", "tpu-v5e") + compiled(
        "tpu", "search", "--batch", "1024", "--target", "tpu-v5e"
    )
    for row in rows:
        assert row["host_waits"] == 0 and row["kernels"] > 0
        assert row["predicted_s"] > 0 and row["calibrated"] is False  # the compiler's estimates, said so
    # the loops' counts read from their tests, which a TPU's compiler does not annotate
    assert rows[0]["loops"][0]["trips"] == 21 and rows[1]["loops"][0]["trips"] == 32


@pytest.mark.parametrize(("preset", "games"), [("ex3-rwb", 50), ("gumbel-az-gpu", 2048)])
def test_example_3s_and_the_strength_recipes_chunks_compile_for_a_tpu(preset, games):
    """Both training chunks compile for a TPU v5e, every loop and branch on the chip, the chunk's
    iterations one loop whose count is read from its test."""
    (row,) = compiled("tpu", "train", "--preset", preset, "--target", "tpu-v5e")
    assert row["host_waits"] == 0 and row["kernels"] > 0 and row["flops"] > 0
    assert row["loops"][0]["trips"] == row["iterations"] and row["games"] == games * row["iterations"]
    assert row["predicted_s"] > 0 and row["calibrated"] is False
