"""AlphaZero.jl's Pons protocol: its MCTS (``azjl``) and its minimax (``minimax:depth=N``) against
the plain-Python ports of its source in tests/reference_azjl.py, and the calibration of the
protocol player against AlphaZero.jl's own published figures."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, models
from czjax.evaluate import pons, protocol
from czjax.players import minimax
from czjax.players.loading import load_agent
from czjax.search.azjl import AlphaZeroJlMCTS
from czjax.util.specs import PlayerSpec
from tests import reference_azjl as R


@pytest.fixture(scope="module")
def pons_records():
    """Every 97th Pons position (62 positions from all six sets), with its solver scores."""
    sets = pons.load_pons_moves()
    records = []
    for name, data in sets.items():
        for moves, scores in zip(data["moves"], data["scores"]):
            records.append({"set": name, "moves": moves, "scores": [None if np.isnan(s) else s for s in scores]})
    return records[::97]


def boards_of(records) -> jax.Array:
    return jnp.asarray(np.stack([game.from_moves(r["moves"]) for r in records]))


def reference_board_to_czjax(board: R.Board) -> np.ndarray:
    """The reference's bitboard as a canonical czjax board (row 0 on top)."""
    out = np.zeros((game.ROWS, game.COLS), np.int8)
    for col in range(game.COLS):
        for row in range(game.ROWS):
            out[game.ROWS - 1 - row, col] = board.cell(col, row)
    return out


# ---------------------------------------------------------------------------------------------
# The MCTS


@pytest.fixture(scope="module")
def mlp():
    model = models.get_model("mlp")
    return models.model_player(model), models.init_params(model, jax.random.key(7))


def network_oracle(player, params):
    """The reference MCTS's oracle from a czjax network: its softmax over the legal columns and
    its value, as AlphaZero.jl's network oracle gives them."""
    net = jax.jit(lambda b: player(params, b[None], None))

    def oracle(board: R.Board):
        out = net(jnp.asarray(reference_board_to_czjax(board)))
        logits = np.asarray(out.logits[0], np.float64)[board.actions()]
        probs = np.exp(logits - logits.max())
        value = 0.0 if out.value is None else float(out.value[0])
        return list(probs / probs.sum()), value

    return oracle


@pytest.mark.parametrize("transpositions", [True, False])
def test_azjl_search_visits_equal_alphazero_jl_mcts_with_a_uniform_oracle(pons_records, transpositions):
    """Uniform prior, value 0 (AlphaZero.jl's RandomOracle, czjax's `random`): every position's
    root visits equal the reference's exactly, transpositions on and off."""
    records = pons_records[:24]
    search = AlphaZeroJlMCTS(sims=120, transpositions=transpositions)
    random = load_agent("random")
    out = jax.jit(lambda b: search.run(random.player, None, b, jax.random.key(0)))(boards_of(records))
    for i, r in enumerate(records):
        col, visits = R.mcts_move(R.Board.from_moves(r["moves"]), 120, 2.0, transpositions=transpositions)
        assert np.asarray(out.visits[i]).tolist() == visits, r["moves"]
        assert int(out.action[i]) == col


def test_azjl_search_visits_equal_alphazero_jl_mcts_with_a_network(pons_records, mlp):
    """A network's prior and value (an untrained SimpleMLP has neither uniform priors nor value
    0): the same visits as the reference fed the same network's outputs."""
    player, params = mlp
    records = pons_records[::3]
    search = AlphaZeroJlMCTS(sims=120)
    out = jax.jit(lambda b: search.run(player, params, b, jax.random.key(0)))(boards_of(records))
    oracle = network_oracle(player, params)
    for i, r in enumerate(records):
        col, visits = R.mcts_move(R.Board.from_moves(r["moves"]), 120, 2.0, oracle=oracle)
        assert np.asarray(out.visits[i]).tolist() == visits, r["moves"]
        assert int(out.action[i]) == col


def test_azjl_transpositions_share_nodes():
    """From the empty board, 1-2-3 and 3-2-1 reach one position: with transpositions some node
    is linked from two edges (more links than nodes below the root), without them every node
    has one parent; both make one node a simulation (none ends a game this early)."""
    from czjax.search.azjl import run_graph_search

    random = load_agent("random")
    boards = jnp.zeros((1, game.ROWS, game.COLS), jnp.int8)
    for transpositions, more_links in ((True, True), (False, False)):
        graph = run_graph_search(
            random.player, None, boards, jax.random.key(0), 600, 2.0, transpositions=transpositions
        )
        links = int((graph.children[0] >= 0).sum())
        assert int(graph.size[0]) == 600 and int(graph.visits[0, 0].sum()) == 599
        assert (links > 599) == more_links, links


