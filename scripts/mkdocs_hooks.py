"""MkDocs hooks: the docstrings' Sphinx roles (``:func:`name```, ``:class:``, ``:mod:``, ...) read
as plain code on the API page, where mkdocstrings renders them as text followed by the code;
the notebooks in ``notebooks/`` (outside ``docs/``) as pages of the site, ``notebooks/NAME.md``:
their Markdown cells as they are, their code cells as Python blocks, no outputs (none are
committed; CI runs them, ``tests/test_notebook.py``); and the studies' READMEs
(``experiments/<study>/README.md``, outside ``docs/``) as the pages ``studies/<study>.md``, a
page's link to a study's README made a link to its page."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ROLE = re.compile(r":(?:func|class|mod|data|attr|meth|obj|exc):(?=<code>)")
ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EXPERIMENTS = ROOT / "experiments"
DOCS = ROOT / "docs"
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def on_page_content(html: str, **kwargs) -> str:
    return ROLE.sub("", html)


def notebook_markdown(path: Path) -> str:
    """A notebook as Markdown: its cells in order, code in fenced Python blocks, and where to find it."""
    cells = json.loads(path.read_text())["cells"]
    parts = []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"]).strip("\n")
        if cell["cell_type"] == "markdown":
            parts.append(source)
        elif cell["cell_type"] == "code":
            parts.append(f"```python\n{source}\n```")
        if index == 0:
            parts.append(
                f"*This page is the notebook `notebooks/{path.name}` of the repository, shown without its "
                "outputs: open it in Jupyter to run it.*"
            )
    return "\n\n".join(parts) + "\n"


def study_page(path: Path) -> Path | None:
    """The site's page for a file: ``docs/studies/<study>.md`` for a study's README (None for
    any other file)."""
    if path.name == "README.md" and path.parent.parent == EXPERIMENTS:
        return DOCS / "studies" / f"{path.parent.name}.md"
    return None


def relinked(markdown: str, source: Path, page: Path, outside: bool) -> str:
    """``markdown``, written in the folder ``source``, as the page ``page`` of docs/: a link to a
    study's README points to its page; with ``outside`` (a text from outside docs/), a link into
    docs/ is made relative to the page and any other link is shown as its text."""

    def move(match: re.Match) -> str:
        text, target = match.groups()
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return match.group(0)
        file, _, anchor = target.partition("#")
        path = Path(os.path.normpath(source / file))
        goal = study_page(path) or (path if path.is_relative_to(DOCS) else None)
        if goal is None or (not outside and goal == path):
            return text if outside else match.group(0)
        return f"[{text}]({Path(os.path.relpath(goal, page.parent)).as_posix()}{'#' + anchor if anchor else ''})"

    return LINK.sub(move, markdown)


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    path = DOCS / page.file.src_uri
    return markdown if page.file.generated_by else relinked(markdown, path.parent, path, outside=False)


def on_files(files, config, **kwargs):
    from mkdocs.structure.files import File

    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        files.append(File.generated(config, f"notebooks/{path.stem}.md", content=notebook_markdown(path)))
    for readme in sorted(EXPERIMENTS.glob("*/README.md")):
        page = study_page(readme)
        content = relinked(readme.read_text(), readme.parent, page, outside=True)
        files.append(File.generated(config, f"studies/{readme.parent.name}.md", content=content))
    return files
