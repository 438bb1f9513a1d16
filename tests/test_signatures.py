"""Signatures a reader can follow: in czjax and in experiments/ (the studies' scripts, their
steps and the campaign), at most a few functions of each take more than 8 parameters (group them
into the typed records that exist: settings, specs, a rollout's ``Side``, a script's parsed
arguments), and none is longer than 60 lines (split it into named steps). Read from the source
with ``ast``: every function, nested ones and methods included; nothing is exempt."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "czjax"
TREES = [PACKAGE, ROOT / "experiments"]  # each read as a whole, each with its own allowance

MAX_PARAMETERS = 8  # a function over this many ...
# ... is allowed this many times in each tree. In the package today one: rollout.play_games, whose
# options are keyword-only, as mctx's policies take theirs (the PyTorch peer's loops take records:
# Learner, Update, Promotion, Logging); in experiments/ none.
MAX_MANY_PARAMETERS = 3
MAX_LINES = 60  # decorators, signature, docstring and body


def functions(path: Path):
    """Every function defined in the file at ``path``, methods and nested functions included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Its parameters, positional, keyword-only, ``*args`` and ``**kwargs``; a method's first,
    ``self`` or ``cls``, is not one a caller passes."""
    args = function.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    names += [f"*{a.arg}" for a in (args.vararg,) if a] + [f"**{a.arg}" for a in (args.kwarg,) if a]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Its lines, from its first decorator (or ``def``) to its last line."""
    start = min([function.lineno] + [d.lineno for d in function.decorator_list])
    assert function.end_lineno is not None
    return function.end_lineno - start + 1


def offenders(package: Path = PACKAGE) -> tuple[dict[str, int], dict[str, int]]:
    """``(over MAX_PARAMETERS parameters, over MAX_LINES lines)``: ``"path:line name"`` -> its
    count, for every function of the tree ``package`` (czjax, or experiments/)."""
    many, long = {}, {}
    for path in sorted(package.rglob("*.py")):
        for function in functions(path):
            where = f"{path.relative_to(package.parent)}:{function.lineno} {function.name}"
            if len(parameters(function)) > MAX_PARAMETERS:
                many[where] = len(parameters(function))
            if lines(function) > MAX_LINES:
                long[where] = lines(function)
    return many, long


@pytest.mark.parametrize("tree", TREES, ids=lambda tree: tree.name)
def test_few_functions_take_more_than_8_parameters(tree):
    many, _ = offenders(tree)
    assert len(many) <= MAX_MANY_PARAMETERS, (
        f"{len(many)} functions take more than {MAX_PARAMETERS} parameters (at most {MAX_MANY_PARAMETERS} may): "
        f"{many}; group them into a typed record (settings, a spec, a rollout Side)"
    )


@pytest.mark.parametrize("tree", TREES, ids=lambda tree: tree.name)
def test_no_function_is_longer_than_60_lines(tree):
    _, long = offenders(tree)
    assert not long, f"functions over {MAX_LINES} lines: {long}; split them into named steps"


def test_the_checks_see_many_parameters_and_a_long_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (package / "mod.py").write_text(
        "class C:\n"
        "    def fine(self, a, b, c, d, e, f, g, h):\n"
        "        def nested(a, b, c, d, e, f, g, *h, i, **j):\n"
        "            pass\n"
        "\n"
        "@decorator\n"
        f"def long():\n{body}\n"
    )
    many, long = offenders(package)
    assert many == {"pkg/mod.py:3 nested": 10}
    assert long == {"pkg/mod.py:7 long": MAX_LINES + 2}
