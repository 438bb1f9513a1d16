"""Play a model in the browser: ``czjax serve CHECKPOINT`` serves one page on localhost.

Inference runs in czjax behind a small JSON API rather than in the browser from the ONNX
export: the page then works for every player czjax loads (checkpoints of any model and the
built-in players, which have no ONNX form), needs no JavaScript runtime for ONNX, and the
rules are checked by czjax's engine, not re-implemented in JavaScript. The page holds the game
as a move string; the server is stateless. A search runs once per position asked for. With
``reuse`` (:func:`make_server`; off by default, as measured) a PUCT search (``mcts``) keeps its
last tree and starts the search of a position up to two moves past that tree's root from its
subtree there (:class:`czjax.evaluate.interactive.SearchMemory`): the positions a page asks for
in turn, whichever page asked.

API (JSON in, JSON out; columns 1-based as in move strings):

* ``POST /api/position {"moves": "4453"}`` -> the position after the moves: ``board`` (rows top
  first; 1 = first player, -1 = second, 0 empty), ``legal``, ``to_move``, ``result`` (null,
  ``"first"``, ``"second"`` or ``"draw"``), and the model's ``probs`` and ``value`` for the side
  to move (``value`` null without a value head), and for a search its root's visit ``shares``
  (null for a player that does not search; a search's ``probs`` are its move, one-hot).
* ``POST /api/model-move {"moves": ...}`` -> the model's move (``move``), with ``move_probs``,
  ``move_value`` and ``move_shares`` of the position it moved from, and the position after it
  as above.
* ``GET /api/info`` -> ``player`` and ``has_value``.
* ``GET /`` -> the page. ``HEAD`` answers as ``GET`` does, without the body.

Every error reply is JSON, ``{"error": ...}``, with one of these statuses:

* 400: an illegal or malformed move string; a body that is not UTF-8, not JSON, nested too
  deeply for the parser, or not a JSON object; a ``Content-Length`` that is not one whole number
  (negative, say), or a body cut short by the client closing; a malformed request line.
* 404: any other path. 405 (with ``Allow``): a method the path does not take (GET on a POST
  endpoint, POST on the page, PUT, DELETE, PATCH, OPTIONS). 501 (with ``Allow``): an unknown method.
* 408: a body that stops arriving for ``read_timeout`` seconds. 411: a POST without a
  ``Content-Length`` (or with a ``Transfer-Encoding``). 413: a body over ``MAX_BODY`` bytes,
  refused unread. 414, 431: a request line or headers over http.server's limits. 505: an HTTP
  version other than 1.x. 500: a bug (logged in one line).

Each connection carries one request (HTTP/1.0) and closes after the reply. A client that sends
nothing, or half a request, for ``read_timeout`` seconds is dropped; a client that goes away
early is dropped without a traceback.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

import numpy as np

from czjax import game
from czjax.agents import Agent
from czjax.evaluate.interactive import REUSE_TREES, SearchMemory, absolute_board, choose_move, game_result

RESULTS = {None: None, 0: "draw", 1: "first", -1: "second"}

MAX_BODY = 4096  # bytes: a move string has at most 42 characters, so this is room to spare
READ_TIMEOUT = 10.0  # seconds a connection may go without sending a byte of its request
LINGER_TIMEOUT = 1.0  # seconds spent, at most, reading what a client still sends after the reply
LINGER_LIMIT = 64 * 1024  # bytes read and dropped, at most, before closing a connection
DISCONNECTS = (ConnectionError, TimeoutError)  # a client went away or stalled: nothing to answer
PAGE_PATHS = ("/", "/index.html")
ALL_METHODS = "GET, HEAD, POST"


class GameService:
    """The JSON API's logic, separate from HTTP so it can be called directly."""

    def __init__(self, agent: Agent, temperature: float | None = None, seed: int = 0, reuse: bool = REUSE_TREES):
        self.agent, self.temperature = agent, agent.temperature(temperature)
        self.rng = np.random.default_rng(seed)
        self.lock = threading.Lock()
        # one search per position; with ``reuse``, a PUCT search's last tree kept for the next
        # position of the same game (the positions a page asks for in turn)
        self.memory = SearchMemory(agent, reuse)

    def _evaluate(self, moves: list[int]):
        with self.lock:
            report = self.memory.searched(moves)
        probs, value, greedy = report.probs[0], report.value[0], report.greedy[0]
        shares = None if report.shares is None else [float(x) for x in report.shares[0]]
        return probs, (None if np.isnan(value) else float(value)), int(greedy), shares

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
            "shares": None,
        }
        if result is None:
            probs, value, _, shares = self._evaluate(moves)
            state.update(probs=[float(p) for p in probs], value=value, shares=shares)
        return state

    def model_move(self, moves: list[int]) -> dict:
        if game_result(moves) is not None:
            raise ValueError("the game is over")
        probs, value, greedy, shares = self._evaluate(moves)
        with self.lock:
            col = choose_move(probs, greedy, self.temperature, self.rng)
        after = self.position(moves + [col])
        return dict(after, move=col + 1, move_probs=[float(p) for p in probs], move_value=value, move_shares=shares)

    @staticmethod
    def parse(body: dict) -> list[int]:
        moves = body.get("moves", "") if isinstance(body, dict) else None
        if not isinstance(moves, str):
            raise ValueError('expected {"moves": "4453..."}')
        cols = game.parse_moves(moves)
        game.apply_moves(cols, column_base=1)  # ValueError for a full column or a move after the end
        return cols


