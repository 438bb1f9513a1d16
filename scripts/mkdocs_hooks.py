"""MkDocs hooks: the docstrings' Sphinx roles (``:func:`name```, ``:class:``, ``:mod:``, ...) read
as plain code on the API page, where mkdocstrings renders them as text followed by the code; and
the notebooks in ``notebooks/`` (outside ``docs/``) as pages of the site, ``notebooks/NAME.md``:
their Markdown cells as they are, their code cells as Python blocks, no outputs (none are
committed; CI runs them, ``tests/test_notebook.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROLE = re.compile(r":(?:func|class|mod|data|attr|meth|obj|exc):(?=<code>)")
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


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


def on_files(files, config, **kwargs):
    from mkdocs.structure.files import File

    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        files.append(File.generated(config, f"notebooks/{path.stem}.md", content=notebook_markdown(path)))
    return files
