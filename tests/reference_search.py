"""Plain-Python searches for the tests, on :class:`tests.reference.RefGame`, sharing no code with
czjax: the rollout improver (``treesearch.multiple_rollouts`` as docs/DESIGN.md states it) and a
recursive PUCT / entropy-guided PUCT with node objects, in float64.

The network is a linear one, ``logits = x @ W``, ``value = tanh(x @ w)``, ``x`` the canonical
board flattened (+1 the side to move), so that czjax and these searches see the same numbers.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from tests.reference import COLS, RefGame


def features(g: RefGame) -> np.ndarray:
    return np.asarray(g.canonical(), np.float64).reshape(-1)


def network(g: RefGame, W, w) -> tuple[np.ndarray, float]:
    """``(logits (7,), value)``, illegal columns at ``-inf``."""
    x = features(g)
    logits = np.where(g.legal(), x @ W, -np.inf)
    return logits, float(np.tanh(x @ w))


def after(g: RefGame, col: int) -> RefGame:
    h = copy.deepcopy(g)
    h.play(col)
    return h


def rollout_expectation(g: RefGame, W, w, depth: int, gamma: float, uniform: bool) -> list[float]:
    """The rollout improver's value of every column (``-inf`` where illegal): the exact
    expectation over the rollouts, with a greedy policy (``uniform=False``, one line) or a
    uniformly random one (every line weighted by its probability)."""

    def line_value(h: RefGame, k: int) -> float:
        """Expected score from ``h`` at rollout ply ``k`` (0 = the opponent's reply)."""
        if k == depth:
            sign = 1.0 if depth % 2 == 1 else -1.0
            return sign * gamma ** (depth + 1) * network(h, W, w)[1]
        legal = [c for c in range(COLS) if h.legal()[c]]
        if uniform:
            choices = [(c, 1.0 / len(legal)) for c in legal]
        else:
            logits, _ = network(h, W, w)
            choices = [(int(np.argmax(logits)), 1.0)]
        total = 0.0
        for c, p in choices:
            nxt = after(h, c)
            if nxt.winner:
                total += p * (1.0 if k % 2 == 1 else -1.0) * gamma ** (k + 1)
            elif not nxt.over:
                total += p * line_value(nxt, k + 1)
        return total

    values = []
    for col in range(COLS):
        if not g.legal()[col]:
            values.append(-math.inf)
            continue
        h = after(g, col)
        values.append(1.0 if h.winner else 0.0 if h.over else line_value(h, 0))
    return values


class Node:
    def __init__(self, g: RefGame, W, w, reward: float):
        self.game = g
        self.reward = reward  # 1 if the move into this node won
        self.terminal = g.over
        self.legal = g.legal()
        logits, value = network(g, W, w)
        finite = np.where(self.legal, logits, -np.inf)
        p = np.exp(finite - finite.max()) if any(self.legal) else np.zeros(COLS)
        self.prior = p / p.sum() if p.sum() > 0 else p
        self.raw = 0.0 if self.terminal else value
        self.visits = 0
        self.mean = 0.0
        self.children: dict[int, Node] = {}

    def add(self, g: float) -> None:
        self.mean = (self.mean * self.visits + g) / (self.visits + 1)
        self.visits += 1

    def q(self, a: int) -> float:
        child = self.children.get(a)
        return child.reward - child.mean if child is not None else self.mean

    def entropy(self, a: int) -> float:
        """The docstring of czjax.search.selection.subtree_entropy, written out."""
        child = self.children.get(a)
        if child is None or child.terminal:
            return 0.0
        legal = [b for b in range(COLS) if child.legal[b]]
        if len(legal) <= 1:
            return 0.0
        weights = [(child.children[b].visits if b in child.children else 0) + child.prior[b] for b in legal]
        total = sum(weights)
        h = -sum(x / total * math.log(x / total) for x in weights if x > 0)
        return min(max(h / math.log(len(legal)), 0.0), 1.0)

    def select(self, c: float, entropy_guided: bool) -> int:
        best, best_score = None, -math.inf
        for a in range(COLS):
            if not self.legal[a]:
                continue
            child = self.children.get(a)
            n = child.visits if child is not None else 0
            e = self.entropy(a) if entropy_guided else 1.0
            score = self.q(a) + c * self.prior[a] * math.sqrt(self.visits) / (1.0 + n * e)
            if score > best_score:
                best, best_score = a, score
        return best


def puct(g: RefGame, W, w, sims: int, c: float, entropy_guided: bool = False) -> Node:
    """The root after ``sims`` simulations."""
    root = Node(g, W, w, 0.0)
    root.add(root.raw)
    return more_puct(root, W, w, sims, c, entropy_guided)


def more_puct(root: Node, W, w, sims: int, c: float, entropy_guided: bool = False) -> Node:
    """``sims`` more simulations from ``root``, a node of an earlier search kept with its
    subtree (AlphaZero's tree reuse), or a fresh root."""
    for _ in range(sims):
        path = [root]
        node = root
        while True:
            a = node.select(c, entropy_guided)
            child = node.children.get(a)
            if child is None:
                h = after(node.game, a)
                child = node.children[a] = Node(h, W, w, 1.0 if h.winner else 0.0)
                path.append(child)
                break
            path.append(child)
            if child.terminal:
                break
            node = child
        g_value = path[-1].raw if path[-1].visits == 0 else 0.0
        g_value = 0.0 if path[-1].terminal else g_value
        path[-1].add(g_value)
        for child, parent in zip(path[:0:-1], path[-2::-1]):
            g_value = child.reward - g_value
            parent.add(g_value)
    return root
