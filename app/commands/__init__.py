"""The CLI's commands: one module each, named for the command, and the table of them.

Each module has ``add_parser(subparsers)``, which declares the command, and ``run(args)``,
which runs it and returns the exit status. Building the parser imports every module, so a
module imports at its top only what ``add_parser`` needs; ``run`` imports the rest, and
``stateglass collect`` never pays for DuckDB's Python layer, Arrow or the dashboard.

Example::

    for command in COMMANDS:
        command.module().add_parser(subparsers)
    status = COMMANDS_BY_NAME["info"].module().run(args)
"""

from __future__ import annotations

import argparse
import enum
import importlib
from dataclasses import dataclass
from typing import Any, Protocol, cast


class Reads(enum.Flag):
    """What a command reads: checkpoints (paths or URLs, so it takes the remote storage
    options) and the DuckDB history database (``--db``)."""

    CHECKPOINTS = enum.auto()
    DATABASE = enum.auto()


class CommandModule(Protocol):
    def add_parser(self, subparsers: Any) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


@dataclass(frozen=True)
class Command:
    name: str
    reads: Reads
    # Nothing is left open when ``run`` returns (its output and any session are closed in
    # ``with`` blocks, and it holds no database writer), so the process may end at once
    # without tearing its modules down (see ``stateglass.app.cli.console``).
    quick_exit: bool = False

    def module(self) -> CommandModule:
        """``stateglass.app.commands.<name>`` (``-`` spelled ``_``), imported on first use."""
        module = self.name.replace("-", "_")
        return cast(CommandModule, importlib.import_module(f"{__name__}.{module}"))


# In the order ``stateglass --help`` lists them.
COMMANDS = (
    Command("info", Reads.CHECKPOINTS, quick_exit=True),
    Command("state", Reads.CHECKPOINTS, quick_exit=True),
    Command("changes", Reads.CHECKPOINTS, quick_exit=True),
    Command("sql", Reads.CHECKPOINTS | Reads.DATABASE, quick_exit=True),
    Command("dashboard", Reads.CHECKPOINTS | Reads.DATABASE),
    Command("collect", Reads.CHECKPOINTS | Reads.DATABASE),
    Command("watch", Reads.CHECKPOINTS | Reads.DATABASE),
    Command("report", Reads.CHECKPOINTS | Reads.DATABASE),
    Command("check", Reads.CHECKPOINTS | Reads.DATABASE),
    Command("export", Reads.DATABASE),
    Command("metrics", Reads.DATABASE),
    Command("maintain", Reads.DATABASE),
    Command("compat", Reads.CHECKPOINTS, quick_exit=True),
    Command("plan-partitions", Reads.CHECKPOINTS, quick_exit=True),
    Command("rewrite", Reads.CHECKPOINTS),
)
COMMANDS_BY_NAME = {c.name: c for c in COMMANDS}
