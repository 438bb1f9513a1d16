"""Signatures a reader can follow: across czjax, at most a few functions take more than 8
parameters (group them into the typed records that exist: settings, specs, a rollout's
``Side``), and none is longer than 60 lines (split it into named steps). Read from the source
with ``ast``: every function, nested ones and methods included; nothing is exempt."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "czjax"

MAX_PARAMETERS = 8  # a function over this many ...
# ... is allowed this many times in the package. Today one: rollout.play_games, whose options are
# keyword-only, as mctx's policies take theirs (the PyTorch peer's loops take records: Learner,
# Update, Promotion, Logging).
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
    count, for every function of the package."""
    many, long = {}, {}
    for path in sorted(package.rglob("*.py")):
        for function in functions(path):
            where = f"{path.relative_to(package.parent)}:{function.lineno} {function.name}"
            if len(parameters(function)) > MAX_PARAMETERS:
                many[where] = len(parameters(function))
            if lines(function) > MAX_LINES:
                long[where] = lines(function)
    return many, long


def test_few_functions_take_more_than_8_parameters():
    many, _ = offenders()
    assert len(many) <= MAX_MANY_PARAMETERS, (
        f"{len(many)} functions take more than {MAX_PARAMETERS} parameters (at most {MAX_MANY_PARAMETERS} may): "
        f"{many}; group them into a typed record (settings, a spec, a rollout Side)"
    )


def test_no_function_is_longer_than_60_lines():
    _, long = offenders()
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
