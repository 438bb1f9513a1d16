"""What picks a move: players, pure functions ``(params, boards, key) -> PlayerOutput``, and the
agents built from them.

One module per job, on the floors of docs/DESIGN.md (a module imports only from those below it):

- ``base``: :class:`PlayerOutput`, the :data:`Player` function, masking and sampling;
- ``builtin``: the built-in players (random, RandomPunisher), :data:`BUILTIN_PLAYERS`;
- ``network``: a network as a player (:func:`czjax.players.network.model_player`);
- ``minimax``: AlphaZero.jl's depth-limited minimax, a player over the rules;
- ``searched``: a search over another player, as a player
  (:func:`czjax.players.searched.search_player`);
- ``agent``: the :class:`czjax.players.agent.Agent` (a player with its parameters, name, network
  and search) and what is asked of it on the host: its policy, a searched move, self-play;
- ``loading``: the agent a spec names (:func:`czjax.players.loading.load_agent`): a built-in
  name, a shipped model, a checkpoint, a fresh network, minimax, or a search over one of them.

This package names what the floors below a search use (``base`` and ``builtin``), as the module
``czjax.players`` did; the others are imported from their module.
"""

from __future__ import annotations

from czjax.players.base import (
    LOSS_MASK_VALUE,
    Player,
    PlayerOutput,
    entropy,
    mask_for_loss,
    mask_for_sampling,
    masked_entropy,
    masked_log_probs,
    sample,
    sample_masked,
    sample_masked_uniform,
)
from czjax.players.builtin import (
    BUILTIN_PLAYERS,
    forced_columns,
    random_player,
    random_punisher,
    random_punisher_leftmost,
    winning_columns,
)

__all__ = [
    "BUILTIN_PLAYERS",
    "LOSS_MASK_VALUE",
    "Player",
    "PlayerOutput",
    "entropy",
    "forced_columns",
    "mask_for_loss",
    "mask_for_sampling",
    "masked_entropy",
    "masked_log_probs",
    "random_player",
    "random_punisher",
    "random_punisher_leftmost",
    "sample",
    "sample_masked",
    "sample_masked_uniform",
    "winning_columns",
]
