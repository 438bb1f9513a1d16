"""`czjax serve`: the JSON API, and a whole game played by clicking in headless Chromium.

The browser tests drive Debian's Chromium (/usr/bin/chromium, which `./test.sh` installs where
it can, as on CI) with Playwright; without it they skip and say how to get it (`apt-get install
chromium`, or CZJAX_CHROMIUM=PATH for another Chromium). The opponent is the built-in ``random``
player at temperature 0, which plays its lowest legal column, so the game's course is known in
advance.
"""

import concurrent.futures
import http.client
import json
import os
import random
import re
import socket
import struct
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # the API tests need no browser; the browser tests skip, saying why
    expect = sync_playwright = None

from czjax import game
from czjax.evaluate import serve
from czjax.players.agent import searched_move, visit_shares
from czjax.players.loading import load_agent

CHROMIUM = os.environ.get("CZJAX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def start(spec, temperature=0.0, read_timeout=serve.READ_TIMEOUT, warm=False, **options):
    """A server of the player ``spec`` on a free port, serving in a thread; ``options``: the
    GameService's (reuse, max_batch, max_waiting)."""
    service = serve.GameService(load_agent(spec), temperature=temperature, **options)
    server = serve.make_server(service, port=0, read_timeout=read_timeout, warm=warm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture(scope="module")
def random_server():
    server, url = start("random")
    yield url
    server.shutdown()
    server.server_close()


STRICT_TIMEOUT = 0.5  # seconds: the read timeout of strict_server


@pytest.fixture(scope="module")
def strict_server():
    """A server that drops stalled clients after STRICT_TIMEOUT rather than 10 s."""
    server, url = start("random", read_timeout=STRICT_TIMEOUT)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if sync_playwright is None:
        pytest.skip("browser test: Playwright is not installed (pip install 'czjax[test]')")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(
            f"browser test: no Chromium at {CHROMIUM} (`apt-get install chromium`, which ./test.sh does where it "
            "can, or CZJAX_CHROMIUM=PATH)"
        )
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def post(url, path, body):
    request = urllib.request.Request(url + path.lstrip("/"), data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_api_positions_moves_and_errors(random_server):
    status, state = post(random_server, "/api/position", {"moves": "4"})
    assert status == 200 and state["to_move"] == "second" and state["result"] is None
    assert state["board"][5][3] == 1 and sum(map(sum, state["board"])) == 1
    assert state["probs"] == pytest.approx([1 / 7] * 7) and state["value"] is None
    status, state = post(random_server, "/api/model-move", {"moves": "4"})
    assert status == 200 and state["move"] == 1 and state["moves"] == "41"
    status, state = post(random_server, "/api/position", {"moves": "4141414"})
    assert state["result"] == "first" and state["legal"] == [False] * 7 and state["probs"] is None
    assert post(random_server, "/api/model-move", {"moves": "4141414"}) == (400, {"error": "the game is over"})
    status, err = post(random_server, "/api/position", {"moves": "1111111"})
    assert status == 400 and "column 1 is full" in err["error"]
    assert post(random_server, "/api/position", {"moves": "48"})[0] == 400
    assert post(random_server, "/api/position", {"moves": 4})[0] == 400


def get(url, path):
    try:
        with urllib.request.urlopen(url + path.lstrip("/")) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def test_api_answers_get_on_post_endpoints_with_405(random_server):
    for path in ("/api/position", "/api/model-move"):
        status, headers, body = get(random_server, path)
        assert status == 405 and headers["Allow"] == "POST" and "POST" in body["error"] and path in body["error"]
    status, _, body = get(random_server, "/api/nothing")
    assert status == 404 and "POST /api/position" in body["error"]
    assert get(random_server, "/api/info")[::2] == (200, {"player": "random", "has_value": False})


def test_built_in_players_sample_unless_a_temperature_is_given():
    random_agent = load_agent("random")
    assert random_agent.temperature() == 1.0 and random_agent.temperature(0.0) == 0.0
    service = serve.GameService(random_agent, seed=0)
    first_moves = {service.model_move([])["move"] for _ in range(60)}
    assert len(first_moves) == 7  # uniform over 7 columns: all seen in 60 draws but with probability ~1e-3
    assert {serve.GameService(random_agent, temperature=0.0).model_move([])["move"] for _ in range(5)} == {1}


# -- robustness: real requests over raw sockets to 127.0.0.1

POSITION_KEYS = {"moves", "board", "legal", "to_move", "result", "probs", "value", "shares"}
PAGE_PATHS = ("/", "/index.html")


class Reply:
    """An HTTP reply read off a raw socket: status, headers (names lowercased) and body."""

    def __init__(self, response: http.client.HTTPResponse):
        self.status = response.status
        self.headers = {name.lower(): value for name, value in response.getheaders()}
        self.body = response.read()

    def json(self):
        assert self.headers["content-type"] == "application/json"
        assert int(self.headers["content-length"]) == len(self.body)
        return json.loads(self.body)


def port_of(url):
    return urllib.parse.urlsplit(url).port


def connect(url, timeout=5.0):
    return socket.create_connection(("127.0.0.1", port_of(url)), timeout=timeout)


def read_reply(sock, head=False):
    """The reply on ``sock``, or None if the server closed the connection without one."""
    response = http.client.HTTPResponse(sock, method="HEAD" if head else "GET")
    try:
        response.begin()
    except http.client.RemoteDisconnected:
        return None
    return Reply(response)


def exchange(url, request: bytes, timeout=5.0):
    """Send ``request`` as is and read the reply (None: the server closed without one)."""
    with connect(url, timeout) as sock:
        sock.sendall(request)
        return read_reply(sock, head=request.startswith(b"HEAD "))


def post_raw(url, body: bytes, headers=None, path="/api/position"):
    """A POST with ``body`` and ``headers`` (by default just a correct Content-Length)."""
    headers = {"Content-Length": str(len(body))} if headers is None else headers
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return exchange(url, head.encode() + b"\r\n" + body)


def error_of(reply, status):
    """The error message of a JSON error reply with ``status``."""
    assert reply is not None and reply.status == status, (reply and reply.status, reply and reply.body[:200])
    payload = reply.json()
    assert set(payload) == {"error"} and isinstance(payload["error"], str)
    return payload["error"]


def hang_up(sock):
    """Close ``sock`` with a reset (SO_LINGER 0) rather than a FIN: the server's next read or
    write on it fails with ConnectionResetError or BrokenPipeError."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def wait_for_handlers(timeout=5.0):
    """Wait until the servers' request threads (in this process) have finished."""
    deadline = time.monotonic() + timeout
    while any("process_request" in t.name for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.02)


def assert_answers_a_move(url):
    status, state = post(url, "/api/position", {"moves": "44"})
    assert status == 200 and state["moves"] == "44" and state["board"][4][3] == -1


def test_content_length_is_checked_before_the_body_is_read(random_server):
    for bad in ("-1", "abc", "+5", "1_0", "", "5, 6"):
        assert "Content-Length" in error_of(post_raw(random_server, b'{"moves": "4"}', {"Content-Length": bad}), 400)
    two = post_raw(random_server, b"{}", {"Content-Length": "2", "content-length": "3"})
    assert "Content-Length" in error_of(two, 400)
    # a huge promise is refused at once, before any body is sent or read
    started = time.monotonic()
    assert str(serve.MAX_BODY) in error_of(post_raw(random_server, b"", {"Content-Length": "1000000000000"}), 413)
    too_big = b'{"moves": "' + b" " * serve.MAX_BODY + b'4"}'
    assert str(serve.MAX_BODY) in error_of(post_raw(random_server, too_big), 413)  # sent, unread, reply intact
    # no Content-Length: 411 rather than reading until the client closes (it has not)
    assert "Content-Length" in error_of(post_raw(random_server, b'{"moves": "4"}', {}), 411)
    assert "Content-Length" in error_of(post_raw(random_server, b"0\r\n\r\n", {"Transfer-Encoding": "chunked"}), 411)
    assert time.monotonic() - started < 3
    assert_answers_a_move(random_server)


def test_a_body_shorter_than_its_content_length_times_out(strict_server):
    started = time.monotonic()
    with connect(strict_server) as sock:  # promises 40 bytes, sends 14 and waits
        sock.sendall(b'POST /api/position HTTP/1.1\r\nContent-Length: 40\r\n\r\n{"moves": "4"}')
        assert "Content-Length of 40" in error_of(read_reply(sock), 408)
        assert sock.recv(100) == b""  # and the server closed the connection
    assert STRICT_TIMEOUT <= time.monotonic() - started < STRICT_TIMEOUT + 3
    # a client that closes its side before the promised bytes: 400 at once
    with connect(strict_server) as sock:
        sock.sendall(b'POST /api/position HTTP/1.1\r\nContent-Length: 40\r\n\r\n{"moves": "4"}')
        sock.shutdown(socket.SHUT_WR)
        assert "fewer than its Content-Length" in error_of(read_reply(sock), 400)
    # silence, or half a request line or of the headers: the connection is dropped, not held
    for sent in (b"", b"POST /api/posi", b"POST /api/position HTTP/1.1\r\nContent-Le"):
        started = time.monotonic()
        with connect(strict_server) as sock:
            sock.sendall(sent)
            assert read_reply(sock) is None
        assert time.monotonic() - started < STRICT_TIMEOUT + 3
    assert_answers_a_move(strict_server)


def test_a_stalled_client_does_not_hold_up_others(random_server):
    with connect(random_server) as stalled:  # holds its connection for the 10 s read timeout
        stalled.sendall(b"POST /api/position HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        started = time.monotonic()
        assert_answers_a_move(random_server)
        assert time.monotonic() - started < 2


def test_bodies_that_are_not_move_requests_are_400(random_server):
    assert "nests too deeply" in error_of(post_raw(random_server, b"[" * 4000), 400)
    # valid JSON, too deep for a move request whatever the Python build's recursion limit
    assert "nests too deeply" in error_of(post_raw(random_server, b"[" * 40 + b"]" * 40), 400)
    assert "nests too deeply" in error_of(post_raw(random_server, b'{"moves": ' + b'{"":' * 1000), 400)
    assert "not UTF-8" in error_of(post_raw(random_server, b'{"moves": "4\xff"}'), 400)
    assert "not UTF-8" in error_of(
        post_raw(random_server, b"\xfe\xff\x00{\x00}"), 400
    )  # UTF-16, which json.loads takes
    assert "not JSON" in error_of(post_raw(random_server, b"moves=44"), 400)
    for not_an_object in (b"[1, 2]", b'"44"', b"null", b"7"):
        assert "JSON object" in error_of(post_raw(random_server, not_an_object), 400)
    assert "column 1-7" in error_of(post_raw(random_server, b'{"moves": "4\xd9\xa4"}'), 400)  # an Arabic 4
    empty = post_raw(random_server, b"")  # an empty body is the empty position, as before
    assert empty.status == 200 and empty.json()["moves"] == "" and set(empty.json()) == POSITION_KEYS


def test_every_method_gets_a_json_reply(random_server):
    def request(method, path):
        return exchange(random_server, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())

    page = request("HEAD", "/")  # HEAD: GET's status and headers, no body
    assert page.status == 200 and page.body == b"" and page.headers["content-type"].startswith("text/html")
    assert int(page.headers["content-length"]) == len(urllib.request.urlopen(random_server).read())
    info = request("HEAD", "/api/info")
    assert info.status == 200 and info.body == b"" and info.headers["content-type"] == "application/json"
    assert request("HEAD", "/api/position").status == 405 and request("HEAD", "/api/nothing").status == 404
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):
        for path, allowed in (
            ("/", "GET, HEAD"),
            ("/api/info", "GET, HEAD"),
            ("/api/position", "POST"),
            ("/api/model-move", "POST"),
        ):
            reply = request(method, path)
            assert method in error_of(reply, 405) and reply.headers["allow"] == allowed
        assert "no page or endpoint" in error_of(request(method, "/api/nothing"), 404)
    reply = request("POST", "/")
    assert "takes GET, HEAD, not POST" in error_of(reply, 405) and reply.headers["allow"] == "GET, HEAD"
    for method in ("FOO", "BREW", "get", "TRACE", "CONNECT"):
        reply = request(method, "/api/position")
        assert method in error_of(reply, 501) and reply.headers["allow"] == "POST"
        assert request(method, "/").headers["allow"] == "GET, HEAD"


def test_malformed_requests_get_a_json_reply(random_server):
    assert "GARBAGE" in error_of(exchange(random_server, b"GARBAGE\r\n\r\n"), 400)
    assert "request" in error_of(exchange(random_server, b"GET / HTTP/1.1 extra\r\n\r\n"), 400)
    error_of(exchange(random_server, b"POST /api/position\r\n\r\n"), 400)  # HTTP/0.9 knew only GET
    assert "version" in error_of(exchange(random_server, b"GET / HTTP/x.y\r\n\r\n"), 400)
    error_of(exchange(random_server, b"GET / HTTP/2.0\r\n\r\n"), 505)
    error_of(exchange(random_server, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"), 414)
    error_of(exchange(random_server, b"GET / HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n"), 431)
    error_of(exchange(random_server, b"GET / HTTP/1.1\r\n" + b"X: 1\r\n" * 200 + b"\r\n"), 431)
    # a request line without a version is answered with a status line too (as HTTP/1.0, not 0.9)
    reply = exchange(random_server, b"GET /api/info\r\n\r\n")
    assert reply.status == 200 and reply.json() == {"player": "random", "has_value": False}


def test_clients_that_hang_up_early_leave_no_traceback(random_server, capfd):
    capfd.readouterr()
    request = b'POST /api/model-move HTTP/1.1\r\nContent-Length: 14\r\n\r\n{"moves": "4"}'
    for _ in range(10):
        for cut in (20, 60, len(request)):  # mid request line, mid headers, the whole request
            with connect(random_server) as sock:
                sock.sendall(request[:cut])
            sock = connect(random_server)
            sock.sendall(request[:cut])
            hang_up(sock)
        sock = connect(random_server)  # mid reply: read its first bytes, then hang up
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        sock.recv(10)
        hang_up(sock)
    assert_answers_a_move(random_server)
    wait_for_handlers()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err, err


def test_a_handler_bug_is_a_500_and_one_line_in_the_log(random_server, capfd, monkeypatch):
    def broken(body):
        raise KeyError("a bug")

    monkeypatch.setattr(serve.GameService, "parse", staticmethod(broken))
    capfd.readouterr()
    assert "KeyError" in error_of(post_raw(random_server, b"{}", path="/api/model-move"), 500)
    wait_for_handlers()
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "KeyError" in err, err


def test_make_server_compiles_the_player_before_it_returns(monkeypatch):
    evaluated = []
    real_position = serve.GameService.position
    monkeypatch.setattr(
        serve.GameService, "position", lambda self, moves: evaluated.append(moves) or real_position(self, moves)
    )
    server = serve.make_server(load_agent("random"), port=0)
    server.server_close()
    assert evaluated == [[]]


def fuzz_request(rng: random.Random):
    """A random request, and whether the client hangs up without reading the reply."""
    # weighted towards requests that reach the API, so that bodies and lengths get checked
    method = rng.choice(["POST"] * 6 + ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "FOO", "get"])
    path = rng.choice(
        ["/api/position"] * 3
        + ["/api/model-move"] * 2
        + ["/", "/index.html", "/api/info", "/api/nothing", "/api/position?x=1", "*"]
    )
    if rng.random() < 0.1:
        path += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8))).decode("latin-1")
    version = rng.choice([" HTTP/1.1"] * 6 + [" HTTP/1.0", "", " HTTP/2.0", " HTTP/x"])
    kind = rng.choice(["moves"] * 4 + ["bytes", "nested", "not an object", "empty"])
    if kind == "moves":
        body = json.dumps({"moves": "".join(rng.choice("1234567") for _ in range(rng.randrange(12)))}).encode()
    elif kind == "bytes":
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    elif kind == "nested":
        body = rng.choice([b"[", b'{"":']) * rng.randrange(300, 1200) if rng.random() < 0.5 else b"[" * 100
    else:
        body = {"not an object": b"[1]", "empty": b""}[kind]
    headers = []
    if rng.random() < 0.5:
        headers.append("Host: 127.0.0.1")
    if rng.random() < 0.3:
        headers.append("Content-Type: application/json")
    if rng.random() < 0.1:
        headers.append("X-Garbage: " + bytes(rng.randrange(32, 256) for _ in range(20)).decode("latin-1"))
    length = rng.choice(["right"] * 6 + ["short", "none", "-1", "abc", "huge", "twice"])
    short = len(body) + rng.randrange(1, 50)  # promises more than it sends: a 408 after the read timeout
    headers += {
        "right": [f"Content-Length: {len(body)}"],
        "short": [f"Content-Length: {short}"],
        "none": [],
        "-1": ["Content-Length: -1"],
        "abc": ["Content-Length: abc"],
        "huge": ["Content-Length: 99999999999"],
        "twice": [f"Content-Length: {len(body)}", f"Content-Length: {len(body) + 1}"],
    }[length]
    head = f"{method} {path}{version}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"
    request = head.encode("latin-1") + body
    return request, rng.random() < 0.1


def fuzz_one(url, request, hangs_up):
    """Send one fuzz request; return a description of what was wrong with the reply, or None."""
    with connect(url) as sock:
        sock.sendall(request)
        if hangs_up:
            hang_up(sock)
            return None
        reply = read_reply(sock, head=request.startswith(b"HEAD "))
    if reply is None:
        return "no reply"
    method, path = (request.split(b"\r\n")[0].split(b" ") + [b""])[:2]
    if request.startswith(b"HEAD "):
        return None if reply.body == b"" else "a body in a reply to HEAD"
    if reply.status == 200 and method == b"GET" and path.decode("latin-1") in PAGE_PATHS:
        return None if reply.body.startswith(b"<!") else "not the page"
    payload = reply.json()
    if reply.status == 200:
        return None if POSITION_KEYS <= set(payload) or set(payload) == {"player", "has_value"} else f"200 {payload}"
    return None if reply.status >= 400 and set(payload) == {"error"} else f"{reply.status} {payload}"


def test_fuzz_of_requests_gets_json_replies(strict_server, capfd):
    """200 random requests (fixed seed) over raw sockets, 16 at a time: every one whose client
    waits for it gets a JSON reply (the page for GET /), those promising more body than they send
    after the read timeout; then the server still answers, and it printed no traceback."""
    rng = random.Random(0)
    cases = [fuzz_request(rng) for _ in range(200)]
    capfd.readouterr()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        problems = list(pool.map(lambda case: fuzz_one(strict_server, *case), cases))
    wrong = [(case[0][:120], problem) for case, problem in zip(cases, problems) if problem]
    assert not wrong, wrong
    assert_answers_a_move(strict_server)
    wait_for_handlers()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err, err


def test_a_whole_game_by_clicking(random_server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 760, "height": 720})
    page.goto(random_server)
    expect(page.locator("#status")).to_contain_text("Your move")
    for i in range(4):  # X stacks column 4; the model answers in column 1
        page.locator('.cell[data-col="4"]').first.click()
        if i < 3:
            expect(page.locator("#moves")).to_have_value("41" * (i + 1))
            expect(page.locator("#status")).to_contain_text("Your move")
            # the model's probabilities for the move it just made: uniform, 0.14 in every column
            assert page.locator("#probs .p").all_inner_texts() == ["0.14"] * 7
    expect(page.locator("#moves")).to_have_value("4141414")
    expect(page.locator("#status")).to_contain_text("You win!")
    expect(page.locator("#status")).to_contain_text("Game over after 7 moves")
    assert page.locator(".cell.first").count() == 4 and page.locator(".cell.second").count() == 3
    page.screenshot(path=str(tmp_path / "won.png"))
    assert (tmp_path / "won.png").stat().st_size > 5000

    page.locator('.cell[data-col="5"]').first.click()  # a click after the end is a message
    expect(page.locator("#message")).to_contain_text("The game is over")
    expect(page.locator("#moves")).to_have_value("4141414")

    page.select_option("#first", "model")  # a new game where the model starts
    page.click("#new-game")
    expect(page.locator("#moves")).to_have_value("1")
    for expected in ("111", "11111", "1111112"):
        page.locator('.cell[data-col="1"]').first.click()
        expect(page.locator("#moves")).to_have_value(expected)
    page.locator('.cell[data-col="1"]').first.click()  # column 1 is full now
    expect(page.locator("#message")).to_contain_text("Column 1 is full")
    expect(page.locator("#moves")).to_have_value("1111112")
    page.close()


