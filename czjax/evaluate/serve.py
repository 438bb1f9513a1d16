"""Play a model in the browser: ``czjax serve CHECKPOINT`` serves one page on localhost.

Inference runs in czjax behind a small JSON API rather than in the browser from the ONNX
export: the page then works for every player czjax loads (checkpoints of any model and the
built-in players, which have no ONNX form), needs no JavaScript runtime for ONNX, and the
rules are checked by czjax's engine, not re-implemented in JavaScript. The page holds the game
as a move string; the server is stateless. A search runs once per position asked for.

Requests that arrive together are answered together: one worker thread takes every position
waiting (up to ``max_batch``) and asks the player about all of them in one compiled call
(:func:`czjax.players.agent.searched_each`: each position as if alone, so a batched answer is the one
asked alone, to float rounding), padded to a few fixed batch sizes so that few programs
compile. With ``reuse`` (:class:`GameService`; off by default, as measured) a PUCT search
(``mcts``) keeps its last tree and starts the search of a position up to two moves past that
tree's root from its subtree there (:class:`czjax.evaluate.interactive.SearchMemory`): the
positions a page asks for in turn, whichever page asked; that follows one position after
another, so the worker then answers them one at a time, in the order they arrived.

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
* 503 (with ``Retry-After``): ``max_waiting`` positions already wait for the player (the server
  is that far behind), or the server is stopping.

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
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

import numpy as np

from czjax import game
from czjax.evaluate.interactive import REUSE_TREES, SearchMemory, absolute_board, choose_move, game_result
from czjax.players.agent import Agent, searched_each

RESULTS = {None: None, 0: "draw", 1: "first", -1: "second"}

MAX_BODY = 4096  # bytes: a move string has at most 42 characters, so this is room to spare
READ_TIMEOUT = 10.0  # seconds a connection may go without sending a byte of its request
LINGER_TIMEOUT = 1.0  # seconds spent, at most, reading what a client still sends after the reply
LINGER_LIMIT = 64 * 1024  # bytes read and dropped, at most, before closing a connection
DISCONNECTS = (ConnectionError, TimeoutError)  # a client went away or stalled: nothing to answer
PAGE_PATHS = ("/", "/index.html")
ALL_METHODS = "GET, HEAD, POST"
# Positions the player is asked about in one call, at most: a burst of 50 moves is one call, then
# one or two for the positions after the moves. On a CPU a batch costs its positions' arithmetic
# (docs/benchmarks.md, "Serving a burst of moves"); on a GPU it should cost little more than one.
MAX_BATCH = 64
MAX_WAITING = 256  # positions waiting for the player, at most; a request past them is refused (503)
RETRY_AFTER = 1  # seconds a refused client is told to wait before asking again


def batch_sizes(max_batch: int) -> tuple[int, ...]:
    """The batch sizes the player is called with: the powers of two below ``max_batch``, and
    ``max_batch``. A batch is padded up to the next of them, so that at most ``log2(max_batch) + 1``
    programs compile and a batch does at most twice the work it needs."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, got {max_batch}")
    return tuple(1 << k for k in range((max_batch - 1).bit_length()) if 1 << k < max_batch) + (max_batch,)


def padded_size(count: int, sizes: tuple[int, ...]) -> int:
    """The smallest of ``sizes`` (ascending) that holds ``count`` positions."""
    return next(size for size in sizes if size >= count)


class ServiceBusy(Exception):
    """A position the service will not take now: too many wait already, or it is stopping."""