def page_html(agent: Agent) -> str:
    html = (resources.files("czjax") / "web" / "play.html").read_text()
    return html.replace("{{PLAYER}}", json.dumps(agent.name)[1:-1].replace("<", "&lt;"))


class RequestError(Exception):
    """A request the server refuses: the HTTP status, the message for the JSON body, and headers."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


# A move request is one object of strings; anything nested deeper than this is not one.
MAX_NESTING = 32


def nesting_depth(text: str, stop_above: int) -> int:
    """How deep JSON arrays and objects nest in ``text`` (brackets inside strings do not count),
    counting no further than ``stop_above + 1``."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > stop_above:
                break
        elif char in "]}":
            depth -= 1
    return deepest


def parse_json_object(body: bytes) -> dict:
    """The request body as a JSON object (an empty body is ``{}``), or a RequestError 400."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(400, "the request body is not UTF-8") from None
    # Checked before parsing: whether json.loads reaches its recursion limit on "[[[[..." or first
    # finds the text unterminated depends on the Python build, and the answer should not.
    if nesting_depth(text, MAX_NESTING) > MAX_NESTING:
        raise RequestError(400, "the request body nests too deeply to be a move request")
    try:
        value = json.loads(text or "{}")
    except RecursionError:  # kept as a guard: nothing this shallow should reach it
        raise RequestError(400, "the request body nests too deeply to be a move request") from None
    except ValueError:
        raise RequestError(400, "the request body is not JSON") from None
    if not isinstance(value, dict):
        raise RequestError(400, 'the request body is not a JSON object such as {"moves": "4453"}')
    return value


def content_length(headers) -> int:
    """The body's length from the headers, or a RequestError: 411 without one, 400 for a bad one,
    413 over MAX_BODY (so a huge body is refused before it is read)."""
    if headers.get("Transfer-Encoding") is not None:
        raise RequestError(411, "send the body with a Content-Length, not a Transfer-Encoding")
    values = [str(value).strip() for value in headers.get_all("Content-Length") or []]
    if not values:
        raise RequestError(411, "a POST needs a Content-Length header")
    # int() alone would take "+5", " 5" and "1_0"; several differing values mean the length is unknown
    if len(set(values)) != 1 or not re.fullmatch(r"[0-9]{1,19}", values[0]):
        raise RequestError(400, f"Content-Length {', '.join(values)[:100]!r} is not a whole number of bytes")
    length = int(values[0])
    if length > MAX_BODY:
        raise RequestError(413, f"the body has {length} bytes; the server takes at most {MAX_BODY}")
    return length


class ApiHandler(BaseHTTPRequestHandler):
    """The page and the JSON API over one GameService (``make_server`` subclasses it with the
    service, the page and the read timeout). Every reply, errors included, is JSON but the page."""

    service: GameService
    page: bytes
    routes: dict  # POST path -> the GameService method that answers it
    timeout = READ_TIMEOUT  # socketserver sets it on the socket: a stalled read raises TimeoutError
    # http.server's default, HTTP/0.9, answers a request line without a version (including a
    # malformed one) with a body but no status line or headers: answer it as HTTP/1.0 instead
    default_request_version = "HTTP/1.0"

    # -- replies

    def _send(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":  # HEAD: GET's status and headers, no body
            self.wfile.write(body)

    def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _error(self, status: int, message: str, headers: dict | None = None) -> None:
        # the body of a refused request may be unread: the connection is not reused
        self._json(status, {"error": message}, dict(headers or {}, Connection="close"))

    def send_error(self, code, message=None, explain=None):
        """http.server's own errors as JSON rather than its HTML page: a malformed request line
        (400), a long request line (414) or headers (431), an unknown method (501)."""
        headers = {"Allow": self._allowed_methods() or ALL_METHODS} if code == HTTPStatus.NOT_IMPLEMENTED else None
        self._error(code, message or HTTPStatus(code).phrase, headers)

    def log_message(self, format, *args):  # quiet: the terminal shows the URL, not each request
        pass

    # -- dispatch

    def _allowed_methods(self) -> str | None:
        """The methods this request's path takes (the ``Allow`` header), None for no such path."""
        path = getattr(self, "path", None)  # unset when the request line did not parse
        if path in PAGE_PATHS or path == "/api/info":
            return "GET, HEAD"
        return "POST" if path in self.routes else None

    def _answer(self, respond) -> None:
        """Run one method's handler; a refused request gets its JSON error, a bug a 500."""
        try:
            respond()
        except RequestError as err:
            self._error(err.status, err.message, err.headers)
        except DISCONNECTS:
            raise  # nobody to answer; the server drops the connection without a traceback
        except Exception as err:
            self._error(500, f"internal error: {type(err).__name__}: {err}")
            raise  # the server logs it

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._answer(self._get)

    def do_HEAD(self):  # noqa: N802
        self._answer(self._get)

    def do_POST(self):  # noqa: N802
        self._answer(self._post)

    def _method_not_allowed(self):
        self._answer(self._refuse_method)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed

    # -- the answers

    def _no_such_path(self) -> RequestError:
        return RequestError(
            404, f"no page or endpoint {self.path}: the page is /, the API POST /api/position and POST /api/model-move"
        )

    def _refuse_method(self):
        allowed = self._allowed_methods()
        if allowed is None:
            raise self._no_such_path()
        if allowed == "POST":
            message = f'{self.path} takes POST with a JSON body such as {{"moves": "4453"}}, not {self.command}'
        else:
            message = f"{self.path} takes {allowed}, not {self.command}"
        raise RequestError(405, message, {"Allow": allowed})

    def _get(self):
        if self.path in PAGE_PATHS:
            self._send(200, self.page, "text/html; charset=utf-8")
        elif self.path == "/api/info":
            self._json(200, {"player": self.service.agent.name, "has_value": self.service.agent.has_value})
        else:
            self._refuse_method()

    def _post(self):
        if self.path not in self.routes:
            self._refuse_method()
        body = parse_json_object(self._read_body())
        try:
            state = self.routes[self.path](self.service.parse(body))
        except ValueError as err:  # an illegal move string, or a move after the end
            raise RequestError(400, str(err)) from None
        self._json(200, state)

    def _read_body(self) -> bytes:
        length = content_length(self.headers)
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            raise RequestError(
                408, f"the body stopped arriving for {self.timeout:g} s before its Content-Length of {length} bytes"
            ) from None
        if len(body) < length:  # the client closed its side early
            raise RequestError(400, f"the body has {len(body)} bytes, fewer than its Content-Length of {length}")
        return body


