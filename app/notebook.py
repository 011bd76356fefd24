"""The Python API for notebooks and scripts: the SQL catalog, and one store's state as Arrow.

Also importable as ``stateglass.connect`` and ``stateglass.read_state``.

Example::

    import stateglass

    with stateglass.connect("sample_checkpoints") as session:
        biggest = session.sql(
            "SELECT key, value FROM agg_hdfs.op0_default ORDER BY value.count DESC LIMIT 5"
        ).df()

    table = stateglass.read_state("sample_checkpoints/spark-4.3/agg-hdfs", batch_id=3)

A relation runs its query again at each ``.df()``, ``.arrow()`` or ``.pl()``; the session
keeps the partitions it decoded (``SqlLimits.cache_bytes``), so only what a new commit or a
rewritten file changed is decoded again. Keep a result with ``.to_arrow_table()`` (or
``.df()``) when it is read twice.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stateglass.app.errors import AppError

if TYPE_CHECKING:
    import pyarrow as pa

    from stateglass.collectors.catalog import SqlLimits, SqlSession, TableEntry


class Result:
    """A query's rows, fetched under the session's limits at each call.

    Like a DuckDB relation, it runs its query again at every fetch (partitions the session
    has decoded come from its cache): keep what a fetch returns when it is read twice.
    ``relation`` is DuckDB's own relation of the query, for composing (``.filter()``,
    ``.aggregate()``); a fetch from it runs outside the session's timer, bounded only by
    DuckDB's ``max_execution_time``.
    """

    def __init__(self, session: SqlSession, text: str, relation: Any) -> None:
        self._session = session
        self.text = text
        self.relation = relation

    @property
    def columns(self) -> list[str]:
        """The result's column names (nothing runs)."""
        return list(self.relation.columns)

    def arrow(self) -> pa.Table:
        """Every row as an Arrow table."""
        return self._session.execute(self.text).table

    def to_arrow_table(self) -> pa.Table:
        """Every row as an Arrow table (as DuckDB's relations name it)."""
        return self.arrow()

    def df(self) -> Any:
        """Every row as a pandas DataFrame."""
        return self.arrow().to_pandas()

    def pl(self) -> Any:
        """Every row as a polars DataFrame (needs ``pip install polars``)."""
        try:
            import polars
        except ImportError as exc:
            raise AppError("Result.pl() needs polars: pip install polars") from exc
        return polars.from_arrow(self.arrow())

    def __repr__(self) -> str:
        return f"<stateglass Result {self.text!r}: columns {', '.join(self.columns)}>"


class Session:
    """What :func:`connect` returns: the SQL catalog over the checkpoints, for a notebook.

    ``sql(text)`` gives a :class:`Result` (``.df()``, ``.arrow()``, ``.pl()``), or None for
    a statement without rows; ``tables()`` lists the catalog; ``catalog`` is the underlying
    :class:`~stateglass.collectors.catalog.SqlSession` (``stream``, ``columns``, ``schemas``).
    Every error is one line: a :class:`~stateglass.collectors.errors.CollectorError` from the
    checkpoints or the query, an :class:`~stateglass.app.errors.AppError` for what the call
    itself asks (a limit that is not a size, ``.pl()`` without polars).
    """

    def __init__(self, catalog: SqlSession) -> None:
        self.catalog = catalog

    def sql(self, text: str) -> Result | None:
        """The rows of ``text``. A statement the session refuses raises here, one line."""
        relation = self.catalog.sql(text)
        return None if relation is None else Result(self.catalog, text, relation)

    def tables(self) -> list[TableEntry]:
        """Every table: schema, table, checkpoint, operator_id, store_name, state_var, kind."""
        return self.catalog.tables()

    def close(self) -> None:
        """Close the DuckDB connection and remove the session's private files."""
        self.catalog.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    roots: str | Iterable[str],
    db: str | None = None,
    *,
    time_limit: float | None = None,
    memory_limit: str | int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    time_zone: str = "UTC",
) -> Session:
    """A read-only SQL session over every checkpoint at or under ``roots``.

    Every checkpoint is a schema and every store a table (``session.tables()`` lists them);
    ``session.sql(text)`` gives a :class:`Result` (``.df()``, ``.arrow()``, ``.pl()``).
    ``db`` attaches a copy of that history database as ``history``, so the session never
    holds the file a running ``stateglass watch`` writes. ``time_limit`` (seconds) and
    ``memory_limit`` (``"512MiB"`` or bytes) bound each query; ``storage_options`` are the
    fsspec backend's (``{"anon": True}``), as ``--storage-option`` gives them. Close it, or
    use it in ``with``.

    Example::

        with stateglass.connect("/data/checkpoints", time_limit=30) as session:
            session.sql("SELECT count(*) FROM orders.op0_default").df()
    """
    from stateglass.app.render.arrow_values import spark_text
    from stateglass.collectors.catalog import SqlSession

    if storage_options:
        _configure_storage(storage_options)
    paths = [roots] if isinstance(roots, str) else list(roots)
    catalog = SqlSession(
        paths,
        history=None if db is None else os.path.expanduser(db),
        limits=sql_limits(time_limit, memory_limit),
        copy_history=True,
        text_form=spark_text(time_zone),
    )
    return Session(catalog)


