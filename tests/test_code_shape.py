"""The package's code stays easy to change: short functions and modules, named for concepts.

Long orchestrators hide their phases, a long module holds more than one job, and a line
naming the ticket or the work session it came from says nothing to the next reader (in the
code, the docs or the tests); all crept back before, so they are checked here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = [
    p for layer in ("app", "collectors", "parsers") for p in sorted((ROOT / layer).rglob("*.py"))
]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TESTS = sorted((ROOT / "tests").rglob("*.py"))
MAX_FUNCTION_LINES = 79
MAX_MODULE_LINES = 800
# A ticket's or a work session's number (the test below has examples); not "session window",
# "SparkSession" or a Spark JIRA id.
TICKET = re.compile(r"\b(?:issues?|sessions?) #?[0-9]+", re.IGNORECASE)


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


def test_no_module_is_over_800_lines() -> None:
    """None is a generated table today: every module is one someone edits."""
    long = [
        f"{path.relative_to(ROOT)} ({lines})"
        for path in PACKAGE
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, "\n".join(["modules over 800 lines:", *long])


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(PACKAGE, id="package"),
        pytest.param(DOCS, id="readme-and-docs"),
        pytest.param(TESTS, id="tests"),
    ],
)
def test_no_code_is_named_for_a_ticket(files: list[Path]) -> None:
    assert len(files) > 10
    found = [
        f"{path.relative_to(ROOT)}:{n}: {named.group()}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if (named := TICKET.search(line))
    ]
    assert not found, "\n".join(["named for a ticket or a work session:", *found])


def test_a_ticket_or_session_number_is_seen_and_spark_words_are_not() -> None:
    # Put together here, so that this file does not name one itself.
    n = 14
    named = [f"issue {n}", f"Issue {n}'s", f"issues {n} and 9", f"issue #{n}", f"session {n}"]
    assert all(TICKET.search(text) for text in named)
    spark = ["a session window of 5 minutes", "SparkSession 1", "SPARK-12345", "issued 3 keys"]
    assert not any(TICKET.search(text) for text in spark)
