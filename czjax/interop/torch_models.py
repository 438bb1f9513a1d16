"""czjax's ResNet (the shipped model, ``czjax``) as a PyTorch module, to run the ``.pth`` files
that ``czjax export-torch`` writes of it.

The PyTorch project's own models (``SimpleMLPModel``, ``Connect4MLP3``, ``Connect4CNN_Mk4``) are
defined in that project; czjax's ResNet exists only in czjax, so its PyTorch form is here. Its
state-dict keys and shapes are the layout of :func:`czjax.models.torch_layout.resnet_table`.

Loading an exported file (PyTorch must be installed: ``pip install 'czjax[torch]'``)::

    czjax export-torch czjax -o czjax.pth          # the shipped 5 x 64 ResNet

    import torch
    from czjax.interop import torch_models

    model = torch_models.ResNet(blocks=5, channels=64)  # the sizes the export printed
    model.load_state_dict(torch.load("czjax.pth", weights_only=True)["model_state_dict"])
    model.eval()
    with torch.no_grad():
        logits, value = model(boards)  # boards (N, 6, 7), int8 or float, +1 = the side to move

or in one call, the sizes read from the file: ``model = torch_models.load_resnet("czjax.pth")``.

The network is czjax's ``czjax.models.ResNet`` in PyTorch's NCHW layout: one-hot input planes
(own, opponent, empty), a 3x3 convolution stem, residual blocks of two 3x3 convolutions (no
bias) each followed by GroupNorm (groups of 8 channels, at least one group; eps 1e-5), and two
heads of a 1x1 convolution each. czjax computes in NHWC and flattens a head's cells as (row,
column, channel); the heads here permute to that order before flattening, so the Linear
weights are czjax's as they are.

PyTorch is imported only when a function here is called, since it is an optional extra.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

from czjax import game, models
from czjax.models import torch_layout


@functools.cache
def _classes() -> SimpleNamespace:
    """The PyTorch classes, defined once torch is imported (``ResidualBlock``, ``ResNet``)."""
    torch = torch_layout._import_torch()
    nn: Any = torch.nn  # Any: the classes below subclass a module imported at run time

    def one_hot_planes(boards):
        """Boards ``(N, 6, 7)`` -> float ``(N, 3, 6, 7)``: own, opponent, empty (czjax's order)."""
        return torch.stack([boards == 1, boards == -1, boards == 0], dim=1).float()

    def flatten_cells(x):
        """``(N, C, 6, 7)`` -> ``(N, 42 * C)`` in czjax's NHWC order: index (row * 7 + col) * C + channel."""
        return x.permute(0, 2, 3, 1).flatten(1)

    class ResidualBlock(nn.Module):
        """conv0 -> norm0 -> ReLU -> conv1 -> norm1, the input added, ReLU."""

        def __init__(self, channels: int):
            super().__init__()
            self.conv0 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.norm0 = nn.GroupNorm(models.resnet_groups(channels), channels, eps=models.TORCH_EPS)
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.norm1 = nn.GroupNorm(models.resnet_groups(channels), channels, eps=models.TORCH_EPS)

        def forward(self, x):
            y = torch.relu(self.norm0(self.conv0(x)))
            return torch.relu(x + self.norm1(self.conv1(y)))

    class ResNet(nn.Module):
        """czjax's residual policy-value network: ``forward(boards (N, 6, 7))`` -> ``(logits (N,
        7), value (N,))``, the value in [-1, 1] for the side to move."""

        def __init__(self, blocks: int = 5, channels: int = 64):
            super().__init__()
            cells = game.ROWS * game.COLS
            self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
            self.stem_norm = nn.GroupNorm(models.resnet_groups(channels), channels, eps=models.TORCH_EPS)
            self.blocks = nn.ModuleList(ResidualBlock(channels) for _ in range(blocks))
            self.policy_conv = nn.Conv2d(channels, 2, 1)  # czjax: a Dense(2) on every cell
            self.policy = nn.Linear(2 * cells, game.COLS)
            self.value_conv = nn.Conv2d(channels, 1, 1)  # czjax: a Dense(1) on every cell
            self.value_hidden = nn.Linear(cells, channels)
            self.value = nn.Linear(channels, 1)

        def forward(self, boards):
            x = torch.relu(self.stem_norm(self.stem(one_hot_planes(boards))))
            for block in self.blocks:
                x = block(x)
            logits = self.policy(flatten_cells(torch.relu(self.policy_conv(x))))
            v = torch.relu(self.value_hidden(flatten_cells(torch.relu(self.value_conv(x)))))
            return logits, torch.tanh(self.value(v))[:, 0]

    for cls in (ResidualBlock, ResNet):  # named as the module-level attributes they are (__getattr__), so
        cls.__qualname__ = cls.__name__  # a whole module pickles (torch.save(model)) and reads back
    return SimpleNamespace(ResidualBlock=ResidualBlock, ResNet=ResNet)


def resnet_class():
    """The PyTorch class ``ResNet(blocks=5, channels=64)`` (imports torch)."""
    return _classes().ResNet


def __getattr__(name: str):
    """``torch_models.ResNet`` and ``torch_models.ResidualBlock``, made when first asked for, so
    that importing this module does not import torch."""
    if name in ("ResNet", "ResidualBlock"):
        return getattr(_classes(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resnet(blocks: int = 5, channels: int = 64):
    """A fresh ``ResNet`` module of that size (PyTorch's default initialisation); its state dict
    has the keys and shapes of czjax's export."""
    return resnet_class()(blocks, channels)


def load_resnet(path):
    """The ResNet in a ``.pth`` file that ``czjax export-torch`` wrote (or a bare state dict),
    its size read from the file, weights loaded strictly, in eval mode; a one-line ValueError
    for a file of another model."""
    torch = torch_layout._import_torch()
    state_dict = torch_layout.read_pth(path)
    model_name = torch_layout.detect_model(state_dict)
    flax_module = models.get_model(model_name)
    if not isinstance(flax_module, models.ResNet):
        raise ValueError(f"{path} holds a {torch_layout.torch_class(model_name)} ({model_name}), not a ResNet")
    model = resnet(flax_module.blocks, flax_module.channels)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state_dict.items()})
    return model.eval()
