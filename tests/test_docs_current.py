"""The docs say what the code does and where their figures come from:

- docs/cli.md's command reference is the block the parsers render now (czjax.cli.reference);
- the defaults the pages state in prose (the player of ``czjax play``, the default preset's size,
  the checkpoint interval, the benchmarks' settings) are read from the code, not copied;
- docs/testing.md quotes no test count or suite time (they change with every commit);
- every speed figure (games/s, searches/s, positions/s, moves/s, GFLOP/s, an ``NNx`` ratio; a
  goal's is none) in README.md and every page of docs/ links the result file it was read from,
  under docs/results/ (a figure with no such file has no place in the docs); a linked file records
  its ``command``, ``commit``, ``machine`` and ``date`` (in the JSON itself, as ``czjax bench ...
  --json`` writes them, or in a table ``| file | command | commit | machine | date |`` of its
  folder's README.md), and a figure linked to JSON files only is found in them at its rounding.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from czjax.cli import bench, reference

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"
CLI_PAGE = DOCS / "cli.md"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def normalized(page: Path) -> str:
    return " ".join(page.read_text().split())


# --- The command reference ------------------------------------------------------------------


def test_the_command_reference_is_what_the_parsers_render():
    page = CLI_PAGE.read_text()
    written = reference.generated_block(page)
    assert written is not None, f"docs/cli.md lost its markers {reference.BEGIN} ... {reference.END}"
    rendered = reference.render()
    if written != rendered:
        diff = "\n".join(
            list(
                difflib.unified_diff(written.splitlines(), rendered.splitlines(), "docs/cli.md", "parsers", lineterm="")
            )[:40]
        )
        pytest.fail(f"docs/cli.md's command reference is stale: run `{reference.UPDATE_COMMAND}`\n{diff}")


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs' toc makes it (lower case, code marks and punctuation dropped)."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "").strip().lower())
    return re.sub(r"[\s-]+", "-", text)


def test_links_into_the_command_page_land_on_a_heading():
    anchors = {slug(line.lstrip("#")) for line in CLI_PAGE.read_text().splitlines() if line.startswith("#")}
    assert "czjax-scan" in anchors and "czjax-bench-train" in anchors
    for page in PAGES:
        for target in re.findall(r"cli\.md#([\w-]+)", page.read_text()):
            assert target in anchors, f"{page.name} links cli.md#{target}, which is no heading of docs/cli.md"


def test_the_reference_renders_a_parser():
    parser = argparse.ArgumentParser(prog="czjax")
    commands = parser.add_subparsers(dest="command")
    tool = commands.add_parser("tool", help="does a thing", description="Does a thing | well.")
    tool.add_argument("player", metavar="PLAYER", nargs="?", default="azjl:czjax", help="who plays " + "x" * 100)
    tool.add_argument("--batch", type=int, nargs="+", default=[50, 4096], help="games (default: %(default)s)")
    tool.add_argument("--mode", metavar="a|b", default="a", help="a_b and _c_ mode, *not* %(default)s twice")
    tool.add_argument("--mirror", action=argparse.BooleanOptionalAction, default=None)
    tool.add_argument("--hidden", default=argparse.SUPPRESS, help="no default shown")
    other = commands.add_parser("other", help="the same player")
    other.add_argument("player", metavar="PLAYER", help="who plays " + "x" * 100)
    block = reference.render(parser)
    assert block.startswith(reference.BEGIN) and block.endswith(reference.END)
    assert "| [`czjax tool`](#czjax-tool) | does a thing |" in block
    assert "czjax tool [PLAYER] [--batch BATCH [BATCH ...]] [--mode a|b] [--[no-]mirror] [--hidden HIDDEN]" in block
    assert "| `[PLAYER]` | `azjl:czjax` | who plays" in block
    assert "| `--batch BATCH [BATCH ...]` | `50 4096` | games |" in block  # the default once, lists spaced
    assert "| <code>--mode a&#124;b</code> | `a` | a_b and \\_c\\_ mode, \\*not\\* a twice |" in block
    assert "| `--[no-]mirror` |  |  |" in block and "| `--hidden HIDDEN` |  | no default shown |" in block
    assert "Does a thing \\| well." in block
    assert "| `PLAYER` |  | as for [`czjax tool`](#czjax-tool) |" in block  # a long help is given once


def test_the_reference_updates_its_block_only(tmp_path):
    page = tmp_path / "cli.md"
    page.write_text(f"# prose\n\n{reference.BEGIN}\nold\n{reference.END}\n\nmore prose\n")
    assert reference.update(page, f"{reference.BEGIN}\nnew\n{reference.END}")
    assert page.read_text() == f"# prose\n\n{reference.BEGIN}\nnew\n{reference.END}\n\nmore prose\n"
    assert not reference.update(page, f"{reference.BEGIN}\nnew\n{reference.END}")
    page.write_text("no markers\n")
    with pytest.raises(ValueError, match="no generated block"):
        reference.update(page)


# --- Defaults stated in prose -----------------------------------------------------------------


@pytest.fixture(scope="module")
def parsers() -> dict[str, argparse.ArgumentParser]:
    return reference.command_parsers()


def parse(parsers, command: str) -> argparse.Namespace:
    """``command`` (``czjax bench train --runs 3``) as its parser reads it."""
    words = shlex.split(command)
    for length in range(len(words), 0, -1):
        name = " ".join(words[:length])
        if name in parsers:
            return parsers[name].parse_args(words[length:])
    raise AssertionError(f"no czjax command in {command!r}")


def number(text: str) -> float:
    return float(text.replace(",", ""))


def found(pattern: str, pages=PAGES) -> list[tuple[str, re.Match]]:
    return [(page.name, match) for page in pages for match in re.finditer(pattern, normalized(page))]


def test_the_default_player_of_play_and_serve(parsers):
    default = parsers["czjax play"].get_default("player")
    assert parsers["czjax serve"].get_default("player") == default
    claims = found(r"`czjax play` and `czjax serve`(?: with no `PLAYER`| therefore)? play `([^`]+)`")
    claims += found(r"`czjax play`'s default `([^`]+)`")
    for page in ("cli.md", "strength.md"):
        assert any(name == page for name, _ in claims), f"docs/{page} no longer says what czjax play plays"
    wrong = [(name, m.group(0)) for name, m in claims if m.group(1) != default]
    # "the search `czjax play` uses" is the default's, in the default's words
    wrong += [(name, m.group(0)) for name, m in found(r"`czjax play` uses\b[^.]*") if default not in m.group(0)]
    assert not wrong, f"czjax play and serve play {default}, not what these say: {wrong}"


def test_the_default_preset(parsers):
    from czjax.cli.train import train_spec

    spec = train_spec(parsers["czjax train"].parse_args([]))  # czjax train with no flags
    claims = found(r"trains the `default` preset: ([^.]*?), ([\d,]+) games per batch, ([\d,]+) batches", [CLI_PAGE])
    assert claims, "docs/cli.md no longer says what czjax train trains by default"
    for _, match in claims:
        assert "SimpleMLP" in match.group(1) and spec.config.model == "mlp"
        assert "RandomPunisher" in match.group(1) and spec.config.opponent.startswith("random-punisher")
        assert (number(match.group(2)), number(match.group(3))) == (spec.config.games_per_batch, spec.batches)


def test_the_checkpoint_interval(parsers):
    train = parsers["czjax train"]
    claims = found(
        r"every (\d+) chunks \(`--checkpoint-every`\) or (\d+) seconds of training \(`--checkpoint-seconds`\)",
        [CLI_PAGE],
    )
    assert claims, "docs/cli.md no longer says how often a run is checkpointed"
    for _, match in claims:
        assert number(match.group(1)) == train.get_default("checkpoint_every")
        assert number(match.group(2)) == train.get_default("checkpoint_seconds")


def test_commands_written_out_with_their_defaults(parsers):
    """``czjax X` is `czjax X --flag value ...``: the flags written out are the defaults."""
    claims = found(r"`(czjax [a-z -]+?)` is `(\1 [^`]+)`")
    named = {m.group(1) for name, m in claims if name == "cli.md"}
    wanted = {"czjax play", "czjax serve", "czjax bench train", "czjax bench search", "czjax bench rollout"}
    wanted.add("czjax bench scan")
    assert wanted <= named, f"docs/cli.md no longer writes out {wanted - named}"
    for name, match in claims:
        bare, explicit = vars(parse(parsers, match.group(1))), vars(parse(parsers, match.group(2)))
        changed = {k: (bare[k], explicit[k]) for k in bare if bare[k] != explicit[k] and k != "func"}
        assert not changed, f"{name}: `{match.group(2)}` is not `{match.group(1)}`: (default, written) {changed}"


def test_every_preset_is_named_on_the_command_page():
    from czjax.jobs.presets import PRESETS

    text = CLI_PAGE.read_text()
    assert not [name for name in PRESETS if f"`{name}`" not in text]


def test_the_testing_page_quotes_no_count_or_time():
    text = normalized(DOCS / "testing.md")
    assert not re.findall(r"(?<![=\w-])\d[\d,]* tests\b", text), "a test count: say how to get it instead"
    assert not re.findall(r"\b\d[\d,.]* ?(?:s|min)\b", text), "a time: say how to measure it instead"
    assert "pytest --collect-only -q tests" in text


# --- Where the speed figures come from --------------------------------------------------------

NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
UNITS = {"games/s": 1.0, "searches/s": 1.0, "positions/s": 1.0, "moves/s": 1.0, "GFLOP/s": 1e9}
SCALE = {"": 1.0, "k": 1e3, "M": 1e6}
SPEED = re.compile(
    rf"((?:{NUM})[kM]?(?:\s*/\s*(?:{NUM})[kM]?)*)\s?(games/s|searches/s|positions/s|moves/s|GFLOP/s|(?<=[kM])/s)\b"
)
RATIO = re.compile(rf"(?<![\w.,])({NUM})x\b")
CELL_NUMBER = re.compile(rf"\**((?:{NUM})[kM]?)\**")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
PROVENANCE = ("command", "commit", "machine", "date")


@dataclasses.dataclass
class Figure:
    text: str  # as quoted: "2,315,892", "154.0M", "2.74"
    scale: float  # of the quoted number: 1e9 for GFLOP/s, 1e6 for an M

    @property
    def value(self) -> float:
        return number(self.text.rstrip("kM")) * self.scale

    @property
    def tolerance(self) -> float:
        decimals = len(self.text.rstrip("kM").partition(".")[2])
        return 0.5 * 10.0**-decimals * self.scale * (1 + 1e-9)


def is_goal(text: str, match: re.Match) -> bool:
    """Whether a figure is a goal's ("goal 10x", "the 2x goal", "goals (60k games/s"), not a
    measurement."""
    return "goal" in text[max(0, match.start() - 12) : match.end() + 6]


def figures_in(text: str) -> list[Figure]:
    """The speed figures of a text: numbers before a speed unit, and ratios (``9.7x``), other
    than a goal's (``goal 10x``)."""
    found = []
    text = re.sub(r"`[^`]*`", "", text)  # inline code is a command or an example, not a figure
    for match in SPEED.finditer(text):
        if is_goal(text, match):
            continue
        unit = match.group(2)
        for part in match.group(1).split("/"):
            part = part.strip()
            found.append(Figure(part, SCALE[part[-1]] if part[-1] in "kM" else UNITS.get(unit, 1.0)))
    for match in RATIO.finditer(text):
        if not is_goal(text, match):
            found.append(Figure(match.group(1), 1.0))
    return found


