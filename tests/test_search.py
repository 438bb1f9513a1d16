"""Search: the rollout improver and the tree searches against plain-Python transcriptions
(tests/reference_search.py), Gumbel MuZero against mctx itself, hand-built tactics, legality,
determinism, and search as a player."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, search
from czjax.players import PlayerOutput, random_player
from czjax.players.agent import policy
from czjax.players.loading import load_agent
from czjax.search import tree as tree_module
from czjax.search.playouts import RolloutImprover, rollout_values
from czjax.search.puct import dirichlet_noise
from czjax.search.selection import considered_visits, gumbel_select, puct_select, subtree_entropy
from czjax.search.tree import RootPerturbation, init_tree, run_tree_search
from czjax.util import platforms
from tests import reference_search as ref
from tests.reference import replay

# Positions (1-based move strings): the opening, a midgame, a win in one for the side to move
# (column 4), an opponent's vertical three to block (column 5), a double threat to make
# (column 4 wins by ply 3), a nearly full board (short lines, terminal nodes, full columns).
POSITIONS = ["", "4453", "112233", "151525", "2233", "25777131474464721417456153261"]

rng = np.random.default_rng(7)
W = (0.7 * rng.standard_normal((42, 7))).astype(np.float32)
w = (0.4 * rng.standard_normal(42)).astype(np.float32)
PARAMS = {"W": jnp.asarray(W), "w": jnp.asarray(w)}


def linear_player(params, boards, key):
    del key
    x = boards.reshape(boards.shape[0], -1).astype(jnp.float32)
    logits = jnp.dot(x, params["W"], precision="highest")
    return PlayerOutput(logits=logits, value=jnp.tanh(jnp.dot(x, params["w"], precision="highest")))


def boards_of(positions):
    return jnp.asarray(np.stack([game.from_moves(p) for p in positions]))


def ref_game(moves: str):
    return replay([int(c) - 1 for c in moves])


BOARDS = boards_of(POSITIONS)


@jax.jit
def _rollout(params, boards, key, temperature):
    improver = RolloutImprover(width=512, depth=3, gamma=0.9, temperature=temperature)
    return rollout_values(improver, linear_player, params, game.pack(boards), key)


def test_rollout_improver_matches_the_python_transcription_greedy():
    """Greedy rollouts are one line per column: the values equal the transcription's exactly."""
    got = np.asarray(_rollout(PARAMS, BOARDS, jax.random.key(0), 0.0))
    for i, moves in enumerate(POSITIONS):
        want = ref.rollout_expectation(
            ref_game(moves), W.astype(np.float64), w.astype(np.float64), 3, 0.9, uniform=False
        )
        np.testing.assert_allclose(got[i], want, atol=2e-5, err_msg=moves)


def test_rollout_improver_averages_sampled_rollouts():
    """With a uniform policy (zero logits) the mean of 512 rollouts per column is within 4.5
    standard errors of the exact expectation over every line (a score is at most 1)."""
    params = {"W": jnp.zeros_like(PARAMS["W"]), "w": PARAMS["w"]}
    got = np.asarray(_rollout(params, BOARDS, jax.random.key(1), 1.0))
    for i, moves in enumerate(POSITIONS):
        want = np.asarray(
            ref.rollout_expectation(ref_game(moves), np.zeros((42, 7)), w.astype(np.float64), 3, 0.9, uniform=True)
        )
        legal = np.isfinite(want)
        assert np.array_equal(np.isfinite(got[i]), legal), moves
        assert np.all(np.abs(got[i][legal] - want[legal]) < 4.5 / np.sqrt(512)), (moves, got[i], want)


SEARCH_CACHE = {}


def run(name, options, boards=BOARDS, key=0, player=linear_player, params=PARAMS, **kw):
    s = search.make_search(name, options)
    fn = SEARCH_CACHE.get((s, player, boards.shape))
    if fn is None:
        fn = SEARCH_CACHE[(s, player, boards.shape)] = jax.jit(lambda p, b, k, **kw: s.run(player, p, b, k, **kw))
    return fn(params, boards, jax.random.key(key), **kw)


