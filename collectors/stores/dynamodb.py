"""The DynamoDB state store (``stateglass.dynamo.DynamoStateStoreProvider``): state in two tables.

The provider (sample_checkpoints/dynamodb/java) keeps every change as a ``StateKey_QueryVersion``
item of the state table, one manifest item per version naming the keys it put and removed,
and an index item listing the committed versions; at the last version of each snapshot
group it writes the snapshot table. docs/formats.md ("DynamoDB state store") has the items.
The store directory holds only ``_dynamodb.json``, which names the tables.

This reader only reads (GetItem, BatchGetItem, Query): per store partition one GetItem of the
index and one BatchGetItem per 100 manifests, then one BatchGetItem per 100 records a version
needs. Requests are counted in :data:`~stateglass.collectors.remote.objectfs.COUNTS` (reads as
GET, queries as LIST). Credentials, region and endpoint come from the AWS chain
(``AWS_ENDPOINT_URL`` for a local server).
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from stateglass.collectors.errors import (
    CorruptFile,
    MissingVersion,
    NotACheckpoint,
    StorageError,
    wrap_parse_error,
)
from stateglass.collectors.fs import FileInfo
from stateglass.collectors.stores.base import Change, StoreContext
from stateglass.collectors.stores.keysets import apply_key_sets
from stateglass.parsers.errors import ParseError
from stateglass.parsers.limits import DEFAULT_LIMITS, DecodeLimits

MARKER = "_dynamodb.json"
CHANGE_KIND = "ddbdelta"
FULL_KIND = "ddbsnapshot"
BATCH_GET = 100  # DynamoDB's most keys per BatchGetItem
DELTA_END = 4


@dataclass(frozen=True)
class Tables:
    """Where one store partition's state lives (the provider's ``_dynamodb.json``)."""

    state: str
    snapshot: str
    store_prefix: str
    group_size: int
    region: str | None

    @classmethod
    def from_json(cls, data: bytes) -> Tables:
        doc = json.loads(data)
        prefix = str(doc["tablePrefix"])
        return cls(
            f"{prefix}_state",
            f"{prefix}_snapshot",
            str(doc["storePrefix"]),
            int(doc["snapshotGroupSize"]),
            doc.get("region"),
        )


@dataclass(frozen=True)
class Manifest:
    """One committed version: the keys it put and removed, and what it recorded of itself."""

    version: int
    puts: tuple[bytes, ...]
    removes: tuple[bytes, ...]
    num_keys: int
    bytes: int
    commit_ms: int
    # Bytes of the snapshot group written at this version; None when it closes no group.
    snapshot_bytes: int | None


def parse_entry_name(name: str) -> tuple[int, str] | None:
    """``(version, kind)`` of the entries :meth:`DynamoStoreReader.list_entries` names."""
    head, dot, tail = name.partition(".")
    if dot and head.isdigit() and tail in (CHANGE_KIND, FULL_KIND):
        return int(head), tail
    return None


def decode_record(data: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> tuple[bytes, bytes | None]:
    """One change: gzip of ``int keySize, key, int valueSize, value`` (-1: removed), inflated
    no further than ``limits`` allow (``LimitExceeded``)."""
    inflater = zlib.decompressobj(wbits=31)  # one gzip member, as GZIPOutputStream writes
    raw = inflater.decompress(data, limits.budget(len(data)) + 1)
    limits.check("gzip", len(raw), len(data))
    if not inflater.eof:
        raise EOFError("gzip stream cut short")
    (key_size,) = struct.unpack_from(">i", raw, 0)
    key = raw[4 : 4 + key_size]
    (value_size,) = struct.unpack_from(">i", raw, 4 + key_size)
    if value_size < 0:
        return key, None
    start = 8 + key_size
    return key, raw[start : start + value_size]


class _Client:
    """The few read calls the reader makes, counted, with AWS errors as StorageErrors."""

    def __init__(self, tables: Tables, where: str) -> None:
        self.tables = tables
        self.where = where

    @cached_property
    def _dynamodb(self) -> Any:
        try:
            import boto3
        except ImportError as exc:
            from stateglass.collectors.errors import BackendMissing

            raise BackendMissing(
                self.where, "reading DynamoDB needs boto3: pip install boto3"
            ) from exc
        session = boto3.session.Session()
        return session.client("dynamodb", region_name=session.region_name or self.tables.region)

    def _call(self, kind: str, operation: str, **kwargs: Any) -> Any:
        from stateglass.collectors.remote.failures import storage_error
        from stateglass.collectors.remote.objectfs import COUNTS

        COUNTS.add(kind)
        try:
            return getattr(self._dynamodb, operation)(**kwargs)
        except Exception as exc:  # botocore's errors, matched by name at this boundary
            error = storage_error(f"dynamodb://{self.tables.state}", exc, {})
            if error is None:
                error = StorageError(f"dynamodb://{self.tables.state}", f"{operation}: {exc}")
            raise error from exc

    def get(self, table: str, pk: str) -> dict[str, Any] | None:
        answer = self._call(
            "get", "get_item", TableName=table, Key={"StateKey_QueryVersion": {"S": pk}}
        )
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def batch_get(self, table: str, pks: Sequence[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(pks), BATCH_GET):
            request = {
                table: {
                    "Keys": [{"StateKey_QueryVersion": {"S": k}} for k in pks[i : i + BATCH_GET]]
                }
            }
            while request:
                answer = self._call("get", "batch_get_item", RequestItems=request)
                for item in answer.get("Responses", {}).get(table, []):
                    out[item["StateKey_QueryVersion"]["S"]] = item
                request = answer.get("UnprocessedKeys") or {}
        return out


def _manifest(version: int, item: dict[str, Any]) -> Manifest:
    def keys(name: str) -> tuple[bytes, ...]:
        return tuple(base64.b64decode(k["S"]) for k in item.get(name, {}).get("L", []))

    return Manifest(
        version,
        keys("Puts"),
        keys("Removes"),
        int(item.get("NumKeys", {}).get("N", 0)),
        int(item.get("Bytes", {}).get("N", 0)),
        int(item.get("CommitTime", {}).get("N", 0)),
        int(item["SnapshotBytes"]["N"]) if "SnapshotBytes" in item else None,
    )


class DynamoStoreReader:
    """Reads one store partition of the DynamoDB provider, through its tables."""

    CHANGE_KIND: ClassVar[str] = CHANGE_KIND
    FULL_KIND: ClassVar[str] = FULL_KIND
    SHARED_DIR: ClassVar[str | None] = None
    ROW_LAYOUT: ClassVar[str] = "hdfs"  # the HDFS provider's records, UnsafeRows

    @staticmethod
    def classify(name: str) -> tuple[int, str] | None:
        return parse_entry_name(name)

    @classmethod
    def list_entries(cls, ctx: StoreContext) -> list[FileInfo] | None:
        reader = cls(ctx)
        out = []
        for v, m in sorted(reader.manifests.items()):
            # As an HDFS delta file would take them, its 4-byte end marker included: a
            # version that changed nothing is not an empty (damaged) file.
            size = m.bytes + DELTA_END
            out.append(FileInfo(f"{v}.{CHANGE_KIND}", False, size, m.commit_ms / 1000))
            if m.snapshot_bytes is not None:
                out.append(
                    FileInfo(f"{v}.{FULL_KIND}", False, m.snapshot_bytes, m.commit_ms / 1000)
                )
        return out

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx
        marker = ctx.join(MARKER)
        try:
            data = ctx.fs.read(marker)
        except NotACheckpoint:
            raise MissingVersion(ctx.store_dir, f"no {MARKER}: not a DynamoDB store") from None
        try:
            self.tables = Tables.from_json(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFile(marker, f"not the DynamoDB provider's marker ({exc})") from exc
        self.client = _Client(self.tables, ctx.store_dir)
        self._records: dict[str, tuple[bytes, bytes | None]] = {}

    def _pk(self, key: bytes, version: int) -> str:
        return f"{self.tables.store_prefix}{base64.b64encode(key).decode()}_{version}"

    @cached_property
    def manifests(self) -> dict[int, Manifest]:
        """Every committed version's manifest: one GetItem, one BatchGetItem per 100."""
        prefix = self.tables.store_prefix
        index = self.client.get(self.tables.state, f"{prefix}@versions")
        versions = sorted(int(v) for v in (index or {}).get("Versions", {}).get("NS", []))
        items = self.client.batch_get(self.tables.state, [f"{prefix}@{v}" for v in versions])
        found = {}
        for v in versions:
            pk = f"{prefix}@{v}"
            if pk not in items:
                continue
            try:
                found[v] = _manifest(v, items[pk])
            except (ValueError, KeyError, TypeError) as exc:  # binascii.Error is a ValueError
                raise CorruptFile(
                    f"dynamodb://{self.tables.state}/{pk}", f"not a manifest ({exc})"
                ) from exc
        return found

    def versions(self) -> list[int]:
        out, expected = [], 1
        for v in sorted(self.manifests):
            if v != expected:
                break  # a hole: later versions cannot be replayed
            out.append(v)
            expected += 1
        return out

    def change_versions(self) -> set[int]:
        return set(self.manifests)

    def full_versions(self) -> set[int]:
        return {v for v, m in self.manifests.items() if m.snapshot_bytes is not None}

    def _need(self, version: int) -> Manifest:
        if version not in self.versions():
            raise MissingVersion(
                self.ctx.store_dir, f"version {version} is not in {self.tables.state}"
            )
        return self.manifests[version]

    def _last_versions(self, version: int) -> dict[bytes, int]:
        """Each live key's last version at ``version``: the manifests replayed."""
        self._need(version)
        last: dict[bytes, int] = {}
        for v in range(1, version + 1):
            m = self.manifests[v]
            for k in m.removes:
                last.pop(k, None)
            for k in m.puts:
                last[k] = v
        return last

    def load_keys(self, version: int) -> set[bytes]:
        return set(self._last_versions(version)) if version else set()

    def apply_keys(self, keys: set[bytes], version: int) -> tuple[int, int, int]:
        m = self._need(version)
        return apply_key_sets(keys, list(m.puts), m.removes)

    def recorded_num_keys(self, version: int) -> int | None:
        return self._need(version).num_keys

    def shared_files(self, version: int) -> dict[str, int] | None:
        return None

    def column_family_id(self, name: str) -> int | None:
        return None

    def chain_data(self, version: int) -> tuple[bytes | None, list[bytes]] | None:
        return None

    def sorted_runs(self, version: int) -> list[list[bytes]] | None:
        return None

    def differing_keys(self, before: int, after: int) -> list[bytes] | None:
        return None  # no item is shared between versions: the manifests say what changed

    def flushed_changes(self, before: int, after: int) -> dict[bytes, bytes | None] | None:
        return None  # the manifests say what changed

    def _fetch(self, pks: Sequence[str]) -> dict[str, tuple[bytes, bytes | None]]:
        missing = [pk for pk in pks if pk not in self._records]
        for pk, item in self.client.batch_get(self.tables.state, missing).items():
            try:
                self._records[pk] = decode_record(item["State"]["B"], self.ctx.limits)
            except ParseError as exc:
                raise wrap_parse_error(f"dynamodb://{self.tables.state}/{pk}", exc) from exc
            except (OSError, EOFError, zlib.error, struct.error, KeyError) as exc:
                raise CorruptFile(
                    f"dynamodb://{self.tables.state}/{pk}", f"not a record ({exc})"
                ) from exc
        lost = [pk for pk in pks if pk not in self._records]
        if lost:
            raise MissingVersion(
                self.ctx.store_dir, f"item {lost[0]} is missing from {self.tables.state}"
            )
        return {pk: self._records[pk] for pk in pks}

    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        if not version:
            return
        last = self._last_versions(version)
        records = self._fetch([self._pk(k, v) for k, v in last.items()])
        for k, v in last.items():
            value = records[self._pk(k, v)][1]
            if value is not None:
                yield k, value

    def changes(self, version: int) -> Iterator[Change]:
        m = self._need(version)
        records = self._fetch([self._pk(k, version) for k in (*m.puts, *m.removes)])
        for k in m.puts:
            value = records[self._pk(k, version)][1]
            yield "update", k, value
        for k in m.removes:
            yield "delete", k, None

    def lookup(
        self, keys: Collection[bytes], versions: Sequence[int]
    ) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        wanted = set(keys)
        for version in versions:
            last = {k: v for k, v in self._last_versions(version).items() if k in wanted}
            records = self._fetch([self._pk(k, v) for k, v in last.items()])
            found = {k: records[self._pk(k, v)][1] for k, v in last.items()}
            yield version, {k: v for k, v in found.items() if v is not None}