@dataclasses.dataclass
class Unit:
    """What one link covers: a table row (with its caption, the paragraph or list item right above
    the table), a list item or a paragraph."""

    page: Path
    line: int
    text: str
    figures: list[Figure]
    caption: str = ""


def split_cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def units_of(page: Path) -> list[Unit]:
    lines = page.read_text().splitlines()
    units: list[Unit] = []
    block: list[tuple[int, str]] = []
    fenced = False
    caption = ""  # the paragraph right above a table
    lead_in = ""  # the paragraph right above a list, for all its items

    def flush():
        nonlocal block, caption, lead_in
        if not block:
            return
        kind = "table" if block[0][1].lstrip().startswith("|") else "item" if is_item(block[0][1]) else "text"
        text = " ".join(line.strip() for _, line in block)
        if kind == "table":
            header = split_cells(block[0][1])
            for line_number, row in block[2:]:
                figures = figures_in(row)
                for title, cell in zip(header, split_cells(row)):
                    unit = next((u for u in UNITS if u in title), None)
                    matched = CELL_NUMBER.fullmatch(cell)
                    if unit and matched:  # a bare number in a column of speeds
                        quoted = matched.group(1)
                        figures.append(Figure(quoted, SCALE[quoted[-1]] if quoted[-1] in "kM" else UNITS[unit]))
                units.append(Unit(page, line_number, row, figures, caption))
            caption = lead_in = ""
        elif kind == "item":
            units.append(Unit(page, block[0][0], text, figures_in(text), lead_in))
            caption = text  # a table right below an item (indented in it) is the item's
        else:
            units.append(Unit(page, block[0][0], text, figures_in(text)))
            caption = lead_in = text
        block = []

    for line_number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith("<!--"):
            continue
        if not line.strip():
            flush()
            continue
        if line.startswith("#"):
            flush()
            caption = lead_in = ""
            continue
        in_table = bool(block) and block[0][1].lstrip().startswith("|")
        if block and (line.lstrip().startswith("|") != in_table or is_item(line)):
            flush()
        block.append((line_number, line))
    flush()
    return units


