"""The catalog itself: which tables a session has, and the lazy source behind each.

:func:`build_catalog` finds the checkpoints, names a schema per checkpoint and a table per
view of each store (:mod:`.names`), registers one :class:`~.sources.SharedTable` per Arrow
schema as ``_sg_<n>`` and creates the view users query over each of its tables. The history
database's tables and views are listed as kind ``history``; a ``stateglass.tables`` view
lists everything. Reading schema files is all it does (for a fleet on an object store, not
even that until a query names a checkpoint: :class:`LazySchemas`): nothing is decoded until a
query scans a table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from stateglass.collectors.catalog.metadata import METADATA
from stateglass.collectors.catalog.names import (
    CATALOG_SCHEMA,
    CHANGES_SUFFIX,
    HISTORY,
    TIMERS,
    quoted,
    schema_names,
    state_table,
    unique,
)
from stateglass.collectors.catalog.pruning import TABLE_ID_NAME
from stateglass.collectors.catalog.scope import DecodedCache, QueryScope, SourceCache
from stateglass.collectors.catalog.sources import Needed, Pieces, SharedTable, StoreTables
from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.discover import Limits, checkpoints_at, is_checkpoint
from stateglass.collectors.checkpoints.state_views import StateView, views_of
from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.remote.urls import is_url
from stateglass.parsers.arrow_types import RepeatedNames
from stateglass.parsers.state_arrow import TextForm

if TYPE_CHECKING:
    import pyarrow.compute as pc

    from stateglass.collectors.catalog.spark_decoding import SparkDecoding

KINDS = ("state", "changes", "timers", "metadata", "history")
# Keys of a remote root listed in one go before discovery: a fleet of small checkpoints is
# then a few LISTs; a root of big ones costs at most these pages more (1,000 keys a page).
_KEYS_LISTED_AT_ONCE = 20_000


@dataclass(frozen=True)
class TableEntry:
    """One table of the catalog, as ``stateglass sql --tables`` lists it.

    ``checkpoint`` is the path as the user gave it (or as discovery found it below a
    folder); ``operator_id``, ``store_name`` (Spark's store name) and ``state_var`` are None
    where they do not apply; ``kind`` is one of :data:`KINDS`.
    """

    schema: str
    table: str
    checkpoint: str | None
    operator_id: int | None
    store_name: str | None
    state_var: str | None
    kind: str


@dataclass(frozen=True)
class Catalog:
    """What a session holds: its tables, each checkpoint schema's path, and the schemas
    registered when a query names them."""

    entries: tuple[TableEntry, ...]
    schemas: dict[str, str]
    lazy: LazySchemas
    # Grows as schemas register (a fleet's, when a query names them).
    repeated_names: RepeatedNames


@dataclass(frozen=True)
class _OpenedView:
    store: StoreInfo
    view: StateView
    table: str
    changes: str
    tables: StoreTables


@dataclass(frozen=True)
class _Opened:
    """A checkpoint as read for the catalog: its views' tables and the warnings to say."""

    schema: str
    given: str
    root: str
    fs: FileSystem
    views: tuple[_OpenedView, ...]
    said: tuple[str, ...]


class _Builder:
    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        text_form: TextForm,
        scopes: Callable[[], QueryScope],
        warn: Callable[[str], None],
        decoded: DecodedCache,
        spark: SparkDecoding | None,
        decoders: int,
        remote_decoders: int,
    ) -> None:
        self.con = con
        self.spark = spark
        self.decoders = decoders
        self.remote_decoders = remote_decoders
        self.text_form = text_form
        self.scopes = scopes
        self.warn = warn
        self.sources = SourceCache(decoded)
        self.entries: list[TableEntry] = []
        # The repeated field names of every state table's structs (see SqlSession).
        self.repeated_names: RepeatedNames = {}
        # One registered source per Arrow schema (see SharedTable), by its serialized form.
        self._shared: dict[bytes, tuple[str, SharedTable]] = {}

    def add(self, entry: TableEntry, schema: pa.Schema, pieces: Pieces) -> None:
        key = schema.serialize().to_pybytes()
        found = self._shared.get(key)
        if found is None:
            found = (f"_sg_{len(self._shared) + 1}", SharedTable(schema, self.scopes))
            self.con.register(found[0], found[1])
            self._shared[key] = found
        hidden, shared = found
        number = shared.add(pieces)
        target = f"{quoted(entry.schema)}.{quoted(entry.table)}"
        # No COMMENT ON VIEW with the path: stateglass.tables has it, and each statement
        # costs a millisecond or more, which a fleet of hundreds of checkpoints multiplies.
        self.con.execute(
            f"CREATE VIEW {target} AS SELECT * EXCLUDE ({TABLE_ID_NAME}) FROM {hidden} "
            f"WHERE {TABLE_ID_NAME} = {number}"
        )
        self.entries.append(entry)

    def opened(self, schema: str, given: str, root: str, fs: FileSystem) -> _Opened:
        """What registering ``root`` needs, read from storage; no DuckDB, so checkpoints
        open in threads (an object store answers each request in tens of milliseconds)."""
        cp = Checkpoint(root, fs)
        said: list[str] = []
        try:
            stores = cp.stores()
        except CheckpointError as exc:
            said.append(f"{given}: only its metadata tables are listed ({exc.why})")
            stores = []
        planned = [(store, view) for store in stores for view in views_of(store, root)]
        state_names, change_names = _table_names(
            [(view.operator_id, _label(store, view)) for store, view in planned]
        )
        views: list[_OpenedView] = []
        for (store, view), table, changes in zip(planned, state_names, change_names, strict=True):
            try:
                source = self.sources.get(view, cp)
                tables = StoreTables(
                    schema,
                    view,
                    fs,
                    self.sources,
                    self.text_form,
                    source,
                    self.spark,
                    self.remote_decoders if is_url(root) else self.decoders,
                )
            except CheckpointError as exc:
                said.append(f"{given}: {schema}.{table} is left out: {exc}")
                continue
            views.append(_OpenedView(store, view, table, changes, tables))
        return _Opened(schema, given, root, fs, tuple(views), tuple(said))

    def checkpoint(self, opened: _Opened) -> None:
        """Register an opened checkpoint's tables, and say what was left out."""
        for line in opened.said:
            self.warn(line)
        self.con.execute(f"CREATE SCHEMA {quoted(opened.schema)}")
        for found in opened.views:
            self.store(opened.schema, opened.given, found)
        for table in METADATA:
            self.metadata(opened.schema, opened.given, opened.root, opened.fs, table)

    def store(self, schema: str, given: str, found: _OpenedView) -> None:
        store, view, tables = found.store, found.view, found.tables
        store_name, state_var = _spark_names(store, view)
        kind = "timers" if view.read_timers else "state"
        entry = TableEntry(
            schema, found.table, given, view.operator_id, store_name, state_var, kind
        )
        self.add(entry, tables.state_schema, tables.state_pieces(found.table))
        self.repeated_names.update(tables.repeated_names)
        if view.read_timers:
            return  # Spark has no change feed of the registered timers
        entry = TableEntry(
            schema, found.changes, given, view.operator_id, store_name, state_var, "changes"
        )
        self.add(entry, tables.change_schema, tables.change_pieces(found.changes))

    def metadata(self, schema: str, given: str, root: str, fs: FileSystem, table: str) -> None:
        arrow_schema, build = METADATA[table]

        def pieces(scope: QueryScope, flt: pc.Expression | None, _: Needed) -> Iterator[pa.Table]:
            yield build(scope.checkpoint(root, fs))

        entry = TableEntry(schema, table, given, None, None, None, "metadata")
        self.add(entry, arrow_schema, pieces)

    def history(self) -> None:
        # DuckDB binds information_schema at its first use, about 10 ms: a session without
        # the history database attached skips it.
        attached = self.con.execute(
            "SELECT 1 FROM duckdb_databases() WHERE database_name = ?", [HISTORY]
        ).fetchall()
        if not attached:
            return
        rows = self.con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_catalog = ? ORDER BY table_schema, table_name",
            [HISTORY],
        ).fetchall()
        for (name,) in rows:
            self.entries.append(TableEntry(HISTORY, str(name), None, None, None, None, "history"))

    def listing(self) -> None:
        """``stateglass.tables``: the entries, queryable."""
        names = [f.name for f in fields(TableEntry)]
        columns = {n: [getattr(e, n) for e in self.entries] for n in names}
        table = pa.table(
            {
                n: pa.array(v, type=pa.int32() if n == "operator_id" else pa.string())
                for n, v in columns.items()
            }
        )
        self.con.execute(f"CREATE SCHEMA {CATALOG_SCHEMA}")
        self.con.register("_sg_tables", table)
        self.con.execute(f"CREATE VIEW {CATALOG_SCHEMA}.tables AS SELECT * FROM _sg_tables")


