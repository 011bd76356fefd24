"""The Python API for notebooks and scripts: the SQL catalog, and one store's state as Arrow.

Also importable as ``stateglass.connect`` and ``stateglass.read_state``.

Example::

    import stateglass

    with stateglass.connect(["sample_checkpoints"]) as session:
        biggest = session.sql(
            "SELECT key, value FROM agg_hdfs.op0_default ORDER BY value.count DESC LIMIT 5"
        ).df()

    table = stateglass.read_state("sample_checkpoints/spark-4.3/agg-hdfs", batch_id=3)

A relation runs its query again at each ``.df()``, ``.arrow()`` or ``.pl()``, decoding the
state again: keep a result with ``.to_arrow_table()`` (or ``.df()``) when it is read twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from stateglass.collectors.catalog import SqlSession


def connect(
    roots: str | Iterable[str],
    db: str | None = None,
    *,
    time_limit: float | None = None,
    memory_limit: str | int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> SqlSession:
    """A read-only SQL session over every checkpoint at or under ``roots``.

    Every checkpoint is a schema and every store a table (``session.tables()`` lists them);
    ``session.sql(text)`` gives a DuckDB relation (``.df()``, ``.arrow()``, ``.pl()``).
    ``db`` attaches a copy of that history database as ``history``, so the session never
    holds the file a running ``stateglass watch`` writes. ``time_limit`` (seconds) and
    ``memory_limit`` (``"512MiB"`` or bytes) bound each query run through the session;
    ``storage_options`` are the fsspec backend's (``{"anon": True}``), as
    ``--storage-option`` gives them. Close it, or use it in ``with``.
    """
    from stateglass.collectors.catalog import SqlSession

    if storage_options:
        _configure_storage(storage_options)
    paths = [roots] if isinstance(roots, str) else list(roots)
    return SqlSession(
        _checkpoints(paths), history=db, limits=_limits(time_limit, memory_limit), copy_history=True
    )


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

    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
    from stateglass.parsers.state_arrow import arrow_schema, partition_tables, state_columns

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
    chunks: list[pa.Table] = []
    for partition in source.partitions:
        with source.decoding(partition):
            items = list(source.load(partition, version))
            chunks.extend(partition_tables(source.row_codec, partition, items))
    schema = arrow_schema(state_columns(source.row_codec))
    if not chunks:
        return schema.empty_table()
    return pa.concat_tables(chunks)


def _checkpoints(roots: list[str]) -> list[str]:
    """Every checkpoint at or under ``roots``, found as ``stateglass collect`` finds them."""
    import argparse

    from stateglass.app import discovery

    return discovery.find(roots, argparse.Namespace())


def _limits(time_limit: float | None, memory_limit: str | int | None) -> Any:
    from stateglass.collectors.catalog import SqlLimits
    from stateglass.collectors.errors import BadConfig
    from stateglass.collectors.limits import parse_size

    defaults = SqlLimits()
    memory = memory_limit if isinstance(memory_limit, int) else None
    if isinstance(memory_limit, str):
        memory = parse_size(memory_limit)
        if memory is None:
            raise BadConfig("memory_limit", f"not a size: {memory_limit!r} (e.g. 512MiB, 2GiB)")
    return SqlLimits(
        time_s=defaults.time_s if time_limit is None else time_limit,
        memory_bytes=defaults.memory_bytes if memory is None else memory,
    )


def _configure_storage(options: Mapping[str, Any]) -> None:
    """Make ``options`` the fsspec backends' options in this process (``--storage-option``)."""
    from stateglass.collectors.remote.settings import StorageSettings, configure, merge

    base = StorageSettings()
    configure(StorageSettings(merge(base.options, dict(options)), base.cache_dir, base.cache_bytes))
