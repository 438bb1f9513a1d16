"""The field every setting of czjax is declared with: its default and its description.

The settings of training (``TrainConfig``, its groups, ``HParams``, each algorithm's own) are
frozen dataclasses whose fields say what their command-line flags need to know, so that the
flags, the overrides and the help text are generated from the dataclasses
(:func:`czjax.cli.flags.add_setting_flags`).
"""

from __future__ import annotations

import dataclasses
from typing import Any


def setting(default: Any, help: str, **flag: Any) -> Any:
    """A field of the settings with its description: ``help`` (the command line's flag shows it)
    and, where the default's type does not tell how a flag reads a value, ``type`` ("positive":
    an integer >= 1, "games": an integer >= 2, "count": an integer >= 0), ``metavar`` and
    ``choices`` (:func:`czjax.cli.flags.add_setting_flags` builds every flag from these). The settings of
    ``TrainConfig``, its groups, ``HParams`` and each algorithm's settings (``Algorithm.settings``) are
    declared with it."""
    return dataclasses.field(default=default, metadata={"help": help, **flag})
