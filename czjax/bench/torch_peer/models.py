"""The PyTorch project's models (``SimpleMLPModel``, ``Connect4MLP3``, ``Connect4CNN_Mk4``) with
its layers and module names, so czjax's weights load into them with
:func:`czjax.models.torch_layout.to_state_dict` and fresh ones are drawn in the project's order.
"""

from __future__ import annotations

from typing import Any

from czjax.bench.torch_peer.base import import_torch


def build_model(name: str):
    """``SimpleMLPModel``, ``Connect4MLP3`` or ``Connect4CNN_Mk4`` returning ``(logits, value or None)``."""
    torch = import_torch()
    nn: Any = torch.nn  # torch is imported on call: nn is a value here, Any lets Peer subclass nn.Module

    class Peer(nn.Module):
        def __init__(self):
            super().__init__()
            self.kind = name
            if name == "mlp":
                layers = _mlp_layers(nn)
            elif name == "mlp3":
                layers = _mlp3_layers(nn)
            else:
                layers = _cnn_mk4_layers(nn, value_head=name == "cnn-mk4-value")
            for attribute, module in layers.items():  # in the PyTorch project's order: its state_dict's
                setattr(self, attribute, module)

        def forward(self, boards):
            if self.kind == "mlp":
                return self.layers(boards.float()), None
            if self.kind == "mlp3":
                out = self.layers(boards.float())
                return out[:, :7], torch.tanh(out[:, 7])
            x = torch.stack([boards == 1, boards == -1, boards == 0], dim=1).float()
            x = self.feature_extractor(x)
            for block in (self.resblock1, self.resblock2, self.resblock3):
                x = torch.relu(x + block(x))
            features = self.downsample(x).view(-1, 448)
            value = self.value_head(features)[:, 0] if self.value_head is not None else None
            return self.fc_layers(features), value

    return Peer()


def _stack(nn, layers):
    """``layers`` after a flatten, numbered ``layers.i`` as in the PyTorch project."""
    return nn.Sequential(nn.Flatten(), *layers)


def _mlp_layers(nn) -> dict[str, Any]:
    """``SimpleMLPModel``'s modules (made in this order: it decides their initial weights)."""
    return {"layers": _stack(nn, [nn.Linear(42, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 7)])}


def _mlp3_layers(nn) -> dict[str, Any]:
    """``Connect4MLP3``'s modules: seven hidden layers, then 7 logits and a value."""
    hidden = []
    for i in range(7):
        hidden += [nn.Linear(42 if i == 0 else 256, 256, bias=False), nn.LayerNorm(256), nn.ReLU()]
    return {"layers": _stack(nn, hidden + [nn.Linear(256, 8)])}


def _cnn_mk4_layers(nn, value_head: bool) -> dict[str, Any]:
    """``Connect4CNN_Mk4``'s modules by attribute name, in the order they are made and registered;
    ``value_head`` None unless asked for."""
    conv = lambda c_in: nn.Conv2d(c_in, 64, 3, padding=1, bias=False)  # noqa: E731
    layers = {"feature_extractor": nn.Sequential(conv(3), nn.GroupNorm(16, 64), nn.ReLU())}
    for i in (1, 2, 3):
        layers[f"resblock{i}"] = nn.Sequential(
            conv(64), nn.GroupNorm(16, 64), nn.ReLU(), conv(64), nn.GroupNorm(16, 64)
        )
    layers["downsample"] = nn.Conv2d(64, 64, (6, 1), bias=False)
    layers["fc_layers"] = nn.Sequential(
        nn.Linear(448, 128, bias=False),
        nn.LayerNorm(128),
        nn.ReLU(),
        nn.Linear(128, 128, bias=False),
        nn.LayerNorm(128),
        nn.ReLU(),
        nn.Linear(128, 7),
    )
    layers["value_head"] = (
        nn.Sequential(nn.Linear(448, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1), nn.Tanh())
        if value_head
        else None
    )
    return layers
