"""Time `czjax serve` under a burst: one model move asked alone (the median of ``--single``), then
``--requests`` model moves asked at once, each from its own thread, of a server on 127.0.0.1
playing ``--player`` (by default `czjax serve`'s own, ``azjl:sims=600:czjax``).

    python experiments/serve-load/load.py --out docs/results/serve-load/DATE/load.json
    python experiments/serve-load/load.py --max-batch 1 --out ...   # one position a call, as before batching

The server runs in this process (``serve.make_server``), with every batch size compiled before
the clock starts. Each move is asked of a different opening (random legal moves from
``--seed``); a burst's latencies run from the moment its threads are released together to each
reply. The player's calls are counted by wrapping ``serve.searched_each``: their batch sizes
(padded) show how the burst was grouped. Time it on a quiet machine: beside another busy
process the timings mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from czjax.players.loading import DEFAULT_OPPONENT, load_agent


def openings(count: int, seed: int, plies: int = 8) -> list[str]:
    """``count`` move strings of 0 to ``plies`` random legal moves, none of a game already over."""
    from czjax import game
    from czjax.evaluate.interactive import game_result

    rng = random.Random(seed)
    games = []
    for _ in range(count):
        moves: list[int] = []
        for _ in range(rng.randrange(plies + 1)):
            legal = [c for c in range(game.COLS) if game.apply_moves(moves)[0, c] == 0]
            moves.append(rng.choice(legal))
            if game_result(moves) is not None:
                moves.pop()
                break
        games.append("".join(str(c + 1) for c in moves))
    return games


def ask_move(url: str, moves: str, timeout: float) -> int:
    """The HTTP status of one model move asked of the server at ``url``."""
    request = urllib.request.Request(f"{url}api/model-move", data=json.dumps({"moves": moves}).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def time_alone(url: str, games: list[str], timeout: float) -> list[float]:
    """Seconds of each model move asked one after another."""
    seconds = []
    for moves in games:
        start = time.perf_counter()
        status = ask_move(url, moves, timeout)
        seconds.append(time.perf_counter() - start)
        if status != 200:
            raise RuntimeError(f"a move alone answered {status}")
    return seconds


def time_burst(url: str, games: list[str], timeout: float) -> tuple[list[float], list[int]]:
    """Seconds from the common start to each reply, and each status, of the moves asked at once."""
    ready = threading.Barrier(len(games) + 1)
    start = [0.0]

    def one(moves: str) -> tuple[float, int]:
        ready.wait()
        status = ask_move(url, moves, timeout)
        return time.perf_counter() - start[0], status

    with ThreadPoolExecutor(len(games)) as pool:
        futures = [pool.submit(one, moves) for moves in games]
        start[0] = time.perf_counter()
        ready.wait()  # every thread waits here: they go together
        replies = [future.result(timeout=timeout + 60) for future in futures]
    return [seconds for seconds, _ in replies], [status for _, status in replies]


def latency_summary(seconds: list[float]) -> dict:
    values = np.asarray(seconds)
    return {
        "p50_s": float(np.percentile(values, 50)),
        "p99_s": float(np.percentile(values, 99)),
        "last_s": float(values.max()),
    }


def counted_calls(serve) -> list[int]:
    """The padded batch size of every call the server makes of its player, from now on."""
    sizes: list[int] = []
    real = serve.searched_each

    def counting(agent, boards):
        sizes.append(len(boards))
        return real(agent, boards)

    serve.searched_each = counting
    return sizes


def measure(args) -> dict:
    from czjax.bench.provenance import provenance
    from czjax.evaluate import serve

    agent = load_agent(args.player)
    sizes = counted_calls(serve)
    print(f"compiling {agent.name} for batches of up to {args.max_batch} ...", file=sys.stderr, flush=True)
    service = serve.GameService(agent, max_batch=args.max_batch, max_waiting=max(256, 2 * args.requests))
    server = serve.make_server(service, port=0)
    server.service.warm()  # every batch size compiled before the clock starts
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        games = openings(args.single + args.requests, args.seed)
        time_alone(url, games[:1], args.timeout)  # untimed: the first request of a fresh server
        alone = time_alone(url, games[: args.single], args.timeout)
        del sizes[:]
        burst, statuses = time_burst(url, games[args.single :], args.timeout)
    finally:
        server.shutdown()
        server.server_close()
    return {
        **provenance(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "player": agent.name,
        "max_batch": args.max_batch,
        "alone": {"requests": len(alone), "median_s": statistics.median(alone), "seconds": alone},
        "burst": {
            "requests": len(burst),
            "answered_200": statuses.count(200),
            **latency_summary(burst),
            "player_calls": sizes,  # the padded batch size of each call, in order
            "seconds": burst,
        },
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from czjax.evaluate.serve import MAX_BATCH

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--player", default=DEFAULT_OPPONENT, help="(default: %(default)s, czjax serve's)")
    parser.add_argument("--requests", type=int, default=50, help="model moves asked at once (default: %(default)s)")
    parser.add_argument("--single", type=int, default=10, help="moves asked alone, timed (default: %(default)s)")
    parser.add_argument(
        "--max-batch", type=int, default=MAX_BATCH, help="positions a call at most (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="of the openings asked (default: %(default)s)")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds a request may take (default: %(default)s)"
    )
    parser.add_argument("--out", type=Path, help="write the JSON here too")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = measure(args)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0 if report["burst"]["answered_200"] == report["burst"]["requests"] else 1


if __name__ == "__main__":
    sys.exit(main())
