"""The search benchmark (host side): czjax's batched tree searches against mctx, over czjax's
rules and over pgx, with the same network, timed in the same process (``czjax bench search``).
"""

from __future__ import annotations

import statistics

import jax
import jax.numpy as jnp
import numpy as np

from czjax import game, players, row_skipping, search
from czjax.bench.roofline import format_fraction, network_fields
from czjax.bench.timing import step_fields, time_interleaved

# ---------------------------------------------------------------------------------------------
# Search: czjax's tree against mctx (over czjax's rules, and over pgx), the same network


def search_network_params(seed: int = 0) -> dict:
    """A SimpleMLP-sized policy-value MLP, 84-128-64-8 (two 42-cell planes in; 7 logits and a
    value out), PyTorch-style uniform weights."""
    keys = jax.random.split(jax.random.key(seed), 3)
    sizes = [(84, 128), (128, 64), (64, 8)]
    params = {}
    for i, (key, (n_in, n_out)) in enumerate(zip(keys, sizes)):
        bound = 1.0 / np.sqrt(n_in)
        k_w, k_b = jax.random.split(key)
        params[f"w{i}"] = jax.random.uniform(k_w, (n_in, n_out), jnp.float32, -bound, bound)
        params[f"b{i}"] = jax.random.uniform(k_b, (n_out,), jnp.float32, -bound, bound)
    return params


def search_network(params, planes):
    """``planes (M, 84)`` -> ``(logits (M, 7), value (M,))``."""
    x = jax.nn.relu(planes @ params["w0"] + params["b0"])
    x = jax.nn.relu(x @ params["w1"] + params["b1"])
    out = x @ params["w2"] + params["b2"]
    return out[:, :7], jnp.tanh(out[:, 7])


def search_network_player(params, boards, key):
    """The network as a czjax player: int8 boards -> own and opponent planes."""
    del key
    planes = jnp.concatenate(
        [(boards == 1).reshape(boards.shape[0], -1), (boards == -1).reshape(boards.shape[0], -1)], -1
    )
    logits, value = search_network(params, planes.astype(jnp.float32))
    return players.PlayerOutput(logits=logits, value=value)


def midgame_moves(batch: int, plies: int = 12, seed: int = 0) -> np.ndarray:
    """``int (batch, plies)``: random games of ``plies`` moves that never complete four (so the
    same positions exist in czjax and in pgx, none of them finished)."""

    rng = np.random.default_rng(seed)
    moves = np.zeros((batch, plies), np.int64)
    for g in range(batch):
        board = np.zeros((game.ROWS, game.COLS), np.int8)
        for t in range(plies):
            for col in rng.permutation(game.COLS):
                if board[0, col] != 0:
                    continue
                row = game.ROWS - 1 - int((board[:, col] != 0).sum())
                board[row, col] = 1
                if not game.host_has_four(board == 1):
                    break
                board[row, col] = 0
            moves[g, t] = col
            board = -board
    return moves


def boards_of(moves: np.ndarray) -> jax.Array:
    """The int8 boards after each row of ``moves`` (:func:`midgame_moves`'), ``(B, 6, 7)``."""
    return jnp.asarray(np.stack([game.apply_moves(m) for m in moves]))


def search_settings(algo: str, sims: int) -> search.Search:
    """czjax's search of the bench: Gumbel MuZero (``algo`` "gumbel") or PUCT, ``sims`` simulations."""
    return search.Gumbel(sims=sims) if algo == "gumbel" else search.PUCT(sims=sims)


def czjax_search(algo: str, sims: int):

    settings = search_settings(algo, sims)

    def run(params, boards, key):
        out = settings.run(search_network_player, params, boards, key)
        return out.action, out.policy

    return run


def _mctx_search(algo: str, sims: int, root_fn, recurrent_fn):
    import mctx

    def run(params, state, key):
        root, invalid = root_fn(params, state)
        if algo == "gumbel":
            out = mctx.gumbel_muzero_policy(params, key, root, recurrent_fn, sims, invalid_actions=invalid)
        else:
            out = mctx.muzero_policy(params, key, root, recurrent_fn, sims, invalid_actions=invalid)
        return out.action, out.action_weights

    return run


def _mctx_over_czjax():
    """mctx with czjax's packed positions as the embedding and czjax's step as the dynamics."""
    import mctx

    def root_fn(params, boards):
        pos = game.pack(boards)
        logits, value, legal = search.network_value(search_network_player, params, pos, None)
        return mctx.RootFnOutput(
            prior_logits=logits, value=value, embedding=(pos, jnp.zeros(value.shape, bool))
        ), ~legal

    def recurrent_fn(params, key, action, embedding):
        pos, over = embedding
        nxt, won, done = game.position_step(pos, action)
        logits, value, _ = search.network_value(search_network_player, params, nxt, key)
        ended = over | done
        out = mctx.RecurrentFnOutput(
            reward=jnp.where(over, 0.0, won.astype(jnp.float32)),
            discount=jnp.where(ended, 0.0, -1.0),
            prior_logits=logits,
            value=jnp.where(ended, 0.0, value),
        )
        return out, (nxt, ended)

    return root_fn, recurrent_fn


