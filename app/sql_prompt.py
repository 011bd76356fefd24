"""The interactive prompt of ``stateglass sql``: history, and completion of the catalog's names.

Statements end with ``;`` and may span lines; each runs under the session's limits and prints
as a table. An error prints its one line and the prompt goes on. ``.tables`` lists the
catalog; ``.quit``, ``\\q`` or Ctrl+D leave. The history is kept in
``~/.stateglass/sql_history`` (never in a checkpoint).

Example::

    with SqlSession(checkpoints) as session:
        prompt(session, args)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from stateglass.collectors.errors import CollectorError

HISTORY_FILE = os.path.join("~", ".stateglass", "sql_history")
HISTORY_LENGTH = 1000
QUIT = frozenset({".quit", ".exit", "\\q", "quit", "exit"})
KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "LIMIT", "JOIN", "USING", "ON",
    "COUNT", "DESCRIBE", "SUMMARIZE", "BETWEEN", "batch_id", "partition_id",
)  # fmt: skip


class Completer:
    """Completes the word under the cursor from the catalog's schema, table and column names.

    ``schema.`` completes to that schema's tables; anything else to schemas, qualified
    tables, columns and a few keywords.
    """

    def __init__(self, tables: Iterable[tuple[str, str]], columns: Iterable[str]) -> None:
        self.qualified = sorted({f"{s}.{t}" for s, t in tables})
        self.words = sorted(
            {s for s, _ in tables} | {t for _, t in tables} | set(columns) | set(KEYWORDS)
        )
        self.matches: list[str] = []

    def candidates(self, text: str) -> list[str]:
        """Every name that starts with ``text`` (case-insensitive)."""
        low = text.lower()
        pool = self.qualified if "." in text else [*self.words, *self.qualified]
        return [w for w in pool if w.lower().startswith(low)]

    def __call__(self, text: str, state: int) -> str | None:
        if state == 0:
            self.matches = self.candidates(text)
        return self.matches[state] if state < len(self.matches) else None


def catalog_names(session: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """The catalog's (schema, table) pairs and its column names; reading them decodes nothing."""
    tables = [(e.schema, e.table) for e in session.tables()]
    columns: list[str] = []
    with contextlib.suppress(CollectorError):
        found = session.execute(
            "SELECT DISTINCT column_name FROM information_schema.columns "
            "WHERE table_catalog <> 'temp'"
        )
        columns = [str(name) for name in found.table.column(0).to_pylist()]
    return tables, columns


def _setup_readline(complete: Callable[[str, int], str | None]) -> Callable[[], None]:
    """Turn on history and completion; returns what saves the history at the end."""
    try:
        import readline
    except ImportError:  # no GNU readline (some Windows Pythons): a plain prompt
        return lambda: None
    path = os.path.expanduser(HISTORY_FILE)
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(HISTORY_LENGTH)
    readline.set_completer(complete)
    readline.set_completer_delims(" \t\n(),;=<>'\"")
    # libedit (macOS) spells the binding differently.
    binding = "bind ^I rl_complete" if "libedit" in (readline.__doc__ or "") else "tab: complete"
    readline.parse_and_bind(binding)

    def save() -> None:
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            readline.write_history_file(path)

    return save


def statements(read: Callable[[str], str]) -> Iterable[str]:
    """SQL statements from ``read(prompt)``, each up to its closing ``;``; a dot command or
    ``quit`` alone on a line; Ctrl+C drops what was typed."""
    lines: list[str] = []
    while True:
        try:
            line = read("sql> " if not lines else "...> ")
        except EOFError:
            return
        except KeyboardInterrupt:
            print(file=sys.stderr)
            lines = []
            continue
        if not lines and line.strip().lower() in QUIT:
            return
        if not lines and line.strip().startswith("."):
            yield line.strip()
            continue
        lines.append(line)
        if line.rstrip().endswith(";"):
            yield "\n".join(lines)
            lines = []


def prompt(session: Any, args: argparse.Namespace) -> int:
    """Read statements until Ctrl+D, running each and printing its result as a table."""
    from stateglass.app.sql_output import CATALOG_LISTING, open_result, unpicked_batch_note

    tables, columns = catalog_names(session)
    save = _setup_readline(Completer(tables, columns))
    print(
        f"stateglass sql: {len(session.schemas())} checkpoint(s), {len(tables)} table(s). "
        "End statements with ;  .tables lists them, Ctrl+D leaves.",
        file=sys.stderr,
    )
    try:
        for text in statements(input):
            if text.startswith(".") and text != ".tables":
                print(f"unknown command {text} (.tables, .quit)", file=sys.stderr)
                continue
            query = CATALOG_LISTING if text == ".tables" else text
            try:
                with (
                    open_result("table", None, args.time_zone, args.max_rows) as out,
                    session.stream(query) as reader,
                ):
                    out.write(reader)
                note = unpicked_batch_note(query, session.last_batch_read)
                if note is not None:
                    print(f"stateglass: note: {note}", file=sys.stderr)
            except CollectorError as exc:
                print(f"stateglass: error: {exc}", file=sys.stderr)
            except KeyboardInterrupt:
                print("stateglass: interrupted", file=sys.stderr)
    finally:
        save()
    return 0
