"""The package's code stays easy to change: short functions, named for concepts.

Long orchestrators hide their phases, and a comment naming the ticket a line came from says
nothing to the next reader; both crept back before, so they are checked here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = [
    p for layer in ("app", "collectors", "parsers") for p in sorted((ROOT / layer).rglob("*.py"))
]
MAX_FUNCTION_LINES = 79
TICKET = re.compile(r"\bissue [0-9]", re.IGNORECASE)


def test_there_is_code_to_read() -> None:
    assert len(PACKAGE) > 150


def test_every_function_is_under_80_lines() -> None:
    long = []
    for path in PACKAGE:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert long == []


def test_no_code_is_named_for_a_ticket() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in PACKAGE
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TICKET.search(line)
    ]
    assert found == []
