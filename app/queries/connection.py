"""The read-only connection every query runs on, and the helpers the query modules share.

Each call opens a read-only connection for one query (``collectors.db.read.reader``), which
waits while a collector holds the write lock; inside :func:`session` the queries of a page
share one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import pandas as pd

from stateglass.collectors.db.read import reader

if TYPE_CHECKING:
    import duckdb


# What the pages show for a store: one frame, filtered in SQL by these three columns.
STORE_WHERE = "checkpoint = ? AND operator_id = ? AND store_name = ?"
# The partitions a store has at its newest version (as STORE_WHERE, the store's three
# parameters follow): a repartition that lowered the count leaves the higher partitions' last
# files behind, and a restart never loads them again.
NOW_PARTITIONS = f"""partition_id < coalesce((
    SELECT b.shuffle_partitions FROM batches b
    WHERE b.checkpoint = ? AND b.batch_id = (
        SELECT max(version) - 1 FROM partition_newest WHERE {STORE_WHERE})), 2147483647)"""
# A condition on the ``repartitions`` view (the checkpoint follows as a parameter): a
# repartition needs two partition counts, and this reads the batches' smallest and largest
# count from their statistics, so a checkpoint never repartitioned skips the view's window
# over every batch (a month is 259,200 batches: a tenth of a CPU second a page).
REPARTITIONED = (
    "(SELECT min(shuffle_partitions) < max(shuffle_partitions) FROM batches WHERE checkpoint = ?)"
)


class _Session:
    """One read-only connection shared by the queries of a :func:`session`, opened lazily."""

    def __init__(self, db: str) -> None:
        self.db = os.path.abspath(os.path.expanduser(db))
        self.stack = ExitStack()
        self.conn: duckdb.DuckDBPyConnection | None = None
        # change_key per checkpoint (None: the whole database), asked once per session: each
        # of a page's loads asks it, and on a month of batches it costs as much as a load.
        self.keys: dict[str | None, str] = {}

    def connection(self) -> duckdb.DuckDBPyConnection:
        if self.conn is None:
            self.conn = self.stack.enter_context(reader(self.db))
        return self.conn


_SESSION: ContextVar[_Session | None] = ContextVar("stateglass_query_session", default=None)


@contextmanager
def session(db: str) -> Iterator[None]:
    """Run the queries inside on one read-only connection: a page's loads open it once.

    Opening costs tens of milliseconds on a big database; a page runs half a dozen queries.
    The connection opens at the first query (none when every load is cached) and closes at
    the end of the block, so a collector waits at most that long for its write lock.
    """
    shared = _Session(db)
    token = _SESSION.set(shared)
    try:
        with shared.stack:
            yield
    finally:
        _SESSION.reset(token)


def session_connection(db: str) -> duckdb.DuckDBPyConnection | None:
    """The :func:`session`'s connection to ``db`` (opened now if need be); None outside one,
    or inside one for another database."""
    shared = _SESSION.get()
    if shared is None or shared.db != os.path.abspath(os.path.expanduser(db)):
        return None
    return shared.connection()


def read_frame(db: str, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
    """``sql`` on ``db`` as a DataFrame: on the :func:`session`'s connection when one is open
    for this database, else on a connection of its own."""
    shared = _SESSION.get()
    if shared is not None and shared.db == os.path.abspath(os.path.expanduser(db)):
        return shared.connection().execute(sql, list(params)).df()
    with reader(db) as conn:
        return conn.execute(sql, list(params)).df()


def read_rows(db: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """``sql`` on ``db`` as rows, on the connection :func:`read_frame` would use."""
    shared = _SESSION.get()
    if shared is not None and shared.db == os.path.abspath(os.path.expanduser(db)):
        return shared.connection().execute(sql, list(params)).fetchall()
    with reader(db) as conn:
        return conn.execute(sql, list(params)).fetchall()


def data_version(db: str) -> float:
    """Changes whenever a writer commits (the file or its WAL is touched): a cache key.

    0.0 when the database does not exist yet.
    """
    db = os.path.expanduser(db)
    stamps = [os.stat(p).st_mtime for p in (db, db + ".wal") if os.path.exists(p)]
    return max(stamps, default=0.0)


def change_key(db: str, checkpoint: str | None = None) -> str:
    """What a cached load of ``checkpoint`` (of every checkpoint: ``None``) depends on: when
    it was last scanned and its newest committed batch. A commit of another checkpoint, or a
    reader, leaves it alone (the file's mtime would not); "" without a database. Asked once
    per :func:`session`: the loads of one page run share one version."""
    if not os.path.exists(os.path.expanduser(db)):
        return ""
    shared = _SESSION.get()
    if shared is None or shared.db != os.path.abspath(os.path.expanduser(db)):
        return _change_key(db, checkpoint)
    if checkpoint not in shared.keys:
        shared.keys[checkpoint] = _change_key(db, checkpoint)
    return shared.keys[checkpoint]


def _change_key(db: str, checkpoint: str | None) -> str:
    where = "WHERE checkpoint = ?" if checkpoint is not None else ""
    params = [checkpoint] * 2 if checkpoint is not None else []
    row = read_frame(
        db,
        f"SELECT (SELECT max(last_scan) FROM checkpoints {where}) AS scanned, "
        f"(SELECT count(*) FROM checkpoints) AS checkpoints, "
        f"(SELECT max(batch_id) FROM batches {where}) AS newest",
        params,
    ).iloc[0]
    if checkpoint is not None and pd.isna(row["scanned"]):
        return change_key(db)  # not a checkpoint: the first argument is something else
    return f"{row['scanned']}|{row['checkpoints']}|{row['newest']}"
