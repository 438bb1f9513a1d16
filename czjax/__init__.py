"""czjax: Connect-Zero in JAX. Connect 4 self-play, policy-gradient and search-based training,
compiled end to end.

The names a notebook uses, from the layer each lives in::

    import czjax
    boards = czjax.new_boards(8)                                   # the rules
    traj, results = czjax.play_games(key, czjax.Side(czjax.random_punisher), czjax.Side(czjax.random_player), 8)
    preset = czjax.get_preset("ex3-rwb")                           # settings
    summary = czjax.run_training(preset.config, czjax.HParams.create(**preset.hparams), "runs/ex3", batches=100)
    agent = czjax.load_agent("gumbel:sims=64:runs/ex3")            # players, searches
    czjax.accuracy(agent, czjax.load_positions())                  # evaluation

Names resolve when first used (PEP 562), so ``import czjax`` and the command line start without
loading JAX until something needs it.
"""

from __future__ import annotations

import importlib

# public name -> (module, attribute); no public name is also a submodule's (``from czjax import
# game`` gives the module, never an attribute of that name)
PUBLIC = {
    # the rules
    "new_boards": ("czjax.game", "new_boards"),
    "step": ("czjax.game", "step"),
    "legal_mask": ("czjax.game", "legal_mask"),
    "apply_moves": ("czjax.game", "apply_moves"),
    "from_moves": ("czjax.game", "from_moves"),
    "to_text": ("czjax.game", "to_text"),
    # players and games
    "PlayerOutput": ("czjax.players", "PlayerOutput"),
    "random_player": ("czjax.players", "random_player"),
    "random_punisher": ("czjax.players", "random_punisher"),
    "random_punisher_leftmost": ("czjax.players", "random_punisher_leftmost"),
    "play_games": ("czjax.rollout", "play_games"),
    "Side": ("czjax.rollout", "Side"),
    "Agent": ("czjax.players.agent", "Agent"),
    "load_agent": ("czjax.players.loading", "load_agent"),
    "policy": ("czjax.players.agent", "policy"),
    # models
    "get_model": ("czjax.models", "get_model"),
    "MODELS": ("czjax.models", "MODELS"),
    # searches
    "make_search": ("czjax.search", "make_search"),
    "search_player": ("czjax.players.searched", "search_player"),
    # training
    "TrainConfig": ("czjax.learn.settings", "TrainConfig"),
    "HParams": ("czjax.learn.settings", "HParams"),
    "make_trainer": ("czjax.learn.trainer", "make_trainer"),
    "get_preset": ("czjax.jobs.presets", "get_preset"),
    "PRESETS": ("czjax.jobs.presets", "PRESETS"),
    "run_training": ("czjax.jobs.loop", "run_training"),
    "run_scan": ("czjax.jobs.scan", "run_scan"),
    "run_tune": ("czjax.jobs.tune", "run_tune"),
    "TuneSpec": ("czjax.jobs.tune", "TuneSpec"),
    # evaluation
    "load_positions": ("czjax.evaluate.positions", "load_positions"),
    "accuracy": ("czjax.evaluate.positions", "accuracy"),
    "load_pons": ("czjax.evaluate.pons", "load_pons"),
    "pons": ("czjax.evaluate.pons", "pons"),
    "play_tournament": ("czjax.evaluate.tournament", "tournament"),
}

__all__ = sorted(PUBLIC)


def __getattr__(name: str):
    if name not in PUBLIC:
        raise AttributeError(f"module 'czjax' has no attribute {name!r}")
    module, attribute = PUBLIC[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # resolved once
    return value


def __dir__():
    return sorted(set(globals()) | set(PUBLIC))
