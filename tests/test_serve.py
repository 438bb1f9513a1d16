"""`czjax serve`: the JSON API, and a whole game played by clicking in headless Chromium.

The browser test drives Debian's Chromium (/usr/bin/chromium, which `.ci/run` installs) with
Playwright. The opponent is the built-in ``random`` player at temperature 0, which plays its
lowest legal column, so the game's course is known in advance.
"""

import json
import re
import threading
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect, sync_playwright

from czjax import agents, serve

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def start(spec):
    server = serve.make_server(agents.load_agent(spec), port=0)
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
