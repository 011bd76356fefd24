"""HDFSBackedStateStoreProvider: ``N.delta`` and ``N.snapshot`` files.

Version V = the newest snapshot S <= V, then the deltas S+1..V applied in order
(``HDFSBackedStateStoreProvider.loadMap``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from functools import lru_cache
from typing import ClassVar

from stateglass.collectors.errors import MissingVersion
from stateglass.collectors.fs import FileInfo
from stateglass.collectors.stores.base import NAMES_CACHED, Change, StoreContext
from stateglass.collectors.stores.keysets import apply_key_sets, apply_records
from stateglass.parsers.compression import decompress
from stateglass.parsers.hdfs_files import read_record_keys, read_records


# Every partition directory repeats the same names (1.delta, 2.delta, …): cache them.
@lru_cache(maxsize=NAMES_CACHED)
def parse_hdfs_name(name: str) -> tuple[int, str] | None:
    """``(version, "delta"|"snapshot")`` for Spark's file names; None for anything else.

    Mirrors ``fetchFiles``: exactly two dot-separated parts, so ``3.delta.crc`` and temp files
    are skipped.
    """
    head, dot, tail = name.partition(".")
    if not dot or "." in tail or not head.isdigit():
        return None
    kind = tail.lower()
    if kind not in ("delta", "snapshot"):
        return None
    return int(head), kind


# The compiled merge may hold a chain's files up to this much, or this many times its biggest
# file (about the state's size), whichever is more.
CHAIN_HOLD_MIN_BYTES = 64 << 20
CHAIN_HOLD_FACTOR = 3


class HdfsStoreReader:
    """Reads one HDFS-backed store partition directory."""

    CHANGE_KIND: ClassVar[str] = "delta"
    FULL_KIND: ClassVar[str] = "snapshot"
    SHARED_DIR: ClassVar[str | None] = None
    ROW_LAYOUT: ClassVar[str] = "hdfs"

    @classmethod
    def list_entries(cls, ctx: StoreContext) -> list[FileInfo] | None:
        return None  # the store directory's files are the store

    @staticmethod
    def classify(name: str) -> tuple[int, str] | None:
        return parse_hdfs_name(name)

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx
        self.deltas: dict[int, str] = {}
        self.snapshots: dict[int, str] = {}
        for f in ctx.listing():
            parsed = parse_hdfs_name(f.name)
            if parsed is None or f.is_dir:
                continue
            version, kind = parsed
            (self.deltas if kind == "delta" else self.snapshots)[version] = f.name

    def versions(self) -> list[int]:
        # One pass in version order: a version is readable when it has a snapshot, or a delta
        # on top of a readable version (or of the empty store, version 0).
        out = []
        readable = 0  # the newest version known to be readable; -1 after a hole
        for v in sorted(set(self.deltas) | set(self.snapshots)):
            if v in self.snapshots or (v in self.deltas and readable == v - 1):
                readable = v
                out.append(v)
            else:
                readable = -1
        return out

    def change_versions(self) -> set[int]:
        return set(self.deltas)

    def full_versions(self) -> set[int]:
        return set(self.snapshots)

    def recorded_num_keys(self, version: int) -> int | None:
        return None  # a snapshot is a bare record stream: its rows must be counted

    def shared_files(self, version: int) -> dict[str, int] | None:
        return None

    def column_family_id(self, name: str) -> int | None:
        return None  # the HDFS provider has no column families

    def _chain(self, version: int) -> tuple[str | None, list[str]]:
        """The snapshot to start from (or None for empty) and the deltas to apply after it."""
        if version in self.snapshots:
            return self.snapshots[version], []
        base = max((s for s in self.snapshots if s < version), default=0)
        missing = [v for v in range(base + 1, version + 1) if v not in self.deltas]
        if missing:
            where = f"snapshot {base}" if base else "an empty store"
            raise MissingVersion(
                self.ctx.join(f"{missing[0]}.delta"),
                f"missing, and no snapshot bridges it: version {version} needs the deltas "
                f"{base + 1}..{version} on top of {where}",
            )
        return (self.snapshots.get(base) if base else None), [
            self.deltas[v] for v in range(base + 1, version + 1)
        ]

    def _records(self, name: str, allow_deletes: bool) -> list[tuple[bytes, bytes | None]]:
        def parse(data: bytes) -> list[tuple[bytes, bytes | None]]:
            # Decode the whole file inside the error boundary so that errors name it.
            return read_records(
                decompress(self.ctx.codec, data, self.ctx.limits),
                allow_deletes=allow_deletes,
                row_checksum=self.ctx.row_checksum,
            )

        return self.ctx.decode_file(name, parse)

    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        if version == 0:
            return iter(())
        snapshot, deltas = self._chain(version)
        # Even a snapshot alone goes through a map: Spark's loadMap keeps a repeated key's last
        # record, and so does the compiled chain (``chain_data``).
        # A removed key maps to None until the end: later puts overwrite it in place, and
        # dict.update applies a whole file at C speed, last record winning as in Spark.
        state: dict[bytes, bytes | None] = {}
        if snapshot is not None:
            state.update(self._records(snapshot, allow_deletes=False))
        for name in deltas:
            state.update(self._records(name, allow_deletes=True))
        # One scan of the merged map (at C speed) instead of one per record.
        if None in state.values():
            return ((k, v) for k, v in state.items() if v is not None)
        return iter(state.items())  # type: ignore[arg-type]

    def chain_data(
        self, version: int, hold_min: int = CHAIN_HOLD_MIN_BYTES
    ) -> tuple[bytes | None, list[bytes]] | None:
        """The decompressed snapshot (or None) and deltas that make ``version``.

        For a compiled merge of the whole chain (``app.render.bytes_to_json.state_chain_encoder``).
        None where the streams need more than a plain walk (row checksums), or where holding
        every file at once would cost more than ``hold_min`` bytes and three copies of the
        biggest file: the record path then merges file by file.
        """
        if self.ctx.row_checksum:
            return None
        if version == 0:
            return None, []
        snapshot, deltas = self._chain(version)

        def data(name: str) -> bytes:
            return self.ctx.decode_file(
                name, lambda raw: decompress(self.ctx.codec, raw, self.ctx.limits)
            )

        # The compiled merge holds every file of the chain at once; the record path holds
        # about one copy of the state. A long chain of big deltas (snapshots lagging behind
        # an aggregation that rewrites every key) goes the record path.
        held = biggest = 0
        files: list[bytes] = []
        for name in ([snapshot] if snapshot is not None else []) + deltas:
            files.append(data(name))
            held += len(files[-1])
            biggest = max(biggest, len(files[-1]))
            if held > hold_min and held > CHAIN_HOLD_FACTOR * biggest:
                return None
        return (files.pop(0) if snapshot is not None else None), files

    def sorted_runs(self, version: int) -> list[list[bytes]] | None:
        return None  # delta and snapshot files are record streams: see chain_data

    def lookup(
        self, keys: Collection[bytes], versions: Sequence[int]
    ) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        """See :meth:`StoreReader.lookup`: the chain of the first version, then each delta.

        Every file is still decompressed and walked once, but only the wanted keys are kept,
        so a key's history over N versions costs one rebuild, not N.
        """
        wanted = sorted(set(versions))
        if not wanted:
            return
        emit = set(wanted)
        keys = keys if isinstance(keys, (set, frozenset)) else set(keys)
        state: dict[bytes, bytes | None] = {}
        current = 0  # the version ``state`` holds

        def absorb(name: str, allow_deletes: bool) -> None:
            records = self._records(name, allow_deletes=allow_deletes)
            if len(keys) == 1:
                (key,) = keys
                # The last record of the key wins, as in Spark.
                for k, v in reversed(records):
                    if k == key:
                        state[k] = v
                        return
                return
            merged = dict(records)
            for k in keys:
                if k in merged:
                    state[k] = merged[k]

        for version in range(wanted[0], wanted[-1] + 1):
            if current and current == version - 1 and version in self.deltas:
                absorb(self.deltas[version], allow_deletes=True)
            else:
                snapshot, deltas = self._chain(version)
                state.clear()
                if snapshot is not None:
                    absorb(snapshot, allow_deletes=False)
                for name in deltas:
                    absorb(name, allow_deletes=True)
            current = version
            if version in emit:
                yield version, {k: v for k, v in state.items() if v is not None}

    def load_keys(self, version: int) -> set[bytes]:
        """The keys of ``version``, values never sliced out (what counting keys needs)."""
        if version == 0:
            return set()
        snapshot, deltas = self._chain(version)
        keys: set[bytes] = set()
        if snapshot is not None:
            keys.update(
                self.ctx.decode_file(
                    snapshot,
                    lambda data: read_record_keys(
                        decompress(self.ctx.codec, data, self.ctx.limits),
                        allow_deletes=False,
                        row_checksum=self.ctx.row_checksum,
                    )[0],
                )
            )
        for name in deltas:
            self.apply_keys(keys, int(name.split(".", 1)[0]))
        return keys

    def apply_keys(self, keys: set[bytes], version: int) -> tuple[int, int, int]:
        # The hot loop of a scan: a delta's keys, values never sliced out, applied in bulk.
        puts, deletes, ordered = self.delta_keys(version)
        if ordered:
            return apply_key_sets(keys, puts, deletes)
        return apply_records(keys, self._records(self.deltas[version], allow_deletes=True))

    def delta_keys(self, version: int) -> tuple[list[bytes], list[bytes], bool]:
        """``(put keys, removed keys, ordered)`` of ``version``'s delta, values unread.

        See :func:`stateglass.parsers.hdfs_files.read_record_keys`; for counting keys without
        decoding.
        """
        if version not in self.deltas:
            raise MissingVersion(self.ctx.join(f"{version}.delta"), "missing")
        return self.ctx.decode_file(
            self.deltas[version],
            lambda data: read_record_keys(
                decompress(self.ctx.codec, data, self.ctx.limits),
                row_checksum=self.ctx.row_checksum,
            ),
        )

    def differing_keys(self, before: int, after: int) -> list[bytes] | None:
        return None  # no file is shared between versions: the deltas say what changed

    def flushed_changes(self, before: int, after: int) -> dict[bytes, bytes | None] | None:
        return None  # the deltas say what changed

    def changes(self, version: int) -> Iterator[Change]:
        if version not in self.deltas:
            raise MissingVersion(
                self.ctx.join(f"{version}.delta"), "missing: no change data for it"
            )
        for k, v in self._records(self.deltas[version], allow_deletes=True):
            yield ("delete", k, None) if v is None else ("update", k, v)
