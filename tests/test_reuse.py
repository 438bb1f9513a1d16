"""Tree reuse between moves (czjax.search.reuse): the re-rooted tree against a
plain-Python walk of the old tree's arrays, and a search continued from it (PUCT's ``tree``
argument) against the recursive float64 PUCT of tests/reference_search.py continued from the same
node."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, search
from czjax.search import reuse
from czjax.search.tree import UNVISITED, edge_stats
from tests import reference_search as ref
from tests.test_search import BOARDS, PARAMS, POSITIONS, W, linear_player, ref_game, w

SIMS = 48


@jax.jit
def _search(params, boards, key):
    return search.make_search("mcts", f"sims={SIMS},c=1.5").run(linear_player, params, boards, key).tree


_reroot = jax.jit(reuse.reroot, static_argnums=(2, 3))


def python_subtree(tree: dict, path) -> list[int] | None:
    """The old node numbers of the subtree below ``path`` in one tree (numpy arrays), in the
    order they were added; None where the path leaves the tree or ends on a terminal node. A
    walk over ``children_index`` only."""
    node = 0
    for move in path:
        if move < 0:
            continue
        node = int(tree["children_index"][node, move])
        if node == UNVISITED:
            return None
    if tree["terminal"][node] or tree["node_visits"][node] == 0:  # no position to search from
        return None
    found, stack = [], [node]
    while stack:
        n = stack.pop()
        found.append(n)
        stack.extend(int(c) for c in tree["children_index"][n] if c != UNVISITED)
    return sorted(found)


def ancestors_of(parents, node: int) -> set[int]:
    out = set()
    while parents[node] != UNVISITED:
        node = int(parents[node])
        out.add(node)
    return out


def unpack(words, n: int) -> set[int]:
    return {i for i in range(n) if (int(words[i // 32]) >> (i % 32)) & 1}


def check_against_python(old, new, found, paths, keep, num_nodes):
    """Every tree of ``new`` (re-rooted from ``old`` along ``paths``) is the Python walk's subtree,
    its first ``keep`` nodes, statistics as they were, links renumbered, slots after it empty."""
    old, new = jax.device_get(old), jax.device_get(new)
    stats = ("node_visits", "node_values", "raw_value", "prior", "prior_logits", "legal")
    for b, path in enumerate(paths):
        tree = {k: np.asarray(getattr(old, k))[b] for k in ("children_index", "terminal", "parents", "node_visits")}
        nodes = python_subtree(tree, path)
        assert bool(found[b]) == (nodes is not None), (b, path)
        whole = nodes is not None and len(nodes) <= keep
        nodes = (nodes or [])[:keep]
        renumber = {o: i for i, o in enumerate(nodes)}
        for i in range(num_nodes):
            if i >= len(nodes):  # empty
                assert new.node_visits[b, i] == 0 and new.parents[b, i] == UNVISITED
                assert (new.children_index[b, i] == UNVISITED).all() and not new.ancestors[b, i].any()
                continue
            o = nodes[i]
            for k in stats:
                np.testing.assert_array_equal(getattr(new, k)[b, i], getattr(old, k)[b, o], err_msg=f"{k} {b} {i}")
            for new_part, old_part in zip(jax.tree.leaves(new.positions), jax.tree.leaves(old.positions)):
                np.testing.assert_array_equal(new_part[b, i], old_part[b, o])
            assert new.reward[b, i] == (0.0 if i == 0 else old.reward[b, o])
            assert new.terminal[b, i] == (False if i == 0 else old.terminal[b, o])
            assert new.parents[b, i] == (UNVISITED if i == 0 else renumber[int(old.parents[b, o])])
            assert new.action_from_parent[b, i] == (UNVISITED if i == 0 else old.action_from_parent[b, o])
            children = [
                renumber.get(int(c), UNVISITED) if c != UNVISITED else UNVISITED for c in old.children_index[b, o]
            ]
            assert new.children_index[b, i].tolist() == children, (b, i)
            assert new.depth[b, i] == old.depth[b, o] - old.depth[b, nodes[0]]
            expected = {renumber[a] for a in ancestors_of(tree["parents"], o) if a in renumber}
            assert unpack(new.ancestors[b, i], num_nodes) == expected, (b, i)
        if nodes and whole:  # the root's edge statistics are the old node's
            np.testing.assert_array_equal(
                np.asarray(edge_stats(jax.tree.map(lambda x: x[b], new), 0)[0]),
                np.asarray(edge_stats(jax.tree.map(lambda x: x[b], old), nodes[0])[0]),
            )


def most_visited_path(tree, depth: int) -> np.ndarray:
    """Per tree, the most visited child ``depth`` times from the root (-1 past a leaf)."""
    tree = jax.device_get(tree)
    paths = np.full((tree.node_visits.shape[0], depth), -1, np.int32)
    for b in range(paths.shape[0]):
        node = 0
        for d in range(depth):
            children = tree.children_index[b, node]
            visits = np.where(children != UNVISITED, tree.node_visits[b, np.maximum(children, 0)], -1)
            if visits.max() <= 0:
                break
            paths[b, d] = int(np.argmax(visits))
            node = int(children[paths[b, d]])
    return paths


@pytest.mark.parametrize("keep", [SIMS + 1, 5])
def test_reroot_is_the_python_walks_subtree(keep):
    """Along the two most visited moves, along one, along none (the whole tree again), along a
    move no simulation tried, and on a tree re-rooted twice; ``keep`` 5 cuts the subtrees short
    (a node's parent is always kept)."""
    tree = _search(PARAMS, BOARDS, jax.random.key(0))
    two = most_visited_path(tree, 2)
    one = np.stack([two[:, 0], np.full(len(POSITIONS), -1)], 1)
    none = np.full_like(two, -1)
    untried = np.stack([np.argmin(np.where(np.asarray(tree.children_index[:, 0]) == UNVISITED, 0, 1), 1), two[:, 1]], 1)
    num_nodes = keep + SIMS
    for paths in (untried, none, one, two):
        new, found = _reroot(tree, paths, keep, num_nodes)
        check_against_python(tree, new, found, paths, keep, num_nodes)
    again_paths = most_visited_path(new, 1)  # re-rooted twice: along the two moves, then one more
    again, found = _reroot(new, again_paths, keep, num_nodes)
    check_against_python(new, again, found, again_paths, keep, num_nodes)
    empty, found = _reroot(reuse.empty_tree(len(POSITIONS), num_nodes), none, keep, num_nodes)
    assert not found.any() and not np.asarray(empty.node_visits).any()
    with pytest.raises(ValueError, match="keep"):
        reuse.reroot(tree, two, num_nodes + 1, num_nodes)


def test_a_search_from_a_reused_tree_is_the_python_search_continued():
    """The search's tree, re-rooted after the two most visited moves, and searched ``SIMS`` more
    simulations: visits per column equal those of the recursive float64 PUCT continued from the
    same node of its own first search (its subtree and statistics kept); the root's visits are
    the subtree's plus the new simulations'. Where the path leaves the tree the search starts
    afresh, as the plain search of that position."""
    settings = search.make_search("mcts", f"sims={SIMS},c=1.5")
    tree = _search(PARAMS, BOARDS, jax.random.key(0))
    paths = most_visited_path(tree, 2)
    moves = [p + "".join(str(m + 1) for m in path if m >= 0) for p, path in zip(POSITIONS, paths)]
    playable = [i for i, m in enumerate(moves) if ref_game(m).over is False]
    boards = jnp.asarray(np.stack([game.from_moves(moves[i]) for i in playable]))
    previous = jax.tree.map(lambda x: x[np.asarray(playable)], tree)
    keep = SIMS + 1
    out = jax.jit(
        lambda p, b, k, t, path: settings.run(linear_player, p, b, k, tree=reuse.reroot(t, path, keep, keep + SIMS)[0])
    )(PARAMS, boards, jax.random.key(1), previous, paths[playable])
    new = out.tree
    reused_visits = np.asarray(_reroot(previous, paths[playable], keep, keep + SIMS)[0].node_visits[:, 0])
    found = 0
    for j, i in enumerate(playable):
        root = ref.puct(ref_game(POSITIONS[i]), W.astype(np.float64), w.astype(np.float64), SIMS, 1.5)
        node = root
        for m in paths[i]:
            node = node.children.get(int(m), None) if node is not None and m >= 0 else node
        if node is None or node.terminal:  # not in the tree: a fresh search of the position
            node = ref.puct(ref_game(moves[i]), W.astype(np.float64), w.astype(np.float64), SIMS, 1.5)
            assert reused_visits[j] == 0
        else:
            found += 1
            assert reused_visits[j] == node.visits
            ref.more_puct(node, W.astype(np.float64), w.astype(np.float64), SIMS, 1.5)
        visits = [node.children[a].visits if a in node.children else 0 for a in range(7)]
        np.testing.assert_array_equal(np.asarray(out.visits[j]), visits, err_msg=moves[i])
        assert int(new.node_visits[j, 0]) == node.visits == max(reused_visits[j], 1) + SIMS
        np.testing.assert_allclose(float(out.value[j]), node.mean, atol=1e-4, err_msg=moves[i])
    assert found >= 3  # most of the positions reuse something


@pytest.mark.parametrize("options", ["sims=24,c=1.5", "sims=24,noise=0.25,noise_alpha=0.5"])
def test_from_an_empty_tree_it_is_the_plain_search(options):
    """An empty tree (a game's first search), or one the path leaves: the search is the one it
    runs without a tree, its tree's extra slots (``keep``) left empty."""
    settings = search.make_search("mcts", options)
    plain = jax.jit(lambda p, b, k: settings.run(linear_player, p, b, k))(PARAMS, BOARDS, jax.random.key(3))
    assert plain.tree.node_visits.shape == (len(POSITIONS), 24 + 1)
    out = jax.jit(lambda p, b, k, t: settings.run(linear_player, p, b, k, tree=t))(
        PARAMS, BOARDS, jax.random.key(3), reuse.empty_tree(len(POSITIONS), 9 + 24)
    )
    assert out.tree.node_visits.shape == (len(POSITIONS), 9 + 24)
    for field in ("action", "visits", "policy", "value"):
        np.testing.assert_array_equal(np.asarray(getattr(out, field)), np.asarray(getattr(plain, field)))
    np.testing.assert_array_equal(np.asarray(out.q), np.asarray(plain.q))  # NaN where not visited, alike
    if settings.noise > 0:
        return
    lost = jnp.full((len(POSITIONS), 2), 7 - 1, jnp.int32).at[:, 1].set(-1)  # column 7, in no tree here:
    previous = out.tree.replace(children_index=jnp.full_like(out.tree.children_index, UNVISITED))
    out = jax.jit(lambda p, b, k, t: settings.run(linear_player, p, b, k, tree=reuse.reroot(t, lost, 9, 9 + 24)[0]))(
        PARAMS, BOARDS, jax.random.key(3), previous
    )
    np.testing.assert_array_equal(np.asarray(out.visits), np.asarray(plain.visits))


def test_which_searches_can_reuse():
    """PUCT continues a tree; the others refuse one in a line (and the tree must hold the
    simulations)."""
    assert reuse.reusable(search.make_search("mcts")) and reuse.reusable(search.make_search("entropy-mcts"))
    tree = reuse.empty_tree(len(POSITIONS), 9)
    for name in ("gumbel", "playouts", "azjl"):
        settings = search.make_search(name)
        assert not reuse.reusable(settings)
        with pytest.raises(ValueError, match="starts from a fresh root"):
            settings.run(linear_player, PARAMS, BOARDS, jax.random.key(0), tree=tree)
    with pytest.raises(ValueError, match="needs num_simulations"):
        search.make_search("mcts", "sims=9").run(linear_player, PARAMS, BOARDS, jax.random.key(0), tree=tree)