def is_item(line: str) -> bool:
    return bool(re.match(r"\s{0,3}(?:[-*]|\d+\.) ", line))


def result_file(page: Path, target: str) -> Path | None:
    """The file under docs/results/ a link points to (a folder's README.md is a guide, not a
    result), or None."""
    path = (
        (ROOT if page.name == "README.md" and page.parent == ROOT else page.parent) / target.split("#")[0]
    ).resolve()
    if not path.is_relative_to(RESULTS) or path.name == "README.md" or path == RESULTS:
        return None
    return path


def provenance_rows(folder: Path) -> dict[str, dict[str, str]]:
    """The provenance table of ``folder/README.md``: its rows by file name."""
    readme = folder / "README.md"
    rows: dict[str, dict[str, str]] = {}
    if not readme.is_file():
        return rows
    header: list[str] | None = None
    for line in readme.read_text().splitlines():
        if not line.lstrip().startswith("|"):
            header = None
            continue
        cells = split_cells(line)
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if header[:5] != ["file", *PROVENANCE] or set("".join(cells)) <= set("-: "):
            continue
        names = re.findall(r"`([^`]+)`", cells[0]) or [cells[0]]
        for name in names:
            rows[name] = dict(zip(PROVENANCE, cells[1:5]))
    return rows


def provenance_of(path: Path) -> dict[str, str]:
    """The four fields of a result file: its own (JSON from ``czjax bench --json``), then its
    folder README's row for what it lacks."""
    record: dict[str, str] = {}
    if path.suffix == ".json":
        document = json.loads(path.read_text())
        if isinstance(document, dict):
            record = {k: str(document[k]) for k in PROVENANCE if document.get(k) not in (None, "")}
    row = provenance_rows(path.parent).get(path.name, {})
    return {**{k: v for k, v in row.items() if v.strip()}, **record}


