"""What every search shares: the game as a search sees it (:class:`Environment`, whose ``step``
the searches take as a function, as mctx's searches take a recurrent function), the network's
evaluation of positions, the recurrent function built from both, and the search's output and
settings protocol.

Signs (docs/DESIGN.md): a node's value is from the point of view of the player to move there;
the reward of a move is 1 when it won, for its mover.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol

import chex
import jax
import jax.numpy as jnp

from czjax import game
from czjax.players import Player, mask_for_loss
from czjax.util.pytree import pytree_dataclass

NUM_ACTIONS = game.COLS  # the columns a move can take

StepFn = Callable[[game.Position, jax.Array], tuple[game.Position, jax.Array, jax.Array]]
"""``(positions, columns) -> (next positions, won, done)``: the environment's step, batched
(:func:`czjax.game.position_step`: the next position is the next mover's canonical one)."""


@dataclasses.dataclass(frozen=True)
class Environment:
    """The game as a search sees it: every search receives one and calls its functions, never
    the rules directly. The default is Connect 4 on packed positions (:data:`CONNECT_FOUR`).

    step: ``(positions, columns) -> (next positions, won, done)`` (:data:`StepFn`).
    legal_mask: ``positions -> bool (..., 7)``.
    observe: ``positions -> int8 boards (..., 6, 7)``, what the network reads.
    encode: ``int8 boards -> positions``, the positions the search starts from.
    """

    step: StepFn = game.position_step
    legal_mask: Callable[[game.Position], jax.Array] = game.position_legal_mask
    observe: Callable[[game.Position], jax.Array] = game.unpack
    encode: Callable[[jax.Array], game.Position] = game.pack


CONNECT_FOUR = Environment()


def network_value(
    player: Player, params: Any, positions: game.Position, key: jax.Array | None, env: Environment = CONNECT_FOUR
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(masked logits, value, legal)`` of the network on packed positions (value 0 without a
    value head); the logits get ``-1e9`` added on illegal columns."""
    out = player(params, env.observe(positions), key)  # type: ignore[arg-type]  # a player ignores a None key
    legal = env.legal_mask(positions)
    value = jnp.zeros(legal.shape[:-1], jnp.float32) if out.value is None else out.value.astype(jnp.float32)
    return mask_for_loss(legal, out.logits.astype(jnp.float32)), value, legal


@pytree_dataclass(frozen=True)
class RecurrentOutput:
    """What one move below a node gives (mctx's ``RecurrentFnOutput`` for a two-player game).

    won, done: ``bool (B,)``: the move won; the game ended (win, full board or forfeit).
    logits, value, legal: the network's :func:`network_value` of the position after the move.
    """

    won: chex.Array
    done: chex.Array
    logits: chex.Array
    value: chex.Array
    legal: chex.Array


RecurrentFn = Callable[[Any, jax.Array, jax.Array, game.Position], tuple[RecurrentOutput, game.Position]]
"""``(params, key, columns, positions) -> (RecurrentOutput, next positions)``, as mctx's
``recurrent_fn(params, rng_key, action, embedding)``."""


def make_recurrent_fn(player: Player, env: Environment = CONNECT_FOUR) -> RecurrentFn:
    """The recurrent function of ``player``'s network in ``env``: the environment's step, then
    the network on the position it gives."""

    def recurrent(params: Any, key: jax.Array, columns: jax.Array, positions: game.Position):
        next_positions, won, done = env.step(positions, columns)
        logits, value, legal = network_value(player, params, next_positions, key, env)
        return RecurrentOutput(won=won, done=done, logits=logits, value=value, legal=legal), next_positions

    return recurrent


@pytree_dataclass(frozen=True)
class SearchOutput:
    """What a search says about a batch of boards.

    action: ``int32 (B,)``, the search's move (PUCT: the most visited; Gumbel: sequential
        halving's winner; rollout: the best mean).
    policy: ``float (B, 7)``, the distribution to train towards (visit counts; the completed-Q
        improved policy; one-hot on the rollout's move).
    visits: ``int32 (B, 7)`` per root column (rollouts per column for the rollout improver).
    q: ``float (B, 7)``, the root's Q per column, NaN where not visited or illegal.
    value: ``float (B,)``, the root's value for the side to move.
    trained: ``bool (B,)`` or None: whether ``policy`` is a training target (playout cap
        randomization: a cheap search's policy plays the move but is not trained on); None: always.
    tree: the search's tree (:class:`czjax.search.tree.Tree`; AlphaZero.jl's MCTS: its
        :class:`czjax.search.azjl.TranspositionTree`), as mctx's ``PolicyOutput.search_tree``:
        what the next search can continue from (:mod:`czjax.search.reuse`); None for the rollout
        improver, which keeps none.
    """

    action: chex.Array
    policy: chex.Array
    visits: chex.Array
    q: chex.Array
    value: chex.Array
    trained: chex.Array | None = None
    tree: Any = None


class Search(Protocol):
    """A search's settings: a frozen dataclass whose fields are its options (parsed by
    :func:`czjax.search.registry.make_search`), with ``run``, ``logits``, ``check`` and its cost,
    ``evaluations_per_move``."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    description: ClassVar[str]

    @property
    def evaluations_per_move(self) -> int:
        """Network evaluations behind one move (what a job of many moves costs)."""
        ...

    def __hash__(self) -> int:  # frozen: a search is a static argument and a cache key
        ...

    def run(
        self,
        player: Player,
        params: Any,
        boards: jax.Array,
        key: jax.Array,
        *,
        env: Environment = CONNECT_FOUR,
        tree: Any = None,
    ) -> SearchOutput:
        """The search from int8 ``boards (B, 6, 7)`` with ``player``'s network in ``env``; its
        output carries its tree. Its own options are keyword-only after these four.

        ``tree``: a tree to continue, rooted at ``boards`` (an earlier output's tree re-rooted by
        :func:`czjax.search.reuse.reroot`), for a search that allows it
        (:func:`czjax.search.reuse.reusable`; the others refuse one, :func:`refuse_tree`); None:
        from a fresh root."""
        ...

    def logits(self, out: SearchOutput) -> jax.Array:
        """The logits of a player that plays the search's move (see
        :func:`czjax.players.searched.search_player`)."""
        ...

    def check(self) -> None:
        """One-line ``ValueError`` for a setting out of its range."""
        ...


def refuse_tree(search: Search, tree: Any) -> None:
    """One-line ``ValueError`` when a search that starts from a fresh root every time is given a
    tree to continue (see :func:`czjax.search.reuse.reusable`)."""
    if tree is not None:
        raise ValueError(f"{type(search).__name__} starts from a fresh root: it continues no tree (PUCT does)")


# The largest integer option of a search: a tree of sims + 1 nodes is indexed by the device's
# int32 (JAX's integers are 32-bit unless x64 is on), and so is every count a search keeps.
MAX_SIZE = 2**31 - 2


def check_ranges(settings: Search, at_least_one: Iterable[str] = (), non_negative: Iterable[str] = ()) -> None:
    """One-line ``ValueError`` for the first field (in declaration order) that does not fit the
    device's 32-bit integers (an integer above :data:`MAX_SIZE`), is below 1 among
    ``at_least_one`` or negative (or NaN) among ``non_negative``. Every search's ``check`` calls
    it, so a size the device cannot index is refused where the search is made, before anything
    is loaded (not as JAX's OverflowError from inside the search)."""
    at_least_one, non_negative = set(at_least_one), set(non_negative)
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SIZE:
            raise ValueError(
                f"{field.name}={value:,} does not fit: a search's sizes are 32-bit integers on the device, "
                f"at most {MAX_SIZE:,}"
            )
        if field.name in at_least_one and value < 1:
            raise ValueError(f"{field.name} must be at least 1, got {value}")
        if field.name in non_negative and not value >= 0:
            raise ValueError(f"{field.name} must be non-negative, got {value}")
