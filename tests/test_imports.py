"""Imports point down the layers, and never go round in a circle.

Layers, top to bottom: ``app`` (the CLI, pages, reports, metrics: everything under app/ but
app/analysis), ``app/analysis``, ``collectors``, ``parsers``. A module imports its own layer
and those below it, never one above. Every import counts, wherever it is written: at module
level, inside a function (a lazy import is still a dependency, only a later one), under
``if TYPE_CHECKING:`` (the types still name the layer above), and
``importlib.import_module`` of a literal name. A cycle between modules is two modules that
cannot be understood, or changed, one without the other; a package's ``__init__`` counts as
the module of the package.

The test code and tools (pytest, hypothesis) are not the package's dependencies: only the
conformance suites plugin authors run import them, and nothing in the package imports those
suites.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("app", "collectors", "parsers")
# Bottom to top: a module may import its own layer and those before it.
LAYERS = (
    "stateglass.parsers",
    "stateglass.collectors",
    "stateglass.app.analysis",
    "stateglass.app",
)
# Run by a plugin author's pytest, never by StateGlass itself (docs/providers.md).
CONFORMANCE = {"stateglass.collectors.stores.conformance", "stateglass.app.provider_conformance"}
TEST_TOOLS = {"pytest", "_pytest", "hypothesis"}


@dataclass(frozen=True)
class Import:
    """One import of a module of ours: the file (from the repository's root) and line."""

    file: str
    line: int
    module: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} imports {self.module}"