def _mctx_over_pgx(env):
    """mctx over pgx's connect_four state (pgx's AlphaZero example's recurrent function)."""
    import mctx

    step = jax.vmap(env.step)

    def evaluate(params, state):
        planes = state.observation.reshape(state.observation.shape[0], -1).astype(jnp.float32)
        logits, value = search_network(params, planes)
        return jnp.where(state.legal_action_mask, logits, logits - 1e9), value

    def root_fn(params, state):
        logits, value = evaluate(params, state)
        return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state), ~state.legal_action_mask

    def recurrent_fn(params, key, action, state):
        del key
        mover = state.current_player
        state = step(state, action)
        logits, value = evaluate(params, state)
        reward = state.rewards[jnp.arange(mover.shape[0]), mover]
        out = mctx.RecurrentFnOutput(
            reward=reward,
            discount=jnp.where(state.terminated, 0.0, -1.0),
            prior_logits=logits,
            value=jnp.where(state.terminated, 0.0, value),
        )
        return out, state

    return root_fn, recurrent_fn


def bench_search(algo: str, batch: int, sims: int, runs: int, peers: bool = True) -> list[dict]:
    """Searches per second from ``batch`` mid-game positions (12 random plies), ``sims``
    simulations, the same network: czjax's tree, and with mctx installed mctx over czjax's
    rules and mctx over pgx's connect_four (with pgx installed), in this process, their timed
    runs interleaved. Every implementation evaluates the network on each search's root and once
    a simulation, ``batch x (sims + 1)`` boards a call (the network's FLOPs); the compiled step
    is the simulation (``step_s``: a call's time over ``sims``)."""

    params = search_network_params()
    moves = midgame_moves(batch)
    boards = boards_of(moves)
    impls = [("czjax", czjax_search(algo, sims), boards)]
    if peers:
        try:
            import mctx
        except ImportError:
            mctx = None
        if mctx is not None:
            impls.append(("mctx+czjax-rules", _mctx_search(algo, sims, *_mctx_over_czjax()), boards))
            try:
                import pgx
            except ImportError:
                pgx = None
            if pgx is not None:
                env = pgx.make("connect_four")
                state = jax.vmap(env.init)(jax.random.split(jax.random.key(0), batch))
                for t in range(moves.shape[1]):
                    state = jax.vmap(env.step)(state, jnp.asarray(moves[:, t], jnp.int32))
                impls.append(("mctx+pgx", _mctx_search(algo, sims, *_mctx_over_pgx(env)), state))
    forward = row_skipping.flops_per_board(search_network_player, params)
    rows = []
    for impl, times, compile_s in time_interleaved(
        [(fn, lambda i, inputs=inputs: (params, inputs, jax.random.key(i))) for _, fn, inputs in impls],
        runs,
        [impl for impl, _, _ in impls],
    ):
        median = statistics.median(times)
        rows.append(
            {
                "impl": impl,
                "algo": algo,
                "batch": batch,
                "sims": sims,
                "searches_per_s": batch / median,
                "simulations_per_s": batch * sims / median,
                "median_s": median,
                "times_s": times,
                "compile_s": compile_s,
                **step_fields("simulation", median, sims),
                "precision": "default",
                **network_fields(forward, forward * batch * (sims + 1), median),
            }
        )
    czjax_rate = rows[0]["searches_per_s"]
    for row in rows:
        row["czjax_vs_this"] = czjax_rate / row["searches_per_s"]
    return rows


SEARCH_HEADER = (
    f"{'impl':17s} {'algo':7s} {'batch':>6s} {'sims':>5s} {'searches/s':>11s} {'simulations/s':>14s} "
    f"{'median s':>9s} {'s/sim':>9s} {'net GFLOP/s':>11s} {'of roof':>7s} {'compile s':>9s} {'czjax/this':>10s}"
)


def format_search_row(row: dict) -> str:
    return (
        f"{row['impl']:17s} {row['algo']:7s} {row['batch']:6d} {row['sims']:5d} {row['searches_per_s']:11,.0f} "
        f"{row['simulations_per_s']:14,.0f} {row['median_s']:9.4f} {row['step_s']:9.6f} "
        f"{row['network_flops_per_s'] / 1e9:11.2f} {format_fraction(row)} {row['compile_s']:9.1f} "
        f"{row['czjax_vs_this']:9.2f}x"
    )
