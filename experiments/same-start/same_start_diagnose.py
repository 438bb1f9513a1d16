"""Where a same-start comparison's sides part: the games or the update.

``same_start.py`` trains czjax and the PyTorch project's loop (czjax.bench.torch_peer) from the
same weights; when their curves part, two checks from one network tell where:

- ``games``: the same weights on both sides, learning rate 0, each side's own games against its
  own RandomPunisher (czjax's trainer; the peer's ``train_iteration``): the training metrics each
  side logs (win rate, game length, entropy, losses), mean and 2 standard errors over chunks of
  10 batches. Equal here: the games and the metrics are not where the sides part.
- ``updates``: the same games on both sides, every step: a batch played with czjax's current
  weights (``--games-from peer``: the peer's), then czjax's update and the peer's applied to it,
  each with its own AdamW state. The side whose weights play is on-policy, the other learns
  from another policy's games; run both ways to tell an implementation's bias from that one.
  ``--sync``: before each step the peer takes czjax's weights and AdamW state, so every row is
  one step of each from the same state along czjax's course (``apart``: that step's
  disagreement, beside each side's step length): the update compared where the course has
  taken it, not only at the start.
  Printed every 10 steps: how far each side has moved from the start, how far apart they are,
  the policies' KL on the batch's positions, and each side's entropy there. A systematic
  difference in the update shows as one side moving further or sharpening faster; float
  differences alone make the sides drift apart slowly and in no direction.

    python experiments/same-start/same_start_diagnose.py games runs/same-start-ex4/seed0/czjax --batches 200
    python experiments/same-start/same_start_diagnose.py updates runs/same-start-ex4/seed0/czjax --steps 200
    python experiments/same-start/same_start_diagnose.py updates runs/same-start-ex4/seed0/init.pth --steps 1000
    python experiments/same-start/same_start_diagnose.py updates runs/same-start-ex4/seed0/init.pth --steps 1000 --games-from peer
    python experiments/same-start/same_start_diagnose.py updates runs/same-start-ex4/seed0/init.pth --steps 1000 --sync

(examples 4 and 5, against RandomPunisher: ``--preset ex4-a2c`` or ``ex5-ppo``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import jax
import numpy as np

from czjax import rollout
from czjax.bench import torch_peer
from czjax.jobs import presets
from czjax.learn.settings import HParams
from czjax.learn.trainer import eval_opponent, make_trainer
from czjax.models import torch_layout
from czjax.players.loading import TORCH_SUFFIXES, load_params
from czjax.util.checkpoint import resolve

METRICS = ("win_rate", "game_length", "entropy", "value_loss", "policy_loss", "advantage_std")
CHUNK = 10  # batches per reading


@dataclasses.dataclass
class Sides:
    """Both sides from one network: czjax's trainer and the peer's model, preset and settings."""

    trainer: object
    config: object
    hparams: dict
    model_name: str
    params: object

    def torch_model(self, params=None):
        import torch

        model = torch_peer.build_model(self.model_name)
        state = torch_layout.to_state_dict(
            self.model_name, jax.device_get(params if params is not None else self.params)
        )
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
        return model

    def torch_optimizer(self, model, learning_rate: float):
        import torch

        return torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=self.config.weight_decay)

    @property
    def torch_update(self):
        """The peer's update settings: the preset's algorithm and hyperparameters (PPO's the
        project's own)."""
        h = self.hparams
        return torch_peer.Update(
            algorithm=self.config.algorithm,
            entropy_bonus=h["entropy_bonus"],
            value_weight=h["value_weight"],
            gamma=h["discount"],
        )


def sides_from(checkpoint: str, preset_name: str, games_per_batch: int | None, settings: dict | None = None) -> Sides:
    """Both sides from ``checkpoint`` with ``preset_name``'s settings, ``settings`` overriding
    czjax's (``{"norm": "flax"}``: which of czjax's ways of computing a step matters)."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    preset = presets.get_preset(preset_name)
    if Path(checkpoint).suffix in TORCH_SUFFIXES:  # a same-start seed's init.pth: the preset's network
        model_name, params = torch_layout.read_params(checkpoint, preset.config.model)
    else:
        model_name, params, _ = load_params(resolve(checkpoint))
    if preset.config.opponent == "self":
        raise ValueError(f"preset {preset_name!r} trains by self-play: these checks take ex4-a2c or ex5-ppo")
    changes = {"model": model_name, "eval_games": 2, **(settings or {})}
    if games_per_batch:
        changes["games_per_batch"] = games_per_batch
    config = preset.config.override(changes)
    return Sides(make_trainer(config), config, dict(preset.hparams), model_name, params)


def mean_2se(values) -> tuple[float, float]:
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(2 * values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0


def check_games(sides: Sides, batches: int) -> dict:
    """Each side's training metrics with the same frozen weights: ``{metric: ((czjax mean, 2 se),
    (peer mean, 2 se))}`` over chunks of ``CHUNK`` batches."""
    chunks = max(1, batches // CHUNK)
    hp = HParams.create(**{**sides.hparams, "learning_rate": 0.0})
    state = dataclasses.replace(sides.trainer.init(0), params=sides.params)
    ours = {k: [] for k in METRICS}
    for _ in range(chunks):
        state, metrics = sides.trainer.run_chunk(state, hp, CHUNK)
        for k in METRICS:
            ours[k].append(float(jax.device_get(metrics[k])))
    frozen = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(sides.params)))
    assert frozen, "learning rate 0 moved czjax's weights"
    model = sides.torch_model()
    optimizer = sides.torch_optimizer(model, 0.0)
    theirs = {k: [] for k in METRICS}
    for _ in range(chunks):
        rows = [
            torch_peer.train_iteration(
                torch_peer.Learner(model, torch_peer.RandomPunisher(), optimizer),
                sides.config.games_per_batch,
                sides.torch_update,
            )
            for _ in range(CHUNK)
        ]
        for k in METRICS:
            theirs[k].append(float(np.mean([row[k] for row in rows])))
    return {k: (mean_2se(ours[k]), mean_2se(theirs[k])) for k in METRICS}


def peer_batch(traj, outcome) -> dict:
    """czjax's games as :func:`torch_peer.play_batch` returns them: per game the learner's
    (player A's) ``(board, column)`` moves in order, the outcome for it, the length in plies."""
    outcome = np.asarray(outcome)
    mine = rollout.player_plies(traj, len(outcome), player=0)  # A's own plies in move order, (21, B)
    valid, actions, boards = np.asarray(mine.valid), np.asarray(mine.actions), np.asarray(mine.boards())
    history = [
        [(boards[k, g].astype(np.int8), int(actions[k, g])) for k in range(valid.shape[0]) if valid[k, g]]
        for g in range(len(outcome))
    ]
    return {"history": history, "outcome": outcome.astype(np.float32), "length": np.asarray(traj.valid).sum(0)}


def sync_peer(sides: Sides, model, optimizer, params, opt_state) -> None:
    """The peer takes czjax's weights and AdamW state (moments and step count, PyTorch's layout)."""
    import torch

    adam = opt_state[0]  # make_optimizer's chain: scale_by_adam, then the weight decay
    to_torch = lambda tree: torch_layout.to_state_dict(sides.model_name, jax.device_get(tree))  # noqa: E731
    weights, mu, nu = to_torch(params), to_torch(adam.mu), to_torch(adam.nu)
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()})
    step = int(adam.count)
    for name, parameter in model.named_parameters():
        if step == 0:
            optimizer.state.pop(parameter, None)  # a fresh AdamW, as czjax's
            continue
        optimizer.state[parameter] = {
            "step": torch.tensor(float(step)),
            "exp_avg": torch.from_numpy(np.array(mu[name])),
            "exp_avg_sq": torch.from_numpy(np.array(nu[name])),
        }