def test_protocol_spec_wraps_networks_only():
    def wrapped(text: str) -> str:
        return str(protocol.protocol_spec("alphazero.jl", PlayerSpec.parse(text)))

    assert wrapped("runs/x") == "azjl:sims=600,c=2.0:runs/x"
    assert wrapped("czjax") == "azjl:sims=600,c=2.0:czjax"
    assert wrapped("gumbel:sims=64:czjax") == "gumbel:sims=64:czjax"
    assert wrapped("rollout:width=2:czjax") == "rollout:width=2:czjax"  # a search's earlier name is a search too
    assert wrapped("minimax:depth=5") == "minimax:depth=5"
    with pytest.raises(ValueError, match="unknown protocol"):
        protocol.protocol_spec("leela", PlayerSpec.parse("czjax"))
    with pytest.raises(ValueError, match="unknown protocol 'leela'; choose one of alphazero.jl"):
        protocol.protocol_agent("leela", "czjax")
    agent = protocol.protocol_agent("alphazero.jl", "random")  # the agent of the protocol's spec
    assert agent.name == "azjl:sims=600,c=2.0:random" and agent.search.sims == 600 and agent.search.c == 2.0


def test_the_models_table_says_what_a_network_costs_the_protocols_searches():
    """Each network's cost in the protocol's searches is its entry's: a convolutional network
    (Mk4, the ResNet) with XLA's convolution on a CPU and the stream's rounds of game-ending
    simulations before each call; an MLP as it is, with none. A protocol may say otherwise."""
    from czjax.search.azjl_stream import GAME_ENDS_PER_STEP

    rules = protocol.ALPHAZERO_JL
    for name, entry in models.MODELS.items():
        convolutional = isinstance(models.get_model(name), (models.ResNet, models.CNNMk4))
        cost = entry.search_cost
        assert rules.rounds(cost) == (GAME_ENDS_PER_STEP if convolutional else 0), name
        assert cost.cpu_conv == ("xla" if convolutional else "auto") and cost.cpu_conv in models.CONV_METHODS, name
        mine = dataclasses.replace(rules, game_end_rounds=8, conv="im2col")
        assert (mine.rounds(cost), mine.network_conv(cost)) == (8, "im2col")
    on_cpu = jax.default_backend() == "cpu"
    assert rules.network_conv(models.MODELS["resnet"].search_cost) == ("xla" if on_cpu else "auto")


# ---------------------------------------------------------------------------------------------
# Minimax


def test_heuristic_equals_alphazero_jl_heuristic(pons_records):
    """The heuristic in units of 0.001 equals the reference's exact sum, and AlphaZero.jl's
    float64 sum to within rounding."""
    boards = boards_of(pons_records)
    values = np.asarray(jax.jit(minimax.heuristic)(boards))
    packed = np.asarray(jax.jit(lambda b: minimax.packed_heuristic(game.pack(b)))(boards))
    np.testing.assert_array_equal(packed, values)  # the bitboard count, which the search uses
    for v, r in zip(values, pons_records):
        board = R.Board.from_moves(r["moves"])
        assert int(v) == R.heuristic(board, exact=True)
        assert math.isclose(v / 1000, R.heuristic(board), abs_tol=1e-9)


