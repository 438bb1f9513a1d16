"""Round-robin tournaments between agents, and ratings fitted to the results.

Every pair plays ``games`` games, half with each side first (``play_games`` splits the batch).
Each agent plays at its own temperature (:meth:`czjax.players.agent.Agent.temperature`: its most likely
column for a trained model or a search, sampled for the built-in players), as ``play``, ``serve``
and the evaluations do, unless one temperature is given for all. Pairs of agents with the same
player functions (two checkpoints of one model, say) run as one compiled program: ``play_games``
vmapped over the stacked parameters and temperatures of all such pairs.

Ratings are a Bradley-Terry model on the Elo scale, ``P(i beats j) = 1 / (1 + 10 ** (-(R_i -
R_j) / 400))``, a draw counted as half a win for each side, fitted by maximum likelihood
(Newton's method) with one player anchored at a fixed rating. Confidence intervals come from
the inverse of the observed information. A very weak Gaussian prior (sd ``PRIOR_SD_ELO``
around the anchor) keeps the fit finite when a player wins or loses every game; its effect on
any player with mixed results is far below the interval.
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from czjax.players.agent import Agent
from czjax.rollout import Side, play_games
from czjax.util.progress import Progress

ELO = 400.0 / math.log(10.0)  # Elo points per unit of log-odds
PRIOR_SD_ELO = 4000.0
Z_95 = 1.959964


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def check_entries(players: int, games: int) -> None:
    """A one-line ValueError unless a round robin of ``players`` players, ``games`` games per
    pair, can be played (the command line asks before it loads a player)."""
    if games < 2:
        raise ValueError(f"a match needs at least 2 games (one with each side first), got {games}")
    if players < 2:
        raise ValueError(f"a tournament needs at least two players, got {players}")


def round_robin(
    agents: list[Agent], games: int, seed: int = 0, log=None, temperatures: list[float] | None = None
) -> np.ndarray:
    """``results (P, P, 3)``: for ``i < j``, ``[wins of i, draws, wins of j]`` over ``games``
    games between agents ``i`` and ``j``; ``results[j, i]`` is the same from ``j``'s side. Agent
    ``i`` samples its moves at ``temperatures[i]`` (default: its own, ``Agent.temperature()``)."""
    check_entries(len(agents), games)
    if temperatures is None:
        temperatures = [agent.temperature() for agent in agents]
    pairs = list(itertools.combinations(range(len(agents)), 2))
    keys = jax.random.split(jax.random.key(seed), len(pairs))
    groups: dict[tuple, list[int]] = {}
    for p, (i, j) in enumerate(pairs):
        groups.setdefault((agents[i].player, agents[j].player), []).append(p)
    results = np.zeros((len(agents), len(agents), 3), np.int64)
    progress = Progress(log, "games", games * len(pairs))
    for (player_a, player_b), members in groups.items():
        params_a = _stack([agents[pairs[p][0]].params for p in members])
        params_b = _stack([agents[pairs[p][1]].params for p in members])
        temps_a = jnp.asarray([temperatures[pairs[p][0]] for p in members], jnp.float32)
        temps_b = jnp.asarray([temperatures[pairs[p][1]] for p in members], jnp.float32)

        def match(key, pa, pb, ta, tb, player_a=player_a, player_b=player_b):
            _, res = play_games(key, Side(player_a, pa, ta), Side(player_b, pb, tb), games)
            return jnp.stack([(res.outcome > 0).sum(), (res.outcome == 0).sum(), (res.outcome < 0).sum()])

        matches = jax.jit(jax.vmap(match))
        counts = progress.step(  # called at once, so the loop's current values
            lambda: np.asarray(matches(keys[np.asarray(members)], params_a, params_b, temps_a, temps_b)),  # noqa: B023
            games * len(members),
            f"{len(members)} match{'es' if len(members) > 1 else ''} of {games} games: "
            f"{agents[pairs[members[0]][0]].name} vs {agents[pairs[members[0]][1]].name}",
        )
        for p, (win_a, draw, win_b) in zip(members, counts):
            i, j = pairs[p]
            results[i, j] = (win_a, draw, win_b)
            results[j, i] = (win_b, draw, win_a)
            if log:
                log(f"  {agents[i].name} vs {agents[j].name}: +{win_a} ={draw} -{win_b}")
    return results


def fit_ratings(
    results: np.ndarray, anchor: int = 0, anchor_rating: float = 0.0, iterations: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """``(ratings, half_widths)`` in Elo points from ``results (P, P, 3)`` (see :func:`round_robin`);
    95% intervals are ``ratings +- half_widths`` (0 for the anchor, relative to it)."""
    results = np.asarray(results, np.float64)
    n = results.shape[0]
    score = results[..., 0] + 0.5 * results[..., 1]  # score[i, j]: points of i against j
    played = results.sum(-1)
    free = np.array([k for k in range(n) if k != anchor])
    theta = np.zeros(n)  # log-odds scale, anchor at 0
    prior = (ELO / PRIOR_SD_ELO) ** 2
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))  # P(i beats j)
        grad = (score - played * p).sum(1) - prior * theta
        w = played * p * (1.0 - p)
        hess = np.diag(w.sum(1) + prior) - w  # the observed information (negative Hessian)
        step = np.linalg.solve(hess[np.ix_(free, free)], grad[free])
        theta[free] += step
        if np.max(np.abs(step)) < 1e-10:
            break
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
    w = played * p * (1.0 - p)
    info = np.diag(w.sum(1) + prior) - w
    cov = np.linalg.inv(info[np.ix_(free, free)])
    half = np.zeros(n)
    half[free] = Z_95 * np.sqrt(np.diag(cov)) * ELO
    return anchor_rating + theta * ELO, half


def expected_score(rating_a: float, rating_b: float) -> float:
    return 1.0 / (1.0 + 10.0 ** (-(rating_a - rating_b) / 400.0))


def how_it_plays(agent: Agent, temperature: float) -> str:
    """How ``agent`` chooses its moves at ``temperature``, in words."""
    if temperature == 0:
        return "the search's move" if agent.search is not None else "its most likely column"
    return f"samples its policy at temperature {temperature:g}"


def tournament(
    agents: list[Agent],
    games: int,
    anchor: str | None = None,
    seed: int = 0,
    log=None,
    temperature: float | None = None,
) -> dict:
    """A round robin between agents and the Elo ratings fitted to it.

    Each agent plays at its own temperature (``Agent.temperature()``: a trained model its most
    likely column, a search its move, a built-in player by sampling), or all at
    ``temperature`` when given.

    Args:
        agents: the players.
        games: games per pair, half with each side first.
        anchor: the name of the agent rated 0 (default: the first).
        seed: the games' random stream.
        log: a callable for progress lines.
        temperature: every agent's temperature, overriding their own.

    Returns:
        A report: the results of every pair, how each agent chose its moves, and the ratings
        (Bradley-Terry on the Elo scale, draws counting half) with 95% intervals."""
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        raise ValueError(f"each player may take part once, got {names}")
    anchor = names[0] if anchor is None else anchor
    if anchor not in names:
        raise ValueError(f"the anchor {anchor!r} is not among the players {names}")
    temperatures = [agent.temperature(temperature) for agent in agents]
    results = round_robin(agents, games, seed, log, temperatures)
    ratings, half = fit_ratings(results, names.index(anchor))
    return {
        "games_per_pair": games,
        "anchor": anchor,
        "players": names,
        "temperatures": temperatures,
        "plays": [how_it_plays(agent, t) for agent, t in zip(agents, temperatures)],
        "results": pair_rows(names, results),
        "ratings": rating_rows(names, results, ratings, half),
    }


def pair_rows(names: list[str], results: np.ndarray) -> list[dict]:
    """The report's row per pair ``i < j``: its wins, draws and losses (see :func:`round_robin`)."""
    return [
        {
            "a": names[i],
            "b": names[j],
            "wins_a": int(results[i, j, 0]),
            "draws": int(results[i, j, 1]),
            "wins_b": int(results[i, j, 2]),
        }
        for i, j in itertools.combinations(range(len(names)), 2)
    ]