def numbers_in(document) -> list[float]:
    if isinstance(document, dict):
        return [x for v in document.values() for x in numbers_in(v)]
    if isinstance(document, list):
        return [x for v in document for x in numbers_in(v)]
    if isinstance(document, (int, float)) and not isinstance(document, bool):
        return [float(document)]
    return []


def unsourced(units: list[Unit]) -> list[str]:
    """What is wrong with the units' figures' sources, one line each."""
    problems = []
    for unit in units:
        if not unit.figures:
            continue
        where = f"{unit.page.relative_to(ROOT)}:{unit.line}"
        links = LINK.findall(unit.text) + LINK.findall(unit.caption)
        files = {path for _, target in links if (path := result_file(unit.page, target)) is not None}
        if not files:
            problems.append(
                f"{where}: a speed figure with no link to its result file under docs/results/: {unit.text[:100]}"
            )
            continue
        missing = [p for p in files if not p.is_file()]
        problems += [f"{where}: links {p.relative_to(ROOT)}, which does not exist" for p in missing]
        for path in sorted(files - set(missing)):
            lacking = [k for k in PROVENANCE if k not in provenance_of(path)]
            if lacking:
                problems.append(
                    f"{where}: {path.relative_to(ROOT)} records no {', '.join(lacking)} (in the file, or in a "
                    f"| file | command | commit | machine | date | table of {path.parent.relative_to(ROOT)}/README.md)"
                )
        if missing or any(p.suffix != ".json" for p in files):
            continue
        values = [x for p in files for x in numbers_in(json.loads(p.read_text()))]
        for figure in unit.figures:
            if not any(abs(x - figure.value) <= figure.tolerance for x in values):
                names = ", ".join(p.name for p in sorted(files))
                problems.append(f"{where}: {figure.text} is in none of {names} at that rounding")
    return problems


def test_every_speed_figure_links_a_result_file_that_records_where_it_came_from():
    units = [u for page in PAGES for u in units_of(page)]
    assert sum(len(u.figures) for u in units) > 50  # the scanner still finds the figures
    problems = unsourced(units)
    assert not problems, "\n".join(problems)


