"""Checkpoint exchange with the PyTorch project (Connect-Zero): ``czjax import-torch`` and
``czjax export-torch``. The parameter layout itself is :mod:`czjax.models.torch_layout`.

The optimizer state is not exchanged: an imported checkpoint starts a fresh AdamW state, and an
exported file holds ``model_state_dict`` alone (what ``load_state_dict`` needs).
"""

from __future__ import annotations

from czjax.learn.settings import HParams, TrainConfig
from czjax.learn.trainer import make_trainer
from czjax.models.torch_layout import read_params, to_state_dict, write_pth
from czjax.players.loading import load_params
from czjax.util import checkpoint


def import_torch(pth_path, out_path, model_name: str | None = None, seed: int = 0) -> str:
    """Write a czjax checkpoint from a PyTorch project file; returns the model name.

    The checkpoint holds the imported weights as the learner and as the frozen opponent, with a
    fresh AdamW state, under the default training settings of that model (``czjax train
    --resume`` continues from it; evaluation commands load it). It is the step-0 checkpoint of a
    run started with ``--init-from`` the file, and records the file the same way.
    """
    detected, params = read_params(pth_path, model_name)
    config = TrainConfig(model=detected)
    state = make_trainer(config).init(seed, params)
    checkpoint.save(
        out_path, state, config.to_dict(), HParams.create().to_dict(), {"seed": seed, "init_from": str(pth_path)}
    )
    return detected


def export_torch(checkpoint_path, out_path) -> str:
    """Write the learner of a czjax checkpoint as a PyTorch project ``.pth``; returns the model name."""
    model_name, params, _ = load_params(checkpoint_path)
    write_pth(out_path, to_state_dict(model_name, params))
    return model_name