@dataclass
class Job:
    """One position waiting for the worker, and, once ``done``, its answer (or ``error``)."""

    moves: list[int]
    choose: bool  # a model move: the worker also picks the column
    answer: tuple = ()  # (probs, value, greedy, shares, column or None)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class GameService:
    """The JSON API's logic, separate from HTTP so it can be called directly.

    Every position goes through one queue to one worker thread, which asks the player about all
    that wait (up to ``max_batch``) in one call, padded to :func:`batch_sizes`. More than
    ``max_waiting`` positions waiting: :class:`ServiceBusy`. Sampled moves (``temperature`` > 0)
    draw from one generator seeded with ``seed``, used by the worker alone: one draw per model
    move, in the order the requests joined the queue (rows of a batch in order). With ``reuse``
    (a PUCT search keeping its tree between the positions of a game) the worker answers one
    position at a time in that order, since each search continues the previous one's tree."""

    def __init__(
        self,
        agent: Agent,
        temperature: float | None = None,
        seed: int = 0,
        reuse: bool = REUSE_TREES,
        max_batch: int = MAX_BATCH,
        max_waiting: int = MAX_WAITING,
    ):
        self.agent, self.temperature = agent, agent.temperature(temperature)
        self.rng = np.random.default_rng(seed)  # the worker's alone
        # one search per position; with ``reuse``, a PUCT search's last tree kept for the next
        # position of the same game (the positions a page asks for in turn)
        self.memory = SearchMemory(agent, reuse)
        self.sizes, self.max_waiting = batch_sizes(max_batch), max_waiting
        self.pending: list[Job] = []
        self.arrived = threading.Condition()  # guards pending and closed
        self.closed = False
        self.worker = threading.Thread(target=self._work, name="czjax-serve-player", daemon=True)
        self.worker.start()

    # -- the queue and its worker

    def waiting(self) -> int:
        """Positions queued for the worker, not yet taken."""
        with self.arrived:
            return len(self.pending)

    def close(self) -> None:
        """Stop the worker once its batch is done; positions still waiting are refused."""
        with self.arrived:
            self.closed = True
            refused, self.pending = self.pending, []
            self.arrived.notify_all()
        for job in refused:
            job.error = ServiceBusy("the server is stopping")
            job.done.set()

    def _ask(self, moves: list[int], choose: bool = False) -> tuple:
        """The worker's answer for the position after ``moves``; waits for it."""
        job = Job(moves, choose)
        with self.arrived:
            if self.closed:
                raise ServiceBusy("the server is stopping")
            if len(self.pending) >= self.max_waiting:
                raise ServiceBusy(f"the server is busy ({len(self.pending)} positions already wait for the player)")
            self.pending.append(job)
            self.arrived.notify()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.answer

    def _take(self) -> list[Job]:
        """The positions waiting, up to the largest batch, once there is one; [] once closed."""
        with self.arrived:
            while not self.pending and not self.closed:
                self.arrived.wait()
            if self.closed:
                return []
            jobs, self.pending = self.pending[: self.sizes[-1]], self.pending[self.sizes[-1] :]
            return jobs

    def _work(self) -> None:
        while jobs := self._take():
            try:
                self._answer(jobs)
            except Exception as err:  # a bug: each request answers 500 with it; the worker goes on
                for job in jobs:
                    job.error = err
            for job in jobs:
                job.done.set()

    def _answer(self, jobs: list[Job]) -> None:
        if self.memory.keep:  # reusing trees: one position after another, each from the last tree
            reports = [(self.memory.searched(job.moves), 0) for job in jobs]
        else:
            report = self._report([job.moves for job in jobs])
            reports = [(report, row) for row in range(len(jobs))]
        for job, (report, row) in zip(jobs, reports):
            probs, value, greedy = report.probs[row], float(report.value[row]), int(report.greedy[row])
            shares = None if report.shares is None else [float(x) for x in report.shares[row]]
            col = choose_move(probs, greedy, self.temperature, self.rng) if job.choose else None
            job.answer = (probs, None if np.isnan(value) else value, greedy, shares, col)

    def _report(self, games: list[list[int]]):
        """The player's report of the positions after each of ``games``, from one call padded
        to a batch size with empty boards (the padding's rows dropped)."""
        boards = np.zeros((padded_size(len(games), self.sizes), game.ROWS, game.COLS), np.int8)
        for row, moves in enumerate(games):
            boards[row] = game.apply_moves(moves)
        return searched_each(self.agent, boards)

    def warm(self) -> None:
        """Compile the player for every batch size but one (the first position compiled that
        one), by asking it about empty boards outside the queue. Nothing to do when reusing
        trees: positions then go one at a time."""
        if self.memory.keep:
            return
        for size in self.sizes[1:]:
            try:
                searched_each(self.agent, np.zeros((size, game.ROWS, game.COLS), np.int8))
            except Exception as err:  # out of memory, say: a batch this large will fail when asked, too
                first_line = str(err).split("\n", 1)[0]
                print(
                    f"czjax serve: compiling a batch of {size} failed: {type(err).__name__}: {first_line}",
                    file=sys.stderr,
                )
                return

    # -- the API

    def _evaluate(self, moves: list[int]):
        return self._ask(moves)[:4]

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
        probs, value, _, shares, col = self._ask(moves, choose=True)
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
        except ServiceBusy as err:
            raise RequestError(503, f"{err}: try again in a moment", {"Retry-After": str(RETRY_AFTER)}) from None
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
    service: GameService | None = None  # set by make_server; stopped with the server

    def server_close(self):
        super().server_close()
        if self.service is not None:
            self.service.close()

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


def bind(host: str = "127.0.0.1", port: int = 8000) -> ApiServer:
    """A server bound to ``host:port`` that answers nothing yet (:func:`make_server` gives it
    the player): an ``OSError`` for a host that cannot be resolved or a port in use, found
    before a player is loaded or compiled."""
    return ApiServer((host, port), ApiHandler)


def make_server(
    player: Agent | GameService,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    read_timeout: float = READ_TIMEOUT,
    warm: bool = False,
    server: ApiServer | None = None,
) -> ApiServer:
    """An HTTP server for the page and the API, bound and with the player compiled (not started:
    call ``serve_forever``). ``player``: an agent, served with :class:`GameService`'s defaults
    (the agent's temperature: sampling for built-in players, greedy for models; no tree reuse;
    batches of up to ``MAX_BATCH``), or a :class:`GameService` made with other choices.
    ``read_timeout``: seconds a client may stall mid-request. ``warm``: compile the other batch
    sizes too, in a background thread (each takes about as long as the first compile: the page
    opens after the first, and a burst that comes before its size is ready compiles it itself).
    ``server``: one :func:`bind` made, instead of binding ``host:port`` here; closed if this
    fails."""
    service = player if isinstance(player, GameService) else GameService(player)
    agent = service.agent
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
    try:
        if server is None:
            server = bind(host, port)  # bind first: a port in use fails before the compile
    except BaseException:
        service.close()
        raise
    server.RequestHandlerClass, server.service = handler, service
    try:
        # compile the player now: the first move would otherwise wait for it (7-9 s for the
        # shipped model) with the page showing nothing
        service.position([])
    except BaseException:
        server.server_close()
        raise
    if warm:
        threading.Thread(target=service.warm, name="czjax-serve-warm", daemon=True).start()
    return server