@pytest.mark.parametrize("entropy_guided", [False, True])
def test_puct_matches_the_python_search(entropy_guided):
    """Visits per column equal the recursive float64 search's; Q and the root value agree to
    float32 precision. Covers terminal children (wins in one and two), full columns and draws."""
    out = run("entropy-mcts" if entropy_guided else "mcts", "sims=48,c=1.5")
    for i, moves in enumerate(POSITIONS):
        root = ref.puct(ref_game(moves), W.astype(np.float64), w.astype(np.float64), 48, 1.5, entropy_guided)
        visits = [root.children[a].visits if a in root.children else 0 for a in range(7)]
        np.testing.assert_array_equal(np.asarray(out.visits[i]), visits, err_msg=moves)
        q = [root.q(a) if a in root.children else np.nan for a in range(7)]
        np.testing.assert_allclose(np.asarray(out.q[i]), q, atol=1e-4, err_msg=moves)
        np.testing.assert_allclose(float(out.value[i]), root.mean, atol=1e-4, err_msg=moves)


@pytest.mark.parametrize("name", ["mcts", "gumbel"])
def test_walking_several_levels_a_test_makes_the_same_search(monkeypatch, name):
    """The walk down the tree going several levels per test of its loop's predicate (as a GPU
    does, its ``descend_levels``; 3 here), the walks that ended left where they are: the same
    search, bit for bit, as one level a test (which the searches' tests check against the
    Python searches and mctx)."""
    s = search.make_search(name, "sims=48")

    def searched():  # a new function each time: traced again with the levels then in force
        return jax.jit(lambda p, b, k: s.run(linear_player, p, b, k))(PARAMS, BOARDS, jax.random.key(0))

    with platforms.building_for("cpu"):
        assert tree_module.descend_levels() == 1
        one = searched()
    walked = dataclasses.replace(platforms.CHOICES["gpu"], descend_levels=3, jump_max_nodes=0)
    monkeypatch.setitem(platforms.CHOICES, "gpu", walked)
    with platforms.building_for("gpu"):
        assert tree_module.descend_levels() == 3
        three = searched()
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(three)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", ["mcts", "entropy-mcts", "gumbel"])
def test_jumping_down_the_trees_makes_the_same_search(name):
    """A GPU descends a tree of up to ``jump_max_nodes`` nodes without a loop: every node's choice
    at once, each node pointing to the child the walk would go on to, the pointers composed
    (``descend_by_jumps``). The same search, bit for bit, as the CPU's walk one level a test
    (which the searches' tests check against the Python searches and mctx), for PUCT, its
    entropy-guided variant and Gumbel, from fresh roots, and for PUCT continuing a tree (its reuse)."""
    s = search.make_search(name, "sims=48")
    assert 48 + 1 <= platforms.CHOICES["gpu"].jump_max_nodes

    def searched(platform, tree=None):
        with platforms.building_for(platform):  # a new function each time: traced for the platform
            return jax.jit(lambda p, b, k: s.run(linear_player, p, b, k, tree=tree))(PARAMS, BOARDS, jax.random.key(3))

    walked, jumped = searched("cpu"), searched("gpu")
    for a, b in zip(jax.tree.leaves(walked), jax.tree.leaves(jumped)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    if name != "gumbel":  # PUCT continues its tree: 49 nodes kept and 48 simulations more, 97 slots
        from czjax.search import reuse

        stay = jnp.full((BOARDS.shape[0], 1), -1)  # no move: the same roots
        kept = reuse.reroot(walked.tree, stay, 49, 97)[0]
        for a, b in zip(jax.tree.leaves(searched("cpu", kept)), jax.tree.leaves(searched("gpu", kept))):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def mctx_gumbel(mctx, key, sims: int, **options):
    """``mctx.gumbel_muzero_policy`` over czjax's rules and ``linear_player`` at ``BOARDS`` (4
    actions considered), as one compiled program, its root and its tree's summary included:
    ``(action, action_weights, the root's visit counts)``."""

    def recurrent(params, key, action, embedding):
        pos, over = embedding
        nxt, won, done = game.position_step(pos, action)
        logits, value, _ = search.network_value(linear_player, params, nxt, key)
        out = mctx.RecurrentFnOutput(
            reward=jnp.where(over, 0.0, won.astype(jnp.float32)),
            discount=jnp.where(over | done, 0.0, -1.0),
            prior_logits=logits,
            value=jnp.where(over | done, 0.0, value),
        )
        return out, (nxt, over | done)

    def searched(k):
        pos = game.pack(BOARDS)
        logits, value, _ = search.network_value(linear_player, PARAMS, pos, None)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=(pos, jnp.zeros(pos.heights.shape, bool)))
        out = mctx.gumbel_muzero_policy(
            PARAMS,
            k,
            root,
            recurrent,
            sims,
            invalid_actions=~game.position_legal_mask(pos),
            max_num_considered_actions=4,
            **options,
        )
        return out.action, out.action_weights, out.search_tree.summary().visit_counts

    return jax.jit(searched)(key)


