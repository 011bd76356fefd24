"""Every state schema file of a checkpoint, with a digest, so schema changes leave a history.

Spark keeps one ``_metadata/schema`` per store (formats v1/v2, in partition 0's directory) and
rewrites it in place when a restarted query brings a different but compatible schema; formats
v3 (transformWithState, join formats 3/4) add one file per schema under
``state/<op>/_stateSchema/<store>/``. A scan records each (path, sha256) it sees, so a rewrite
shows up as a second digest of one path, and a new v3 file as a second path.

Example::

    for f in schema_files(cp, cp.stores()):
        print(f.path, f.sha256[:8], f.key_schema)
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.errors import CheckpointError
from stateglass.parsers.errors import ParseError
from stateglass.parsers.schema_file import ColumnFamilySchema, StateSchemaFile


@dataclass(frozen=True)
class SchemaFile:
    """One schema file as seen now; the schemas are None when it does not parse."""

    operator_id: int
    store_name: str
    path: str
    sha256: str
    size: int
    mtime: float
    format_version: int | None
    key_schema: str | None
    value_schema: str | None


def _render(families: tuple[ColumnFamilySchema, ...], key: bool) -> str:
    """One family: its ``struct<…>``; several: ``name=struct<…>; …`` in file order."""
    if len(families) == 1:
        cf = families[0]
        return (cf.key_schema if key else cf.value_schema).simple_string()
    return "; ".join(
        f"{cf.name}={(cf.key_schema if key else cf.value_schema).simple_string()}"
        for cf in families
    )


def _paths(cp: Checkpoint, store: StoreInfo) -> Iterator[str]:
    v12 = cp.path(cp.store_dir(store.operator_id, 0, store.store_name), "_metadata", "schema")
    if cp.fs.exists(v12):
        yield v12
    parts = ("state", str(store.operator_id), "_stateSchema", store.store_name)
    for f in sorted(cp.list_dir(*parts), key=lambda f: (f.mtime, f.name)):
        if not f.is_dir:
            yield posixpath.join(cp.path(*parts), f.name)


def schema_files(cp: Checkpoint, stores: Iterable[StoreInfo]) -> list[SchemaFile]:
    """Read every schema file of ``stores`` (they are small); unreadable ones are skipped."""
    out = []
    for store in stores:
        for path in _paths(cp, store):
            try:
                data = cp.fs.read(path)
                info = cp.fs.stat(path)
            except CheckpointError:
                continue  # purged or unreadable between listing and reading
            if info is None:
                continue
            version = key = value = None
            try:
                parsed = StateSchemaFile.from_bytes(data)
                version = parsed.format_version
                if parsed.column_families:
                    key = _render(parsed.column_families, key=True)
                    value = _render(parsed.column_families, key=False)
            except ParseError:
                pass  # the scan's own read of the schema reports it as a problem
            out.append(
                SchemaFile(
                    store.operator_id,
                    store.store_name,
                    path,
                    hashlib.sha256(data).hexdigest(),
                    info.size,
                    info.mtime,
                    version,
                    key,
                    value,
                )
            )
    return out
