"""`czjax play`, `analyze` and `openings`, through their input and output.

The opponent in the scripted games is the built-in ``random`` player at temperature 0: its
most likely column is its lowest legal one (all its probabilities tie), so its moves are known.
"""

import io
import math
import re

import pytest

from czjax import cli
from czjax.evaluate import interactive
from czjax.players.agent import Agent, policy, searched_move, visit_shares
from czjax.players.loading import DEFAULT_OPPONENT, load_agent

# X (the human) fills column 1 with the model, then stacks column 4 while the model, its column
# 1 full, plays column 2: X completes four in column 4 on move 13.
SCRIPT = ["abc", "9", "", "0", "1", "1", "1", "1", "4", "4", "4", "4"]


def run_cli_play(monkeypatch, capsys, lines, *extra, temperature=("--temperature", "0")):
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(line + "\n" for line in lines)))
    assert cli.main(["play", "random", *temperature, *extra]) == 0
    return capsys.readouterr().out


def test_play_a_whole_game_with_illegal_input(monkeypatch, capsys):
    out = run_cli_play(monkeypatch, capsys, SCRIPT)
    assert "'abc' is not a column" in out
    assert "there is no column 9" in out and "there is no column 0" in out
    assert "'' is not a column" in out
    assert "column 1 is full" in out  # the 4th "1": the column holds X O X O X O
    assert "game over: you win after 13 moves; moves 1111114242424" in out
    assert out.count("random plays") == 6
    assert "1: --   2:0.17" in out  # column 1 full: uniform over the 6 legal columns


def test_play_samples_a_built_in_player_by_default_and_says_so(monkeypatch, capsys):
    replies = set()
    for seed in range(6):
        out = run_cli_play(monkeypatch, capsys, ["4", "q"], "--seed", str(seed), temperature=())
        assert "temperature 1 (sampled from its move probabilities" in out
        replies.add(out.split("random plays ")[1][0])
    assert len(replies) > 1  # all six replies in one column: probability 7 * (1/7)**6 < 1e-4
    out = run_cli_play(monkeypatch, capsys, ["q"])
    assert "temperature 0 (its most likely column" in out


def test_play_checks_the_result_and_the_moves():
    transcript = []
    answers = iter(SCRIPT)
    result = interactive.play(load_agent("random"), read=lambda prompt: next(answers), write=transcript.append)
    assert result == {"moves": "1111114242424", "result": "human", "human_first": True}
    # the last board shows X's four in column 4 above the model's stones
    final_board = [line for line in "\n".join(transcript).splitlines() if line.startswith("|")][-6:]
    assert [row[2 + 2 * 3] for row in final_board] == [".", ".", "X", "X", "X", "X"]


def test_play_quits_and_survives_the_end_of_input(monkeypatch, capsys):
    out = run_cli_play(monkeypatch, capsys, ["4", "q"])
    assert "game over: abandoned after 2 moves; moves 41" in out
    out = run_cli_play(monkeypatch, capsys, ["4"])  # then end of input
    assert "input ended" in out and "abandoned after 2 moves" in out


def test_the_model_can_move_first(monkeypatch, capsys):
    out = run_cli_play(monkeypatch, capsys, ["q"], "--first", "model")
    assert "You play O (second)" in out and "random plays 1" in out