def rating_rows(names: list[str], results: np.ndarray, ratings: np.ndarray, half: np.ndarray) -> list[dict]:
    """The report's row per player, the strongest first: its rating, the half-width of its 95%
    interval, and its score (wins and half the draws, per game)."""
    rows = (
        {
            "player": name,
            "elo": float(r),
            "ci95": float(h),
            "score": float((results[k, :, 0] + 0.5 * results[k, :, 1]).sum() / results[k].sum()),
        }
        for k, (name, r, h) in enumerate(zip(names, ratings, half))
    )
    return sorted(rows, key=lambda row: -row["elo"])


def format_tournament(report: dict) -> str:
    names = report["players"]
    width = max(10, *(len(n) for n in names))
    lines = [
        f"{report['games_per_pair']} games per pair, half with each side first; row's wins/draws/losses against column",
        "",
    ]
    table = {(r["a"], r["b"]): (r["wins_a"], r["draws"], r["wins_b"]) for r in report["results"]}
    table.update({(b, a): (loss, d, w) for (a, b), (w, d, loss) in list(table.items())})
    lines.append(" " * width + "".join(f" {n:>{width}s}" for n in names))
    for a in names:
        cells = "".join(
            f" {'-':>{width}s}" if a == b else f" {'/'.join(str(n) for n in table[(a, b)]):>{width}s}" for b in names
        )
        lines.append(f"{a:>{width}s}{cells}")
    if "plays" in report:
        lines += ["", "how each player chose its moves:"]
        lines += [f"  {name:>{width}s} {plays}" for name, plays in zip(names, report["plays"])]
    lines += ["", f"ratings (Elo, {report['anchor']} = {0:.0f}; 95% intervals):"]
    for r in report["ratings"]:
        ci = "anchor" if r["player"] == report["anchor"] else f"+- {r['ci95']:.0f}"
        lines.append(f"  {r['player']:>{width}s} {r['elo']:8.0f} {ci:>10s}   score {r['score']:.3f}")
    return "\n".join(lines)
