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

- **Several hosts** (:func:`initialize_hosts`, ``czjax train --coordinator``): one process per
  host joins with ``jax.distributed.initialize``; the devices are then every host's, the mesh
  spans them, and each process runs the same program (no data travels from the hosts: the games
  come from the seed). Process 0 writes the run's files.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

GAMES = "games"
CONFIGS = "configs"


def initialize_hosts(coordinator: str, num_processes: int | None = None, process_id: int | None = None) -> None:
    """Join a run over several hosts (one process each) before anything starts a JAX backend:
    ``coordinator`` is process 0's ``HOST:PORT``, or ``auto`` where JAX detects the cluster
    itself (SLURM, Open MPI, Kubernetes, Cloud TPU). CPU hosts exchange data through gloo."""
    if coordinator != "auto" and (num_processes is None or process_id is None):
        raise ValueError("--coordinator HOST:PORT needs --num-processes and --process-id")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if coordinator == "auto":
        jax.distributed.initialize()
    else:
        jax.distributed.initialize(coordinator, num_processes, process_id)


def is_main_process() -> bool:
    """Whether this process writes the run's files (process 0; the only one on one host)."""
    return jax.process_index() == 0


def local_view(tree):
    """``tree`` with every array this process cannot read whole (replicated over several hosts)
    replaced by its copy on one of this process's devices; other leaves as they are."""

    def view(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return x.addressable_data(0)
        return x

    return jax.tree.map(view, tree)


def available(requested: int | None) -> int:
    """The number of devices to use: ``requested`` (all when None), checked. Over several hosts
    these are every host's devices."""
    have = jax.device_count()
    if requested is None:
        return have
    if not 1 <= requested <= have:
        raise ValueError(f"--devices {requested}: this machine has {have} {jax.default_backend()} device(s)")
    return requested


@functools.cache
def mesh(num_devices: int, axis: str) -> Mesh | None:
    """A one-axis mesh over the first ``num_devices`` devices (of every host); None for one device."""
    if num_devices <= 1:
        return None
    return Mesh(jax.devices()[:num_devices], (axis,))


def split(x: jax.Array, num_devices: int, axis: int = 0) -> jax.Array:
    """Inside ``jit``: ``x`` split along ``axis`` (games) across the training mesh. The games
    need not divide evenly (50 over 4 devices): XLA pads the last part."""
    m = mesh(num_devices, GAMES)
    if m is None:
        return x
    spec: list[str | None] = [None] * x.ndim
    spec[axis] = GAMES
    return lax.with_sharding_constraint(x, NamedSharding(m, PartitionSpec(*spec)))


def replicate(tree, num_devices: int):
    """``tree`` placed whole on every device of the training mesh (parameters, state). Over
    several hosts every process holds the same values (the same seed), and each places its own
    devices' copies."""
    m = mesh(num_devices, GAMES)
    if m is None:
        return tree
    sharding = NamedSharding(m, PartitionSpec())
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    return jax.tree.map(lambda x: _global_copy(x, sharding), tree)


def _global_copy(x, sharding):
    if isinstance(x, jax.Array) and x.sharding == sharding:
        return x
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(_global_copy(jax.random.key_data(x), sharding), impl=jax.random.key_impl(x))
    value = np.asarray(x)
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def spread_configurations(tree, num_devices: int):
    """A scan's stacked states or hyperparameters, their leading configuration axis split
    across the devices."""
    m = mesh(num_devices, CONFIGS)
    return tree if m is None else jax.device_put(tree, NamedSharding(m, PartitionSpec(CONFIGS)))


def largest_divisor(n: int, limit: int) -> int:
    """The most devices, at most ``limit``, that split ``n`` evenly."""
    return max(d for d in range(1, limit + 1) if n % d == 0)
