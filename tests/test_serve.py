"""`czjax serve`: the JSON API, and a whole game played by clicking in headless Chromium.

The browser tests drive Debian's Chromium (/usr/bin/chromium, which `./test.sh` installs where
it can, as on CI) with Playwright; without it they skip and say how to get it (`apt-get install
chromium`, or CZJAX_CHROMIUM=PATH for another Chromium). The opponent is the built-in ``random``
player at temperature 0, which plays its lowest legal column, so the game's course is known in
advance.
"""

import json
import os
import re
import threading
import urllib.error
import urllib.request

import pytest

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # the API tests need no browser; the browser tests skip, saying why
    expect = sync_playwright = None

from czjax import agents, serve

CHROMIUM = os.environ.get("CZJAX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def start(spec, temperature=0.0):
    server = serve.make_server(agents.load_agent(spec), port=0, temperature=temperature)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture(scope="module")
def random_server():
    server, url = start("random")
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if sync_playwright is None:
        pytest.skip("browser test: Playwright is not installed (pip install 'czjax[test]')")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"browser test: no Chromium at {CHROMIUM} (`apt-get install chromium`, which ./test.sh does where it "
                    "can, or CZJAX_CHROMIUM=PATH)")
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
    random_agent = agents.load_agent("random")
    assert random_agent.temperature() == 1.0 and random_agent.temperature(0.0) == 0.0
    service = serve.GameService(random_agent, seed=0)
    first_moves = {service.model_move([])["move"] for _ in range(60)}
    assert len(first_moves) == 7  # uniform over 7 columns: all seen in 60 draws but with probability ~1e-3
    assert {serve.GameService(random_agent, temperature=0.0).model_move([])["move"] for _ in range(5)} == {1}


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
