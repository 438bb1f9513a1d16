"""Play a model in the browser: ``czjax serve CHECKPOINT`` serves one page on localhost.

Inference runs in czjax behind a small JSON API rather than in the browser from the ONNX
export: the page then works for every player czjax loads (checkpoints of any model and the
built-in players, which have no ONNX form), needs no JavaScript runtime for ONNX, and the
rules are checked by czjax's engine, not re-implemented in JavaScript. The page holds the game
as a move string; the server is stateless.

API (JSON in, JSON out; columns 1-based as in move strings):

* ``POST /api/position {"moves": "4453"}`` -> the position after the moves: ``board`` (rows top
  first; 1 = first player, -1 = second, 0 empty), ``legal``, ``to_move``, ``result`` (null,
  ``"first"``, ``"second"`` or ``"draw"``), and the model's ``probs`` and ``value`` for the side
  to move (``value`` null without a value head).
* ``POST /api/model-move {"moves": ...}`` -> the model's move (``move``), with ``probs`` and
  ``value`` of the position it moved from, and the position after it as above.
* ``GET /api/info`` -> ``player`` and ``has_value``.
* An illegal or malformed move string -> HTTP 400 ``{"error": ...}``; a GET on a POST
  endpoint -> 405 naming POST; any other path -> 404.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

import numpy as np

from czjax import game
from czjax.agents import Agent, policy
from czjax.interactive import absolute_board, choose_move, game_result

RESULTS = {None: None, 0: "draw", 1: "first", -1: "second"}


class GameService:
    """The JSON API's logic, separate from HTTP so it can be called directly."""

    def __init__(self, agent: Agent, temperature: float | None = None, seed: int = 0):
        self.agent, self.temperature = agent, agent.temperature(temperature)
        self.rng = np.random.default_rng(seed)
        self.lock = threading.Lock()

    def _evaluate(self, moves: list[int]):
        with self.lock:
            probs, value, greedy = (x[0] for x in policy(self.agent, game.apply_moves(moves)[None]))
        return probs, (None if np.isnan(value) else float(value)), int(greedy)

    def position(self, moves: list[int]) -> dict:
        result = game_result(moves)
        state = {
            "moves": "".join(str(c + 1) for c in moves),
            "board": absolute_board(moves).tolist(),
            "to_move": "first" if len(moves) % 2 == 0 else "second",
            "result": RESULTS[result],
            "legal": [bool(x) for x in (game.apply_moves(moves)[0] == 0)] if result is None else [False] * game.COLS,
            "probs": None,
            "value": None,
        }
        if result is None:
            probs, value, _ = self._evaluate(moves)
            state.update(probs=[float(p) for p in probs], value=value)
        return state

    def model_move(self, moves: list[int]) -> dict:
        if game_result(moves) is not None:
            raise ValueError("the game is over")
        probs, value, greedy = self._evaluate(moves)
        with self.lock:
            col = choose_move(probs, greedy, self.temperature, self.rng)
        after = self.position(moves + [col])
        return dict(after, move=col + 1, move_probs=[float(p) for p in probs], move_value=value)

    @staticmethod
    def parse(body: dict) -> list[int]:
        moves = body.get("moves", "") if isinstance(body, dict) else None
        if not isinstance(moves, str):
            raise ValueError("expected {\"moves\": \"4453...\"}")
        cols = game.parse_moves(moves)
        game.apply_moves(cols, column_base=1)  # ValueError for a full column or a move after the end
        return cols


def page_html(agent: Agent) -> str:
    html = (resources.files("czjax") / "web" / "play.html").read_text()
    return html.replace("{{PLAYER}}", json.dumps(agent.name)[1:-1].replace("<", "&lt;"))


def make_server(agent: Agent, host: str = "127.0.0.1", port: int = 8000, temperature: float | None = None,
                seed: int = 0) -> ThreadingHTTPServer:
    """An HTTP server for the page and the API (not started: call ``serve_forever``).
    ``temperature`` None: the agent's default (sampling for built-in players, greedy for models)."""
    service = GameService(agent, temperature, seed)
    page = page_html(agent).encode()
    routes = {"/api/position": service.position, "/api/model-move": service.model_move}

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json", headers)

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path in ("/", "/index.html"):
                self._send(200, page, "text/html; charset=utf-8")
            elif self.path == "/api/info":
                self._json(200, {"player": agent.name, "has_value": agent.has_value})
            elif self.path in routes:
                self._json(405, {"error": f"{self.path} takes POST with a JSON body such as {{\"moves\": \"4453\"}}, not GET"},
                           {"Allow": "POST"})
            else:
                self._json(404, {"error": f"no page or endpoint {self.path}: the page is /, the API POST /api/position and POST /api/model-move"})

        def do_POST(self):  # noqa: N802
            if self.path not in routes:
                self._json(404, {"error": f"no endpoint {self.path}"})
                return
            try:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                self._json(200, routes[self.path](service.parse(body)))
            except json.JSONDecodeError:
                self._json(400, {"error": "the request body is not JSON"})
            except ValueError as err:
                self._json(400, {"error": str(err)})

        def log_message(self, format, *args):  # quiet: the terminal shows the URL, not each request
            pass

    return ThreadingHTTPServer((host, port), Handler)