def _table_names(labels: Sequence[tuple[int, str]]) -> tuple[list[str], list[str]]:
    """The state tables' and their change feeds' names for views labelled ``(operator id,
    label)``, made unique among themselves and the metadata tables."""
    state = [state_table(op, label) for op, label in labels]
    names = unique(state + [f"{name}{CHANGES_SUFFIX}" for name in state] + list(METADATA))
    return names[: len(state)], names[len(state) : 2 * len(state)]


def _as_given(root: str, given: str, canonical: str) -> str:
    """``root``, found at or under the root the user gave as ``given`` (``canonical`` once
    resolved), written from ``given``: a relative root lists relative checkpoints."""
    base = canonical.rstrip("/")
    if root in (canonical, base):
        return given
    if base and root.startswith(base + "/"):
        return given.rstrip("/") + root[len(base) :]
    return root


def _listed_entries(schema: str, given: str, stores: Sequence[tuple[int, str]]) -> list[TableEntry]:
    """A checkpoint's tables as registering it lists them, for stores named by their folders
    (one view each: no state variables, no column families)."""
    state, changes = _table_names(stores)
    out = []
    for (op, store), table, feed in zip(stores, state, changes, strict=True):
        out.append(TableEntry(schema, table, given, op, store, None, "state"))
        out.append(TableEntry(schema, feed, given, op, store, None, "changes"))
    out.extend(TableEntry(schema, name, given, None, None, None, "metadata") for name in METADATA)
    return out


