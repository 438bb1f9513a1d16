"""Loading agents: the agent a spec names (:func:`load_agent`), and the parameters a checkpoint
or a PyTorch file holds (:func:`load_params`, :func:`load_weights`).

Every evaluation command (accuracy, puzzles, tournaments, play, analyze, openings) takes a
*spec*: a path to a czjax checkpoint (a run folder or its ``checkpoint.msgpack``), the name
of a built-in player (``random``, ``random-punisher``, ``czjax`` the shipped model),
AlphaZero.jl's minimax (``minimax:depth=5``), a fresh network (``untrained:mlp3``), or a search
over any of them (``mcts:sims=64:runs/ex3``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization
from flax.traverse_util import flatten_dict

from czjax import models, search
from czjax.models import torch_layout
from czjax.players import minimax
from czjax.players.agent import Agent
from czjax.players.builtin import BUILTIN_PLAYERS
from czjax.players.network import model_player
from czjax.players.searched import search_player
from czjax.util import checkpoint
from czjax.util.specs import PlayerSpec

# The models shipped with the package, oldest first: ``czjax@N`` names each, ``czjax`` the newest.
# docs/strength.md says how each was trained and how strong it is; a better one is added, never
# replaces an older one, so that a player once named stays loadable.
SHIPPED_NAME = "czjax"
SHIPPED_FOLDER = Path(__file__).parent.parent / "data" / "models"
SHIPPED_MODELS = {
    "czjax@1": SHIPPED_FOLDER / "czjax-1.msgpack",  # example 3 (Mk4), 61k games, CPU
    "czjax@2": SHIPPED_FOLDER / "czjax-2.msgpack",  # gumbel-az (MLP3), one CPU hour
    # gumbel-az with 16 replay steps (MLP3), one hour on a core of its own
    "czjax@3": SHIPPED_FOLDER / "czjax-3.msgpack",
    # gumbel-az-gpu (a 5 x 64 ResNet), 507 s on one H200: the campaign's strength step
    "czjax@4": SHIPPED_FOLDER / "czjax-4.msgpack",
}
SHIPPED_MODEL = SHIPPED_MODELS["czjax@4"]
# The default opponent of `czjax play` and `czjax serve`, chosen by measurement (docs/strength.md,
# "The default search"; docs/results/default-search/2026-11-26): the strongest under AlphaZero.jl's
# protocol that answers within the time a move was allowed on a 2-core CPU.
DEFAULT_OPPONENT = f"azjl:sims=600:{SHIPPED_NAME}"


def shipped_path(spec: str) -> Path | None:
    """The file of a shipped model's name (``czjax``, ``czjax@1``, ...), else None."""
    return SHIPPED_MODEL if spec == SHIPPED_NAME else SHIPPED_MODELS.get(spec)


def load_params(path) -> tuple[str, Any, dict]:
    """``(model name, params, meta)`` of the learner in a training checkpoint."""
    path = Path(path)
    meta, raw = checkpoint.read_meta(path)
    model_name = meta.get("config", {}).get("model")
    if not models.is_model_name(model_name):
        raise checkpoint.CheckpointError(f"{path} names an unknown model {model_name!r}")
    model = models.get_model(model_name)
    template = jax.eval_shape(lambda key: models.init_params(model, key), jax.random.key(0))
    raw_params = raw.get("params") if isinstance(raw, dict) else None
    if not isinstance(raw_params, dict):
        raise checkpoint.CheckpointError(f"{path} holds no model parameters")
    expected = {k: v.shape for k, v in flatten_dict(serialization.to_state_dict(template)).items()}
    got = {k: np.shape(v) for k, v in flatten_dict(raw_params).items()}
    if expected != got:
        stacked = all(len(got.get(k, ())) == len(s) + 1 and got[k][1:] == s for k, s in expected.items())
        hint = " (a scan checkpoint holds several configurations; load a single run's checkpoint)" if stacked else ""
        raise checkpoint.CheckpointError(f"{path}: its parameters do not match model {model_name!r}{hint}")
    params = serialization.from_state_dict(template, raw_params)
    params = jax.tree.map(lambda t, x: jnp.asarray(x, t.dtype), template, params)
    return model_name, params, meta


TORCH_SUFFIXES = (".pth", ".pt")


def load_weights(spec, model_name: str):
    """The ``model_name`` parameters in ``spec``, to start a run from: a PyTorch project file
    (``.pth`` / ``.pt``, converted by :mod:`czjax.models.torch_layout`) or a czjax checkpoint (a run folder
    or a checkpoint file; its learner's parameters only). A file of another model, or one that
    is neither, is a one-line ``ValueError``."""
    path = Path(spec)
    if path.suffix in TORCH_SUFFIXES:
        return torch_layout.read_params(path, model_name)[1]
    found, params, _ = load_params(checkpoint.resolve(path))
    if not models.same_network(found, model_name):  # "resnet" is "resnet:blocks=5,channels=64"
        raise ValueError(f"{spec} holds weights of model {found!r}, not {model_name!r}")
    return params