def test_analyze_reports_probability_entropy_and_value(model_checkpoints):
    report = interactive.analyze(load_agent("random"), "111111")
    assert [r["column"] for r in report["plies"]] == [1] * 6 and report["result"] == "unfinished"
    assert all(
        r["prob"] == pytest.approx(1 / 7) and r["entropy"] == pytest.approx(math.log(7)) for r in report["plies"]
    )
    assert all(r["value"] is None for r in report["plies"])
    report = interactive.analyze(load_agent("random"), "1111112")  # column 1 now full
    assert report["plies"][-1]["prob"] == pytest.approx(1 / 6) and report["plies"][-1]["entropy"] == pytest.approx(
        math.log(6)
    )
    # O ignores X's threat in column 1 on move 6, and X wins there on move 7
    report = interactive.analyze(load_agent("random-punisher"), "1212121")
    assert report["result"] == "X (first) wins"
    assert report["plies"][5]["prob"] == 0.0 and (report["plies"][5]["best"], report["plies"][5]["best_prob"]) == (
        1,
        1.0,
    )
    assert report["plies"][6]["prob"] == 1.0 and report["plies"][6]["entropy"] == 0.0
    with_value = interactive.analyze(load_agent(str(model_checkpoints["cnn-mk4-value"])), seed=1)
    assert with_value["result"] != "unfinished" and all(-1 <= r["value"] <= 1 for r in with_value["plies"])
    assert with_value == interactive.analyze(load_agent(str(model_checkpoints["cnn-mk4-value"])), seed=1)


def test_analyze_rejects_illegal_games(capsys):
    assert cli.main(["analyze", "random", "--moves", "1111111"]) == 2
    assert "move 7: column 1 is full" in capsys.readouterr().err
    assert cli.main(["analyze", "random", "--moves", "4x"]) == 2
    assert "not a column 1-7" in capsys.readouterr().err


def test_openings_count_every_game():
    greedy = interactive.openings(load_agent("random"), games=64, depth=4, temperature=0.0)
    assert greedy["openings"] == [{"moves": "1111", "count": 64, "share": 1.0}]
    sampled = interactive.openings(load_agent("random"), games=700, depth=1, top=10)
    assert sampled["distinct"] == 7 and sum(r["count"] for r in sampled["openings"]) == 700
    assert all(50 <= r["count"] <= 150 for r in sampled["openings"])  # about 100 each
    counts = [r["count"] for r in sampled["openings"]]
    assert counts == sorted(counts, reverse=True)


def test_the_shipped_model_is_the_default_opponent():
    """`czjax play` and `czjax serve` with no PLAYER play a search over the newest model shipped in
    the package ("czjax", czjax@4: gumbel-az-gpu's 5 x 64 ResNet), which plays better than chance on
    the shipped solver-labelled positions (its sampled moves beat uniformly random ones by a
    margin); the older shipped models stay loadable by their names (czjax@3 and czjax@2: the CPU
    hours' MLP3s, czjax@1: example 3's Mk4)."""
    from czjax.evaluate.positions import accuracy, load_positions

    parser = cli.build_parser()
    for command in ("play", "serve"):
        assert str(parser.parse_args([command]).player) == DEFAULT_OPPONENT
    default = load_agent(DEFAULT_OPPONENT)
    assert default.search is not None and default.model_name == "resnet"
    assert load_agent("czjax@2").model_name == load_agent("czjax@3").model_name == "mlp3"
    assert load_agent("czjax@1").model_name == "cnn-mk4-value"
    positions = load_positions()
    shipped, chance = (accuracy(load_agent(name), positions) for name in ("czjax", "random"))
    assert shipped["sampled_optimal"] > chance["sampled_optimal"] + 0.1
    assert shipped["sampled_keeps_outcome_not_lost"] > chance["sampled_keeps_outcome_not_lost"] + 0.05


def test_play_shows_a_search_s_visit_shares(monkeypatch, capsys, model_checkpoints):
    """Not its one-hot move probabilities: how the 16 simulations spread over the columns."""
    monkeypatch.setattr("sys.stdin", io.StringIO("q\n"))
    spec = f"gumbel:sims=16:{model_checkpoints['cnn-mk4-value']}"
    assert cli.main(["play", spec, "--first", "model", "--temperature", "0"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"{spec} plays "))
    move = int(line.split(" plays ")[1][0])
    assert "(visit shares " in line
    listed = re.findall(r"(\d):\s*([\d.]+|--)", line.split("(visit shares ")[1])
    assert len(listed) == 7 and "--" not in dict(listed).values()  # the empty board: every column legal
    shares = {int(c): float(s) for c, s in listed}
    assert (
        abs(sum(shares.values()) - 1) < 7 * 0.005 and sum(s > 0 for s in shares.values()) >= 2
    )  # printed to 2 decimals
    assert shares[move] == max(shares.values())


