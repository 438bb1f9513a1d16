"""czjax bench train, search and rollout: the roofs and the network FLOP/s, the accounting, not the speed."""

import contextlib
import io
import json
import math

import jax
import pytest

from czjax import cli, row_skipping, search
from czjax.bench import roofline, search_bench
from czjax.players.searched import search_player

# SimpleMLP 42-128-64-7: one multiply and one add per weight of each Dense layer (biases and
# ReLUs are not matrix products), written out from the layer sizes
MLP_FORWARD_FLOPS = 2 * (42 * 128 + 128 * 64 + 64 * 7)
# the search benchmark's policy-value MLP, 84-128-64-8, counted the same way
SEARCH_NETWORK_FLOPS = 2 * (84 * 128 + 128 * 64 + 64 * 8)
GAMES = 8
# the keys every row of the three benchmarks carries (docs/benchmarks.md's tables)
ROW_KEYS = {
    "precision",
    "step",
    "step_s",
    "forward_flops_per_board",
    "network_flops_per_s",
    "roof",
    "roof_flops_per_s",
    "roof_fraction",
}


def test_the_roof_is_a_positive_rate_of_a_small_product():
    roof = roofline.matmul_roof(64, runs=2)
    assert math.isfinite(roof) and roof > 0


def test_the_roof_table_holds_each_arithmetic_the_backend_offers(monkeypatch):
    """A CPU offers float32 (bfloat16 only for a run at that precision); an NVIDIA GPU float32,
    TF32 (its default for float32 products) and bfloat16, whatever the run's precision."""
    cpu = roofline.measure_roofs(32, ("default",))
    assert cpu["roof_size"] == 32 and set(cpu["roofs"]) == {"float32"}
    assert cpu["roofs"]["float32"]["dtype"] == "float32" and cpu["roofs"]["float32"]["flops_per_s"] > 0
    assert set(roofline.measure_roofs(32, ("mixed",))["roofs"]) == {"float32", "bfloat16"}
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # the table, timed on this device
    gpu = roofline.measure_roofs(32, ("default",))
    assert set(gpu["roofs"]) == {"float32", "tf32", "bfloat16"}
    assert {name: (r["dtype"], r["precision"]) for name, r in gpu["roofs"].items()} == {
        "float32": ("float32", "highest"),
        "tf32": ("float32", "default"),
        "bfloat16": ("bfloat16", "default"),
    }
    # the roof a run is held to: on a GPU float32 at the default precision runs as TF32
    assert [roofline.roof_of(p, "gpu") for p in ("default", "highest", "bf16", "mixed")] == [
        "tf32",
        "float32",
        "bfloat16",
        "bfloat16",
    ]
    assert [roofline.roof_of(p, "cpu") for p in ("default", "highest", "mixed")] == ["float32", "float32", "bfloat16"]


def test_network_flops_are_a_forward_per_position_played_and_three_per_position_trained_on():
    # 100 positions played, 50 of them the learner's: 100 forward passes, then 50 forward and 50
    # backward passes of twice the cost
    assert roofline.network_flops(1000.0, 100.0, 50.0) == 1000.0 * (100 + 50 + 2 * 50)
    # moves chosen by a search of 4 simulations: its root and 4 evaluations a move played
    assert roofline.network_flops(1000.0, 100.0, 50.0, 5000.0) == 5000.0 * 100 + 1000.0 * 3 * 50


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
    assert row["forward_flops_per_board"] == MLP_FORWARD_FLOPS == row["acting_flops_per_board"]
    assert ROW_KEYS <= set(row) and row["step"] == "iteration" and row["step_s"] == row["iteration_s"]
    expected = MLP_FORWARD_FLOPS * played + 3 * MLP_FORWARD_FLOPS * learner
    assert row["network_flops_per_iteration"] == pytest.approx(expected)
    assert row["network_flops_per_s"] == pytest.approx(expected / row["iteration_s"])


def test_the_roof_is_measured_once_and_each_row_is_a_fraction_of_it(tiny_run):
    document, table = tiny_run
    (row,) = document["rows"]
    assert document["roof_size"] == 128 and document["roofs"]["float32"]["flops_per_s"] > 0
    assert row["roof"] == "float32" and row["roof_flops_per_s"] == document["roofs"]["float32"]["flops_per_s"]
    assert 0 < row["roof_fraction"] == pytest.approx(row["network_flops_per_s"] / row["roof_flops_per_s"])
    assert "roofs: a 128x128 matrix product, GFLOP/s: float32" in table
    assert "net GFLOP/s" in table and "of roof" in table
    assert f"{row['roof_fraction']:.1%}" in table.splitlines()[-1]


def bench_json(*argv: str) -> dict:
    """The JSON document of ``czjax bench ARGV --json`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert cli.main(["bench", *argv, "--no-peer", "--runs", "1", "--roof-size", "64", "--json"]) == 0
    return json.loads(out.getvalue())


def test_a_search_rows_network_flops_are_its_roots_and_simulations():
    batch, sims = 4, 3
    document = bench_json("search", "--algo", "mcts", "--batch", str(batch), "--sims", str(sims))
    (row,) = document["rows"]
    assert ROW_KEYS <= set(row) and row["step"] == "simulation"
    assert row["forward_flops_per_board"] == SEARCH_NETWORK_FLOPS
    # a root evaluation and one per simulation, for every position searched
    assert row["network_flops_per_call"] == SEARCH_NETWORK_FLOPS * batch * (sims + 1)
    # the same count read from the whole traced search over one position
    player = search_player(search.PUCT(sims=sims), search_bench.search_network_player)
    assert row_skipping.flops_per_board(player, search_bench.search_network_params()) == SEARCH_NETWORK_FLOPS * (
        sims + 1
    )
    assert row["network_flops_per_s"] == pytest.approx(row["network_flops_per_call"] / row["median_s"])
    assert row["step_s"] == pytest.approx(row["median_s"] / sims)
    assert row["roof_flops_per_s"] == document["roofs"][row["roof"]]["flops_per_s"]
    assert 0 < row["roof_fraction"] == pytest.approx(row["network_flops_per_s"] / row["roof_flops_per_s"])


def test_rollout_rows_count_a_networks_moves_and_a_builtin_players_none():
    document = bench_json("rollout", "--batch", str(GAMES), "--player", "random", "untrained:mlp")
    builtin, network = document["rows"]
    for row in (builtin, network):
        assert ROW_KEYS <= set(row) and row["step"] == "ply"
        assert 7 <= row["plies"] <= 42 and row["step_s"] == pytest.approx(row["median_s"] / row["plies"])
        assert row["mean_length"] <= row["plies"]  # the loop runs until the longest game has ended
    assert builtin["player"] == "random" and builtin["network_flops_per_s"] == 0 and builtin["roof_fraction"] is None
    assert network["player"] == "untrained:mlp" and network["forward_flops_per_board"] == MLP_FORWARD_FLOPS
    moves = network["mean_length"] * GAMES  # each move one board its mover evaluated
    assert network["network_flops_per_call"] == pytest.approx(MLP_FORWARD_FLOPS * moves)
    assert 0 < network["roof_fraction"] == pytest.approx(network["network_flops_per_s"] / network["roof_flops_per_s"])