def load_agent(spec: PlayerSpec | str) -> Agent:
    """The agent a spec names.

    Args:
        spec: a built-in player (``random``, ``random-punisher``), a shipped model (``czjax``,
            ``czjax@1``, ...), a checkpoint file or run folder, AlphaZero.jl's minimax
            (``minimax:depth=5[,ties=random]``), a fresh network (``untrained:MODEL[:SEED]``), or
            a search over any of these but a search: ``NAME[:OPTIONS]:BASE`` with NAME one of
            :data:`czjax.search.SEARCHES` (``mcts:sims=64:runs/ex3``, ``gumbel:runs/ex3``,
            ``azjl:sims=600:czjax``). Text is parsed once here (:class:`czjax.util.specs.PlayerSpec`);
            the command line passes the spec it parsed.

    Returns:
        The :class:`Agent`, named by the spec's text.

    Raises:
        ValueError: one line saying what is wrong with the spec (an unknown name, search or
            option, a folder without a checkpoint, a path that does not exist).
        czjax.util.checkpoint.CheckpointError: a damaged or foreign checkpoint.
    """
    spec = PlayerSpec.parse(spec) if isinstance(spec, str) else spec
    searched = search.split_search(spec)
    if searched is not None:
        settings, base = searched
        if search.split_search(base) is not None:
            raise ValueError(
                f"{str(spec)!r}: a search cannot search a search; "
                "give a checkpoint or a built-in player after the options"
            )
        return with_search(load_agent(base), settings, str(spec))
    if spec.plain and spec.name in BUILTIN_PLAYERS:
        return Agent(name=spec.name, player=BUILTIN_PLAYERS[spec.name], params=None, model_name=None)
    if spec.name == minimax.NAME:
        return Agent(name=str(spec), player=minimax.from_spec(spec).player(), params=None, model_name=None)
    if spec.name == UNTRAINED and not spec.plain:
        return untrained_agent(spec)
    path = shipped_path(str(spec)) or checkpoint.resolve(str(spec))  # a name or a path, colons and all
    if not path.exists():
        raise ValueError(unknown_player(spec))
    model_name, params, _ = load_params(path)
    return network_agent(str(spec), model_name, params)


def network_agent(name: str, model_name: str, params) -> Agent:
    """A network's parameters in memory (a scan's configuration, say) as an agent."""
    return Agent(name=name, player=model_player(models.get_model(model_name)), params=params, model_name=model_name)


def with_search(base: Agent, settings, name: str) -> Agent:
    """``base`` searched by ``settings`` (a :class:`czjax.search.Search`), named ``name``."""
    return base._replace(name=name, player=search_player(settings, base.player), search=settings, network=base.player)


UNTRAINED = "untrained"


def untrained_agent(spec: PlayerSpec) -> Agent:
    """``untrained:MODEL[:SEED]``: the network ``MODEL`` (``NAME[:OPTIONS]``, the spec's base) as
    a run with that seed starts it (PyTorch-style initialisation, seed 0 by default), for
    calibrating an evaluation."""
    if spec.options or spec.base is None:
        raise ValueError(
            f"{str(spec)!r}: a fresh network is untrained:MODEL[:SEED] (e.g. untrained:mlp3, untrained:resnet:1)"
        )
    network, tail = spec.base, spec.base.base
    seed = int(tail.name) if tail is not None and tail.plain and tail.name.isdigit() else None
    model_name = str(network if seed is None else network.head)  # MODEL[:OPTIONS], then the seed if there is one
    if not models.is_model_name(model_name):
        raise ValueError(f"{str(spec)!r}: unknown model {model_name!r} (e.g. untrained:mlp3, untrained:resnet:1)")
    model = models.get_model(model_name)
    params = models.init_params(model, jax.random.key(0 if seed is None else seed))
    return Agent(name=str(spec), player=model_player(model), params=params, model_name=model_name)


def unknown_player(spec: PlayerSpec) -> str:
    """What is wrong with a player spec that names nothing: a run folder with no checkpoint yet,
    an unknown search, or a path that does not exist."""
    builtins = ", ".join((*BUILTIN_PLAYERS, SHIPPED_NAME, *SHIPPED_MODELS))
    text = str(spec)
    if Path(text).is_dir():
        return (
            f"{text!r} is a folder with no {checkpoint.FILENAME} yet (a run that has not saved its first checkpoint?)"
        )
    if not spec.plain and "/" not in spec.name and "." not in spec.name:
        return (
            f"{text!r}: unknown search {spec.name!r}; a search player is SEARCH[:OPTIONS]:PLAYER with SEARCH one of "
            f"{', '.join(search.SEARCHES)}"
        )
    return (
        f"{text!r} is neither a built-in player ({builtins}) nor an existing checkpoint file or run folder: "
        "no such path"
    )