def _label(store: StoreInfo, view: StateView) -> str:
    if view.read_timers:
        return TIMERS
    return view.state_var or store.store_name


def _spark_names(store: StoreInfo, view: StateView) -> tuple[str, str | None]:
    """(storeName, stateVarName) as Spark's reader options name the view."""
    if store.is_transform_with_state:
        return store.store_name, None if view.read_timers else view.state_var
    # A join store kept as column families (format 3): Spark names each as a store.
    return (view.state_var or store.store_name), None


def _list_fleet(fs: FileSystem, root: str) -> bool:
    """List a remote folder of checkpoints at once (see ``_KEYS_LISTED_AT_ONCE``); whether it
    did. Not a checkpoint itself: its folders one by one cost fewer requests than all its
    state files' keys, and discovery lists its top (this listing) anyway."""
    list_below = getattr(fs, "list_below", None)
    if list_below is None:
        return False
    try:
        if is_checkpoint(fs.names(root)):
            return False
    except CheckpointError:
        return False  # discovery says what is wrong with it, in one line
    list_below(root, _KEYS_LISTED_AT_ONCE)
    return True


class LazySchemas:
    """Checkpoints of a fleet listed from their folders alone, registered when a query first
    names their schema.

    On an object store every file read is a request (tens of milliseconds): reading each
    checkpoint's operator metadata and schema files to register its tables would make a
    fleet of hundreds slow to open, when a query reads one or two of them. Their tables are
    listed from the listing the fleet was found by, and registered (their files read) before
    the first statement whose text names their schema, or asks DuckDB's own catalog.
    """

    def __init__(
        self,
        builder: _Builder,
        found: dict[str, tuple[str, FileSystem]],
        workers: int,
    ) -> None:
        self._builder = builder
        self._found = found
        self._workers = workers
        self._waiting: dict[str, tuple[str, tuple[TableEntry, ...]]] = {}

    def wait(self, schema: str, root: str, listed: Sequence[TableEntry]) -> None:
        self._waiting[schema] = (root, tuple(listed))

    @property
    def waiting(self) -> frozenset[str]:
        """The schemas not registered yet."""
        return frozenset(self._waiting)

    def open_named(self, sql: str) -> None:
        """Register the waiting schemas ``sql`` may name (a word of its text), or all of them
        when it may read DuckDB's catalog (``information_schema``, ``SHOW``, ``duckdb_…()``)."""
        if not self._waiting:
            return
        words = set(_WORD.findall(sql.lower()))
        if words & _CATALOG_WORDS or any(w.startswith(_CATALOG_PREFIXES) for w in words):
            self.open(self._waiting)
        else:
            self.open(words & self._waiting.keys())

    def open(self, schemas: Iterable[str]) -> None:
        """Register ``schemas`` (those still waiting), reading their files in threads."""
        todo = sorted(s for s in schemas if s in self._waiting)
        if not todo:
            return
        builder = self._builder

        def open_one(schema: str) -> _Opened:
            root = self._waiting[schema][0]
            given, fs = self._found[root]
            return builder.opened(schema, given, root, fs)

        with ThreadPoolExecutor(min(self._workers, len(todo)), "stateglass-catalog") as pool:
            for opened in pool.map(open_one, todo):
                known = len(builder.entries)
                builder.checkpoint(opened)
                # Listed already (stateglass.tables has them): a table the folders did not
                # tell is said, not added to a listing that was shown.
                registered = tuple(builder.entries[known:])
                del builder.entries[known:]
                listed = self._waiting.pop(opened.schema)[1]
                if registered != listed:
                    names = ", ".join(e.table for e in registered) or "none"
                    builder.warn(f"{opened.given}: its metadata names other tables: {names}")