def module_names(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the three packages by its installed name (``stateglass.app.cli``)."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(("stateglass", *parts))] = path
    return found


def _nearest(name: str, known: dict[str, Path]) -> str | None:
    """The module ``name`` runs: itself, or the package it names a member of (a compiled
    module, a class)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _names(node: ast.AST, package: str, known: dict[str, Path]) -> list[str]:
    """Dotted names of the modules of ours that one node imports."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        # ``from pkg import mod`` imports the submodule when there is one, else pkg itself.
        return [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
            for alias in node.names
        ]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def imports_of(name: str, known: dict[str, Path], root: Path) -> list[Import]:
    """Every import of a module of ours in module ``name``, wherever in the file it is."""
    path = known[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        for imported in _names(node, package, known):
            module = _nearest(imported, known) if imported.startswith("stateglass.") else None
            if module is not None and module != name:
                line = getattr(node, "lineno", 0)
                found.add(Import(str(path.relative_to(root)), line, module))
    return sorted(found, key=lambda i: (i.line, i.module))


def import_graph(root: Path = ROOT) -> dict[str, list[Import]]:
    """Each module's imports of modules of ours."""
    known = module_names(root)
    return {name: imports_of(name, known, root) for name in known}


def layer(module: str) -> int:
    """The layer's position in :data:`LAYERS`, counted from the bottom: that of the longest
    name ``module`` starts with (``stateglass.app.analysis``, not ``stateglass.app``)."""
    within = [top for top in LAYERS if module == top or module.startswith(top + ".")]
    return LAYERS.index(max(within, key=len))


def upward(graph: dict[str, list[Import]]) -> list[str]:
    return [
        f"{imp} ({LAYERS[layer(imp.module)]} is above {LAYERS[layer(name)]})"
        for name, imports in graph.items()
        for imp in imports
        if layer(imp.module) > layer(name)
    ]


def _reachable(graph: dict[str, list[Import]], start: str) -> set[str]:
    """Modules ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [i.module for i in graph[start]]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += [i.module for i in graph.get(module, [])]
    return seen


def cycles(graph: dict[str, list[Import]]) -> list[list[str]]:
    """Each set of modules that import one another (a strongly connected component of more
    than one module), as the imports that close it."""
    reach = {name: _reachable(graph, name) for name in graph}
    placed: set[str] = set()
    found = []
    for name in sorted(graph):
        if name in placed or name not in reach[name]:
            continue
        members = {other for other in reach[name] if name in reach[other]}
        placed |= members
        found.append(sorted(str(i) for m in members for i in graph[m] if i.module in members))
    return found


GRAPH = import_graph()


def test_the_graph_has_the_package_in_it() -> None:
    assert len(GRAPH) > 200
    assert sum(map(len, GRAPH.values())) > 600


def test_imports_point_down_the_layers() -> None:
    found = upward(GRAPH)
    assert not found, "\n".join(["imports of a layer above:", *found])


def test_no_modules_import_one_another() -> None:
    found = cycles(GRAPH)
    assert not found, "\n".join(["modules that import one another:", *map(" <-> ".join, found)])


def test_only_the_conformance_suites_use_test_tools() -> None:
    """pytest is not a dependency of the package: a plugin author's test run imports the
    suites, StateGlass never does."""
    tools = []
    for name, path in module_names().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if name not in CONFORMANCE and {n.split(".")[0] for n in names} & TEST_TOOLS:
                tools.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {names}")
    assert not tools, "\n".join(tools)
    assert set(GRAPH) >= CONFORMANCE
    users = [str(i) for name in GRAPH if name not in CONFORMANCE for i in GRAPH[name]]
    assert [u for u in users if u.rsplit(" ", 1)[1] in CONFORMANCE] == []


# ---- the checks themselves see what they must -------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, list[Import]]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph(tmp_path)


def test_every_kind_of_import_is_seen(tmp_path: Path) -> None:
    graph = _package(
        tmp_path,
        {
            "parsers/__init__.py": "",
            "parsers/codec.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from stateglass.collectors.scan import scanner\n"
                "def later():\n"
                "    import stateglass.app.cli\n"
                "    from . import helpers\n"
                "    importlib.import_module('stateglass.app.report.model')\n"
                "from stateglass.collectors.scan.scanner import Scanner, NAME\n"
            ),
            "parsers/helpers.py": "",
            "collectors/__init__.py": "",
            "collectors/scan/__init__.py": "from stateglass.collectors.scan.scanner import x\n",
            "collectors/scan/scanner.py": "",
            "app/__init__.py": "",
            "app/cli.py": "",
            "app/report/__init__.py": "",
            "app/report/model.py": "",
        },
    )
    assert [(i.line, i.module) for i in graph["stateglass.parsers.codec"]] == [
        (3, "stateglass.collectors.scan.scanner"),
        (5, "stateglass.app.cli"),
        (6, "stateglass.parsers.helpers"),
        (7, "stateglass.app.report.model"),
        (8, "stateglass.collectors.scan.scanner"),
    ]
    assert [i.module for i in graph["stateglass.collectors.scan"]] == [
        "stateglass.collectors.scan.scanner"
    ]
    assert [line.split(" (")[0] for line in upward(graph)] == [
        "parsers/codec.py:3 imports stateglass.collectors.scan.scanner",
        "parsers/codec.py:5 imports stateglass.app.cli",
        "parsers/codec.py:7 imports stateglass.app.report.model",
        "parsers/codec.py:8 imports stateglass.collectors.scan.scanner",
    ]


def test_analysis_is_below_the_rest_of_app(tmp_path: Path) -> None:
    graph = _package(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/errors.py": "",
            "app/analysis/__init__.py": "",
            "app/analysis/plan.py": "from stateglass.app import errors\n",
            "app/pages.py": "from stateglass.app.analysis import plan\n",
        },
    )
    assert upward(graph) == [
        "app/analysis/plan.py:1 imports stateglass.app.errors "
        "(stateglass.app is above stateglass.app.analysis)"
    ]


def test_a_cycle_is_named_by_the_imports_that_close_it(tmp_path: Path) -> None:
    graph = _package(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "import stateglass.app.b\n",
            "app/b.py": "\n\ndef f():\n    from stateglass.app import c\n",
            "app/c.py": "from stateglass.app.a import thing\n",
            "app/d.py": "import stateglass.app.a\n",
        },
    )
    assert cycles(graph) == [
        [
            "app/a.py:1 imports stateglass.app.b",
            "app/b.py:4 imports stateglass.app.c",
            "app/c.py:1 imports stateglass.app.a",
        ]
    ]
