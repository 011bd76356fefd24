"""``stateglass sql --engine spark``: the store partitions a scan keeps, decoded on a Spark
cluster into Parquet that the session reads in place of decoding them itself.

The Spark engine of ``collect`` runs it (:func:`run_on_executors`): the driver plans each
(partition, batch) of a scan as one :class:`~.decode_task.DecodeTask` with the files it
needs, executors read those files with the cluster's Hadoop connectors and run our decoders
(:func:`~.decode_task.run_decode`), each writing one Parquet file under the scratch folder.
The session then reads those files a row group at a time, only the columns the query needs.
A file is reused while the partition's files stay the same (the key of the local cache,
:class:`~.scope.DecodedKey`), so a second query over the same batch runs no Spark job.

The scratch folder is a local path or a URL pyarrow writes (``s3://``, ``gs://``,
``hdfs://``) that the driver and every executor reach; by default a temporary folder of the
driver, which serves ``local[N]`` and a cluster on this machine. It is never inside a
checkpoint, and is removed when the session closes unless kept.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
import threading
import uuid
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING

from stateglass.collectors.catalog.decode_task import DecodeTask, Kind, run_decode
from stateglass.collectors.catalog.scope import DecodedKey, QueryScope, decoded_key
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView
from stateglass.collectors.engines.hadoop import needed_files
from stateglass.collectors.engines.memfs import MemoryFileSystem
from stateglass.collectors.errors import EngineError
from stateglass.parsers.arrow_types import has_text_form
from stateglass.parsers.sparktypes import ArrayType, DataType, MapType, StructType
from stateglass.parsers.state_arrow import TextForm, plain_text

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

CHUNK_ROWS = 65_536


class SparkDecoding:
    """Decodes store partitions on Spark (``master``: as ``collect --master``; None: an
    active session or ``local[*]``) into Parquet under ``scratch`` (None: a temporary folder),
    removed at :meth:`close` unless ``keep``.

    Fails at once, in one line, when Spark cannot start (no pyspark, no Java, a master that
    does not answer); the cluster itself is started at the first query that decodes.
    """

    def __init__(self, master: str | None = None, scratch: str | None = None, keep: bool = False):
        from stateglass.collectors.engines.spark import check_spark

        check_spark(master)
        self.master = master
        self.keep = keep
        self._lock = threading.Lock()
        self._files: dict[tuple[Kind, DecodedKey], str] = {}
        self.jobs = 0  # Spark jobs run, for tests and the benchmark
        if scratch is None:
            # A name only: the folder is made at the first job.
            self.folder = os.path.join(
                tempfile.gettempdir(), f"stateglass-sql-spark-{uuid.uuid4().hex[:12]}"
            )
        else:
            self.folder = f"{scratch.rstrip('/')}/stateglass-sql-{uuid.uuid4().hex[:12]}"
        self._fs, self._path = _folder(self.folder)
        # Made at the first job: a session that decodes nothing writes nothing, and the CLI
        # checks the folder against the checkpoints found before.
        self._made = False

    def files(
        self,
        kind: Kind,
        view: StateView,
        cp: Checkpoint,
        source: StateSource,
        pairs: Sequence[tuple[int, int]],
        schema: pa.Schema,
        text_form: TextForm,
        scope: QueryScope,
    ) -> list[tuple[str, bool]]:
        """The Parquet file of each ``(partition, batch)`` of ``pairs`` and whether it was
        there already; those missing are decoded in one Spark job, before the deadline."""
        keys = [(kind, decoded_key(view, cp, source.store, p, b, None)) for p, b in pairs]
        with self._lock:
            held = [self._files.get(k) for k in keys]
        missing = [i for i, found in enumerate(held) if found is None]
        if missing:
            form = text_form if _needs_text(source) else plain_text
            by_partition: dict[int, list[tuple[int, str]]] = {}
            for i in missing:
                partition, batch = pairs[i]
                target = f"{self.folder}/{kind}-{uuid.uuid4().hex}.parquet"
                by_partition.setdefault(partition, []).append((batch, target))
                with self._lock:
                    self._files[keys[i]] = target
            tasks = [
                self._task(kind, cp, source, partition, tuple(batches), schema, form)
                for partition, batches in by_partition.items()
            ]
            try:
                self._run(tasks, scope)
            except BaseException:
                with self._lock:
                    for i in missing:
                        self._files.pop(keys[i], None)
                raise
        with self._lock:
            return [(self._files[k], held[i] is not None) for i, k in enumerate(keys)]

    def _task(
        self,
        kind: Kind,
        cp: Checkpoint,
        source: StateSource,
        partition: int,
        batches: tuple[tuple[int, str], ...],
        schema: pa.Schema,
        text_form: TextForm,
    ) -> DecodeTask:
        from stateglass.collectors.engines.spark import sst_listing

        ctx = source.context(partition)
        listed = tuple(f for f in ctx.files or () if not f.is_dir and not f.name.startswith("."))
        provider = source.store.provider
        # Rebuilding version b + 1 starts at the newest snapshot at or below it.
        first = min(b for b, _ in batches)
        chain = needed_files(listed, first + 2, sst_listing(provider, ctx.store_dir, cp.fs))
        return DecodeTask(
            kind=kind,
            provider=provider,
            store_dir=ctx.store_dir,
            store_files=chain.store_files,
            sst_files=chain.sst_files,
            spec=source.row_codec.spec,
            partition=partition,
            batches=batches,
            schema=schema,
            codec=ctx.codec,
            row_checksum=ctx.row_checksum,
            merge_delimiter=ctx.merge_delimiter,
            unique_ids=ctx.unique_ids,
            text_form=text_form,
        )

    def _run(self, tasks: list[DecodeTask], scope: QueryScope) -> None:
        from pyspark import cloudpickle

        from stateglass.collectors.engines import executor
        from stateglass.collectors.engines.hadoop import ChainFiles
        from stateglass.collectors.engines.spark import chain_inputs, run_on_executors

        remote: list[tuple[DecodeTask, str]] = []
        self._make_folder()
        for task in tasks:
            inputs = chain_inputs(task.store_dir, ChainFiles(task.store_files, task.sst_files))
            if inputs is None:
                # No file to read needs no executor (binaryFiles refuses an empty input).
                run_decode(task, MemoryFileSystem(task.store_dir, (), task.sst_files, {}))
            else:
                remote.append((task, inputs))
        if not remote:
            return
        # cloudpickle: a text form is a closure (Spark's text of an interval).
        payload = cloudpickle.dumps([t for t, _ in remote], pickle.DEFAULT_PROTOCOL)
        paths = [i for _, i in remote]
        run_on_executors(self.master, paths, executor.decode_partition, payload, scope.deadline)
        self.jobs += 1

    def _make_folder(self) -> None:
        if self._made:
            return
        try:
            self._fs.create_dir(self._path, recursive=True)
        except OSError as exc:
            raise EngineError(self.folder, f"cannot make the scratch folder ({exc})") from exc
        self._made = True

    def read(self, path: str, columns: Collection[str] | None) -> Iterator[pa.Table]:
        """The rows of one decoded file, a row group at a time, ``columns`` only (None: all)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        with self._fs.open_input_file(_inside(self._fs, path)) as fh:
            parquet = pq.ParquetFile(fh)
            wanted = (
                None if columns is None else [n for n in parquet.schema_arrow.names if n in columns]
            )
            for batch in parquet.iter_batches(CHUNK_ROWS, columns=wanted):
                yield pa.Table.from_batches([batch])

    def close(self) -> None:
        """Remove the scratch folder, unless it is kept."""
        if self.keep or not self._made:
            return
        with contextlib.suppress(OSError):
            self._fs.delete_dir(self._path)