# Words of a statement that read DuckDB's catalog, which lists registered schemas only
# (``SHOW ALL TABLES``, ``PRAGMA show_tables_expanded``, ``duckdb_columns()``, ``pg_class``…).
_CATALOG_WORDS = frozenset({"information_schema", "describe", "sqlite_master"})
_CATALOG_PREFIXES = ("show", "duckdb_", "pg_")
_WORD = re.compile(r"[a-z0-9_]+")


def build_catalog(
    con: duckdb.DuckDBPyConnection,
    roots: Sequence[str],
    discovery: Limits | None,
    text_form: TextForm,
    scopes: Callable[[], QueryScope],
    warn: Callable[[str], None] | None,
    decoded: DecodedCache,
    spark: SparkDecoding | None = None,
    decoders: int = 1,
    remote_decoders: int = 1,
) -> Catalog:
    """Find the checkpoints under ``roots`` and register their tables on ``con`` (those of a
    fleet on an object store when a query names them: :class:`LazySchemas`); their sources
    keep decoded partitions in ``decoded`` and decode ``decoders`` partitions at once
    (``remote_decoders`` for a checkpoint on an object store), or have ``spark`` decode
    them."""
    from stateglass.collectors.remote import open_location

    say = warn or (lambda _line: None)
    found: dict[str, tuple[str, FileSystem]] = {}
    in_fleet: set[str] = set()
    for given in roots:
        fs, canonical = open_location(given)
        fleet = _list_fleet(fs, canonical)
        for root in checkpoints_at(fs, given, discovery, say):
            found.setdefault(root, (_as_given(root, given, canonical), fs))
            if fleet:
                in_fleet.add(root)
    builder = _Builder(con, text_form, scopes, say, decoded, spark, decoders, remote_decoders)
    names = schema_names(found)
    ordered = sorted(names.items(), key=lambda kv: kv[1])
    workers = max(1, (discovery or Limits()).concurrency)
    lazy = LazySchemas(builder, found, workers)

    def folders(root: str) -> list[tuple[int, str]] | None:
        if root not in in_fleet:
            return None
        try:
            return Checkpoint(root, found[root][1]).stores_from_folders()
        except CheckpointError:
            return None  # registered now, which says what is wrong with it

    def open_one(root_schema: tuple[str, str]) -> _Opened:
        root, schema = root_schema
        given, fs = found[root]
        return builder.opened(schema, given, root, fs)

    with ThreadPoolExecutor(workers, "stateglass-catalog") as pool:
        stores = dict(zip(names, pool.map(folders, names), strict=True))
        now = pool.map(open_one, [(r, s) for r, s in ordered if stores[r] is None])
        # Opened in threads, registered in name order on this thread (DuckDB's connection
        # is not shared), so warnings and tables come in the order a serial build gives.
        for root, schema in ordered:
            from_folders = stores[root]
            if from_folders is None:
                builder.checkpoint(next(now))
                continue
            listed = _listed_entries(schema, found[root][0], from_folders)
            builder.entries.extend(listed)
            lazy.wait(schema, root, listed)
    builder.history()
    builder.listing()
    schemas = {schema: found[root][0] for root, schema in names.items()}
    return Catalog(tuple(builder.entries), schemas, lazy, builder.repeated_names)