def read_state(
    checkpoint: str,
    operator: int = 0,
    store: str = "default",
    batch_id: int | None = None,
    *,
    state_var: str | None = None,
    read_timers: bool = False,
    partitions: Iterable[int] | None = None,
    flatten: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> pa.Table:
    """One store's state at a batch as an Arrow table, with the columns of Spark's reader.

    The same rows as ``stateglass state CHECKPOINT --format parquet`` (and
    ``spark.read.format("statestore")``): ``batch_id`` None reads the last committed batch;
    ``state_var`` or ``read_timers`` pick a transformWithState variable or its timers.

    Example::

        counts = stateglass.read_state("/data/checkpoints/orders", batch_id=41)
        counts.to_pandas()
    """
    import pyarrow as pa

    from stateglass.app.render.arrow_values import spark_text
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
    from stateglass.parsers.state_arrow import arrow_schema, state_columns

    if storage_options:
        _configure_storage(storage_options)
    cp = Checkpoint.open(checkpoint)
    request = StateRequest(
        operator_id=operator,
        store_name=store,
        batch_id=batch_id,
        partitions=None if partitions is None else list(partitions),
        state_var=state_var,
        read_timers=read_timers,
        flatten=flatten,
    )
    source = StateSource(cp, request)
    version = cp.resolve_batch(batch_id) + 1
    text_form = spark_text("UTC")
    chunks: list[pa.Table] = []
    for partition in source.partitions:
        chunks.extend(source.tables(partition, version, text_form))
    schema = arrow_schema(state_columns(source.row_codec))
    if not chunks:
        return schema.empty_table()
    return pa.concat_tables(chunks)


def sql_limits(
    time_limit: float | None,
    memory_limit: str | int | None,
    jobs: int | None = None,
    keep_decoded: bool = True,
) -> SqlLimits:
    """The per-query limits: seconds, a size (``"512MiB"``) or bytes, and the partitions
    decoded at once; None: the default. ``keep_decoded``: whether the session keeps decoded
    partitions for its next queries (a session of one query has none: keeping them would
    only hold its memory).

    The command line's ``--time-limit``, ``--memory-limit`` and ``--jobs`` are read here too.
    """
    from stateglass.collectors.catalog import SqlLimits
    from stateglass.collectors.limits import parse_size

    defaults = SqlLimits()
    memory = memory_limit if isinstance(memory_limit, int) else None
    if isinstance(memory_limit, str):
        memory = parse_size(memory_limit)
        if memory is None:
            raise AppError(f"memory limit: not a size: {memory_limit!r} (e.g. 512MiB, 2GiB)")
    return SqlLimits(
        time_s=defaults.time_s if time_limit is None else time_limit,
        memory_bytes=defaults.memory_bytes if memory is None else memory,
        decoders=defaults.decoders if jobs is None else jobs,
        remote_decoders=defaults.remote_decoders if jobs is None else jobs,
        cache_bytes=defaults.cache_bytes if keep_decoded else 0,
    )


def _configure_storage(options: Mapping[str, Any]) -> None:
    """Make ``options`` the fsspec backends' options in this process (``--storage-option``)."""
    from stateglass.collectors.remote.settings import StorageSettings, configure, merge

    base = StorageSettings()
    configure(StorageSettings(merge(base.options, dict(options)), base.cache_dir, base.cache_bytes))