def flat_weights(state_dict) -> np.ndarray:
    """A network's parameters as one float64 vector (distances between networks)."""
    return np.concatenate([np.asarray(v, np.float64).ravel() for v in state_dict.values()])


def compare_after_step(sides: Sides, params, model, batch: dict, start: np.ndarray, before) -> dict:
    """czjax's network (``params``) and the peer's (``model``) after a step: how far each moved
    from ``start``, how far apart they are, czjax's policy's KL against the peer's and each one's
    entropy (means over the batch's positions); with ``before`` (the weights the step began from),
    each step's length too."""
    import torch

    ours = sides.torch_model(params)
    boards = torch.from_numpy(np.stack([board for game in batch["history"] for board, _ in game]))
    legal = boards[:, 0, :] == 0
    with torch.no_grad():
        log_ours, log_theirs = (
            torch.log_softmax(net(boards)[0].masked_fill(~legal, -1e9), -1) for net in (ours, model)
        )
    ours_flat, theirs_flat = flat_weights(ours.state_dict()), flat_weights(model.state_dict())
    row = {
        "czjax_moved": float(np.linalg.norm(ours_flat - start)),
        "peer_moved": float(np.linalg.norm(theirs_flat - start)),
        "apart": float(np.linalg.norm(ours_flat - theirs_flat)),
        "kl": float((log_ours.exp() * (log_ours - log_theirs)).sum(-1).mean()),
        "czjax_entropy": float(-(log_ours.exp() * log_ours).sum(-1).mean()),
        "peer_entropy": float(-(log_theirs.exp() * log_theirs).sum(-1).mean()),
    }
    if before is not None:
        row["czjax_step"] = float(np.linalg.norm(ours_flat - before))
        row["peer_step"] = float(np.linalg.norm(theirs_flat - before))
    return row


def update_line(row: dict) -> str:
    """A row of :func:`check_updates` as its log line (the steps' lengths where synced)."""
    return (
        f"{row['step']:5d} | {row['czjax_moved']:.5f} | {row['peer_moved']:.5f} | {row['apart']:.5f} | "
        f"{row['kl']:.2e} | {row['czjax_entropy']:.4f} | {row['peer_entropy']:.4f}"
        + (f" | {row['czjax_step']:.3e} | {row['peer_step']:.3e}" if "czjax_step" in row else "")
    )


