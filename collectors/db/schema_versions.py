"""Databases an older StateGlass wrote: which schema a database has, how the writer upgrades
it, and how everything else reads it. The policy lives here, once:

    A reader never changes a database: one that an older StateGlass wrote is read as it is,
    with what it lacks (tables, columns, views) reading as empty; a read that cannot be
    answered without what it lacks stops with one line, :class:`OlderDatabase`, saying to run
    ``stateglass collect`` once, because the first writer to open a database upgrades it.

Every read-only connection (:func:`stateglass.collectors.db.read.reader`, so every page and
``/metrics``) goes through :func:`read_as_current`. The health rules judge from every table,
so they ask :meth:`Schema.require_current`; ``export`` of one table asks :meth:`Schema.require`;
``/metrics`` leaves out the gauges whose tables :meth:`Schema.lacks`. The writer calls
:func:`upgrade` each time it opens the database.

Example::

    with reader(db) as conn:
        schema_of(conn, db).require("temp_files")  # OlderDatabase: "has no 'temp_files' yet; ..."
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stateglass.collectors.db.history_rollup import PARTITION_NEWEST, STORE_VERSIONS, fill_buckets
from stateglass.collectors.db.schema import COLUMNS, TABLES
from stateglass.collectors.db.views import READS, VIEWS
from stateglass.collectors.errors import NotAStateGlassDatabase, OlderDatabase

if TYPE_CHECKING:
    import duckdb

SCHEMA_VERSION = 9

# Statements that bring a database written by schema version N - 1 up to N (new tables come
# from TABLES). Version 2 records which SSTs each zip references: the live zips of an older
# database are forgotten so that the next scan reads them again (their purged history stays).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: (
        "ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS pinned_conf VARCHAR",
        "ALTER TABLE state_versions ADD COLUMN IF NOT EXISTS sst_files_live INTEGER",
        "DELETE FROM state_files WHERE kind = 'zip' AND NOT purged",
    ),
    # Version 3 only adds the progress tables (created from TABLES).
    3: (),
    # Version 4 keeps per-store and newest-per-partition tables beside the partition rows:
    # filled here from the history so far, then by every scan.
    4: (
        "DELETE FROM store_versions",
        "DELETE FROM partition_newest",
        STORE_VERSIONS.format(source="state_versions"),
        PARTITION_NEWEST.format(source="state_versions"),
    ),
    # Version 5 only adds the stored health verdicts (created from TABLES).
    5: (),
    # Version 6 adds the bucket rows of the partition rows kept (created from TABLES, filled
    # by upgrade() from the history so far: see history_rollup.fill_buckets).
    6: (),
    # Version 7 keeps with each stored verdict the facts its clock rules read, so that readers
    # apply the clock to them rather than judge those rules again (NULL: judged again).
    7: ("ALTER TABLE health_judged ADD COLUMN IF NOT EXISTS clock_facts VARCHAR",),
    # Version 8 adds the rows per transformWithState state variable (created from TABLES);
    # an older database has none until its next scan counts them.
    8: (),
    # Version 9 records the batch a checkpoint written by `stateglass rewrite` starts at.
    9: ("ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS rewritten_at_batch BIGINT",),
}

NOT_OURS = "not a StateGlass history database"


def upgrade(conn: duckdb.DuckDBPyConnection, rollup_versions: int) -> None:
    """Bring the database on the writer's ``conn`` to :data:`SCHEMA_VERSION` (a new one gets
    every table), and (re)create the views; the bucket rows of a database from before them
    are filled in buckets of ``rollup_versions``."""
    for ddl in TABLES.values():
        conn.execute(ddl)
    found = conn.execute("SELECT max(version) FROM schema_info").fetchall()[0][0]
    if found is None:
        conn.execute("INSERT INTO schema_info VALUES (?)", [SCHEMA_VERSION])
    elif found < SCHEMA_VERSION:
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS.get(version, ()):
                conn.execute(statement)
        if found < 6:
            fill_buckets(conn, rollup_versions)
        conn.execute("UPDATE schema_info SET version = ?", [SCHEMA_VERSION])
    for view in VIEWS.values():
        conn.execute(view)


@dataclass(frozen=True)
class Schema:
    """What one database holds, against the schema this release writes."""

    path: str
    # schema_info's version (0 when it holds none)
    version: int
    # the tables stored in the file
    tables: frozenset[str]
    # the views a query can read: stored ones, and those a reader made (read_as_current)
    views: frozenset[str]

    @property
    def older(self) -> bool:
        """Written by an older StateGlass: the next writer to open it upgrades it."""
        return self.version < SCHEMA_VERSION

    def lacks(self, *names: str) -> list[str]:
        """Those of the tables and views ``names`` that the database does not have."""
        return [n for n in names if n not in (self.views if n in VIEWS else self.tables)]

    def require(self, *names: str) -> None:
        """:class:`OlderDatabase` unless the database has every table and view named."""
        missing = self.lacks(*names)
        if missing:
            raise OlderDatabase(self.path, older_why(self.version, missing))

    def require_current(self) -> None:
        """:class:`OlderDatabase` unless the database has the schema this release writes."""
        missing = self.lacks(*TABLES)
        if self.older or missing:
            raise OlderDatabase(self.path, older_why(self.version, missing))


def older_why(version: int, missing: Sequence[str]) -> str:
    """The one message of :class:`OlderDatabase`: what the database lacks, and what to do."""
    shown = ", ".join(repr(n) for n in missing[:3])
    if len(missing) > 3:
        shown += f" and {len(missing) - 3} more"
    said = []
    if version < SCHEMA_VERSION:
        said.append(
            f"written by an older StateGlass (schema {version}, this release writes "
            f"{SCHEMA_VERSION})"
        )
    if missing:
        said.append(f"has no {shown} yet")
    return ", and ".join(said) + "; run `stateglass collect` once to upgrade it"


def schema_of(conn: duckdb.DuckDBPyConnection, path: str) -> Schema:
    """What the database ``path`` on ``conn`` holds; :class:`NotAStateGlassDatabase` for a
    DuckDB file StateGlass did not write."""
    tables, views, made = _catalog(conn)
    if "schema_info" not in tables:
        raise NotAStateGlassDatabase(path, NOT_OURS)
    version = conn.execute("SELECT max(version) FROM schema_info").fetchall()[0][0] or 0
    return Schema(path, version, frozenset(tables), frozenset(views | (made & set(VIEWS))))


def read_as_current(conn: duckdb.DuckDBPyConnection, path: str) -> None:
    """Make the database on the read-only ``conn`` read as the schema this release writes,
    for this connection only (temporary views shadow what is stored): a table it lacks reads
    as empty, a column it lacks as NULL, and the views are this release's wherever the tables
    they read are stored. Nothing is made for a database of the current schema."""
    schema = schema_of(conn, path)
    if not schema.older and not schema.lacks(*TABLES, *VIEWS):
        return
    for table in schema.lacks(*TABLES):
        columns = ", ".join(f"NULL::{t} AS {c}" for c, t in COLUMNS[table].items())
        conn.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT {columns} WHERE false")
    if schema.older:
        _columns_as_null(conn, schema.tables)
    shadowed: set[str] = set()
    for name, sql in VIEWS.items():
        # A view that reads one made here is made too, so that it reads the current one. A
        # view over a table the database lacks keeps what it has: an older database keeps its
        # own views until a writer fills the new tables from its history.
        stale = schema.older or name not in schema.views or READS[name] & shadowed
        if stale and _TABLES_READ[name] <= schema.tables:
            conn.execute(sql.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW"))
            shadowed.add(name)


def _catalog(conn: duckdb.DuckDBPyConnection) -> tuple[set[str], set[str], set[str]]:
    """The tables and views stored in the database, and the temporary views made on ``conn``."""
    tables: set[str] = set()
    views: set[str] = set()
    made: set[str] = set()
    for name, kind, temporary in conn.execute(
        "SELECT table_name, 'table', temporary FROM duckdb_tables() UNION ALL "
        "SELECT view_name, 'view', temporary FROM duckdb_views() WHERE NOT internal"
    ).fetchall():
        if temporary:
            made.add(name)
        else:
            (tables if kind == "table" else views).add(name)
    return tables, views, made


def _columns_as_null(conn: duckdb.DuckDBPyConnection, stored: Iterable[str]) -> None:
    """Each stored table that lacks a column of its DDL, read with that column NULL."""
    found: dict[str, set[str]] = {}
    for table, column in conn.execute(
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = 'main'"
    ).fetchall():
        found.setdefault(table, set()).add(column)
    database = conn.execute("SELECT current_database()").fetchall()[0][0].replace('"', '""')
    for table in stored:
        missing = [c for c in COLUMNS.get(table, {}) if c not in found.get(table, set())]
        if missing:
            added = ", ".join(f"NULL::{COLUMNS[table][c]} AS {c}" for c in missing)
            conn.execute(
                f"CREATE OR REPLACE TEMP VIEW {table} AS "
                f'SELECT *, {added} FROM "{database}".main.{table}'
            )


def _tables_read(name: str) -> frozenset[str]:
    """The tables a view reads, through the views it reads."""
    return frozenset().union(
        *({r} if r in TABLES else _tables_read(r) for r in READS.get(name, ()))
    )


_TABLES_READ: dict[str, frozenset[str]] = {name: _tables_read(name) for name in VIEWS}