def mctx_noise(key):
    """The Gumbel noise mctx's search draws from ``key``, to give czjax's search the same."""
    return jax.jit(lambda k: jax.random.gumbel(jax.random.split(k)[1], (len(POSITIONS), 7), jnp.float32))(key)


def assert_same_search(ours, theirs):
    action, weights, visits = theirs
    np.testing.assert_array_equal(np.asarray(ours.visits), np.asarray(visits))
    np.testing.assert_array_equal(np.asarray(ours.action), np.asarray(action))
    np.testing.assert_allclose(np.asarray(ours.policy), np.asarray(weights), atol=1e-5)


def test_gumbel_matches_mctx():
    """Czjax's Gumbel MuZero against ``mctx.gumbel_muzero_policy`` with czjax's rules as its
    recurrent function and the same Gumbel noise: same action, visits and improved policy."""
    mctx = pytest.importorskip("mctx", reason="mctx is a test dependency (pip install -e '.[test]')")
    key = jax.random.key(3)
    theirs = mctx_gumbel(mctx, key, 24)
    assert_same_search(run("gumbel", "sims=24,considered=4", gumbel=mctx_noise(key)), theirs)


TACTICS = ["112233", "151525", "2233"]  # win now at 4; block at 5; double threat at 4
TACTIC_MOVES = [3, 4, 3]


@pytest.mark.parametrize(
    "name,options",
    [
        ("mcts", "sims=200"),
        ("entropy-mcts", "sims=200"),
        ("gumbel", "sims=200,scale=0"),
        ("playouts", "width=8,depth=4"),
    ],
)
def test_search_finds_tactics_with_no_knowledge(name, options):
    """Over the uniform random player (no value head) each search wins in one and blocks a
    vertical three; PUCT and its entropy-guided variant also play the double threat that wins
    at ply 3. (Gumbel's sequential halving drops that column after 4 visits worth 0 when the
    network knows nothing, and the rollout improver's rollouts are random.)"""
    out = run(name, options, boards=boards_of(TACTICS), player=random_player, params=None)
    checked = 3 if name.endswith("mcts") else 2
    assert np.asarray(out.action)[:checked].tolist() == TACTIC_MOVES[:checked]


def test_illegal_columns_are_never_chosen_at_any_depth():
    """On the nearly full board every node's move was legal in its parent, the policies are 0
    on full columns, and 64 simulations on a board with two empty columns stay in the tree."""
    for name in ("mcts", "entropy-mcts", "gumbel"):
        s = search.make_search(name, "sims=40")
        select = puct_select(s.c, s.entropy) if name != "gumbel" else gumbel_select(40, 16, 50.0, 0.1)
        gumbel = jnp.zeros((len(POSITIONS), 7)) if name == "gumbel" else None
        tree = jax.jit(
            lambda b, select=select, gumbel=gumbel: run_tree_search(
                linear_player, PARAMS, b, jax.random.key(0), 40, select, RootPerturbation(gumbel=gumbel)
            )
        )(BOARDS)
        used = np.asarray(tree.parents) >= 0
        parents = np.maximum(np.asarray(tree.parents), 0)
        actions = np.maximum(np.asarray(tree.action_from_parent), 0)
        legal_in_parent = np.asarray(tree.legal)[np.arange(len(POSITIONS))[:, None], parents, actions]
        assert legal_in_parent[used].all(), name
        assert (np.asarray(tree.children_visits)[~np.asarray(tree.legal)] == 0).all(), name
    full = ~np.asarray(game.legal_mask(BOARDS))
    out = run("mcts", "sims=48,c=1.5")
    assert (np.asarray(out.policy)[full] == 0).all() and (np.asarray(out.visits)[full] == 0).all()


def test_the_same_key_gives_the_same_search():
    a = run("mcts", "sims=48,c=1.5,noise=0.25", key=5)
    b = run("mcts", "sims=48,c=1.5,noise=0.25", key=5)
    c = run("mcts", "sims=48,c=1.5,noise=0.25", key=6)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(np.asarray(a.visits), np.asarray(c.visits))  # the root noise differs


def test_dirichlet_noise_stays_on_legal_columns_and_sums_to_one():
    legal = jnp.asarray([[True, False, True, True, False, True, True]] * 3)
    probs = jax.nn.softmax(jnp.where(legal, 0.0, -1e9))
    noisy = np.asarray(dirichlet_noise(0.3, 0.25)(jax.random.key(0), probs, legal))
    np.testing.assert_allclose(noisy.sum(-1), 1.0, atol=1e-6)
    assert (noisy[:, [1, 4]] < 1e-6).all() and not np.allclose(noisy, np.asarray(probs))


