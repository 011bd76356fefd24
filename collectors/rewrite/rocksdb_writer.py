"""Writes one partition of a RocksDB store as Spark's ``RocksDBFileManager`` lays it out.

A version V of a store partition is ``V.zip`` (``V_<uniqueId>.zip`` in checkpoint format v2)
plus the SST files it names under ``SSTs/``. The zip holds a real RocksDB checkpoint's
``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*`` and live WAL, and Spark's ``metadata`` (the SSTs'
local and DFS names and sizes, ``numKeys``). Everything RocksDB reads here is written by a
real RocksDB (rocksdict): the rows are put into a fresh database, flushed, and checkpointed,
as Spark's ``RocksDB.commit`` does; only the zip and ``metadata`` are ours.

A fresh zip at V is a full snapshot, with or without changelog checkpointing: Spark loads V
from the newest zip at or below it and replays changelogs only after it, so a zip at V needs
none. A store with virtual column families (transformWithState) gets its rows as they are
(each key already under its column family's id) and the zip's ``metadata`` names the ids;
join state formats 3 and 4 and Avro-encoded keys of stores without column families are
refused (:class:`~stateglass.collectors.errors.RewriteRefused`).

Example::

    target = RocksDBTarget(store_dir="/dst/state/0/1", version=7, layout=layout)
    written = write_partition(target, rows)   # ["/dst/state/0/1/SSTs/000009-….sst", ".../7.zip"]
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stateglass.collectors.errors import RewriteError, RewriteRefused
from stateglass.collectors.rewrite.files import write_bytes
from stateglass.collectors.rewrite.rocksdb_rows import RocksDBRows, is_internal_family
from stateglass.parsers.checksums import spark_checksum_file, spark_checksum_json
from stateglass.parsers.errors import ParseError
from stateglass.parsers.rocksdb_encoding import KeyLayout, cf_prefix

if TYPE_CHECKING:
    import rocksdict

METADATA_ENTRY = "metadata"
SST_DIR = "SSTs"
# Spark 4.x opens RocksDB with block-based tables of format 5 and LZ4-compressed blocks
# (the OPTIONS files of its checkpoints say so); our SSTs are written the same way, so that
# the RocksDB inside Spark reads them as its own.
BLOCK_FORMAT_VERSION = 5
_PUT_BATCH = 10_000


@dataclass(frozen=True)
class RocksDBTarget:
    """Where and how one store partition's version is written.

    ``layout`` is the key encoder of the store (from its schema file), or None for a store
    with virtual column families, whose rows come as RocksDB stores them and whose
    ``column_families`` (name → id) the keys are prefixed with; ``row_checksum`` the
    destination's ``stateStore.rowChecksum.enabled``, and ``unique_id`` the version's
    checkpoint unique id when the destination is in checkpoint format v2 (None: format v1;
    the commit of the batch must name the same id). SSTs get no checksum file, as in Spark.
    """

    store_dir: str
    version: int
    layout: KeyLayout | None
    row_checksum: bool = False
    column_families: Mapping[str, int] | None = None
    unique_id: str | None = None
    file_checksum: bool = False  # Spark 4.1+'s <zip>.crc beside the zip
    timestamp_ms: int = 0  # the time the checksum file records

    @property
    def zip_name(self) -> str:
        stem = str(self.version) if self.unique_id is None else f"{self.version}_{self.unique_id}"
        return f"{stem}.zip"


def write_partition(target: RocksDBTarget, rows: Iterable[tuple[bytes, bytes]]) -> list[str]:
    """Write ``rows`` (neutral ``(key row, value row)`` pairs, keys unique) as version
    ``target.version`` of the store partition at ``target.store_dir``; return the paths
    written, the zip last (it is what makes the version exist for Spark)."""
    to_rocksdb = _encoder(target)
    work = tempfile.mkdtemp(prefix="stateglass-rocksdb-write-")
    try:
        checkpoint, counts = _build_database(Path(work), to_rocksdb, rows, _internal_ids(target))
        return _upload(target, checkpoint, counts)
    except OSError as exc:
        raise RewriteError(
            target.store_dir, f"cannot write version {target.version} ({exc.strerror or exc})"
        ) from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _encoder(target: RocksDBTarget) -> Callable[[bytes, bytes], tuple[bytes, bytes]]:
    """Neutral row → RocksDB key and value: the store's encoding, or the row itself for a
    store with virtual column families."""
    if target.layout is None:
        return lambda key, value: (key, value)
    try:
        return RocksDBRows(target.layout, row_checksum=target.row_checksum).to_rocksdb
    except ParseError as exc:
        raise RewriteRefused(target.store_dir, f"cannot rewrite {exc.why}") from exc


def _internal_ids(target: RocksDBTarget) -> frozenset[bytes]:
    """The key prefixes of the internal column families (counted as ``numInternalKeys``)."""
    families = target.column_families or {}
    return frozenset(cf_prefix(i) for name, i in families.items() if is_internal_family(name))


def _database_options() -> rocksdict.Options:
    import rocksdict

    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_compression_type(rocksdict.DBCompressionType.lz4())
    table = rocksdict.BlockBasedOptions()
    table.set_format_version(BLOCK_FORMAT_VERSION)
    table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    return options


def _build_database(
    work: Path,
    to_rocksdb: Callable[[bytes, bytes], tuple[bytes, bytes]],
    rows: Iterable[tuple[bytes, bytes]],
    internal: frozenset[bytes],
) -> tuple[Path, tuple[int, int]]:
    """Put every row into a fresh RocksDB, flush it, and take a checkpoint of it (what
    Spark's ``RocksDB.commit`` uploads); return the checkpoint's directory and its counts of
    keys and internal keys (those whose prefix is in ``internal``)."""
    import rocksdict

    db = rocksdict.Rdict(str(work / "db"), options=_database_options())
    try:
        # Spark disables the WAL: its state lives in SSTs and changelogs, never in a log.
        write_options = rocksdict.WriteOptions()
        # rocksdict makes it a property; its stub says a method.
        write_options.disable_wal = True  # type: ignore[method-assign,assignment]
        db.set_write_options(write_options)
        num_keys = num_internal = 0
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key_row, value_row in rows:
            key, value = to_rocksdb(key_row, value_row)
            batch.put(key, value)
            if internal and key[:2] in internal:
                num_internal += 1
            else:
                num_keys += 1
            if len(batch) >= _PUT_BATCH:
                db.write(batch)
                batch = rocksdict.WriteBatch(raw_mode=True)
        if len(batch):
            db.write(batch)
        db.flush()
        checkpoint = work / "checkpoint"
        rocksdict.Checkpoint(db).create_checkpoint(str(checkpoint))
    finally:
        db.close()
    return checkpoint, (num_keys, num_internal)


def _upload(target: RocksDBTarget, checkpoint: Path, counts: tuple[int, int]) -> list[str]:
    """Copy the SSTs under their DFS names and write the zip with Spark's ``metadata``."""
    written: list[str] = []
    sst_entries = []
    others = []
    for local in sorted(checkpoint.iterdir()):
        if local.suffix == ".sst":
            dfs_name = f"{local.stem}-{uuid.uuid4()}.sst"
            path = os.path.join(target.store_dir, SST_DIR, dfs_name)
            write_bytes(path, local.read_bytes())
            written.append(path)
            size = local.stat().st_size
            sst_entries.append(
                {"localFileName": local.name, "dfsSstFileName": dfs_name, "sizeBytes": size}
            )
        elif local.is_file() and _is_rocksdb_file(local.name):
            others.append(local)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for local in others:
            zipped.write(local, local.name)
        zipped.writestr(
            METADATA_ENTRY, checkpoint_metadata(sst_entries, counts, target.column_families)
        )
    data = archive.getvalue()
    if target.file_checksum:
        crc = os.path.join(target.store_dir, spark_checksum_file(target.zip_name))
        write_bytes(crc, spark_checksum_json(data, target.timestamp_ms))
        written.append(crc)
    zip_path = os.path.join(target.store_dir, target.zip_name)
    write_bytes(zip_path, data)
    written.append(zip_path)
    return written


def _is_rocksdb_file(name: str) -> bool:
    """RocksDB's own files of a checkpoint (rocksdict adds a config file of its own, which
    Spark's RocksDB would not expect)."""
    return name == "CURRENT" or name.startswith(("MANIFEST-", "OPTIONS-")) or name.endswith(".log")


def checkpoint_metadata(
    sst_files: list[dict[str, object]],
    counts: tuple[int, int],
    column_families: Mapping[str, int] | None = None,
) -> str:
    """The zip's ``metadata``: ``v1`` and Jackson's JSON of Spark 4's
    ``RocksDBCheckpointMetadata`` (an empty ``logFiles`` is omitted, as Spark does):
    ``counts`` are the user and internal keys, ``column_families`` the virtual column
    families' ids (empty maps and 0 without them). Spark 3 reads it too: its reader ignores
    unknown fields (``FAIL_ON_UNKNOWN_PROPERTIES`` off)."""
    families = dict(column_families or {})
    fields = {
        "sstFiles": sst_files,
        "numKeys": counts[0],
        "numInternalKeys": counts[1],
        "columnFamilyMapping": families,
        "columnFamilyTypeMap": {name: is_internal_family(name) for name in families},
        "maxColumnFamilyId": max(families.values(), default=0),
    }
    return "v1\n" + json.dumps(fields, separators=(",", ":"))