def _folder(folder: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's file system of ``folder`` and the folder's path in it."""
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(folder if "://" in folder else os.path.abspath(folder))
    except (OSError, ValueError) as exc:
        raise EngineError(folder, f"cannot use it as the scratch folder ({exc})") from exc


def _inside(fs: pafs.FileSystem, uri: str) -> str:
    """The path of ``uri`` in ``fs`` (a URL's scheme and bucket stripped as pyarrow does)."""
    import pyarrow.fs as pafs

    return pafs.FileSystem.from_uri(uri if "://" in uri else os.path.abspath(uri))[1]


def _needs_text(source: StateSource) -> bool:
    """Whether a row of ``source`` holds a type written as Spark's text (an interval, a
    variant). Only then does the session's text form travel to executors: it is the app's
    renderer, which a cluster without StateGlass installed could not load."""
    codec = source.output_codec
    return any(_has_text(dt) for _, dt in (*codec.columns, *codec.change_columns))


def _has_text(dt: DataType) -> bool:
    if isinstance(dt, StructType):
        return any(_has_text(f.data_type) for f in dt.fields)
    if isinstance(dt, ArrayType):
        return _has_text(dt.element_type)
    if isinstance(dt, MapType):
        return _has_text(dt.key_type) or _has_text(dt.value_type)
    return has_text_form(dt)


__all__ = ["SparkDecoding"]
