"""The PyTorch peer's examples 4 and 5 (``czjax.bench.torch_peer``: A2C and PPO against
RandomPunisher) against independent definitions: its losses and their gradients against czjax's
JAX losses for the same weights on the same hand-made batch, its RandomPunisher against the
tests' plain-Python Connect 4 and against czjax's, its PPO epochs against the KL-stop rule, and
``experiments/same_start.py`` running ex4-a2c and ex5-ppo at a tiny scale."""

import importlib.util
import json
import random
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch  # the test extra installs it: pip install -e ".[test]"

from czjax import game, models, players
from czjax.bench import torch_peer
from czjax.bench.torch_peer import updates
from czjax.learn import losses
from czjax.models import torch_layout
from czjax.util import precision
from tests.reference import COLS, RefGame, random_game

GAMMA, BETA, VALUE_WEIGHT, CLIP = 0.9, 0.05, 1.5, 0.2  # examples 4 and 5


def torch_model(name: str, seed: int, scale: float = 0.1):
    """The peer's model with every parameter moved off its default by ``scale`` noise (norm
    scales and biases too, so no layer is at a special point)."""
    torch.manual_seed(seed)
    model = torch_peer.build_model(name)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))
    return model


def czjax_params(name: str, model):
    return torch_layout.from_state_dict(name, {k: v.detach().numpy() for k, v in model.state_dict().items()})


def hand_made_batch(seed: int = 3, games: int = 4) -> dict:
    """A batch as ``torch_peer.play_batch`` returns it, from random games of the reference
    Connect 4: the first player's positions (canonical) and moves, and its outcome. The last
    game's outcome is set to 0, as a draw's, so the batch has a zero reward too."""
    rng = random.Random(seed)
    history, outcome, length = [], [], []
    for g in range(games):
        ref = random_game(rng)
        replay, moves = RefGame(), []
        for ply, col in enumerate(ref.moves):
            if ply % 2 == 0:
                moves.append((np.array(replay.canonical(), np.int8), col))
            replay.play(col)
        history.append(moves)
        outcome.append(0.0 if g == games - 1 else {1: 1.0, 2: -1.0, 0: 0.0}[ref.winner])
        length.append(len(ref.moves))
    assert {1.0, -1.0} <= set(outcome[:-1]), outcome  # wins and losses both
    return {"history": history, "outcome": np.array(outcome, np.float32), "length": np.array(length)}


def game_major(batch: dict):
    """``(T, B)`` layout of a batch's learner moves (czjax's): ``valid`` and the flat,
    game-by-game index of each ``(t, b)``."""
    counts = [len(moves) for moves in batch["history"]]
    valid = np.arange(max(counts))[:, None] < np.array(counts)[None, :]
    flat = np.full(valid.shape, -1)
    index = 0
    for b, n in enumerate(counts):
        flat[:n, b] = np.arange(index, index + n)
        index += n
    return valid, flat


def czjax_td_targets(values: np.ndarray, batch: dict) -> np.ndarray:
    """czjax's ``a2c_targets`` for the batch, back in the peer's flat game-by-game order."""
    valid, flat = game_major(batch)
    values_tb = np.where(valid, values[np.maximum(flat, 0)], 0.0)
    targets = np.asarray(losses.a2c_targets(jnp.asarray(values_tb), jnp.asarray(valid), batch["outcome"], GAMMA))
    out = np.zeros(values.shape, np.float32)
    out[flat[valid]] = targets[valid]
    return out


def torch_grads(model, loss) -> dict:
    model.zero_grad()
    loss.backward()
    return {k: p.grad.numpy().copy() for k, p in model.named_parameters()}


def assert_grads_close(name: str, torch_g: dict, jax_g) -> None:
    """Every gradient entry within float32 error of the largest: the frameworks sum in other
    orders, and a wrong detach or target would move whole tensors."""
    mapped = torch_layout.to_state_dict(name, jax_g)
    scale = max(np.abs(g).max() for g in torch_g.values())
    for k, g in torch_g.items():
        np.testing.assert_allclose(mapped[k], g, rtol=1e-3, atol=2e-5 * scale, err_msg=k)


