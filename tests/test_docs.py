"""The docs name what exists: every dotted name of czjax in inline code in README.md and docs/*.md
(``czjax.learn.trainer``, ``loop.run_chunk_once``, ``search.tree.run_tree_search(``) resolves to a
module or an attribute, so a moved or renamed function cannot leave a page pointing at nothing.
A short name (``loop.``) may be any czjax module of that name; file names (``run.json``) and
setting paths (``replay.capacity``) are not code names."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import czjax
from czjax.learn.settings import setting_fields

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FILE_SUFFIXES = {"py", "json", "jsonl", "msgpack", "png", "sh", "md", "gz", "pth", "pt", "onnx", "txt", "html", "toml"}
CODE_NAME = re.compile(r"`((?:czjax\.)?[a-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(|`)")


def modules_by_short_name() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {"czjax": ["czjax"]}
    for module in pkgutil.walk_packages(czjax.__path__, "czjax."):
        found.setdefault(module.name.rsplit(".", 1)[1], []).append(module.name)
    return found


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or a module's attribute (attributes of attributes too), at
    its home: an old path that still answers with a DeprecationWarning does not count."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            return _resolves(name)
        except DeprecationWarning:
            return False


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attribute in parts[i:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            return False
        return True
    return False


def unresolved(text: str, short: dict[str, list[str]], settings: set[str]) -> list[str]:
    missing = []
    for match in CODE_NAME.finditer(text):
        name = match.group(1)
        head, _, rest = name.partition(".")
        if name.rsplit(".", 1)[1] in FILE_SUFFIXES or name in settings or head not in short:
            continue
        candidates = [name] if head == "czjax" else [f"{module}.{rest}" for module in short[head]]
        if not any(resolves(c) for c in candidates):
            missing.append(name)
    return missing


def test_every_code_name_in_the_docs_exists():
    short, settings = modules_by_short_name(), set(setting_fields())
    missing = {page.name: names for page in PAGES if (names := unresolved(page.read_text(), short, settings))}
    assert not missing, f"names in the docs that are not in the code: {missing}"


def test_a_renamed_function_is_caught():
    short, settings = modules_by_short_name(), set(setting_fields())
    text = "`loop.run_chunk_once` and `search.tree.run_tree_search(`, `czjax.jobs.loop.no_such_thing`, `loop.gone`"
    assert unresolved(text, short, settings) == ["czjax.jobs.loop.no_such_thing", "loop.gone"]
