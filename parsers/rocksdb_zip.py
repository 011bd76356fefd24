"""The Spark ``metadata`` entry of a RocksDB ``<v>.zip`` checkpoint, and zip entry name checks.

``metadata`` is ``v1\\n`` + one Jackson JSON object::

    {"sstFiles":[{"localFileName":"000030.sst","dfsSstFileName":"000030-<uuid>.sst",
                  "sizeBytes":1457}],
     "logFiles":[...],                                  (omitted when empty)
     "numKeys":6,
     "numInternalKeys":60, "columnFamilyMapping":{"default":1,...},      (4.0+)
     "columnFamilyTypeMap":{"default":false,...}, "maxColumnFamilyId":15}

Restoring version V (done by a collector, not here): unzip every entry except ``metadata``
into an empty directory, copy ``SSTs/<dfs_sst_file_name>`` to ``<local_file_name>`` and
``logs/<dfs_log_file_name>`` to ``archive/<local_file_name>``; :meth:`copy_plan` lists these.

Example::

    >>> meta = RocksDBCheckpointMetadata.from_bytes(b'v1\\n{"sstFiles":[],"numKeys":0}')
    >>> meta.num_keys, meta.uses_column_families
    (0, False)
    >>> check_zip_entries(["CURRENT", "MANIFEST-000005", "metadata"])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stateglass.parsers.errors import CorruptData
from stateglass.parsers.logs import json_int, json_object, json_str, versioned_json

# RocksDBCheckpointMetadata.readFromFile accepts exactly v1.
CHECKPOINT_METADATA_MAX_VERSION = 1
METADATA_ENTRY = "metadata"

_DRIVE = re.compile(r"[A-Za-z]:")


@dataclass(frozen=True)
class SstFile:
    """An immutable SST file, shared between versions: ``SSTs/<dfs_sst_file_name>``."""

    local_file_name: str  # name inside the restored RocksDB directory
    dfs_sst_file_name: str  # name under SSTs/ in the store directory
    size_bytes: int

    @classmethod
    def from_json(cls, obj: Any) -> SstFile:
        return cls(*_file_entry(obj, "dfsSstFileName", "RocksDB checkpoint SST entry"))


@dataclass(frozen=True)
class LogFile:
    """An archived WAL file: ``logs/<dfs_log_file_name>`` (Spark normally disables the WAL)."""

    local_file_name: str  # restored as archive/<local_file_name>
    dfs_log_file_name: str
    size_bytes: int

    @classmethod
    def from_json(cls, obj: Any) -> LogFile:
        return cls(*_file_entry(obj, "dfsLogFileName", "RocksDB checkpoint log entry"))


def _file_entry(obj: Any, dfs_key: str, what: str) -> tuple[str, str, int]:
    entry = json_object(obj, what)
    local = _plain_name(json_str(entry, "localFileName", what), what)
    dfs = _plain_name(json_str(entry, dfs_key, what), what)
    size = json_int(entry, "sizeBytes", what)
    if size < 0:
        raise CorruptData(f"{what} {local!r} has negative size {size}")
    return local, dfs, size


@dataclass(frozen=True)
class RocksDBCheckpointMetadata:
    """Spark's description of one RocksDB checkpoint zip."""

    sst_files: tuple[SstFile, ...]
    log_files: tuple[LogFile, ...]
    num_keys: int
    num_internal_keys: int | None = None  # absent before 4.0
    column_family_mapping: Mapping[str, int] | None = None  # name → virtual CF id (4.0+)
    column_family_type_map: Mapping[str, bool] | None = None  # name → is internal
    max_column_family_id: int | None = None

    @classmethod
    def from_bytes(cls, data: bytes) -> RocksDBCheckpointMetadata:
        """Parse the zip's ``metadata`` entry."""
        what = "RocksDB checkpoint metadata"
        _, obj = versioned_json(data, CHECKPOINT_METADATA_MAX_VERSION, what)
        ssts = _list(obj, "sstFiles", what)
        logs = _list(obj, "logFiles", what)
        internal = obj.get("numInternalKeys")
        mapping = _typed_map(obj.get("columnFamilyMapping"), int, f"{what} columnFamilyMapping")
        types = _typed_map(obj.get("columnFamilyTypeMap"), bool, f"{what} columnFamilyTypeMap")
        max_id = obj.get("maxColumnFamilyId")
        return cls(
            sst_files=tuple(SstFile.from_json(s) for s in ssts),
            log_files=tuple(LogFile.from_json(s) for s in logs),
            num_keys=json_int(obj, "numKeys", what, default=0),
            num_internal_keys=None if internal is None else json_int(obj, "numInternalKeys", what),
            column_family_mapping=mapping,
            column_family_type_map=types,
            max_column_family_id=None
            if max_id is None
            else json_int(obj, "maxColumnFamilyId", what),
        )

    @property
    def uses_column_families(self) -> bool:
        """Whether keys carry the 2-byte virtual column family prefix."""
        return bool(self.column_family_mapping)

    def column_family_names(self) -> dict[int, str]:
        """Virtual CF id → name (empty for stores without column families)."""
        return {cf_id: name for name, cf_id in (self.column_family_mapping or {}).items()}

    def is_internal(self, column_family: str) -> bool:
        """Whether Spark marks ``column_family`` as internal (TTL indexes, timers, counters)."""
        return bool((self.column_family_type_map or {}).get(column_family, False))

    def copy_plan(self) -> tuple[tuple[str, str], ...]:
        """``(source relative to the store dir, target relative to the restore dir)`` pairs."""
        plan = [(f"SSTs/{f.dfs_sst_file_name}", f.local_file_name) for f in self.sst_files]
        plan += [
            (f"logs/{f.dfs_log_file_name}", f"archive/{f.local_file_name}") for f in self.log_files
        ]
        return tuple(plan)


def _list(obj: Mapping[str, Any], key: str, what: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise CorruptData(f"{what}: {key!r} must be a list")
    return value


def _typed_map(value: Any, kind: type, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    obj = json_object(value, what)
    for key, item in obj.items():
        # bool is an int subclass; an id must not be true/false and a flag must not be 0/1.
        if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
            raise CorruptData(f"{what}: value of {key!r} must be {kind.__name__}, got {item!r}")
    return obj


def _plain_name(name: str, what: str) -> str:
    # These names become paths in a local directory: allow plain file names only.
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise CorruptData(f"{what} file name {name!r} is not a plain file name")
    return name


def check_zip_entries(names: Iterable[str]) -> None:
    """Raise :class:`CorruptData` if any zip entry name could escape the extraction directory.

    Rejects empty names, absolute paths, drive letters, backslashes, NUL bytes and ``..``
    components (zip-slip). Spark's zips hold plain file names only.
    """
    for name in names:
        why = _unsafe_reason(name)
        if why:
            raise CorruptData(f"unsafe zip entry name {name!r}: {why}")


def _unsafe_reason(name: str) -> str | None:
    if not name:
        return "empty name"
    if "\0" in name:
        return "contains a NUL byte"
    if "\\" in name:
        return "contains a backslash"
    if name.startswith("/"):
        return "absolute path"
    if _DRIVE.match(name):
        return "drive letter"
    if any(part == ".." for part in name.split("/")):
        return "'..' path component"
    return None
