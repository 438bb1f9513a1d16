"""The quick-start notebook (notebooks/quickstart.ipynb) runs top to bottom in a Jupyter kernel,
through the public API only, and is committed without outputs; the docs site shows its cells."""

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

import czjax

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"


def code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_the_notebook_is_committed_clean_and_uses_the_public_api():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    cells = code_cells(notebook)
    assert cells and all(not cell.outputs and cell.execution_count is None for cell in cells)
    used = set(re.findall(r"\bczjax\.(\w+)", "\n".join(cell.source for cell in cells)))
    assert used and used <= set(czjax.__all__), used - set(czjax.__all__)
    assert not re.search(r"^\s*(from|import)\s+czjax\.", "\n".join(cell.source for cell in cells), re.M)


def test_the_notebook_runs_top_to_bottom(tmp_path):
    """Every cell in order in a fresh kernel of this interpreter, in an empty folder (its runs go
    to runs/ there). The kernel inherits the suite's XLA_FLAGS (tests/conftest.py: on the CPU,
    XLA's backend optimisation off, which halves the notebook's compile time)."""
    kernels = tmp_path / "jupyter" / "kernels" / "czjax-test"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "czjax test",
                "language": "python",
            }
        )
    )
    os.environ["JUPYTER_PATH"] = str(tmp_path / "jupyter")  # this kernel, whatever else is installed
    work = tmp_path / "work"
    work.mkdir()
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    try:
        NotebookClient(
            notebook, timeout=600, kernel_name="czjax-test", resources={"metadata": {"path": str(work)}}
        ).execute()  # a cell that raises fails here, naming it
    finally:
        del os.environ["JUPYTER_PATH"]
    outputs = [output for cell in code_cells(notebook) for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.data]
    assert len(images) == 3  # entropy and win rates, the search's shares, the scan
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "solver-labelled positions: the most likely column is optimal" in text and "Test_L1_R3" in text
    assert re.search(r"the shipped model plays column [1-7]", text)
    rows = [json.loads(line) for line in (work / "runs" / "notebook-ex2" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["batches"] == 100
    scan_rows = (work / "runs" / "notebook-scan" / "metrics.jsonl").read_text().splitlines()
    assert {(row["setting"], row["seed"]) for row in map(json.loads, scan_rows)} == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_the_docs_site_shows_every_cell():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = hooks.notebook_markdown(NOTEBOOK)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for cell in notebook.cells:
        assert cell.source.strip() in page
    assert page.count("```python") == len(code_cells(notebook))
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "notebooks/quickstart.md" in nav


def test_czjax_leaves_matplotlib_s_backend_alone():
    """The dashboards are drawn without pyplot: importing the trainer and drawing one keeps the
    backend the user has (a notebook's inline one; svg here)."""
    import subprocess

    code = (
        "import matplotlib, tempfile, pathlib; from czjax.jobs import loop, plots; "
        "plots.dashboard([{'games': 1, 'win_rate': 0.5, 'entropy': 1.0}], pathlib.Path(tempfile.mkdtemp()) / 'd.png'); "
        "print(matplotlib.get_backend())"
    )
    env = {**os.environ, "MPLBACKEND": "svg"}
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert printed.strip() == "svg"