def counting(spec: str, checkpoint) -> tuple[Agent, list]:
    """The search agent ``SEARCH:OPTIONS`` over ``checkpoint``'s network, whose network counts
    its evaluations (one debug callback per batch evaluated), and the list they are counted in."""
    import jax

    from czjax import search
    from czjax.players.searched import search_player

    base = load_agent(str(checkpoint))
    calls: list = []

    def network(params, boards, key):
        jax.debug.callback(lambda: calls.append(1))
        return base.player(params, boards, key)

    name, _, options = spec.partition(":")
    settings = search.make_search(name, options)
    player = search_player(settings, network)
    return base._replace(name=spec, player=player, search=settings, network=network), calls


@pytest.mark.parametrize("spec", ["gumbel:sims=8", "mcts:sims=8"])
def test_a_searched_move_costs_one_search_and_says_what_two_did(spec, model_checkpoints):
    """A search player's move, value and visit shares come from one search (its
    network evaluated sims + 1 times per position, where policy() and visit_shares() searched
    twice), the same numbers; `czjax play` searches once per model move; and a PUCT search asked
    to reuse its tree (interactive.SearchMemory) continues from it after the model's move and the
    reply."""
    import numpy as np

    from czjax import game

    agent, calls = counting(spec, model_checkpoints["mlp"])
    boards = np.stack([game.from_moves(m) for m in ("", "4453", "112233", "2233")])
    report = searched_move(agent, boards)
    assert len(calls) == 9
    probs, value, greedy = policy(agent, boards)
    shares = visit_shares(agent, boards)
    assert len(calls) == 9 + 2 * 9  # the two calls of before: a search each
    for got, want in zip(report[:4], (probs, value, greedy, shares)):
        np.testing.assert_array_equal(got, want)

    calls.clear()
    replies = iter(["4", "q"])
    out: list[str] = []
    result = interactive.play(agent, first="model", read=lambda _: next(replies), write=out.append, reuse=True)
    assert result["result"] == "abandoned" and sum(line.startswith(f"{spec} plays") for line in out) == 2
    assert len(calls) == 2 * 9  # two model moves, one search each (the second from the first's tree, for PUCT)

    memory = interactive.SearchMemory(agent, reuse=True)
    first = memory.searched([])
    col = int(first.greedy[0])
    if spec.startswith("gumbel"):  # sequential halving starts from zero visits: no tree kept
        assert memory.keep == 0 and first.tree is None
        return
    tree = first.tree
    child = int(tree.children_index[0, 0, col])
    reply = int(
        np.argmax(np.where(tree.children_index[0, child] >= 0, tree.node_visits[0, tree.children_index[0, child]], -1))
    )
    kept = int(tree.node_visits[0, tree.children_index[0, child, reply]])
    assert kept >= 1
    second = memory.searched([col, reply])
    assert int(second.tree.node_visits[0, 0]) == kept + 8  # the subtree's visits and this search's
    fresh = interactive.SearchMemory(agent, reuse=False).searched([col, reply])
    assert fresh.tree is None and int(np.asarray(fresh.shares).sum().round()) == 1
    assert memory.searched([col, reply, 0, 0, 0]).tree is not None  # 3 plies on: searched afresh
    assert int(memory.tree.node_visits[0, 0]) == 1 + 8


def test_play_and_serve_take_reuse_from_the_command_line(monkeypatch):
    """`czjax play --reuse` hands the game a PUCT search that keeps its tree (the path the test
    above follows through interactive.play); without the flag, the default, no reuse."""
    seen = []
    monkeypatch.setattr(interactive, "play", lambda agent, **options: seen.append(options["reuse"]) or {})
    assert cli.main(["play", "random", "--reuse"]) == 0
    assert cli.main(["play", "random"]) == 0
    assert seen == [True, interactive.REUSE_TREES] and interactive.REUSE_TREES is False
    assert cli.build_parser().parse_args(["serve", "--reuse"]).reuse
