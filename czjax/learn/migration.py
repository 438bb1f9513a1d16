"""Configs stored by earlier versions of czjax, read as today's: the one place that knows what
an old ``run.json``, ``scan.json`` or checkpoint wrote (:func:`current_form`), so that an old run
resumes as it began. :meth:`czjax.learn.settings.TrainConfig.from_dict` reads its result.

A setting added later needs an entry in :data:`SETTINGS_BEFORE_THEY_EXISTED` when runs stored
before it did something other than its default; a setting moved into a group needs its old flat
name in :data:`FLAT_SETTINGS`; a value renamed needs its old name in :data:`RENAMED_VALUES`.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection

# Flat names of settings that are now nested (configs stored before the nesting use them).
FLAT_SETTINGS = {
    "ppo_clip": ("ppo", "clip"),
    "ppo_epochs": ("ppo", "epochs"),
    "target_kl": ("ppo", "target_kl"),
    "ppo_kl_stop": ("ppo", "kl_stop"),
    "promote_every_games": ("promotion", "every_games"),
    "promote_window_games": ("promotion", "window_games"),
    "promote_threshold": ("promotion", "threshold"),
    "pool": ("pool", "members"),
    "pool_ema": ("pool", "ema"),
    "league": ("pool", "league"),
    "league_slots": ("pool", "league_slots"),
    "league_threshold": ("pool", "league_threshold"),
    "promote_draws_count_half": ("promotion", "draws_count_half"),
    "ppo_bootstrap": ("ppo", "bootstrap"),
}
# What a stored config that predates a setting did: Flax's initialisation, PPO's KL test before
# the step, a draw worth nothing in promotion, PPO's returns without bootstrapping.
SETTINGS_BEFORE_THEY_EXISTED = {
    "init": "flax",
    "ppo_kl_stop": "before-step",
    "promote_draws_count_half": False,
    "ppo_bootstrap": False,
}

# Values renamed since: setting -> {old name: new name}. Connect-Zero's alpha mode was the
# algorithm "alpha", a name that read as AlphaZero's; it is AlphaZero with hard targets.
RENAMED_VALUES = {"algorithm": {"alpha": "alphazero-hard"}}


def current_value(setting: str, value, *, warn: bool = False):
    """``value`` of ``setting`` by its name today (:data:`RENAMED_VALUES`); with ``warn``, an old
    name a user gave (a flag, a constructor) says so with a ``FutureWarning``, for one release."""
    renamed = RENAMED_VALUES.get(setting, {})
    if not isinstance(value, str) or value not in renamed:
        return value
    if warn:
        warnings.warn(
            f"the {setting} {value!r} is called {renamed[value]!r} now ({value!r} goes in the next release)",
            FutureWarning,
            stacklevel=3,
        )
    return renamed[value]


def current_form(stored: dict, groups: Collection[str]) -> dict:
    """A stored config in today's form: the top-level settings, then every group of settings
    (``groups``: their names, ``"ppo"``, ``"pool"``, ...) as a dict under its name.

    A config stored before the settings were nested (no group is a dict) gets what its run did
    for the settings added since (:data:`SETTINGS_BEFORE_THEY_EXISTED`), and a flat name of a
    setting now in a group (:data:`FLAT_SETTINGS`) moves into its group, and a value renamed
    since takes its name today (:data:`RENAMED_VALUES`). A config in today's
    form comes back as it was.
    """
    if not any(isinstance(stored.get(group), dict) for group in groups):  # before the settings were nested
        stored = {**SETTINGS_BEFORE_THEY_EXISTED, **stored}
    nested = {group: dict(stored[group]) for group in groups if isinstance(stored.get(group), dict)}
    for flat_name, (group, name) in FLAT_SETTINGS.items():
        if flat_name in stored and not isinstance(stored[flat_name], dict):
            nested.setdefault(group, {})[name] = stored[flat_name]
    top = {k: current_value(k, v) for k, v in stored.items() if k not in FLAT_SETTINGS and k not in groups}
    return {**top, **nested}
