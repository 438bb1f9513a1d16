"""Opponent pools and the league, inside the compiled training step.

A pool is a fixed list of players (built-in names or checkpoint files), chosen on device for
each batch with weights ``clip(1 - EMA win rate, 0.05, 1)``: the opponents the learner beats
least are played most. A league adds a frozen copy of the learner to a slot whenever its EMA
win rate against every available member exceeds a threshold (the oldest copy is replaced once
every slot is used).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
from jax import lax

from czjax import rollout
from czjax.players.loading import load_agent
from czjax.util.fields import setting
from czjax.util.pytree import pytree_dataclass
from czjax.util.specs import PlayerSpec


@dataclasses.dataclass(frozen=True)
class PoolSettings:
    """opponent="pool": a fixed list of players (built-in names or checkpoint files), chosen on
    device per batch with weights ``clip(1 - EMA win rate, 0.05, 1)``; ``league=True`` adds a
    frozen copy of the learner whenever its EMA win rate against every member exceeds the
    threshold (:mod:`czjax.learn.pool`)."""

    members: tuple[PlayerSpec, ...] = setting(
        (),
        "opponents for --opponent pool: random, random-punisher, checkpoint files; each batch draws one, "
        "favouring those the learner beats least",
        metavar="PLAYER",
    )
    ema: float = setting(0.1, "the step of the win rates' moving average per batch against a member (default 0.1)")
    league: bool = setting(False, "add a frozen copy of the learner to the pool whenever it beats every member")
    league_slots: int = setting(
        8, "a league keeps at most this many learner copies, then replaces the oldest (default 8)", type="positive"
    )
    league_threshold: float = setting(
        0.6, "a league adds a copy when the learner's win rate against every member exceeds this (default 0.6)"
    )

    def __post_init__(self):
        # text when given by a flag or read back from JSON (a list then): parsed once
        members = tuple(PlayerSpec.parse(m) if isinstance(m, str) else m for m in self.members)
        object.__setattr__(self, "members", members)
        if not 0 < self.ema <= 1 or self.league_slots < 1 or not 0 <= self.league_threshold <= 1:
            raise ValueError("pool ema must be in (0, 1], league_slots >= 1 and league_threshold in [0, 1]")


@pytree_dataclass(frozen=True)
class PoolState:
    """Opponent pool: fixed members first, then the league's learner copies (slots)."""

    member_params: Any  # tuple, one entry per fixed member (None for a built-in player)
    win_rate: chex.Array  # (members + slots,) EMA of the learner's win rate against each
    league_params: Any  # learner copies stacked on a leading slot axis (None without a league)
    league_active: chex.Array  # (slots,) bool
    league_next: chex.Array  # the slot the next copy goes to

    def available(self) -> chex.Array:
        """``(members + slots,)`` bool: the fixed members, then the league slots in use."""
        num_members = self.win_rate.shape[-1] - self.league_active.shape[-1]
        return jnp.concatenate([jnp.ones((num_members,), bool), self.league_active])


def load_member(spec: PlayerSpec):
    """``(player, params)`` of a pool member: any player (:func:`czjax.players.loading.load_agent`), a
    built-in one (params None) or a checkpoint file."""
    agent = load_agent(spec)
    return agent.player, agent.params


def init_pool(members: list, slots: int, params) -> PoolState:
    """Every member at an uninformed win rate of 0.5, the league's slots empty."""
    return PoolState(
        member_params=tuple(member_params for _, member_params in members),
        win_rate=jnp.full((len(members) + slots,), 0.5, jnp.float32),
        league_params=jax.tree.map(lambda x: jnp.zeros((slots,) + x.shape, x.dtype), params) if slots else None,
        league_active=jnp.zeros((slots,), bool),
        league_next=jnp.zeros((), jnp.int32),
    )


def opponent_weights(win_rate: jax.Array, available: jax.Array) -> jax.Array:
    """Sampling weights of the pool members: ``clip(1 - win rate, 0.05, 1)``, 0 if unavailable."""
    return jnp.where(available, jnp.clip(1.0 - win_rate, 0.05, 1.0), 0.0)


def update_win_rate(win_rate: jax.Array, chosen, batch_win_rate, ema) -> jax.Array:
    """EMA update of the win rate against the member just played."""
    return win_rate.at[chosen].set((1.0 - ema) * win_rate[chosen] + ema * batch_win_rate)


def league_ready(win_rate: jax.Array, available: jax.Array, threshold) -> jax.Array:
    """Whether the learner beats every available member by more than ``threshold``."""
    return jnp.all(jnp.where(available, win_rate > threshold, True))


def update_pool(pool: PoolState, params, chosen, batch_win_rate, num_members: int, ema: float, threshold: float):
    """After a batch against member ``chosen``: the EMA of the win rate against it, and with a
    league, a copy of the learner's ``params`` in the next slot (the oldest once all are used)
    when it beats every available member by more than ``threshold``; the copy starts at win
    rate 0.5. Returns ``(pool, added)``."""
    win_rate = update_win_rate(pool.win_rate, chosen, batch_win_rate, ema)
    slots = pool.league_active.shape[0]
    if not slots:
        return dataclasses.replace(pool, win_rate=win_rate), jnp.zeros((), bool)
    add = league_ready(win_rate, pool.available(), threshold)
    slot = pool.league_next
    league_params = jax.tree.map(
        lambda stack, p: jnp.where(add, stack.at[slot].set(p), stack), pool.league_params, params
    )
    pool = dataclasses.replace(
        pool,
        win_rate=jnp.where(add, win_rate.at[num_members + slot].set(0.5), win_rate),
        league_params=league_params,
        league_active=jnp.where(add, pool.league_active.at[slot].set(True), pool.league_active),
        league_next=jnp.where(add, (slot + 1) % slots, slot),
    )
    return pool, add


def play_against_pool(key, pool: PoolState, members: list, learner: rollout.Side, num_games: int, **options):
    """One batch of the ``learner`` (side A) against a member drawn by weight (a league slot plays
    the learner's model with the slot's parameters); returns ``(trajectory, results, chosen)``.
    ``options``: how the games are played (:func:`czjax.rollout.play_games`'s ``axis_name``,
    ``devices``, ``chunks``)."""
    choice_key, key = jax.random.split(key)
    chosen = jax.random.categorical(choice_key, jnp.log(opponent_weights(pool.win_rate, pool.available())))
    num_members = len(members)

    def against(player, member_params):
        return rollout.play_games(key, learner, rollout.Side(player, member_params), num_games, **options)

    branches: list[Callable[..., Any]] = [
        lambda pool, k=k: against(members[k][0], pool.member_params[k]) for k in range(num_members)
    ]
    if pool.league_active.shape[0]:  # one branch for every league slot: same player, the slot's parameters
        branches.append(
            lambda pool: against(learner.player, jax.tree.map(lambda x: x[chosen - num_members], pool.league_params))
        )
    traj, results = lax.switch(jnp.minimum(chosen, len(branches) - 1), branches, pool)
    return traj, results, chosen
