"""The studies (experiments/<study>/, experiments/README.md): each has a README with its question,
command, machine, date, commit and verdict; every results folder under docs/results/ belongs to a
study and is linked from its README; the index docs/studies.md is the one experiments/index.py
writes; a script's imports of shared modules and of other studies' modules resolve to one file."""

from __future__ import annotations

import difflib
import importlib
import re
import sys
from pathlib import Path

import pytest

import campaign
import common
import index

ROOT = Path(__file__).resolve().parent.parent
STUDIES = index.studies()


def test_there_are_studies_and_each_has_its_fields():
    assert {"blog-examples", "same-start", "strength", "benchmarks"} <= {s.name for s in STUDIES}
    problems = []
    for study in STUDIES:
        readme = study / "README.md"
        if not readme.is_file():
            problems.append(f"experiments/{study.name}/ has no README.md")
            continue
        fields = index.fields(readme)
        problems += [f"{study.name}: no {key}" for key in index.FIELDS if not fields.get(key)]
        if fields.get("Date") and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", fields["Date"]):
            problems.append(f"{study.name}: Date {fields['Date']!r} is not YYYY-MM-DD")
        if fields.get("Commit") and not re.fullmatch(r"[0-9a-f]{7,40}", fields["Commit"].split(" ")[0]):
            problems.append(f"{study.name}: Commit {fields['Commit']!r} does not begin with a commit hash")
    assert not problems, "\n".join(problems)


def test_the_fields_parser_reads_items_and_their_continued_lines(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "# A study\n\n- **Question**: does it\n  work?\n- **Verdict**: yes | mostly\n\n"
        "Not a field.\n\n## Runs\n\n- **Date**: 2026-01-01\n"
    )
    assert index.fields(readme) == {"Question": "does it work?", "Verdict": "yes | mostly"}


def test_every_results_folder_belongs_to_a_study_and_is_linked_from_its_readme():
    names = {s.name for s in STUDIES}
    problems = []
    for folder in sorted(p for p in index.RESULTS.iterdir() if p.is_dir()):
        if folder.name not in names:
            problems.append(f"docs/results/{folder.name}/ belongs to no study (no experiments/{folder.name}/)")
            continue
        linked = index.links(ROOT / "experiments" / folder.name / "README.md")
        for item in sorted(folder.iterdir()):
            if not item.is_dir():
                problems.append(f"docs/results/{folder.name}/{item.name}: a file outside any run's folder")
            elif not any(path == item or path.is_relative_to(item) for path in linked):
                problems.append(f"docs/results/{folder.name}/{item.name}/ is linked from no line of its study's README")
    assert not problems, "\n".join(problems)


def test_every_link_of_a_study_readme_leads_to_a_file():
    readmes = [ROOT / "experiments" / "README.md", *(s / "README.md" for s in STUDIES)]
    missing = [
        f"{readme.relative_to(ROOT)}: {path.relative_to(ROOT)}"
        for readme in readmes
        for path in index.links(readme)
        if not path.is_file()
    ]
    assert not missing, "links to nothing:\n" + "\n".join(missing)


def test_the_index_page_is_current_and_the_docs_point_to_it():
    page = index.INDEX.read_text()
    written = index.written_block(page)
    assert written is not None, f"docs/studies.md lost its markers {index.BEGIN} ... {index.END}"
    generated = index.block()
    if written != generated:
        diff = "\n".join(
            list(difflib.unified_diff(written.splitlines(), generated.splitlines(), "docs/studies.md", "READMEs"))[:40]
        )
        pytest.fail(f"docs/studies.md's table is stale: run `{index.UPDATE_COMMAND}`\n{diff}")
    for study in STUDIES:
        assert f"](../experiments/{study.name}/README.md)" in written
    for name in ("experiments.md", "status.md", "results/README.md"):
        assert "studies.md)" in (ROOT / "docs" / name).read_text(), f"docs/{name} does not link the index"


def test_the_index_updates_its_block_only(tmp_path):
    page = tmp_path / "studies.md"
    page.write_text(f"# Studies\n\nBefore.\n\n{index.BEGIN}\nold\n{index.END}\n\nAfter.\n")
    assert index.update(page) and not index.update(page)
    text = page.read_text()
    assert text.startswith("# Studies\n\nBefore.\n\n") and text.endswith("\n\nAfter.\n")
    assert index.written_block(text) == index.block(page)


def test_every_campaign_step_writes_into_a_study():
    names = {s.name for s in STUDIES}
    for name, step in campaign.STEPS.items():
        assert step.study in names, f"step {name}: no study {step.study!r}"
        assert campaign.results_folder(index.RESULTS, name) == index.RESULTS / step.study / name


def test_the_studies_are_listed_once_and_each_names_its_campaign_steps():
    """docs/studies.md is the one list of the studies: experiments/README.md points to it and
    keeps no table of its own; a study with campaign steps names its module of them."""
    readme = (ROOT / "experiments" / "README.md").read_text()
    assert "(../docs/studies.md)" in readme and not re.search(r"^\| study \|", readme, re.MULTILINE)
    for study, module in campaign.STEP_MODULES.items():
        text = (ROOT / "experiments" / study / "README.md").read_text()
        assert f"`{module}.py`" in text, f"experiments/{study}/README.md does not name {module}.py"


def test_module_names_are_unique_and_a_study_is_imported_by_name(monkeypatch):
    modules = [p for p in (ROOT / "experiments").rglob("*.py") if "__pycache__" not in p.parts]
    stems = [p.stem for p in modules]
    assert len(stems) == len(set(stems)), f"two modules share a name: {sorted(stems)}"
    assert not set(stems) & {s.name for s in STUDIES}, "a module named as a study folder (a namespace package)"
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "strength_table", raising=False)
    common.use("strength")
    common.use("strength")
    assert sys.path.count(str(ROOT / "experiments" / "strength")) == 1
    module = importlib.import_module("strength_table")
    assert Path(module.__file__) == ROOT / "experiments" / "strength" / "strength_table.py"
    with pytest.raises(ValueError, match="no study 'nowhere'"):
        common.use("nowhere")


def test_a_study_script_runs_from_its_folder_with_the_shared_modules():
    """``python experiments/<study>/<script>.py``: Python puts the study's folder on the path and
    the script adds experiments/ (for curves, common) and the studies it names."""
    import subprocess

    for script in ("strength/cpu_hour.py", "same-start/same_start.py"):
        done = subprocess.run(
            [sys.executable, str(ROOT / "experiments" / script), "--help"], capture_output=True, text=True, cwd="/"
        )
        assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-2000:]
