"""czjax bench train's roof and network FLOP/s: the accounting, not the speed."""

import contextlib
import io
import json
import math

import pytest

from czjax import cli
from czjax.bench import harness

# SimpleMLP 42-128-64-7: one multiply and one add per weight of each Dense layer (biases and
# ReLUs are not matrix products), written out from the layer sizes
MLP_FORWARD_FLOPS = 2 * (42 * 128 + 128 * 64 + 64 * 7)
GAMES = 8


def test_the_roof_is_a_positive_rate_of_a_small_product():
    roof = harness.matmul_roof(64, runs=2)
    assert math.isfinite(roof) and roof > 0
    measured = harness.measure_roof(64, "highest")
    assert measured["roof_size"] == 64 and measured["roof_dtype"] == "float32"
    assert measured["roof_flops_per_s"] > 0


def test_network_flops_are_a_forward_per_position_played_and_three_per_position_trained_on():
    # 100 positions played, 50 of them the learner's: 100 forward passes, then 50 forward and 50
    # backward passes of twice the cost
    assert harness.network_flops(1000.0, 100.0, 50.0) == 1000.0 * (100 + 50 + 2 * 50)


@pytest.fixture(scope="module")
def tiny_run():
    """``(JSON document, table)`` of one tiny benchmark run, compiled once for the tests below."""
    argv = ["bench", "train", "--model", "mlp", "--games-per-batch", str(GAMES), "--runs", "1", "--steps", "1"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert cli.main([*argv, "--no-peer", "--roof-size", "128", "--json"]) == 0
    return json.loads(out.getvalue()), err.getvalue()


def test_a_rows_network_flops_are_a_hand_count_of_its_games(tiny_run):
    document, _ = tiny_run
    (row,) = document["rows"]
    played, learner = row["positions_played_per_iteration"], row["learner_positions_per_iteration"]
    # every game lasts 7 to 42 plies; the learner (player A) moves first in half the games, so it
    # played ceil(L / 2) positions of those and floor(L / 2) of the others: twice its positions
    # are within half the games of all positions played
    assert 7 * GAMES <= played <= 42 * GAMES
    assert abs(2 * learner - played) <= GAMES / 2
    assert row["forward_flops_per_board"] == MLP_FORWARD_FLOPS
    expected = MLP_FORWARD_FLOPS * played + 3 * MLP_FORWARD_FLOPS * learner
    assert row["network_flops_per_iteration"] == pytest.approx(expected)
    assert row["network_flops_per_s"] == pytest.approx(expected / row["iteration_s"])


def test_the_roof_is_measured_once_and_each_row_is_a_fraction_of_it(tiny_run):
    document, table = tiny_run
    (row,) = document["rows"]
    assert document["roof_size"] == 128 and document["roof_flops_per_s"] > 0
    assert row["roof_flops_per_s"] == document["roof_flops_per_s"]
    assert row["roof_fraction"] == pytest.approx(row["network_flops_per_s"] / document["roof_flops_per_s"])
    assert "roof: a 128x128 float32 matrix product" in table
    assert "net GFLOP/s" in table and "of roof" in table
    assert f"{row['roof_fraction']:.1%}" in table.splitlines()[-1]