def inputs(states, batch_actions, returns, **extra) -> losses.LossInputs:
    states = np.asarray(states)
    return losses.LossInputs(
        legal=jnp.asarray(states[:, 0, :] == 0),
        actions=jnp.asarray(batch_actions, jnp.int32),
        returns=jnp.asarray(returns),
        valid=jnp.ones(states.shape[0], bool),
        **extra,
    )


def test_a2c_loss_and_gradient_match_czjax():
    """The peer's A2C (sparse rewards, TD targets by ``roll`` over the batch) and czjax's
    (``a2c_targets`` on the (T, B) layout, ``policy_gradient_sums``): same targets, loss and
    gradient for the same weights and batch. On mlp3, a value-head model that is cheap in both
    frameworks: the loss terms do not depend on the network, and tests/test_torch.py checks
    that Mk4 computes the same outputs in both."""
    name = "mlp3"
    batch = hand_made_batch()
    model = torch_model(name, seed=1)
    params = czjax_params(name, model)
    t = updates.learner_tensors(batch, GAMMA, bootstrap=True, device="cpu")
    log_p, taken, entropy, values = updates.policy_outputs(model, t["states"], t["actions"])
    targets = updates.value_targets(values, t["rewards"], t["done"], GAMMA, bootstrap=True)
    weight = updates.terminal_weight(t["rewards"])
    loss, *_ = updates.policy_gradient_loss(taken, entropy, values, targets, weight, BETA, VALUE_WEIGHT)
    grads = torch_grads(model, loss)

    net, states = models.get_model(name), t["states"].numpy()
    with precision.parity():
        _, jax_values = models.apply_model(net, params, states)
        jax_targets = czjax_td_targets(np.asarray(jax_values), batch)
        batch_in = inputs(states, t["actions"].numpy(), jax_targets)

        def jax_loss(p):
            logits, v = models.apply_model(net, p, states)
            return losses.policy_gradient_sums(logits, v, batch_in, BETA, VALUE_WEIGHT)

        (jax_total, sums), jax_g = jax.jit(jax.value_and_grad(jax_loss, has_aux=True))(params)
    np.testing.assert_allclose(targets.detach().numpy(), jax_targets, rtol=1e-5, atol=1e-5)
    assert float(jax_total) == pytest.approx(loss.item(), rel=1e-4, abs=1e-4)
    assert float(sums["value_loss"]) > 0 and set(np.unique(t["rewards"].numpy())) == {-1.0, 0.0, 1.0}
    assert_grads_close(name, grads, jax_g)


def test_ppo_loss_and_gradient_match_czjax():
    """The peer's PPO loss at weights moved away from the starting ones (so ratios differ from
    1 and some are clipped) equals czjax's ``ppo_sums`` with the same starting log-probabilities,
    TD targets and advantages: loss, clipped count and gradient."""
    name = "mlp3"
    batch = hand_made_batch()
    start, moved = torch_model(name, seed=1), torch_model(name, seed=1)
    with torch.no_grad():
        torch.manual_seed(9)
        for p in moved.parameters():
            p.add_(0.02 * torch.randn_like(p))
    t = updates.learner_tensors(batch, GAMMA, bootstrap=True, device="cpu")
    with torch.no_grad():
        old_log_p, old_taken, _, old_values = updates.policy_outputs(start, t["states"], t["actions"])
    targets = updates.value_targets(old_values, t["rewards"], t["done"], GAMMA, bootstrap=True)
    advantage = targets - old_values
    weight = updates.terminal_weight(t["rewards"])
    settings = updates.Update(
        algorithm="ppo", entropy_bonus=BETA, value_weight=VALUE_WEIGHT, ppo=updates.PPO(clip=CLIP)
    )
    moved_outputs = updates.policy_outputs(moved, t["states"], t["actions"])
    loss, _, _, clipped = updates.ppo_loss(moved_outputs, old_taken, advantage, targets, weight, settings)
    grads = torch_grads(moved, loss)
    n = len(t["actions"])
    assert 0 < clipped < n, clipped  # the clip is exercised, not everywhere

    net, states = models.get_model(name), t["states"].numpy()
    with precision.parity():
        logits0, values0 = models.apply_model(net, czjax_params(name, start), states)
        jax_targets = czjax_td_targets(np.asarray(values0), batch)
        legal = jnp.asarray(states[:, 0, :] == 0)
        batch_in = inputs(
            states,
            t["actions"].numpy(),
            jax_targets,
            old_log_probs=players.masked_log_probs(legal, logits0),
            advantages=jnp.asarray(jax_targets) - values0,
        )

        def jax_loss(p):
            logits, v = models.apply_model(net, p, states)
            return losses.ppo_sums(logits, v, batch_in, CLIP, BETA, VALUE_WEIGHT)

        (jax_total, sums), jax_g = jax.jit(jax.value_and_grad(jax_loss, has_aux=True))(czjax_params(name, moved))
    assert float(jax_total) == pytest.approx(loss.item(), rel=1e-4, abs=1e-4)
    assert float(sums["clipped"]) == clipped
    assert_grads_close(name, grads, jax_g)