def test_the_figure_check_catches_what_it_should(tmp_path):
    page = DOCS / "example.md"  # links resolve from docs/, the page is never written
    text = (
        "| measure | czjax | ratio |\n| --- | ---: | ---: |\n"
        "| a | 2,315,892 games/s | **167x** [r](results/benchmarks/bench/bench-train.json) |\n"
        "| b | 2,315,000 games/s | **167x** [r](results/benchmarks/bench/bench-train.json) |\n"
        "| c | 9 games/s | 9x |\n"
        "| d | 9 games/s | 9x [r](results/nowhere/bench.json) |\n"
        "| e | 9 games/s | 9x [no result file](benchmarks.md#provenance) |\n\n"
        "The goal is 2x (the goals: 60k games/s), and 3x3 convolutions on 2048x2048 boards are no figures.\n\n"
        "Searches: [the table](results/benchmarks/bench/bench-search.json)\n\n"
        "| search | czjax searches/s |\n| --- | ---: |\n| gumbel | 652,406 |\n| mcts | 1,000 |\n"
    )
    source = tmp_path / "example.md"
    source.write_text(text)
    units = [dataclasses.replace(u, page=page) for u in units_of(source)]
    assert [len(u.figures) for u in units] == [2, 2, 2, 2, 2, 0, 0, 1, 1]
    problems = unsourced(units)
    assert len(problems) == 5, problems
    assert "docs/example.md:4: 2,315,000 is in none of bench-train.json" in problems[0]
    assert "docs/example.md:5: a speed figure with no link" in problems[1]
    assert "results/nowhere/bench.json, which does not exist" in problems[2]
    assert "docs/example.md:7: a speed figure with no link" in problems[3]  # "no result file" is no source
    assert "docs/example.md:16: 1,000 is in none of bench-search.json" in problems[4]


def test_a_table_in_a_list_item_relies_on_the_item(tmp_path):
    page = DOCS / "example.md"
    table = "\n  | search | czjax searches/s |\n  | --- | ---: |\n  | gumbel | 652,406 |\n"
    for item, expected in (
        ("- Searches ([r](results/benchmarks/bench/bench-search.json)):\n", 0),
        ("- Searches:\n", 1),
    ):
        source = tmp_path / "example.md"
        source.write_text(item + table)
        units = [dataclasses.replace(u, page=page) for u in units_of(source)]
        assert [len(u.figures) for u in units] == [0, 1]
        assert len(unsourced(units)) == expected


def test_a_folder_readme_records_provenance(tmp_path):
    (tmp_path / "README.md").write_text(
        "# x\n\n| file | command | commit | machine | date |\n| --- | --- | --- | --- | --- |\n"
        "| `a.txt`, `b.txt` | `czjax bench train` | 0fc36d2 | 2-core CPU | 2026-11-26 |\n"
        "| `c.txt` | `czjax bench train` |  | 2-core CPU | 2026-11-26 |\n"
    )
    (tmp_path / "d.json").write_text(json.dumps({"command": "czjax bench search --json", "commit": None, "rows": []}))
    rows = provenance_rows(tmp_path)
    assert rows["b.txt"] == {
        "command": "`czjax bench train`",
        "commit": "0fc36d2",
        "machine": "2-core CPU",
        "date": "2026-11-26",
    }
    assert "commit" not in provenance_of(tmp_path / "c.txt")
    assert set(provenance_of(tmp_path / "d.json")) == {"command"}


# --- What czjax bench --json records ------------------------------------------------------------


def test_the_bench_json_opens_with_its_provenance(capsys):
    args = argparse.Namespace(json=True, runs=1)
    assert bench._bench(args, "nothing", "header", [1, 2], lambda s, log: [{"setting": s}], str) == 0
    document = json.loads(capsys.readouterr().out)
    assert list(document)[:4] == list(PROVENANCE) and document["rows"] == [{"setting": 1}, {"setting": 2}]
    when = datetime.datetime.fromisoformat(document["date"])
    assert when.utcoffset() == datetime.timedelta(0)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) < 600
    assert "jax" in document["machine"] and document["command"]
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:
        head = None
    if head is not None and head.returncode == 0:  # a checkout: its commit
        assert document["commit"] == head.stdout.strip()


def test_the_command_is_recorded_as_typed():
    from czjax.bench.provenance import command_line

    assert command_line(["/x/.venv/bin/czjax", "bench", "train", "--model", "mlp"]) == "czjax bench train --model mlp"
    assert command_line(["/x/czjax/cli/__main__.py", "bench", "search", "--json"]) == "czjax bench search --json"
    assert command_line(["run.py", "a b"]) == "run.py 'a b'"