class ApiServer(ThreadingHTTPServer):
    """A thread per connection (daemon threads, so a stalled client never blocks exit), which
    closes connections without losing replies and reports client disconnects without tracebacks."""

    daemon_threads = True
    # connections waiting to be accepted: socketserver's 5 fills up under a burst (a page load, a
    # fuzz), and the kernel then drops connections that the client retries only a second later
    request_queue_size = 128

    def handle_error(self, request, client_address):
        err = sys.exc_info()[1]
        if isinstance(err, DISCONNECTS):  # the client hung up or stalled: its business, not a fault
            return
        print(
            f"czjax serve: a request from {client_address[0]} failed: {type(err).__name__}: {err}",
            file=sys.stderr,
            flush=True,
        )

    def shutdown_request(self, request):
        """Close a connection after reading and dropping what the client still sends (a refused
        body): closing a socket with unread bytes sends a reset, which can destroy the reply
        before the client reads it."""
        try:
            request.shutdown(socket.SHUT_WR)
            request.settimeout(LINGER_TIMEOUT)
            dropped = 0
            while dropped < LINGER_LIMIT:
                chunk = request.recv(LINGER_LIMIT)
                if not chunk:
                    break
                dropped += len(chunk)
        except OSError:  # the client reset the connection, or went quiet: close it anyway
            pass
        self.close_request(request)


def make_server(
    agent: Agent,
    host: str = "127.0.0.1",
    port: int = 8000,
    temperature: float | None = None,
    seed: int = 0,
    read_timeout: float = READ_TIMEOUT,
    reuse: bool = REUSE_TREES,
) -> ThreadingHTTPServer:
    """An HTTP server for the page and the API, bound and with the player compiled (not started:
    call ``serve_forever``). ``temperature`` None: the agent's default (sampling for built-in
    players, greedy for models). ``read_timeout``: seconds a client may stall mid-request.
    ``reuse``: a PUCT search keeps its tree between the positions of a game (:class:`GameService`)."""
    service = GameService(agent, temperature, seed, reuse)
    handler = type(
        "Handler",
        (ApiHandler,),
        {
            "service": service,
            "page": page_html(agent).encode(),
            "timeout": read_timeout,
            "routes": {"/api/position": service.position, "/api/model-move": service.model_move},
        },
    )
    server = ApiServer((host, port), handler)  # bind first: a port in use fails before the compile
    try:
        # compile the player now: the first move would otherwise wait for it (7-9 s for the
        # shipped model) with the page showing nothing
        service.position([])
    except BaseException:
        server.server_close()
        raise
    return server
