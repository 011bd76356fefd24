"""Every import of our code names the ``stateglass`` namespace.

The repository keeps ``app/``, ``collectors/`` and ``parsers/`` at its top, and pytest puts
the repository on ``sys.path``: a stray ``from collectors.db.writer import …`` would still import
here, then fail for every user who installed the wheel. This reads every module instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = (
    "stateglass",
    "app",
    "collectors",
    "parsers",
    "tests",
    "benchmarks",
    "sample_checkpoints",
)
LAYERS = {"app", "collectors", "parsers"}
# Another job's module named like one of our folders, on purpose (the Spark engine's tests).
DECOY = ROOT / "tests" / "collectors" / "decoy"
# What PySpark queries wrote, not our code.
SAMPLE_DATA = ROOT / "sample_checkpoints" / "data"


def _modules() -> list[Path]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if DECOY not in path.parents and SAMPLE_DATA not in path.parents:
                found.append(path)
    return found


def _bare_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of each absolute import of a bare ``app``/``collectors``/``parsers``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    bare = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        bare += [(node.lineno, n) for n in names if n.split(".", 1)[0] in LAYERS]
    return bare


def test_there_are_modules_to_read() -> None:
    assert len(_modules()) > 300


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_import_outside_the_namespace(folder: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in _modules()
        if path.is_relative_to(ROOT / folder)
        for line, name in _bare_imports(path)
    ]
    assert found == []


def test_the_check_sees_a_bare_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os\nfrom collectors.db.writer import Database\nimport app.cli\n"
        "from stateglass.parsers import records\n"
    )
    assert _bare_imports(module) == [(2, "collectors.db.writer"), (3, "app.cli")]
