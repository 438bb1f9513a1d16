"""Checkpoints: one msgpack file holding the run's config, hyperparameters and TrainState.

Written atomically (a temporary file in the same folder, then ``os.replace``), so a run killed
while writing leaves the previous checkpoint intact. The file ends with a checksum of everything
before it (SHA-256, written last), which loading verifies, so bytes damaged anywhere in a file
(a disk, a copy, an editor) are refused rather than trained on; a file written before checksums
were added has none and loads as before. Loading checks the format and that the checkpoint was
written for the same model, and raises :class:`CheckpointError` with a one-line message otherwise.

A run keeps its earlier checkpoints too, newest first (:func:`save` with ``keep``:
``checkpoint.1.msgpack`` the one before ``checkpoint.msgpack``, ...), so a damaged one is not the
end of the run: :func:`newest_intact` names the newest one that verifies.

A run's totals are wide counts (:class:`czjax.util.counts.WideCount`), stored as ``{"high", "low"}``; a
checkpoint written when they were int32 scalars loads as well (:func:`load` widens them, and
:func:`stored_count` reads either form from a raw state).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path

import jax
import numpy as np
from flax import serialization
from flax.traverse_util import flatten_dict

from czjax.util.counts import WideCount
from czjax.util.specs import PlayerSpec

FILENAME = "checkpoint.msgpack"  # a run folder's checkpoint
FORMAT = "czjax-checkpoint"
VERSION = 1
# The footer after the msgpack payload: this tag, the payload's SHA-256 in hex, a newline. Outside
# the payload, so the payload's format (VERSION) is unchanged and older files load as they are.
CHECKSUM_TAG = b"\nczjax-sha256:"
FOOTER_BYTES = len(CHECKSUM_TAG) + 64 + 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: missing, damaged, or written for another model."""


class DamagedCheckpoint(CheckpointError):
    """A checkpoint file whose bytes are not what was written: its checksum disagrees, or its
    contents do not parse."""


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


def save(path, state, config: dict, hparams: dict, extra: dict | None = None, keep: int = 0) -> None:
    """Write ``state`` (a TrainState) with its run description to ``path`` atomically; with
    ``keep``, the checkpoint it replaces and up to ``keep - 1`` before it are kept as
    :func:`earlier` ``(path, 1)``, ``(path, 2)``, ..."""
    if keep:
        _shift_earlier(Path(path), keep)
    _write(path, {"config": config, "hparams": hparams, "extra": extra or {}}, _state_to_host(state))


def earlier(path, age: int) -> Path:
    """The checkpoint kept ``age`` saves before ``path``: ``checkpoint.2.msgpack`` for age 2."""
    path = Path(path)
    return path.with_name(f"{path.stem}.{age}{path.suffix}")


def kept(path) -> list[Path]:
    """``path`` and its earlier checkpoints that exist, newest first."""
    path = Path(path)
    prefix, suffix = path.stem + ".", path.suffix
    ages = []
    for candidate in path.parent.glob(f"{prefix}*{suffix}"):
        age = candidate.name[len(prefix) : len(candidate.name) - len(suffix)]
        if age.isdigit():
            ages.append(int(age))
    return [p for p in [path, *(earlier(path, age) for age in sorted(ages))] if p.is_file()]


def newest_intact(path) -> tuple[Path, dict] | None:
    """The newest of :func:`kept` ``(path)`` that reads as a checkpoint (checksum and format), with
    its raw state as :func:`read_meta` gives it; None when none does."""
    for candidate in kept(path):
        try:
            _, raw = _read_meta(candidate)
        except CheckpointError:
            continue
        return candidate, raw
    return None


