"""The package's layers (docs/DESIGN.md): every import of czjax by czjax goes down a floor or
stays inside its own package, so the import graph has no circle; read from the source with
``ast`` (function-level imports included), not from what happens to be loaded."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "czjax"

# Bottom to top; a module may import only from floors below its own (or its own package).
FLOORS = {
    "czjax.util": 0,  # progress lines, precision, devices, checkpoint files, the pytree dataclass
    "czjax.deprecation": 0,  # old import paths answering for one release
    "czjax.game": 1,  # the rules
    "czjax.players": 2,  # PlayerOutput, masking, sampling, the built-in players, a network as a player
    "czjax.row_skipping": 2,  # skipping rows that do not matter (finished games, plies that did not happen)
    "czjax.compaction": 2,  # deprecated: its names answer from czjax.row_skipping when used
    "czjax.rollout": 3,
    "czjax.players.minimax": 3,  # AlphaZero.jl's minimax player (a player over the rules, no network)
    "czjax.minimax": 3,  # deprecated: its names answer from czjax.players.minimax when used
    "czjax.models": 3,
    "czjax.search": 4,
    "czjax.players.searched": 5,  # a search over a player, as a player
    "czjax.players.agent": 5,  # the Agent and its queries
    "czjax.agents": 5,  # deprecated: its names answer from czjax.players.agent and .loading when used
    "czjax.players.loading": 6,  # the agent a spec names
    "czjax.evaluate": 7,
    "czjax.learn": 8,
    "czjax.jobs": 9,
    "czjax.run": 9,  # deprecated: its modules answer from czjax.jobs when imported
    "czjax.interop": 10,
    "czjax.bench": 11,
    "czjax.cli": 12,
    "czjax.__main__": 13,
}


def unit_of(module: str) -> str | None:
    """The layer unit (a package of FLOORS or a top-level module) that ``module`` belongs to."""
    for unit in sorted(FLOORS, key=len, reverse=True):
        if module == unit or module.startswith(unit + "."):
            return unit
    return None


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, package: Path) -> bool:
    path = package.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def czjax_imports(path: Path, package: Path) -> set[str]:
    """Every czjax module ``path`` imports, at any depth of the file."""
    found = set()
    name = module_name(path, package)
    parent = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                parts = parent.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
            if base.startswith("czjax"):  # ``from czjax.learn import trainer`` imports the module czjax.learn.trainer
                found.update(f"{base}.{a.name}" if is_module(f"{base}.{a.name}", package) else base for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("czjax"))
    return found


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the czjax modules it imports; the public API (czjax/__init__.py, which names
    every layer lazily) left out."""
    modules = {module_name(p, package): czjax_imports(p, package) for p in sorted(package.rglob("*.py"))}
    modules.pop("czjax", None)
    return modules


def upward_imports(modules: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imports in modules.items():
        unit = unit_of(module)
        for target in sorted(imports):
            target_unit = unit_of(target)
            if target_unit is None:
                found.append(f"{module} -> {target}, which is in no layer")
            elif unit is not None and target_unit != unit and FLOORS[target_unit] >= FLOORS[unit]:
                found.append(f"{module} (floor {FLOORS[unit]}) -> {target} (floor {FLOORS[target_unit]})")
    return found


def first_circle(modules: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports as a path (its first module repeated at the end), or None."""
    edges = {m: sorted(t for t in imports if t in modules and t != m) for m, imports in modules.items()}
    state: dict[str, str] = {}  # depth first: a module met again while still open closes a circle

    def visit(path: list[str]) -> list[str] | None:
        state[path[-1]] = "open"
        for nxt in edges[path[-1]]:
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (circle := visit([*path, nxt])):
                return circle
        state[path[-1]] = "done"
        return None

    for module in sorted(edges):
        if module not in state and (circle := visit([module])):
            return circle
    return None


def test_every_module_has_a_floor():
    homeless = [m for m in graph() if unit_of(m) is None]
    assert not homeless, f"modules outside every layer of FLOORS: {homeless}"


def test_imports_only_go_down():
    upward = upward_imports(graph())
    assert not upward, "imports that go up or sideways:\n" + "\n".join(upward)


def test_no_import_circle():
    circle = first_circle(graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_the_checks_see_an_upward_import_and_a_circle(tmp_path):
    """The checks find what they look for: the rules importing the trainer, inside a function."""
    fake = tmp_path / "czjax"
    (fake / "learn").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "game.py").write_text("def step():\n    from czjax.learn import trainer\n")
    (fake / "learn" / "__init__.py").write_text("")
    (fake / "learn" / "trainer.py").write_text("from czjax import game\n")
    modules = graph(fake)
    assert modules == {
        "czjax.game": {"czjax.learn.trainer"},
        "czjax.learn": set(),
        "czjax.learn.trainer": {"czjax.game"},
    }
    assert upward_imports(modules) == ["czjax.game (floor 1) -> czjax.learn.trainer (floor 8)"]
    assert first_circle(modules) == ["czjax.game", "czjax.learn.trainer", "czjax.game"]