def test_sequential_halving_schedule():
    """mctx's documented example: 4 actions, 8 simulations -> 0,0,0,0 then 1,1 then 2,2 (two
    kept after halving), and every action visited once before any twice."""
    assert considered_visits(4, 8) == (0, 0, 0, 0, 1, 1, 2, 2)
    assert considered_visits(1, 3) == (0, 1, 2)


def test_subtree_entropy_of_hand_built_children():
    """A child with one legal column (a forced reply) has E = 0; a once-visited child with a
    uniform prior over 7 columns has E = 1; a terminal child has E = 0."""
    pos = game.pack(boards_of([""]))
    uniform = jnp.zeros((1, 7))
    tree = jax.jit(init_tree, static_argnums=4)(pos, uniform, jnp.zeros((1,)), jnp.ones((1, 7), bool), 3)
    entropy = jax.jit(lambda t: subtree_entropy(jax.tree.map(lambda x: x[0], t), 0))  # compiled whole
    # node 1: a child of the root through column 0 with a uniform prior and 7 legal columns
    tree = tree.replace(children_index=tree.children_index.at[0, 0, 0].set(1).at[0, 0, 1].set(2)).with_nodes(
        legal=tree.legal.at[0, 1].set(True).at[0, 2].set(jnp.arange(7) == 3),
        prior_logits=tree.prior_logits.at[0, 1].set(0.0),
        prior=tree.prior.at[0, 1].set(1 / 7),
    )
    e = np.asarray(entropy(tree))
    assert e[0] == pytest.approx(1.0, abs=1e-6) and e[1] == 0.0 and (e[2:] == 0).all()
    terminal = tree.with_nodes(terminal=tree.terminal.at[0, 1].set(True))
    assert float(entropy(terminal)[0]) == 0.0


def test_search_specs_and_their_errors(model_checkpoints):
    path = str(model_checkpoints["mlp"])
    agent = load_agent(f"mcts:sims=8,c=1.5:{path}")
    assert agent.search == search.PUCT(sims=8, c=1.5) and agent.temperature() == 0.0
    assert load_agent(f"gumbel:{path}").search == search.Gumbel()
    assert load_agent("playouts:width=2,depth=2:random").search == search.RolloutImprover(width=2, depth=2)
    # the earlier spellings, where users typed them, still read: the search `rollout`, mcts's `alpha`
    assert load_agent("rollout:width=2,depth=2:random").search == search.RolloutImprover(width=2, depth=2)
    assert load_agent("mcts:noise=0.25,alpha=0.5:random").search.noise_alpha == 0.5
    # the same search over the same network is the same player function (tournaments group it)
    assert load_agent(f"mcts:sims=8,c=1.5:{path}").player is agent.player
    probs, _, greedy = policy(agent, boards_of(["112233"]))
    assert greedy[0] == 3 and probs[0, 3] == probs[0].max()
    for spec, message in [
        ("mcts:sims=0:random", "sims must be at least 1"),
        ("mcts:simz=8:random", "has no option 'simz'"),
        ("mcts:sims=x:random", "must be an integer"),
        ("gumbel:sims=8", "names no player"),
        ("mcts:sims=8:mcts:random", "cannot search a search"),
    ]:
        with pytest.raises(ValueError, match=message):
            load_agent(spec)


def test_analyze_shows_a_searchs_visits_and_q():
    """``analyze`` shows a search's visits and Q per column: 32 visits at the root, Q 1 on the
    winning column of the last position (a win in one)."""
    from czjax.evaluate import interactive

    report = interactive.analyze(load_agent("mcts:sims=32:random"), "1122334")
    before_win = report["plies"][-1]  # X to move before 4 wins: the position after 112233
    assert sum(before_win["visits"]) == 32 and before_win["q"][3] == 1.0
    assert "visits/Q" in interactive.format_analysis(report)