def test_value_bar_for_a_model_with_a_value_head(model_checkpoints, browser):
    server, url = start(str(model_checkpoints["cnn-mk4-value"]))
    try:
        page = browser.new_page()
        page.goto(url)
        expect(page.locator("#status")).to_contain_text("Your move")
        page.locator('.cell[data-col="4"]').first.click()
        expect(page.locator("#moves")).to_have_value(re.compile(r"^4[1-7]$"))
        expect(page.locator("#value-text")).to_have_text(re.compile(r"^[+-][01]\.\d\d$"))
        probs = [float(p) for p in page.locator("#probs .p").all_inner_texts()]
        assert len(probs) == 7 and abs(sum(probs) - 1) < 0.05
        page.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_search_reports_its_visit_shares(model_checkpoints):
    """A search's move probabilities are its move alone (one-hot); the API also gives how its
    root visits spread: shares of the 16 simulations, the move among the most visited."""
    server, url = start(f"gumbel:sims=16:{model_checkpoints['cnn-mk4-value']}")
    try:
        status, state = post(url, "/api/model-move", {"moves": ""})
        assert status == 200
        shares, probs = state["move_shares"], state["move_probs"]
        assert sorted(probs) == [0.0] * 6 + [1.0] and probs.index(1.0) == state["move"] - 1
        assert abs(sum(shares) - 1) < 1e-6 and sum(s > 0 for s in shares) >= 2
        assert all(abs(s * 16 - round(s * 16)) < 1e-6 for s in shares)  # whole visits of the 16
        assert shares[state["move"] - 1] == max(shares)
        assert state["shares"] is not None and abs(sum(state["shares"]) - 1) < 1e-6  # the position after the move, too
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("spec", ["gumbel:sims=8", "mcts:sims=8"])
def test_a_model_move_searches_each_position_once(spec, model_checkpoints):
    """A model move searches the position it moves from once (its move, value and
    shares from one search) and the position after it once: 2 x (sims + 1) network evaluations,
    where each position was searched twice before; with the shares those searches give."""
    from tests.test_interactive import counting

    agent, calls = counting(spec, model_checkpoints["mlp"])
    server = serve.make_server(serve.GameService(agent, temperature=0.0, reuse=False), port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        assert len(calls) == 9  # the compile at start: the empty board, once
        calls.clear()
        status, state = post(url, "/api/model-move", {"moves": "44"})
        assert status == 200 and len(calls) == 2 * 9
        want = visit_shares(agent, game.from_moves("44")[None])[0]
        assert state["move_shares"] == [float(x) for x in want]
    finally:
        server.shutdown()
        server.server_close()


def test_a_player_that_does_not_search_has_no_shares(random_server):
    status, state = post(random_server, "/api/model-move", {"moves": ""})
    assert status == 200 and state["move_shares"] is None and state["shares"] is None


def test_nesting_depth_counts_brackets_outside_strings():
    def depth_of(value):  # the reference: the parsed value's depth
        if not isinstance(value, (list, dict)):
            return 0
        return 1 + max(map(depth_of, value.values() if isinstance(value, dict) else value), default=0)

    for text in (
        '{"moves": "4453"}',
        '{"a": [[1], {"b": []}]}',
        '{"moves": "[[[{{{"}',  # brackets inside a string
        '{"m": "\\"[[["}',  # an escaped quote does not end the string
        '{"m": "\\\\", "n": [[]]}',  # an escaped backslash does
        "[" * 20 + "]" * 20,
        '"[["',
    ):
        assert serve.nesting_depth(text, 32) == depth_of(json.loads(text)), text
    assert serve.nesting_depth("", 32) == 0
    assert serve.nesting_depth("[" * 1000, 5) == 6  # stops counting past the limit


# -- batching: concurrent requests answered by one call of the player

# Positions of different lengths, none over: the empty board, one stone, two in a column, ...
POSITIONS = ["", "4", "44", "4453", "1234567", "3355", "71", "444", "2662", "7654321"]


class HeldPlayer:
    """``serve.searched_each`` wrapped: records each call's batch size, can hold the calls until
    released (``hold``), and can make each call take ``delay`` seconds longer (a slower player)."""

    def __init__(self, monkeypatch):
        self.sizes: list[int] = []
        self.entered = threading.Event()  # a call has started since the last hold
        self.released = threading.Event()
        self.released.set()
        self.delay = 0.0
        real = serve.searched_each

        def held(agent, boards):
            self.sizes.append(len(boards))
            self.entered.set()
            assert self.released.wait(120), "the test never released the player"
            time.sleep(self.delay)
            return real(agent, boards)

        monkeypatch.setattr(serve, "searched_each", held)

    def hold(self):
        self.entered.clear()
        self.released.clear()


def wait_until(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def post_for(url, path, body, timeout=120.0):
    """``(status, headers, payload)`` of a POST, giving up after ``timeout`` seconds."""
    request = urllib.request.Request(url + path.lstrip("/"), data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def alone(agent, moves: str):
    """The player's report of one position asked alone, as the service asked before batching."""
    return searched_move(agent, game.from_moves(moves)[None])


def close_to(got, want):
    return got == pytest.approx([float(x) for x in want], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("search", ["", "gumbel:sims=8:"], ids=["network", "gumbel"])
def test_positions_asked_together_are_answered_as_if_alone(search, model_checkpoints, monkeypatch):
    """Ten positions waiting at once go to the player in one call (padded to 16), and each
    answer is the one that position gets alone: the same probabilities (a search's: its move),
    value and visit shares, to float rounding. A Gumbel search draws noise for the batch: a
    position's row would see other noise than the position alone, and often move otherwise, were
    the rows not searched each as if alone."""
    player = HeldPlayer(monkeypatch)
    agent = load_agent(f"{search}{model_checkpoints['cnn-mk4-value']}")
    service = serve.GameService(agent, temperature=0.0)
    try:
        player.hold()
        with concurrent.futures.ThreadPoolExecutor(len(POSITIONS) + 1) as pool:
            blocker = pool.submit(service.position, [])
            assert player.entered.wait(60)  # the worker is busy: the others queue behind it
            asked = [pool.submit(service.position, game.parse_moves(moves)) for moves in POSITIONS]
            wait_until(lambda: service.waiting() == len(POSITIONS))
            player.released.set()
            states = [future.result(timeout=120) for future in asked]
            blocker.result(timeout=120)
    finally:
        player.released.set()  # never leave the worker held, whatever failed
        service.close()
    assert player.sizes == [1, 16]  # the blocker alone, then the ten in one call
    for moves, state in zip(POSITIONS, states):
        want = alone(agent, moves)
        assert state["moves"] == moves and close_to(state["probs"], want.probs[0]), moves
        assert state["value"] == pytest.approx(float(want.value[0]), rel=1e-5, abs=1e-6), moves
        if search:
            assert close_to(state["shares"], want.shares[0]), moves
            assert state["probs"].index(1.0) == int(want.greedy[0]), moves
        else:
            assert state["shares"] is None


def game_of(rng: random.Random) -> str:
    """A move string of 0-8 random legal moves, the game not over."""
    moves: list[int] = []
    for _ in range(rng.randrange(9)):
        legal = [c for c in range(game.COLS) if game.apply_moves(moves)[0, c] == 0]
        moves.append(rng.choice(legal))
        if serve.game_result(moves) is not None:
            moves.pop()
            break
    return "".join(str(c + 1) for c in moves)


def test_fifty_moves_at_once_are_answered_in_a_few_calls(model_checkpoints, monkeypatch):
    """50 model moves asked at once of a real server on 127.0.0.1 (the player held until all 50
    wait, then slowed to 0.1 s a call, as a search would be): all answered 200 with the move the
    position gets alone, in a few calls of the player, where one at a time took 100 (each move
    asks about the position and the one after it)."""
    player = HeldPlayer(monkeypatch)
    spec = str(model_checkpoints["cnn-mk4-value"])
    server, url = start(spec)
    agent = server.service.agent
    rng = random.Random(0)
    games = [game_of(rng) for _ in range(50)]
    try:
        startup = len(player.sizes)
        player.hold()
        with concurrent.futures.ThreadPoolExecutor(51) as pool:
            blocker = pool.submit(post_for, url, "/api/position", {"moves": ""})
            assert player.entered.wait(60)
            asked = [pool.submit(post_for, url, "/api/model-move", {"moves": moves}) for moves in games]
            wait_until(lambda: server.service.waiting() == len(games))
            player.delay = 0.1
            player.released.set()
            replies = [future.result(timeout=180) for future in asked]
            assert blocker.result(timeout=60)[0] == 200
    finally:
        player.released.set()
        server.shutdown()
        server.server_close()
    calls = player.sizes[startup + 1 :]  # after the blocker's
    assert calls[0] == serve.MAX_BATCH and len(calls) <= 10, calls  # the 50 moves, then the positions after
    for moves, (status, _, state) in zip(games, replies):
        assert status == 200, (moves, state)
        want = int(alone(agent, moves).greedy[0]) + 1
        assert state["move"] == want and state["moves"] == moves + str(want), (moves, state["move"], want)


def test_a_request_past_the_queue_limit_is_503_with_retry_after(monkeypatch):
    """With one position allowed to wait and the player busy, a third request is refused at
    once: 503, a JSON error and Retry-After; the two taken are answered once the player is free."""
    player = HeldPlayer(monkeypatch)
    server, url = start("random", max_waiting=1)
    try:
        player.hold()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(post_for, url, "/api/position", {"moves": ""})
            assert player.entered.wait(60)
            second = pool.submit(post_for, url, "/api/model-move", {"moves": "4"})
            wait_until(lambda: server.service.waiting() == 1)
            status, headers, payload = post_for(url, "/api/model-move", {"moves": "44"}, timeout=30)
            assert status == 503 and set(payload) == {"error"} and "busy" in payload["error"], payload
            assert headers["Retry-After"] == str(serve.RETRY_AFTER)
            player.released.set()
            assert first.result(timeout=60)[0] == 200
            status, _, state = second.result(timeout=60)
            assert status == 200 and state["moves"] == "41"
    finally:
        player.released.set()
        server.shutdown()
        server.server_close()


def test_tree_reuse_answers_one_position_at_a_time(model_checkpoints, monkeypatch):
    """With a PUCT search reusing its tree, the positions go one at a time through the search's
    memory (none through the batched call), and the answers are the memory's: the same visit
    shares as a SearchMemory asked about the same positions in the same order."""
    from czjax.evaluate.interactive import SearchMemory

    player = HeldPlayer(monkeypatch)
    agent = load_agent(f"mcts:sims=8:{model_checkpoints['mlp']}")
    service = serve.GameService(agent, temperature=0.0, reuse=True)
    try:
        state = service.model_move(game.parse_moves("44"))
    finally:
        service.close()
    memory = SearchMemory(agent, reuse=True)
    before, after = memory.searched(game.parse_moves("44")), memory.searched(game.parse_moves(state["moves"]))
    assert service.memory.keep and player.sizes == []
    assert state["move"] == int(before.greedy[0]) + 1
    assert close_to(state["move_shares"], before.shares[0]) and close_to(state["shares"], after.shares[0])


def test_warm_compiles_every_batch_size(monkeypatch):
    player = HeldPlayer(monkeypatch)
    server, _ = start("random", max_batch=8, warm=True)
    try:
        wait_until(lambda: sorted(player.sizes) == [1, 2, 4, 8])
    finally:
        server.server_close()


def test_batch_sizes_are_powers_of_two_and_the_largest():
    assert serve.batch_sizes(64) == (1, 2, 4, 8, 16, 32, 64)
    assert serve.batch_sizes(48) == (1, 2, 4, 8, 16, 32, 48)
    assert serve.batch_sizes(1) == (1,) and serve.batch_sizes(2) == (1, 2)
    assert [serve.padded_size(n, serve.batch_sizes(48)) for n in (1, 3, 17, 33, 48)] == [1, 4, 32, 48, 48]
    with pytest.raises(ValueError, match="at least 1"):
        serve.batch_sizes(0)


def test_serve_checks_its_address_before_loading_the_player(monkeypatch, capsys):
    """A host that does not resolve, or a port in use, is refused in one line before the player
    is loaded or compiled."""
    from czjax import cli
    from czjax.cli import flags

    loaded = []
    monkeypatch.setattr(flags, "load_player", lambda spec: loaded.append(spec) or load_agent(spec))
    assert cli.main(["serve", "random", "--host", "256.1.1.1", "--port", "0"]) == 2
    err = capsys.readouterr()
    assert err.err.startswith("czjax: error: cannot serve on 256.1.1.1:0: ") and err.err.count("\n") == 1, err.err
    assert "compiling" not in err.out
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["serve", "random", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"czjax: error: cannot serve on 127.0.0.1:{port}: ") and err.count("\n") == 1, err
    assert loaded == []
