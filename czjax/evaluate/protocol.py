"""AlphaZero.jl's protocol: the player its Pons benchmark scores, and the searches that score it.

A :class:`Protocol` says what a benchmark plays for a player's spec (a network, or a built-in
player, under its search; a search or minimax as given: :meth:`Protocol.spec`,
:func:`protocol_agent`) and how the searches of its scoring run. AlphaZero.jl's
(:data:`ALPHAZERO_JL`) plays its MCTS with 600 simulations, cpuct 2, no Dirichlet noise,
temperature 0 (the most visited column, the lowest on ties). Its scoring runs every position's
search in one stream, each stopped once its move is decided (:func:`stopped_searches`, over
:mod:`czjax.search.azjl_stream`): the same moves in about three fifths of the simulations. How
the stream builds the network, and how many rounds of game-ending simulations go before each of its
calls, is the network's own cost (its ``search_cost`` in the models' table,
:class:`czjax.models.SearchCost`), unless the protocol says otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, NamedTuple

import jax
import numpy as np

from czjax import models
from czjax.players import minimax
from czjax.players.agent import Agent
from czjax.players.loading import load_agent
from czjax.search import azjl_stream, is_search
from czjax.search.azjl import AlphaZeroJlMCTS
from czjax.util import platforms
from czjax.util.progress import Progress
from czjax.util.specs import PlayerSpec


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How a benchmark scores a player.

    Attributes:
        name: its name in reports and ``czjax eval pons --protocol``.
        search: the search (a spec without its base) a network or a built-in player plays under.
        stops_when_decided: each search over a network stops once no later simulation can change
            its move (the same moves; the root values read are those at the stop), unless the
            caller asks for the full searches.
        game_end_rounds: rounds of game-ending simulations before each network call of the stopped
            searches; None: the network's own (``SearchCost.game_end_rounds``).
        conv: how the stopped searches' network computes its 3x3 convolutions; None: on a CPU the
            network's own choice for searches (``SearchCost.cpu_conv``), elsewhere the model's.
    """

    name: str
    search: str
    stops_when_decided: bool = True
    game_end_rounds: int | None = None
    conv: str | None = None

    def spec(self, player: PlayerSpec) -> PlayerSpec:
        """``player`` as this protocol scores it: a network (or a built-in player) under the
        protocol's search; a search or minimax as it is."""
        if is_search(player) or player.name == minimax.NAME:
            return player
        return dataclasses.replace(PlayerSpec.parse(self.search), base=player)

    def network_conv(self, cost: models.SearchCost) -> str:
        """How the stopped searches compute the 3x3 convolutions of a network of this ``cost``."""
        if self.conv is not None:
            return self.conv
        return cost.cpu_conv if platforms.target() == "cpu" else "auto"

    def rounds(self, cost: models.SearchCost) -> int:
        """Rounds of game-ending simulations before each call of a network of this ``cost``."""
        return cost.game_end_rounds if self.game_end_rounds is None else self.game_end_rounds


# AlphaZero.jl's benchmark player (``test_alphazero``): its MCTS with 600 simulations, cpuct 2,
# no Dirichlet noise, temperature 0 (the most visited column, the lowest on ties).
ALPHAZERO_JL = Protocol("alphazero.jl", "azjl:sims=600,c=2.0")
PROTOCOLS = {protocol.name: protocol for protocol in (ALPHAZERO_JL,)}


def protocol_of(protocol: Protocol | str) -> Protocol:
    """The protocol itself, or the one of :data:`PROTOCOLS` so named; one-line ``ValueError`` for
    an unknown name."""
    if isinstance(protocol, Protocol):
        return protocol
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    return PROTOCOLS[protocol]


def protocol_spec(protocol: Protocol | str, spec: PlayerSpec) -> PlayerSpec:
    """The player ``spec`` as ``protocol`` scores it (:meth:`Protocol.spec`); one-line
    ``ValueError`` for an unknown protocol."""
    return protocol_of(protocol).spec(spec)


def protocol_agent(protocol: Protocol | str, spec: PlayerSpec | str) -> Agent:
    """The agent ``protocol`` plays for the player ``spec`` (``czjax``, ``runs/ex3``,
    ``minimax:depth=5``): :func:`czjax.players.loading.load_agent` of :func:`protocol_spec`."""
    return load_agent(protocol_spec(protocol, PlayerSpec.parse(spec) if isinstance(spec, str) else spec))


def streams(agent: Agent) -> bool:
    """Whether ``agent``'s moves can come from searches stopped when decided: AlphaZero.jl's MCTS
    (with transpositions) over a network, whose evaluations draw nothing at random."""
    search = agent.search
    return isinstance(search, AlphaZeroJlMCTS) and search.transpositions and agent.model_name is not None


def stops_when_decided(agent: Agent, protocol: Protocol | str | None, full_searches: bool) -> bool:
    """Whether scoring under ``protocol`` stops each of ``agent``'s searches once its move is
    decided: where the protocol does, unless ``full_searches``, for a player that :func:`streams`."""
    if protocol is None or full_searches:
        return False
    return protocol_of(protocol).stops_when_decided and streams(agent)


def stopped_searches(
    agent: Agent, boards, progress: Progress | None = None, protocol: Protocol | str = ALPHAZERO_JL
) -> azjl_stream.StreamResult:
    """The searches of an ``agent`` that :func:`streams` from int8 ``boards (M, 6, 7)``, each
    stopped once its move is decided (:func:`czjax.search.azjl_stream.stream_search`), its
    network built and called as ``protocol`` says for the network's cost
    (:meth:`Protocol.network_conv`, :meth:`Protocol.rounds`)."""
    model_name = agent.model_name if streams(agent) else None
    if model_name is None:
        raise ValueError(f"{agent.name}: the protocol's stopped searches need AlphaZero.jl's MCTS over a network")
    protocol = protocol_of(protocol)
    cost = models.model_options(model_name)[0].search_cost
    model = models.get_model(model_name, conv=protocol.network_conv(cost))
    return azjl_stream.stream_search(
        agent.search,
        models.model_player(model),
        agent.params,
        boards,
        jax.random.key(0),
        progress=progress,
        convolutions=models.convolves(model),
        game_end_rounds=protocol.rounds(cost),
    )


class SetPolicy(NamedTuple):
    """A player on one set of positions: ``probs (N, 7)``, ``value (N,)`` (None for a player
    without one) and ``greedy (N,)``, its move; ``counts``, each search's simulations and network
    evaluations ``(sims, evaluations)`` where the searches were stopped when decided, else None."""

    name: str
    data: dict[str, Any]
    probs: np.ndarray
    value: np.ndarray | None
    greedy: np.ndarray
    counts: tuple[np.ndarray, np.ndarray] | None = None


def stopped_set_policies(
    agent: Agent, sets: dict[str, dict], progress: Progress, protocol: Protocol | str = ALPHAZERO_JL
) -> Iterator[SetPolicy]:
    """The protocol's scoring of an ``agent`` that :func:`streams` on ``sets`` (``{name: {"boards":
    ...}}``): every position's search in one stream (:func:`stopped_searches`), split back by set;
    the moves are the full searches', the probs and value those at the stop."""
    found = stopped_searches(agent, np.concatenate([data["boards"] for data in sets.values()]), progress, protocol)
    start = 0
    for name, data in sets.items():
        rows = slice(start, start + len(data["boards"]))
        start = rows.stop
        counts = (found.sims_used[rows], found.evaluations[rows])
        yield SetPolicy(name, data, found.policy[rows], found.value[rows], found.action[rows], counts)
