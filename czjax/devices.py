"""Several devices with JAX's own sharding: a batch's games, or a scan's configurations.

- **Training** (``devices > 1``): the games of a batch are split across the devices of a
  one-axis mesh (:data:`GAMES`). The rollout's per-game arrays and the learner's positions
  carry sharding constraints; parameters and optimizer state are replicated; the compiler
  (GSPMD) partitions the program and combines the gradient across devices. The program is the
  same computation as on one device: the same seed gives the same games (random numbers are
  drawn per game with partitionable threefry, not per device), and losses agree within float
  summation order.
- **Scans**: a group's configurations are split across the devices (:data:`CONFIGS`); each
  configuration's run stays on one device.

Nothing here changes what is computed, only where; with one device every function is the
identity.
"""

from __future__ import annotations

import functools

import jax
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

GAMES = "games"
CONFIGS = "configs"


def available(requested: int | None) -> int:
    """The number of local devices to use: ``requested`` (all when None), checked."""
    have = jax.local_device_count()
    if requested is None:
        return have
    if not 1 <= requested <= have:
        raise ValueError(f"--devices {requested}: this machine has {have} {jax.default_backend()} device(s)")
    return requested


@functools.lru_cache(maxsize=None)
def mesh(num_devices: int, axis: str) -> Mesh | None:
    """A one-axis mesh over the first ``num_devices`` local devices; None for one device."""
    if num_devices <= 1:
        return None
    return Mesh(jax.local_devices()[:num_devices], (axis,))


def split(x: jax.Array, num_devices: int, axis: int = 0) -> jax.Array:
    """Inside ``jit``: ``x`` split along ``axis`` (games) across the training mesh. The games
    need not divide evenly (50 over 4 devices): XLA pads the last part."""
    m = mesh(num_devices, GAMES)
    if m is None:
        return x
    spec = [None] * x.ndim
    spec[axis] = GAMES
    return lax.with_sharding_constraint(x, NamedSharding(m, PartitionSpec(*spec)))


def replicate(tree, num_devices: int):
    """``tree`` placed whole on every device of the training mesh (parameters, state)."""
    m = mesh(num_devices, GAMES)
    return tree if m is None else jax.device_put(tree, NamedSharding(m, PartitionSpec()))


def spread_configurations(tree, num_devices: int):
    """A scan's stacked states or hyperparameters, their leading configuration axis split
    across the devices."""
    m = mesh(num_devices, CONFIGS)
    return tree if m is None else jax.device_put(tree, NamedSharding(m, PartitionSpec(CONFIGS)))


def largest_divisor(n: int, limit: int) -> int:
    """The most devices, at most ``limit``, that split ``n`` evenly."""
    return max(d for d in range(1, limit + 1) if n % d == 0)


