"""Checkpoints: one msgpack file holding the run's config, hyperparameters and TrainState.

Written atomically (a temporary file in the same folder, then ``os.replace``), so a run killed
while writing leaves the previous checkpoint intact. Loading checks the format and that the
checkpoint was written for the same model, and raises :class:`CheckpointError` with a
one-line message otherwise.

A run's totals are wide counts (:class:`czjax.util.counts.WideCount`), stored as ``{"high", "low"}``; a
checkpoint written when they were int32 scalars loads as well (:func:`load` widens them, and
:func:`stored_count` reads either form from a raw state).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

import jax
import numpy as np
from flax import serialization
from flax.traverse_util import flatten_dict

from czjax.util.counts import WideCount

FILENAME = "checkpoint.msgpack"  # a run folder's checkpoint
FORMAT = "czjax-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: missing, damaged, or written for another model."""


def resolve(spec) -> Path:
    """The checkpoint file for ``spec``: a run folder (its ``checkpoint.msgpack``) or a file."""
    path = Path(spec)
    return path / FILENAME if path.is_dir() else path


def _to_state_dict(state):
    """A TrainState (chex dataclass, unknown to flax), and dataclasses inside it, as nested dicts."""
    if dataclasses.is_dataclass(state):
        return {f.name: _to_state_dict(getattr(state, f.name)) for f in dataclasses.fields(state)}
    return serialization.to_state_dict(state)


def _from_state_dict(template, state_dict):
    if dataclasses.is_dataclass(template) and not isinstance(template, type):
        return dataclasses.replace(
            template,
            **{
                f.name: _from_state_dict(getattr(template, f.name), state_dict[f.name])
                for f in dataclasses.fields(template)
            },
        )
    return serialization.from_state_dict(template, state_dict)


def _widened(template, raw):
    """``raw`` (a stored state) with every count that ``template`` holds as a
    :class:`WideCount` and ``raw`` as a plain integer (a checkpoint written before the counts
    were widened) in the wide form; the rest as it is."""
    if isinstance(template, WideCount):
        return raw if isinstance(raw, dict) else _to_state_dict(WideCount.of(raw))
    if dataclasses.is_dataclass(template) and not isinstance(template, type) and isinstance(raw, dict):
        fields = {f.name: getattr(template, f.name) for f in dataclasses.fields(template)}
        return {k: _widened(fields[k], v) if k in fields else v for k, v in raw.items()}
    return raw


def stored_count(raw) -> int:
    """A count of a stored state as read by :func:`read_meta` (``raw["step"]``, say): the wide
    form, or an int32 scalar of an older checkpoint."""
    return int(WideCount(**raw) if isinstance(raw, dict) else WideCount.of(raw))


def _state_to_host(state) -> dict:
    state = state.replace(key=jax.random.key_data(state.key))
    return jax.tree.map(np.asarray, _to_state_dict(state))


def save(path, state, config: dict, hparams: dict, extra: dict | None = None) -> None:
    """Write ``state`` (a TrainState) with its run description to ``path`` atomically."""
    _write(path, {"config": config, "hparams": hparams, "extra": extra or {}}, _state_to_host(state))


def save_weights(path, model_name: str, params, extra: dict | None = None) -> None:
    """Write a model's parameters alone (no optimizer state, nothing to resume) in the checkpoint
    format: a player for every command that takes a checkpoint, a few times smaller."""
    state = {"params": jax.tree.map(np.asarray, serialization.to_state_dict(params))}
    _write(path, {"config": {"model": model_name}, "hparams": {}, "extra": extra or {}}, state)


def _write(path, meta: dict, state: dict) -> None:
    """The checkpoint file: format, version, ``meta`` as JSON and ``state``, written atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "version": VERSION, "meta": json.dumps(meta), "state": state}
    data = serialization.msgpack_serialize(payload)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_meta(path) -> tuple[dict, dict]:
    """``(meta, raw_state)`` of a checkpoint file; raises CheckpointError if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        payload = serialization.msgpack_restore(path.read_bytes())
    except Exception as err:  # msgpack raises several kinds on damaged data
        raise CheckpointError(f"{path} is damaged or not a czjax checkpoint ({type(err).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a czjax checkpoint")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {payload.get('version')}, this czjax reads {VERSION}")
    try:
        meta = json.loads(payload["meta"])
        state = payload["state"]
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{path} is damaged (missing run description or state)") from None
    return meta, state


def load(path, template, expected_model: str | None = None):
    """Restore a TrainState shaped like ``template``; returns ``(state, meta)``."""
    meta, raw = read_meta(path)
    model = meta.get("config", {}).get("model")
    if expected_model is not None and model != expected_model:
        raise CheckpointError(f"{path} was written for model {model!r}, not {expected_model!r}")
    template = template.replace(key=jax.random.key_data(template.key))
    raw = _widened(template, raw)
    expected = flatten_dict(_to_state_dict(template))
    got = flatten_dict(raw) if isinstance(raw, dict) else {}
    mismatched = sorted("/".join(k) for k in expected.keys() ^ got.keys())
    mismatched += sorted("/".join(k) for k in expected.keys() & got.keys() if np.shape(expected[k]) != np.shape(got[k]))
    if mismatched:
        raise CheckpointError(f"{path} does not match this run's state (differs at {mismatched[0]})")
    state = _from_state_dict(template, raw)
    state = jax.tree.map(lambda t, r: np.asarray(r, dtype=np.asarray(t).dtype), template, state)
    return state.replace(key=jax.random.wrap_key_data(state.key)), meta
