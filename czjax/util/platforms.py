"""The platform a program is built for ("cpu", "gpu", "tpu") and what czjax chooses for it: one
table (:data:`CHOICES`, a :class:`Choices` record per platform), read where programs are built.

A training config means the same on any machine; how it is compiled is chosen for a platform, by
measurement there (docs/gpu.md, "Per-platform choices"). The trainer's set-up takes the platform
once (:func:`czjax.learn.trainer.make_trainer`, default the machine's) and passes it to what it
builds. A function deep in a traced program (a search's descent, a layer's "auto" method) reads
:func:`target`: the platform of the program being built (:func:`building_for`), else the
machine's. So a program built for a GPU on a CPU (deviceless ahead-of-time compilation, a test) is
the program a GPU runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator

import jax

PLATFORMS = ("cpu", "gpu", "tpu")
# JAX's names of platforms that are one of czjax's: its GPU plugins' and jax.export's
ALIASES = {"cuda": "gpu", "rocm": "gpu"}
# XLA's CPU option that keeps YNNPACK to matrix products (czjax.util.compiling says why)
YNN_FUSIONS = "xla_cpu_experimental_ynn_fusion_type"


@dataclasses.dataclass(frozen=True)
class Choices:
    """What czjax builds for one platform; each choice gives the same results (tested), only the
    program differs.

    Attributes:
        merged_halves: where both sides of a batch are one player, the two halves' movers are
            one call vmapped over the halves (:mod:`czjax.rollout`).
        descend_levels: levels of a tree a search's walk goes down per test of its loop
            (:func:`czjax.search.tree.descend`).
        jump_max_nodes: the most nodes of a search tree descended without a loop, by pointer
            jumping (:func:`czjax.search.tree.descend_by_jumps`); larger trees are walked.
        stream_slots: the pool of searches of the streamed AlphaZero.jl benchmark
            (:func:`czjax.search.azjl_stream.stream_search`).
        mk4_conv, resnet_conv: how Mk4's and the ResNet's 3x3 convolutions compute under "auto"
            (:data:`czjax.models.CONV_METHODS`).
        mk4_norm, resnet_norm: how Mk4's and the ResNet's GroupNorm layers compute under "auto"
            (:data:`czjax.models.NORM_METHODS`).
        rollout_min_flops: the fewest FLOPs of a player call (boards times the player's FLOPs a
            board) at which "auto" compaction skips finished games in a rollout
            (:func:`czjax.row_skipping.in_rollout`).
        skip_finished_pairs: a rollout skips a pair of plies in which every game has ended
            (``lax.cond``; :func:`czjax.rollout.play_games`), where the branch costs less than
            the pairs it skips.
        column_sampling: a move sampled from logits column by column, not by reductions over the
            row (:func:`czjax.players.base.sample_masked_uniform`; the same moves).
        packed_records: a rollout's records of a ply packed as one array of 32-bit words
            (:func:`czjax.rollout.pack_words`), which a loop step outputs as one array.
        static_models: the networks whose "auto" control flow is static, a program without
            data-dependent branches (``TrainConfig.control_flow``).
        replay_plain_gradient: a replay step takes the plain gradient over its draw, not the
            compacted one (:func:`czjax.learn.trainer.replay_update`).
        loss_min_flops: the fewest forward FLOPs of the learner's whole batch at which the
            on-policy gradient is cut into chunks whose idle ones are skipped
            (:func:`czjax.row_skipping.loss_chunks`); below it the plain gradient.
        loss_counts_configurations: in a scan, that batch is every vmapped configuration's
            (they run as one program, so the chunks' branches are paid once for all of them).
        loss_chunk_min: each chunk holds at least ``loss_min_flops`` (their count a power of
            two up to :data:`czjax.row_skipping.LOSS_CHUNKS`), where a chunk's branch costs
            launches; else that many chunks from ``loss_min_flops`` on.
        convolution_options: compiler options of programs that hold convolutions
            (:mod:`czjax.util.compiling`).
    """

    merged_halves: bool = False
    descend_levels: int = 1
    jump_max_nodes: int = 0
    stream_slots: int = 1024
    mk4_conv: str = "im2col"
    resnet_conv: str = "im2col"
    mk4_norm: str = "flax"
    resnet_norm: str = "flax"
    rollout_min_flops: float = 0.0
    skip_finished_pairs: bool = True
    column_sampling: bool = False
    packed_records: bool = False
    static_models: tuple[str, ...] = ()
    replay_plain_gradient: bool = False
    loss_min_flops: float = 1e8
    loss_counts_configurations: bool = False
    loss_chunk_min: bool = False
    convolution_options: tuple[tuple[str, str | bool], ...] = ()


# Each value measured on its platform (docs/gpu.md), the TPU's chosen by its compiler's estimates; a
# platform neither measured nor estimated keeps the defaults.
CHOICES = {
    # XLA's CPU: compaction pays at any size and each compacted half is its own call; the canonical
    # convolution with grouped norms and YNNPACK kept to matrix products trains Mk4 fastest; the
    # ResNet keeps im2col, its runs recorded bit for bit (tests/data/old-run); a search stream of 512.
    "cpu": Choices(
        stream_slots=512,
        mk4_conv="canonical",
        mk4_norm="grouped",
        convolution_options=((YNN_FUSIONS, "LIBRARY_FUSION_TYPE_DOT"),),
    ),
    # One H100: every loop test and branch waits on the host, so fewer and larger programs a ply.
    # Compaction pays from 3e10 FLOPs a call: Mk4 (19 MFLOP a board) at 50 games, 25 boards a call,
    # 2.2x faster without it, at 4,096 games, 2,048 boards (3.9e10), 1.12x faster with it; a
    # searched player's call (a network call a simulation) passes it from a few boards: the
    # strength recipe at 2,048 games predicted 1.6x faster with 56% of its FLOPs and bytes (counted by
    # czjax bench kernels, not yet measured); static control flow for the SimpleMLP (1.26x at 50 games, 1.49x at
    # 4,096; Mk4 0.68x at 4,096); convolutions and norms not measured yet.
    "gpu": Choices(
        merged_halves=True,
        # Counted without a GPU: each pair of a GroupNorm's sums one reduction, Mk4's forward at 50
        # boards 40 kernels (flax's 52), its gradient 118 (137). Not yet measured.
        mk4_norm="onepass",
        resnet_norm="onepass",
        descend_levels=4,
        # Counted without a GPU: the Gumbel search of 1,024 positions x 32 simulations 1,633 kernels
        # and no host wait, where walking it 4 levels a test was 3,313 kernels and 80 waits
        # (2.5 tests a simulation, measured); its selection at every node costs a tree of n nodes
        # n times a level's arithmetic, so larger trees are walked. Not yet measured.
        jump_max_nodes=128,
        rollout_min_flops=3e10,
        # Counted without a GPU: a rollout's pair of plies writes one array where it wrote seven
        # (nine with targets), 12 fewer kernels a pair. Not yet measured.
        packed_records=True,
        # Counted without a GPU: a ply's sampling one kernel where it was five. Not yet measured.
        column_sampling=True,
        # By the cost model: the branch that skips a pair of plies once every game has ended waits
        # on the host (~7 us) and copies the loop's state (6 kernels) at every pair, ~18 us a pair;
        # a batch of hundreds of games rarely ends a pair early, and at 50 games the pairs skipped
        # (Mk4's ~0.16 ms each, the last one to three) save about what 21 branches cost. Not yet
        # measured.
        skip_finished_pairs=False,
        static_models=("mlp",),
        replay_plain_gradient=True,
        # Counted without a GPU (czjax bench kernels): the loss chunks behind their branches are
        # about 1,000 of example 3's 4,600 launches an iteration and 8 host waits, ~1.5 ms by the
        # cost model, against the arithmetic of the positions they skip (half the gradient's):
        # they pay from ~5e10 forward FLOPs of the batch (Mk4 at 50 games: 2e10, plain; at 2,048
        # games: 8e11, chunked). Predicted, not yet measured.
        loss_min_flops=5e10,
        # By the cost model (czjax bench kernels train --preset ex3-rwb --seeds 8): example 3's 8
        # seeds as one scan are 21 x 50 x 8 positions a batch, 1.6e11 FLOPs, and skipping their
        # idle chunks is predicted 1.21x faster; alone (2e10) the plain gradient stays. Not yet
        # measured.
        loss_counts_configurations=True,
        # By the cost model: a chunk's branch is ~220 launches (~0.4 ms) and a host wait, and at
        # example 3's lengths (12-20 plies: 29-48% of the learner's rows valid) two chunks skip as
        # much as eight; its 8 seeds (1.6e11) then take 2 chunks, 2,048 games of Mk4 (8e11) 8.
        # Predicted, not yet measured.
        loss_chunk_min=True,
    ),
    # A TPU v5e, not yet run: by its compiler's own cycle estimates (czjax bench kernels --target
    # tpu-v5e, uncalibrated), a tree of up to 128 nodes descended without a loop makes the Gumbel
    # search of 4,096 x 32 5.7x faster (PUCT 4.9x), both halves as one call example 3's
    # iteration 1.25x, a ply's records as one array and no branch over finished pairs of plies
    # the random rollout at 1,024 games 1.47x (at 65,536 0.77x: packing grows with the batch);
    # sampling column by column 0.96x, not taken. Not yet measured.
    "tpu": Choices(merged_halves=True, jump_max_nodes=128, packed_records=True, skip_finished_pairs=False),
}
UNMEASURED = Choices()  # a platform without a row (a JAX plugin czjax does not know)


def platform_of(backend: str) -> str:
    """czjax's name of a JAX backend or platform: ``"cuda"`` and ``"rocm"`` are ``"gpu"``."""
    name = backend.lower()
    return ALIASES.get(name, name)


def machine() -> str:
    """The platform of this machine's default devices (``jax.default_backend()``)."""
    return platform_of(jax.default_backend())


def checked(platform: str | None) -> str:
    """``platform`` as czjax names it (None: the machine's); a one-line ``ValueError`` for a name
    that is neither a platform of :data:`PLATFORMS` nor this machine's."""
    if platform is None:
        return machine()
    name = platform_of(platform)
    if name not in PLATFORMS and name != machine():
        raise ValueError(f"unknown platform {platform!r}; choose one of {', '.join(PLATFORMS)}")
    return name


def choices_for(platform: str | None = None) -> Choices:
    """The choices for ``platform`` (None: :func:`target`)."""
    return CHOICES.get(platform_of(platform) if platform else target(), UNMEASURED)


_BUILDING_FOR: contextvars.ContextVar[str | None] = contextvars.ContextVar("czjax_building_for", default=None)


@contextlib.contextmanager
def building_for(platform: str) -> Iterator[str]:
    """Within: :func:`target` is ``platform``. Entered while a program is traced for ``platform``,
    so that what it calls that reads the platform by default builds that platform's program."""
    name = checked(platform)
    token = _BUILDING_FOR.set(name)
    try:
        yield name
    finally:
        _BUILDING_FOR.reset(token)


def target() -> str:
    """The platform of the program being built (the innermost :func:`building_for`), else this
    machine's."""
    return _BUILDING_FOR.get() or machine()