def check_updates(
    sides: Sides,
    steps: int,
    every: int = CHUNK,
    seed: int = 11,
    log=print,
    games_from: str = "czjax",
    sync: bool = False,
) -> list[dict]:
    """Both updates on the same games, step after step, the games played with ``games_from``'s
    current weights (``"czjax"`` or ``"peer"``); ``sync``: each step from czjax's weights and
    AdamW state on both sides (:func:`sync_peer`; rows add ``czjax_step``, ``peer_step``, the
    lengths of that step). A row every ``every`` steps (and after the first): ``step``, ``czjax_moved``, ``peer_moved``, ``apart`` (parameter-vector norms),
    ``kl`` (czjax's policy against the peer's, mean over the batch's positions) and each side's
    ``czjax_entropy``, ``peer_entropy`` there."""
    config, h = sides.config, sides.hparams
    hp = HParams.create(**h)
    params, opt_state = sides.params, sides.trainer.init(0).opt_state
    model = sides.torch_model()
    optimizer = sides.torch_optimizer(model, h["learning_rate"])
    punisher = eval_opponent(config.opponent)  # czjax's opponent (the peer always plays the project's)
    learner = sides.trainer.learner
    play = jax.jit(
        lambda key, p: rollout.play_games(key, rollout.Side(learner, p), rollout.Side(punisher), config.games_per_batch)
    )
    update = jax.jit(sides.trainer.update)
    start = flat_weights(torch_layout.to_state_dict(sides.model_name, jax.device_get(sides.params)))
    key, rows, before = jax.random.key(seed), [], None
    for step in range(1, steps + 1):
        key, game_key = jax.random.split(key)
        players = params if games_from == "czjax" else peer_params(sides.model_name, model)
        traj, results = play(game_key, players)
        batch = peer_batch(traj, results.outcome)
        if sync:
            sync_peer(sides, model, optimizer, params, opt_state)
            before = flat_weights(torch_layout.to_state_dict(sides.model_name, jax.device_get(params)))
        torch_peer.update(model, optimizer, batch, sides.torch_update)
        params, opt_state, _ = update(params, opt_state, traj, results.outcome, hp)
        if step % every and step != 1:
            continue
        rows.append({"step": step, **compare_after_step(sides, params, model, batch, start, before)})
        log(update_line(rows[-1]))
    return rows


def peer_params(model_name: str, model):
    """The peer's current weights as czjax parameters (to play its games with czjax's rollout)."""
    return torch_layout.from_state_dict(model_name, model.state_dict())  # it takes tensors as they are


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("check", choices=("games", "updates"))
    parser.add_argument(
        "checkpoint",
        help="a czjax checkpoint or run folder (a same-start run's seed<S>/czjax), or a PyTorch .pth of the "
        "preset's network (its seed<S>/init.pth: the run's start)",
    )
    parser.add_argument("--preset", default="ex4-a2c", help="ex4-a2c, ex5-ppo or default (default: %(default)s)")
    parser.add_argument("--batches", type=int, default=200, help="games: batches a side (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=200, help="updates: steps (default: %(default)s)")
    parser.add_argument("--games-per-batch", type=int, default=None, help="(default: the preset's)")
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="czjax's settings over the preset's, as TrainConfig.override takes them (norm=flax conv=im2col)",
    )
    parser.add_argument(
        "--games-from",
        choices=("czjax", "peer"),
        default="czjax",
        help="updates: whose current weights play each batch (default: %(default)s)",
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="updates: each step from czjax's weights and AdamW state on both sides (one step's disagreement)",
    )
    args = parser.parse_args(argv)
    try:
        settings = dict(item.split("=", 1) for item in args.set if "=" in item)
        if len(settings) != len(args.set):
            raise ValueError(f"--set takes KEY=VALUE items, got {' '.join(args.set)}")
        sides = sides_from(args.checkpoint, args.preset, args.games_per_batch, settings)
    except (ValueError, OSError) as err:
        parser.error(str(err))
    games = sides.config.games_per_batch
    if args.check == "games":
        print(f"{args.checkpoint}: {args.batches} batches of {games} games a side, weights frozen; mean +- 2 se")
        for name, (ours, theirs) in check_games(sides, args.batches).items():
            print(f"{name:14s} czjax {ours[0]:8.4f} +- {ours[1]:.4f}   peer {theirs[0]:8.4f} +- {theirs[1]:.4f}")
    else:
        print(
            f"{args.checkpoint}: {args.steps} steps, each on one batch of {games} games played by {args.games_from}'s "
            "weights, both updates"
        )
        print(
            "step | czjax moved | peer moved | apart | KL(czjax || peer) | czjax entropy | peer entropy"
            + (" | czjax step | peer step" if args.sync else "")
        )
        check_updates(sides, args.steps, games_from=args.games_from, sync=args.sync)
    return 0


if __name__ == "__main__":
    sys.exit(main())
