"""Search on the device: Connect-Zero's rollout improver and batched Monte Carlo tree search.

Every search takes a network player (``(params, boards, key) -> PlayerOutput``, its value 0
when it has no value head) and a batch of int8 boards, and returns a :class:`SearchOutput`:
the chosen move, the policy to train towards, visits and Q per column, and the root value.
Everything is fixed-shape and compiled: the tree is a set of ``(B, N)`` / ``(B, N, 7)``
arrays (``N = simulations + 1``), positions travel packed (:class:`czjax.game.Position`).
The game enters as functions (:class:`Environment`: its step, legal mask and encodings, by
default Connect 4's), as mctx's searches take a recurrent function.

The modules:

- ``base``: the environment, the network's value of positions (:func:`network_value`), the
  recurrent function, :class:`SearchOutput` and the settings protocol :class:`Search`;
- ``columns``: reductions over a node's 7 columns, column by column;
- ``tree``: the tree's arrays, one simulation (descend, expand, back up) and the search loop;
- ``selection``: the selection rules (PUCT, entropy-guided PUCT, Gumbel's);
- one module per search: ``playouts`` (``rollout``, the PyTorch project's rollout improver,
  ``treesearch.multiple_rollouts``), ``puct`` (``mcts``, AlphaZero's PUCT with Dirichlet noise
  at the root and a visit-count policy; ``entropy-mcts``, entropy-guided PUCT: PUCT whose
  exploration damps a column's visits by its child's policy entropy),
  ``gumbel`` (``gumbel``, Gumbel MuZero's root with its deterministic interior selection, as
  in ``mctx.gumbel_muzero_policy``), ``azjl`` (``azjl``, AlphaZero.jl's MCTS with
  transpositions; ``azjl_stream`` runs it over many positions, each stopped once its move is
  decided);
- ``registry``: the :data:`SEARCHES` table and options from text, so every evaluation command
  can name a search (``czjax.players.loading.load_agent("mcts:sims=64:runs/ex3")``; a search as a
  player is :func:`czjax.players.searched.search_player`);
- ``reuse``: a searched subtree kept between moves (re-rooted, for PUCT to continue: its
  ``tree`` argument), for ``play`` and ``serve``.

This package names what a user calls (as mctx's does): the searches' settings, the table and its
parsers, :class:`SearchOutput` and the :class:`Environment` a search is given; the machinery is
imported from its module (``from czjax.search.tree import run_tree_search``).
"""

from __future__ import annotations

from typing import Any

from czjax.deprecation import moved
from czjax.search.azjl import AlphaZeroJlMCTS
from czjax.search.base import (
    CONNECT_FOUR,
    Environment,
    RecurrentFn,
    RecurrentOutput,
    Search,
    SearchOutput,
    StepFn,
    make_recurrent_fn,
    network_value,
)
from czjax.search.gumbel import Gumbel
from czjax.search.playouts import RolloutImprover
from czjax.search.puct import PUCT
from czjax.search.registry import SEARCHES, is_search, make_search, search_of, search_options, split_search
from czjax.search.tree import Tree

__all__ = [
    "CONNECT_FOUR",
    "PUCT",
    "SEARCHES",
    "AlphaZeroJlMCTS",
    "Environment",
    "Gumbel",
    "RecurrentFn",
    "RecurrentOutput",
    "RolloutImprover",
    "Search",
    "SearchOutput",
    "StepFn",
    "Tree",
    "is_search",
    "make_recurrent_fn",
    "make_search",
    "network_value",
    "search_of",
    "search_options",
    "split_search",
]

# A search as a player moved to czjax.players.searched; its old name answers here for one release.
MOVED = {"search_player": "czjax.players.searched"}


def __getattr__(name: str) -> Any:
    return moved(__name__, MOVED, name)