def test_gumbel_without_rescaling_matches_mctx():
    """``rescale=0``: Q enters sigma as it is, in [-1, 1], as mctx's
    ``qtransform_completed_by_mix_value(rescale_values=False)``; and ``move=policy`` plays the
    improved policy."""
    mctx = pytest.importorskip("mctx", reason="mctx is a test dependency (pip install -e '.[test]')")
    import functools

    key = jax.random.key(4)
    qtransform = functools.partial(mctx.qtransform_completed_by_mix_value, rescale_values=False)
    theirs = mctx_gumbel(mctx, key, 16, qtransform=qtransform)
    settings = search.make_search("gumbel", "sims=16,considered=4,rescale=0,move=policy")
    ours = settings.run(linear_player, PARAMS, BOARDS, key, gumbel=mctx_noise(key))
    assert_same_search(ours, theirs)
    played = jax.nn.softmax(settings.logits(ours))
    np.testing.assert_allclose(np.asarray(played), np.asarray(ours.policy), atol=1e-6)
    with pytest.raises(ValueError, match="move must be one of action, policy"):
        search.make_search("gumbel", "move=best")


def test_the_search_takes_the_step_as_a_function():
    """The searches call the environment they are given, never the rules directly: Connect 4's
    environment given explicitly is the default bit for bit, and a step under which no move
    wins hides the win in one (column 4 of ``112233``) from every search."""
    boards = boards_of(["112233"])

    def no_wins(pos, cols):
        nxt, won, done = game.position_step(pos, cols)
        return nxt, jnp.zeros_like(won), done & ~won

    blind = search.Environment(step=no_wins)
    for name, options in [("mcts", "sims=16"), ("gumbel", "sims=16,scale=0"), ("playouts", "width=2,depth=2")]:
        s = search.make_search(name, options)
        default, explicit, hidden = (
            jax.jit(lambda b, env=env: s.run(random_player, None, b, jax.random.key(2), **env))(boards)
            for env in ({}, {"env": search.CONNECT_FOUR}, {"env": blind})
        )
        for x, y in zip(jax.tree.leaves(default), jax.tree.leaves(explicit)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=name)
        assert float(default.q[0, 3]) == 1.0 and float(hidden.q[0, 3]) != 1.0, name


def test_a_trees_node_fields_are_stored_bit_for_bit_in_one_array():
    """A node's fields travel as one row of 32-bit words (one write a simulation on a GPU): every
    field reads back as written, bit for bit (NaN, -0.0, negative integers, booleans), each in its
    type and shape, and replacing some leaves the others as they were."""
    rng = np.random.default_rng(0)
    batch, num_nodes = 2, 40  # two words of ancestor bits
    floats = rng.standard_normal((batch, num_nodes, 7)).astype(np.float32)
    floats[0, 0, :3] = [np.nan, -0.0, np.inf]
    fields = dict(
        position_words=rng.integers(0, 2**32, (batch, num_nodes, 5), dtype=np.uint32),
        terminal=rng.random((batch, num_nodes)) < 0.5,
        reward=rng.standard_normal((batch, num_nodes)).astype(np.float32),
        raw_value=-floats[..., 0],
        parents=rng.integers(-1, num_nodes, (batch, num_nodes), dtype=np.int32),
        action_from_parent=rng.integers(-1, 7, (batch, num_nodes), dtype=np.int32),
        legal=rng.random((batch, num_nodes, 7)) < 0.5,
        prior_logits=floats,
        prior=floats[::-1],
        depth=rng.integers(0, 42, (batch, num_nodes), dtype=np.int32),
        ancestors=rng.integers(0, 2**32, (batch, num_nodes, tree_module.ancestor_words(num_nodes)), dtype=np.uint32),
    )
    others = dict(
        node_visits=jnp.zeros((batch, num_nodes), jnp.int32),
        node_values=jnp.zeros((batch, num_nodes)),
        children_index=jnp.zeros((batch, num_nodes, 7), jnp.int32),
        gumbel=jnp.zeros((batch, 7)),
    )
    tree = tree_module.make_tree(**others, **{name: jnp.asarray(x) for name, x in fields.items()})
    assert tree.node_words.dtype == jnp.uint32 and tree.node_words.shape == (
        batch,
        num_nodes,
        5 + 1 + 1 + 1 + 1 + 1 + 7 * 3 + 1 + 2,
    )

    def same(tree, fields):
        for name, x in fields.items():
            got = np.asarray(getattr(tree, name))
            assert got.dtype == x.dtype and got.shape == x.shape, name
            assert got.tobytes() == x.tobytes(), name

    same(tree, fields)
    changed = tree.with_nodes(terminal=~fields["terminal"], prior=fields["prior_logits"])
    same(changed, {**fields, "terminal": ~fields["terminal"], "prior": fields["prior_logits"]})
    with pytest.raises(ValueError, match="not node fields: node_visits"):
        tree.with_nodes(node_visits=others["node_visits"])
    with pytest.raises(ValueError, match="pack_nodes takes the fields"):
        tree_module.pack_nodes(terminal=fields["terminal"])