def test_lines_are_the_69_lines_of_four():
    """The same 69 lines as AlphaZero.jl's ALIGNMENTS (its cells are (column, row from the bottom))."""
    ours = {
        frozenset((cell % game.COLS, game.ROWS - 1 - cell // game.COLS) for cell in line)
        for line in minimax.alignments().tolist()
    }
    assert len(ours) == 69 and ours == {frozenset(al) for al in R.ALIGNMENTS}


@pytest.mark.parametrize("depth, every", [(1, 1), (3, 1), (4, 6)])
def test_minimax_values_and_moves_equal_alphazero_jl_minmax(pons_records, depth, every):
    """Every column's value (win +inf, a forced loss -inf) and the chosen move (the first of the
    tied best) equal the reference's, its heuristic counted exactly; ties=random's support is
    the reference policy's support (depth 4 on every 6th position: the reference is slow)."""
    pons_records = pons_records[::every]
    boards = boards_of(pons_records)
    first, values = jax.jit(lambda b: minimax.minimax_choice(b, depth, "first"))(boards)
    spread, _ = jax.jit(lambda b: minimax.minimax_choice(b, depth, "random"))(boards)
    for i, r in enumerate(pons_records):
        actions, pi, qs = R.minmax_think(R.Board.from_moves(r["moves"]), depth, exact=True)
        expect = {math.inf: minimax.WIN, -math.inf: -minimax.WIN}
        assert [int(values[i, a]) for a in actions] == [expect.get(q, q) for q in qs], r["moves"]
        assert int(jnp.argmax(first[i])) == actions[R.argmax_first(pi)]
        assert np.flatnonzero(np.asarray(spread[i])).tolist() == [a for a, p in zip(actions, pi) if p > 0]


def test_minimax_player_specs():
    agent = load_agent("minimax:depth=2,ties=random")
    boards = boards_of([{"moves": "4444"}, {"moves": "1122334"}])
    out = agent.player(None, boards, jax.random.key(0))
    # 4444: every move is scored by the heuristic; 1122334: column 4 (index 3) wins at once
    assert np.asarray(out.logits[1] == 0).tolist() == [False, False, False, True, False, False, False]
    with pytest.raises(ValueError, match="depth must be 1 to 8"):
        load_agent("minimax:depth=0")
    with pytest.raises(ValueError, match="ties must be one of"):
        load_agent("minimax:ties=best")
    assert load_agent("minimax").name == "minimax"


def test_minimax_finds_a_forced_win_and_sees_a_forced_loss():
    """After 445566 the first player wins at once in column 3 or 7 (depth 1 sees it). After 4455
    column 3 or 6 makes an open three on the bottom row, a win two moves later whatever the
    reply: depth 3 values them +inf, depth 1 only sees the heuristic."""
    board = boards_of([{"moves": "445566"}])  # first player to move: 3 or 7 wins at once
    _, values = minimax.minimax_choice(board, 1, "first")
    assert int(values[0, 2]) == minimax.WIN and int(values[0, 6]) == minimax.WIN
    board = boards_of([{"moves": "4455"}])  # 3 or 6 makes an open three: a win two moves later
    _, values3 = minimax.minimax_choice(board, 3, "first")
    assert int(values3[0, 2]) == minimax.WIN and int(values3[0, 5]) == minimax.WIN
    _, values1 = minimax.minimax_choice(board, 1, "first")
    assert int(values1[0].max()) < minimax.WIN


# ---------------------------------------------------------------------------------------------
# Calibration against AlphaZero.jl's own figures


def protocol_errors(spec: str, per_set: dict[str, int]) -> dict[str, float]:
    """Move error (%) of ``spec`` under AlphaZero.jl's protocol on the first positions of each set."""
    agent = protocol.protocol_agent("alphazero.jl", spec)
    sets = {name: {k: v[: per_set[name]] for k, v in data.items()} for name, data in pons.load_pons().items()}
    report = pons.pons(agent, sets, protocol="alphazero.jl")
    return {r["set"]: r["move_error"] for r in report["sets"]}


def test_mcts600_over_an_untrained_network_reads_like_alphazero_jl_iteration_0(optimised_programs):
    """AlphaZero.jl's iteration 0 is its untrained network under its benchmark MCTS. czjax's
    protocol player over an untrained network with a value head (MLP3, seed 0) stays within
    three binomial standard errors (plus 1 point for reading the plot) of it on every set:
    1,000 positions of the hardest set, where the protocol's details matter most (a uniform
    prior with value 0 reads 45% without transpositions, 41% with them, against ~35%: its exact
    ties all go to the lowest column), 100 of each other."""
    per_set = {name: 1000 if name == "Test_L1_R3" else 100 for name in pons.PONS_REFERENCE_ORDER}
    errors = protocol_errors("untrained:mlp3", per_set)
    for name, n in per_set.items():
        ref = pons.PONS_REFERENCE["azjl-iter0"][name]
        tolerance = 300 * math.sqrt(ref / 100 * (1 - ref / 100) / n) + 1.0
        assert abs(errors[name] - ref) <= tolerance, (name, errors[name], ref, tolerance)


# ---------------------------------------------------------------------------------------------
# Searches stopped when their move is decided (the protocol's fast path)


def final_move(visits, legal) -> int:
    """The most visited legal column, the lowest on ties (AlphaZero.jl's argmax(pi))."""
    return max((c for c in range(game.COLS) if legal[c]), key=lambda c: (visits[c], -c))


def every_way_to_add(visits, legal, remaining):
    """Every root visit count ``remaining`` more simulations can leave (each adds one visit to
    one legal column)."""
    columns = [c for c in range(game.COLS) if legal[c]]
    counts = [list(visits)]
    for _ in range(remaining):
        counts = [v[:c] + [v[c] + 1] + v[c + 1 :] for v in counts for c in columns]
    return counts


def test_decided_is_true_exactly_when_no_remaining_simulations_can_change_the_move():
    """``decided`` against enumeration: for random visit counts, legal masks and 0-3 simulations
    left, it says decided exactly when every way the remaining visits can fall keeps the move."""
    from czjax.search.azjl_stream import decided

    rng = np.random.default_rng(0)
    cases = []
    for _ in range(400):
        legal = rng.random(game.COLS) < 0.7
        legal[rng.integers(game.COLS)] = True
        visits = np.where(legal, rng.integers(0, 6, game.COLS), 0)
        cases.append((visits, legal, int(rng.integers(0, 4))))
    got = decided(
        jnp.asarray(np.stack([v for v, _, _ in cases])),
        jnp.asarray(np.stack([m for _, m, _ in cases])),
        jnp.asarray([r for _, _, r in cases]),
    )
    for (visits, legal, remaining), answer in zip(cases, np.asarray(got)):
        move = final_move(list(visits), legal)
        expected = all(final_move(v, legal) == move for v in every_way_to_add(list(visits), legal, remaining))
        assert bool(answer) == expected, (visits.tolist(), legal.tolist(), remaining)


@pytest.mark.parametrize("rounds", [0, 4])
def test_searches_stopped_when_decided_make_the_full_searches_moves(pons_records, mlp, monkeypatch, rounds):
    """62 positions through a pool of 8 graphs (each slot refilled many times, the pool halved
    twice in the tail), 40 simulations, with and without rounds of game-ending simulations before
    each network call: every move is the full search's; searches run to the end read its visit
    shares and value, and used one network evaluation per node of its graph (a simulation that
    ends the game uses none); some stop early, some skip evaluations."""
    from czjax.search import azjl_stream
    from czjax.search.azjl import graph_output, run_graph_search
    from czjax.search.azjl_stream import stream_search

    sizes = []
    shrink = azjl_stream.shrink
    monkeypatch.setattr(azjl_stream, "shrink", lambda s, slots: sizes.append(slots) or shrink(s, slots))
    monkeypatch.setattr(azjl_stream, "STEPS_PER_CALL", 2)  # the pool's size is checked between calls

    player, params = mlp
    boards = boards_of(pons_records)
    graph = jax.jit(lambda b: run_graph_search(player, params, b, jax.random.key(0), 40, 2.0))(boards)
    full = graph_output(graph)
    streamed = stream_search(
        AlphaZeroJlMCTS(sims=40),
        player,
        params,
        np.asarray(boards),
        jax.random.key(0),
        slots=8,
        min_slots=2,
        game_end_rounds=rounds,
    )
    np.testing.assert_array_equal(streamed.action, np.asarray(full.action))
    assert (streamed.sims_used >= 1).all() and (streamed.sims_used <= 40).all(), streamed.sims_used  # each ran
    assert (streamed.sims_used < 40).sum() >= 10, streamed.sims_used
    whole = streamed.sims_used == 40
    np.testing.assert_allclose(streamed.policy[whole], np.asarray(full.policy)[whole], atol=1e-6)
    np.testing.assert_allclose(streamed.value[whole], np.asarray(full.value)[whole], atol=1e-5)
    np.testing.assert_array_equal(streamed.evaluations[whole], np.asarray(graph.size)[whole])
    assert (streamed.evaluations <= streamed.sims_used).all()
    assert (streamed.evaluations < streamed.sims_used).sum() >= 10, streamed.evaluations
    assert sizes == [4, 2]


def test_an_idle_slot_keeps_its_graph_however_long_the_others_search(mlp):
    """A pool of 4 graphs with 1 position: the 3 slots with nothing to search keep their graphs
    (no node added, every link inside the graph) for 3x the simulations, while the busy one
    grows. Grown with the others, an idle graph outgrows its nodes, its links point past them,
    and a walk down it need not end (the full protocol over an untrained network hung so)."""
    from czjax.search import azjl_stream
    from czjax.search.base import CONNECT_FOUR

    player, params = mlp
    search = AlphaZeroJlMCTS(sims=8)
    roots = CONNECT_FOUR.encode(jnp.asarray(game.from_moves("4455")[None]))
    s = azjl_stream.start(roots, 4, search.sims)
    nodes = s.graph.value.shape[1]
    before = jax.tree.map(lambda x: np.asarray(x[1:]), s.graph)
    step = jax.jit(lambda s, key: azjl_stream.step(s, roots, search, player, params, key, CONNECT_FOUR))
    for i in range(3 * search.sims):
        s = step(s, jax.random.key(i))
        assert int(np.asarray(s.graph.size).max()) <= nodes and int(np.asarray(s.graph.children).max()) < nodes
        if i == 1:
            assert int(s.graph.size[0]) > 1  # the busy slot grows
    after = jax.tree.map(lambda x: np.asarray(x[1:]), s.graph)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    assert bool(s.finished) and int(s.sims_used[0]) >= 2


def test_simulations_that_end_the_game_need_no_network_call(mlp):
    """A pool of one graph on a position whose mover wins at once (three in a row on the bottom
    row): the simulations down the winning column end the game, so the search takes fewer steps
    (network calls) than simulations, chooses the win, and used one evaluation per node."""
    from czjax.search import azjl_stream
    from czjax.search.base import CONNECT_FOUR

    player, params = mlp
    search = AlphaZeroJlMCTS(sims=40)
    roots = CONNECT_FOUR.encode(jnp.asarray(game.from_moves("112233")[None]))
    s = azjl_stream.start(roots, 1, search.sims)
    step = jax.jit(lambda s, key: azjl_stream.step(s, roots, search, player, params, key, CONNECT_FOUR))
    steps = 0
    while not bool(s.finished):
        s, steps = step(s, jax.random.key(steps)), steps + 1
    assert int(s.action[0]) == 3  # the fourth column wins
    assert int(s.evaluations[0]) == int(s.graph.size[0])
    assert steps < int(s.sims_used[0]) // 2, (steps, int(s.sims_used[0]))


def test_the_protocols_cpu_network_makes_the_same_moves():
    """The protocol's searches on a CPU compute a ResNet's convolutions their own way (its
    entry's ``search_cost.cpu_conv``: XLA's convolution, compiled with the options for
    convolutions): over 6 positions of each set, ``czjax@4``'s searches of 64 simulations choose
    the moves they choose with the model's own convolution (im2col products), and their root
    values agree to the search's rounding."""
    agent = load_agent("azjl:sims=64:czjax@4")
    sets = {name: {k: v[:6] for k, v in data.items()} for name, data in pons.load_pons().items()}

    def searched(conv: str):
        rules = dataclasses.replace(protocol.ALPHAZERO_JL, conv=conv)
        rows = list(pons.set_policies(agent, sets, stopped_by=rules))
        return np.concatenate([row.greedy for row in rows]), np.concatenate([row.value for row in rows])

    (cpu, cpu_value), (own, own_value) = searched(models.MODELS["resnet"].search_cost.cpu_conv), searched("im2col")
    np.testing.assert_array_equal(cpu, own)
    np.testing.assert_allclose(cpu_value, own_value, atol=1e-3)


def test_the_protocol_reads_the_same_move_errors_with_searches_stopped_when_decided():
    """``pons`` under the protocol (searches stopped when decided, the default) and with
    ``full_searches``: the same move error on every set, and the report says which ran."""
    agent = load_agent("azjl:sims=60:czjax@3")
    sets = {name: {k: v[:20] for k, v in data.items()} for name, data in pons.load_pons().items()}
    fast = pons.pons(agent, sets, protocol="alphazero.jl")
    full = pons.pons(agent, sets, protocol="alphazero.jl", full_searches=True)
    assert (fast["searches"], full["searches"]) == ("stopped when decided", "full")
    assert [r["move_error"] for r in fast["sets"]] == [r["move_error"] for r in full["sets"]]
    assert all(1 <= r["evaluations"] <= r["simulations"] <= 60 for r in fast["sets"])
    assert not any("simulations" in r for r in full["sets"])
    assert "each search stopped once its move was decided" in pons.format_pons(fast)


def test_stopped_searches_refuse_a_player_without_a_network():
    """Only AlphaZero.jl's MCTS over a network streams: minimax, or a network alone, is refused
    in one line naming the player."""
    for spec in ("minimax:depth=1", "czjax@4"):
        with pytest.raises(ValueError, match="need AlphaZero.jl's MCTS over a network"):
            protocol.stopped_searches(load_agent(spec), np.zeros((1, 6, 7), np.int8))