def _shift_earlier(path: Path, keep: int) -> None:
    """Before ``path`` is replaced: each kept checkpoint one age older (the oldest beyond
    ``keep`` dropped), and ``path`` itself kept as age 1. Each step is an atomic rename (age 1 a
    hard link first), so ``path`` exists throughout and a crash between steps loses no file but
    the oldest."""
    for age in range(keep, 1, -1):
        if earlier(path, age - 1).exists():
            os.replace(earlier(path, age - 1), earlier(path, age))
    if path.exists():
        link = path.with_name(path.name + ".keep.tmp")
        link.unlink(missing_ok=True)
        try:
            os.link(path, link)
        except OSError:  # a file system without hard links
            link.write_bytes(path.read_bytes())
        os.replace(link, earlier(path, 1))


def save_weights(path, model_name: str, params, extra: dict | None = None) -> None:
    """Write a model's parameters alone (no optimizer state, nothing to resume) in the checkpoint
    format: a player for every command that takes a checkpoint, a few times smaller."""
    state = {"params": jax.tree.map(np.asarray, serialization.to_state_dict(params))}
    _write(path, {"config": {"model": model_name}, "hparams": {}, "extra": extra or {}}, state)


def _write(path, meta: dict, state: dict) -> None:
    """The checkpoint file: format, version, ``meta`` as JSON and ``state``, written atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "version": VERSION, "meta": json.dumps(meta, default=spec_text), "state": state}
    data = serialization.msgpack_serialize(payload)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.write(CHECKSUM_TAG + hashlib.sha256(data).hexdigest().encode() + b"\n")  # last
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def spec_text(value) -> str:
    """A player spec in a checkpoint's description (a config's search, say) as the text it was
    given as; anything else JSON cannot write is an error, as ``json.dumps`` raises it."""
    if isinstance(value, PlayerSpec):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def read_meta(path) -> tuple[dict, dict]:
    """``(meta, raw_state)`` of a checkpoint file; raises CheckpointError if it is not one,
    naming for a damaged one the newest intact checkpoint kept beside it."""
    try:
        return _read_meta(Path(path))
    except DamagedCheckpoint as err:
        hint = _intact_hint(Path(path))
        if not hint:
            raise
        raise DamagedCheckpoint(f"{err}; {hint}") from None


def _intact_hint(path: Path) -> str:
    """Where to go on from a damaged checkpoint: the newest intact one kept beside it ("" when
    none was kept)."""
    if len(kept(path)) < 2:
        return ""
    found = newest_intact(path)
    if found is None:
        return "no earlier checkpoint kept beside it is intact either"
    intact, raw = found
    batch = f" (batch {stored_count(raw['step']):,})" if isinstance(raw, dict) and "step" in raw else ""
    return f"the newest intact checkpoint is {intact}{batch}: copy it over {path.name} to continue from it"


def _read_meta(path: Path) -> tuple[dict, dict]:
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    data = _verified_payload(path)
    try:
        payload = serialization.msgpack_restore(data)
    except Exception as err:  # msgpack raises several kinds on damaged data
        raise DamagedCheckpoint(f"{path} is damaged or not a czjax checkpoint ({type(err).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a czjax checkpoint")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint version {payload.get('version')}, this czjax reads {VERSION}")
    try:
        meta = json.loads(payload["meta"])
        state = payload["state"]
    except (KeyError, TypeError, ValueError):
        raise DamagedCheckpoint(f"{path} is damaged (missing run description or state)") from None
    return meta, state


def _verified_payload(path: Path) -> bytes:
    """The msgpack payload of a checkpoint file, its checksum verified (a file without one, from
    before checksums, as it is); CheckpointError when the checksum disagrees."""
    data = path.read_bytes()
    footer = data[-FOOTER_BYTES:]
    if not footer.startswith(CHECKSUM_TAG):
        return data
    payload = data[:-FOOTER_BYTES]
    if hashlib.sha256(payload).hexdigest().encode() != footer[len(CHECKSUM_TAG) : -1]:
        raise DamagedCheckpoint(f"{path} is damaged: its checksum does not match its contents")
    return payload


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