@pytest.mark.parametrize("target_kl, steps", [(0.0, 2), (None, 4), (1e9, 4)])
def test_ppo_stops_after_the_step_whose_kl_exceeds_the_target(target_kl, steps):
    """The project's order (forward, step, then the KL of that forward): epoch 0's KL is 0, so
    a target of 0 stops after epoch 1's step (2 steps); no target, or one never reached, runs
    all 4. The KL reported is the last epoch's, from the starting policy."""
    model = torch_model("mlp3", seed=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    settings = torch_peer.Update("ppo", BETA, VALUE_WEIGHT, GAMMA, torch_peer.PPO(target_kl=target_kl))
    metrics = torch_peer.update(model, optimizer, hand_made_batch(), settings)
    assert metrics["ppo_epochs"] == steps and metrics["ppo_kl"] > 0
    assert optimizer.state[next(model.parameters())]["step"] == steps
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert 0 <= metrics["ppo_clip_fraction"] <= 1 and metrics["positions"] == sum(
        len(m) for m in hand_made_batch()["history"]
    )


def test_reinforce_needs_no_value_head_and_a2c_does():
    batch = hand_made_batch()
    model = torch_model("mlp", seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert torch_peer.update(model, optimizer, batch, torch_peer.Update(algorithm="reinforce"))["value_loss"] == 0.0
    with pytest.raises(ValueError, match="value head"):
        torch_peer.update(model, optimizer, batch, torch_peer.Update(algorithm="a2c"))
    with pytest.raises(ValueError, match="unknown algorithm"):
        torch_peer.update(model, optimizer, batch, torch_peer.Update(algorithm="sac"))


def board(rows: list[str]) -> np.ndarray:
    """A canonical board from six strings, top row first: ``x`` the side to move, ``o`` the opponent."""
    return np.array([[{"x": 1, "o": -1, ".": 0}[c] for c in row] for row in rows], np.int8)


PUNISHER_CASES = {  # board, the column it must play (None: uniform)
    "wins-horizontally": (["......."] * 5 + ["xxx.oo."], 3),
    "wins-before-blocking": (["......."] * 3 + ["....o..", "x...o..", "xx.xo.."], 2),
    "blocks-vertically": (["......."] * 3 + ["o......", "o.....x", "o....xx"], 0),
    "blocks-a-diagonal": ([".......", ".......", ".......", "..ox...", ".oxx...", "oxxo..."], 3),
    "first-of-two-wins": (["......."] * 3 + ["x.....x", "x.....x", "x.oo.ox"], 0),
    "nothing-forced": (["......."] * 5 + ["x..o..."], None),
}


@pytest.mark.parametrize("case", list(PUNISHER_CASES))
def test_random_punisher_wins_then_blocks(case):
    rows, column = PUNISHER_CASES[case]
    b = board(rows)
    logits, value = torch_peer.RandomPunisher()(torch.from_numpy(b[None]))
    assert value is None and logits.shape == (1, COLS)
    probs = torch.softmax(logits[0], -1).numpy()
    if column is None:
        np.testing.assert_array_equal(logits.numpy(), 0.0)  # uniform once the sampler masks full columns
    else:  # the project's log(one_hot + 1e-12): the others keep a 1e-12 chance each
        assert probs.argmax() == column and np.delete(probs, column).max() < 1e-10


def reference_forced(ref: RefGame) -> int | None:
    """The project's RandomPunisher by its description, on the reference game: the first column
    that wins for the side to move, else the first where the opponent would win, else None."""
    me, them = ref.to_move, 3 - ref.to_move
    for player in (me, them):
        for c in range(COLS):
            if ref.would_win(c, player):
                return c
    return None


def test_random_punisher_agrees_with_the_reference_and_czjax():
    """On 400 positions of random games: the forced column is the reference's; czjax's
    RandomPunisher forces play in exactly the same positions, and the peer's column is among
    czjax's choices (czjax spreads ties, the project takes the first)."""
    rng = random.Random(7)
    refs, boards = [], []
    while len(refs) < 400:
        full = random_game(rng)
        ref = RefGame()
        for col in full.moves[: rng.randrange(len(full.moves))]:
            ref.play(col)
        refs.append(ref)
        boards.append(np.array(ref.canonical(), np.int8))
    boards = np.stack(boards)
    logits = torch_peer.random_punisher_logits(boards)
    forced = np.where((logits < 0).any(1), logits.argmax(1), -1)
    expected = np.array([-1 if (c := reference_forced(r)) is None else c for r in refs])
    np.testing.assert_array_equal(forced, expected)
    assert (expected >= 0).sum() > 50 and (expected < 0).sum() > 50  # both kinds are common
    czjax_choice = np.asarray(players.random_punisher(None, jnp.asarray(boards), None).logits) == 0
    legal = np.asarray(game.legal_mask(jnp.asarray(boards)))
    czjax_forced = ~(czjax_choice == True).all(1)  # noqa: E712  (unforced: every column allowed)
    np.testing.assert_array_equal(czjax_forced, forced >= 0)
    some = forced >= 0
    assert czjax_choice[np.flatnonzero(some), forced[some]].all() and legal[np.flatnonzero(some), forced[some]].all()


def load_same_start():
    path = Path(__file__).resolve().parent.parent / "experiments" / "same-start" / "same_start.py"
    spec = importlib.util.spec_from_file_location("experiment_same_start", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("preset", ["ex4-a2c", "ex5-ppo"])
def test_same_start_runs_the_peer_against_random_punisher(preset, tmp_path):
    """same_start.py's PyTorch side of examples 4 and 5 at a tiny scale (mlp3, 2 batches of 4
    games): it starts from czjax's weights, trains against RandomPunisher without weight decay
    and writes the rows the tables read (PPO's own metrics too)."""
    same_start = load_same_start()
    argv = ["--preset", preset, "--games", "8", "--games-per-batch", "4", "--seeds", "1", "--model", "mlp3"]
    # the preset's yardstick is the project's RandomPunisher; --eval-opponent sets both sides' own
    yardstick = {"ex4-a2c": "random-punisher", "ex5-ppo": "random-punisher-leftmost"}[preset]
    summary = same_start.main(
        [*argv, "--log-every", "1", "--sides", "torch", "--out", str(tmp_path), "--eval-opponent", yardstick]
    )
    assert summary["games"] == 8 and summary["start_check"]["0"] < 1e-5
    assert summary["config"]["opponent"] == "random-punisher-leftmost"
    assert summary["config"]["eval_opponent"] == yardstick
    folder = tmp_path / "seed0" / "torch"
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [r["games"] for r in rows] == [4, 8] and all(r["promotions"] == 0 for r in rows)
    keys = {key for key, _ in same_start.METRICS} | set(torch_peer.ROW_MEANS)
    if preset == "ex5-ppo":
        keys |= set(torch_peer.PPO_MEANS)
    assert keys <= set(rows[-1]) and all(0 <= r["eval_win_rate"] <= 1 for r in rows)
    assert json.loads((folder / "done.json").read_text())["weight_decay"] == 0.0
    assert len((folder / "batches.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--preset", "alpha-mini"], "trains against current"),
        (["--preset", "ex4-a2c", "--model", "mlp"], "value head"),
        (["--preset", "default"], "not a frozen copy or the project's RandomPunisher"),
        (["--preset", "ex4-a2c", "--eval-opponent", "nobody"], "unknown evaluation opponent 'nobody'"),
    ],
)
def test_same_start_refuses_what_the_peer_cannot_run(argv, message, tmp_path, capsys):
    same_start = load_same_start()
    with pytest.raises(SystemExit) as stopped:
        same_start.main([*argv, "--games", "8", "--out", str(tmp_path)])
    # parser.error prints the usage and then its line; run_config's error is the exit's message
    said = capsys.readouterr().err if stopped.value.code == 2 else str(stopped.value.code)
    assert message in said.strip().splitlines()[-1]


def test_same_start_diagnose_checks_run_and_agree_after_one_step(tmp_path):
    """experiments/same_start_diagnose.py on MLP3 with 4 games a batch: ``games`` keeps czjax's
    weights frozen and reads both sides' metrics; ``updates`` gives the peer czjax's own games
    (its batch built from czjax's trajectory), so after one step both sides have moved the same
    way: apart by float error only, the policies' KL ~0."""
    import common
    from czjax.util import checkpoint

    common.use("same-start")  # experiments/same-start/: the script's folder on the import path
    import same_start_diagnose as diagnose

    path = tmp_path / "start.msgpack"
    checkpoint.save_weights(path, "mlp3", czjax_params("mlp3", torch_model("mlp3", 7)))
    sides = diagnose.sides_from(str(path), "ex4-a2c", 4)  # PPO's update is checked above
    readings = diagnose.check_games(sides, 10)  # one chunk a side
    assert set(readings) == set(diagnose.METRICS)
    for (ours, _), (theirs, _) in readings.values():
        assert np.isfinite(ours) and np.isfinite(theirs)
    assert 0 <= readings["win_rate"][0][0] <= 1 and 0 <= readings["win_rate"][1][0] <= 1
    with precision.parity():
        rows = diagnose.check_updates(sides, 1, log=lambda line: None)
    (row,) = rows
    assert row["czjax_moved"] > 1e-4 and row["peer_moved"] == pytest.approx(row["czjax_moved"], rel=1e-3)
    assert row["apart"] < 1e-3 * row["czjax_moved"] and abs(row["kl"]) < 1e-6
    assert row["czjax_entropy"] == pytest.approx(row["peer_entropy"], abs=1e-4)
    # the same with the peer's weights playing: they are czjax's at the start, so the same again
    with precision.parity():
        (row,) = diagnose.check_updates(sides, 1, log=lambda line: None, games_from="peer")
    assert row["apart"] < 1e-3 * row["czjax_moved"] and abs(row["kl"]) < 1e-6
    # --sync: every step from czjax's weights and AdamW state on both sides, so each later step
    # agrees too (a peer keeping its own AdamW state, or starting it afresh, would not: its
    # moments and step count differ from the second step on)
    with precision.parity():
        rows = diagnose.check_updates(sides, 3, every=1, log=lambda line: None, sync=True)
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        assert row["czjax_step"] > 1e-4 and row["peer_step"] == pytest.approx(row["czjax_step"], rel=1e-3)
        assert row["apart"] < 1e-3 * row["czjax_step"] and abs(row["kl"]) < 1e-6
    # and the peer's weights, read back as czjax's, are the ones the peer holds
    peer = sides.torch_model()
    for a, b in zip(jax.tree.leaves(diagnose.peer_params("mlp3", peer)), jax.tree.leaves(sides.params)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="self-play"):
        diagnose.sides_from(str(path), "ex3-rwb", 4)
    assert diagnose.sides_from(str(path), "ex4-a2c", 4, {"norm": "flax"}).config.norm == "flax"
    # a same-start seed's init.pth: the preset's network (default: the SimpleMLP) from PyTorch's layout
    torch_start = torch_model("mlp", 3)
    pth = tmp_path / "init.pth"
    torch_layout.write_pth(pth, {k: v.detach().numpy() for k, v in torch_start.state_dict().items()})
    from_pth = diagnose.sides_from(str(pth), "default", 4)
    assert from_pth.model_name == "mlp"
    for a, b in zip(jax.tree.leaves(from_pth.params), jax.tree.leaves(czjax_params("mlp", torch_start))):
        np.testing.assert_array_equal(a, b)
