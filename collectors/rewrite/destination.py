"""A rewrite's destination: a temporary sibling, the logs copied, renamed when complete.

Everything is written under ``.<name>.stateglass-rewrite-<id>`` beside the destination; only a
complete, self-checked tree is renamed to the destination. Before that tree is made, an owner
file ``.<name>.stateglass-rewrite-<id>.owner`` names the process (``owner.py``). A killed run
leaves the hidden tree and its owner file (never a directory at the destination); the next
rewrite to the same destination removes them once the owner file shows that process is gone,
and leaves alone every sibling it cannot prove is such a leftover. The source is only read.

What is copied from the source, up to batch ``B``: ``metadata`` (and, beside it, a new
``stateglass-rewrite.json`` naming ``B``: the destination's state history starts there, which
the retention rule reads); ``offsets/0..B`` (the last one
with the pinned confs changed); ``commits/0..B``; the sources' logs cut at ``B``
(:mod:`.source_logs`: a file source's at the batch of its own log that ``offsets/B`` names);
and under ``state/`` every file that is not state data (operator metadata, with its
``numPartitions`` changed, and state schema files), in the operator directory and in partition
directories below the new count. State data (deltas, snapshots, changelogs, zips, SSTs) is
never copied: the writers write it. Hidden files (Hadoop's ``.crc`` sidecars, Spark's temp
files) are not copied: a copied sidecar would no longer match an edited file.

Example::

    dest = Destination.create("/data/cp-32")
    dest.copy_logs(Checkpoint.open("/data/cp"), 41, {"spark.sql.shuffle.partitions": "32"}, 32)
    ...
    dest.commit()
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Mapping
from typing import Any

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.errors import RewriteRefused
from stateglass.collectors.rewrite.files import not_written, write_bytes
from stateglass.collectors.rewrite.owner import OWNER_SUFFIX, OwnerMark
from stateglass.collectors.rewrite.source_logs import source_log_files, up_to_batch
from stateglass.collectors.stores import READERS, classify_name
from stateglass.parsers.logs import REWRITE_MARK, RewriteMark, StreamMetadata, split_lines

TEMP_MARK = ".stateglass-rewrite-"
# Directories of state data shared between versions (RocksDB's SSTs): never copied.
_SHARED_DIRS = frozenset(r.SHARED_DIR for r in READERS.values() if r.SHARED_DIR)


def temp_siblings(dst: str) -> list[str]:
    """Temporary trees and owner files of rewrites to ``dst`` beside it."""
    parent, name = os.path.split(os.path.abspath(dst))
    if not os.path.isdir(parent):
        return []
    return [
        os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(f".{name}{TEMP_MARK}")
    ]


def remove_leftovers(dst: str) -> list[str]:
    """Remove the temporary trees of killed rewrites to ``dst``: those whose owner file names
    a process of this host that is gone. Returns what was removed; anything else is kept."""
    removed = []
    for owner in temp_siblings(dst):
        if not owner.endswith(OWNER_SUFFIX):
            continue
        mark = OwnerMark.read(owner)
        if mark is None or not mark.gone():
            continue
        tree = owner.removesuffix(OWNER_SUFFIX)
        if os.path.isdir(tree) and not os.path.islink(tree):
            shutil.rmtree(tree)
            removed.append(tree)
        os.remove(owner)  # last: a kill in between leaves the owner file to say whose it was
        removed.append(owner)
    return removed


class Destination:
    """The temporary tree a rewrite writes, and its one way to become the destination."""

    def __init__(self, dst: str, root: str) -> None:
        self.dst = dst
        self.root = root
        self.checkpoint = Checkpoint(root)  # paths of stores and logs in the new tree

    @classmethod
    def create(cls, dst: str) -> Destination:
        """A fresh temporary tree for the local path ``dst``; refused when ``dst`` holds
        anything. (``object_store.create_destination`` also takes object-store URLs.)"""
        dst = os.path.abspath(dst)
        if os.path.exists(dst) and (not os.path.isdir(dst) or os.listdir(dst)):
            raise RewriteRefused(dst, "the destination exists and is not empty")
        parent, name = os.path.split(dst)
        root = os.path.join(parent, f".{name}{TEMP_MARK}{uuid.uuid4().hex[:12]}")
        try:
            os.makedirs(parent, exist_ok=True)
            remove_leftovers(dst)
            OwnerMark.of_this_process().write(root + OWNER_SUFFIX)  # before the tree: never unowned
            os.mkdir(root)
        except OSError as exc:
            raise not_written(exc.filename or dst, exc) from exc
        return cls(dst, root)

    def copy_logs(
        self,
        cp: Checkpoint,
        batch: int,
        conf: Mapping[str, str],
        partitions: int,
        watermark_ms: int | None = None,
    ) -> list[str]:
        """Copy what the destination keeps from ``cp`` up to ``batch`` (module docstring),
        with ``conf`` (and ``watermark_ms`` as ``batchWatermarkMs``) set in the last offsets
        entry; the paths written."""
        # Spark reads these on restart: a damaged one is refused here, never copied.
        cp.parse(cp.path("metadata"), StreamMetadata.from_bytes)
        written = [
            self._copy(cp, "metadata"),
            self._write(RewriteMark(batch).to_bytes(), REWRITE_MARK),
        ]
        for log in ("offsets", "commits"):
            for n in _batches(cp, log, batch):
                if log == "offsets":
                    cp.offsets(n)
                else:
                    cp.commit(n)
                data = cp.fs.read(cp.path(log, str(n)))
                if log == "offsets" and n == batch:
                    data = with_conf(data, conf, watermark_ms)
                written.append(self._write(data, log, str(n)))
        written += [self._write(data, *rel) for rel, data in source_log_files(cp, batch)]
        for rel in _walk(cp, ("state",)):
            if _keeps_state_file(rel, batch, partitions):
                data = cp.fs.read(cp.path(*rel))
                if "_metadata" in rel and rel[-1] != "schema" and "_stateSchema" not in rel:
                    data = with_partitions(data, partitions, self.dst)
                written.append(self._write(data, *rel))
        return written

    def set_state_unique_ids(self, batch: int, ids: Mapping[int, list[list[str]]]) -> None:
        """Checkpoint format v2: name the written files' unique ids in ``commits/<batch>``
        (operator id → per partition, per store), which is where Spark looks them up."""
        path = os.path.join(self.root, "commits", str(batch))
        with open(path, "rb") as f:
            data = f.read()
        lines = split_lines(data.decode("utf-8"))
        meta: dict[str, Any] = json.loads(lines[1]) if len(lines) > 1 and lines[1] else {}
        meta["stateUniqueIds"] = {str(op): parts for op, parts in sorted(ids.items())}
        self._write(
            f"{lines[0]}\n{json.dumps(meta, separators=(',', ':'))}".encode(), "commits", str(batch)
        )

    def commit(self) -> None:
        """Make the temporary tree the destination (one rename: complete or absent)."""
        try:
            if os.path.isdir(self.dst):
                os.rmdir(self.dst)  # empty, checked at create(); rename needs it gone
            os.rename(self.root, self.dst)
        except OSError as exc:
            self.discard()
            raise not_written(self.dst, exc) from exc
        os.remove(self.root + OWNER_SUFFIX)

    def discard(self) -> None:
        """Remove the temporary tree (a refusal or a failed self-check after writing)."""
        shutil.rmtree(self.root, ignore_errors=True)
        if os.path.exists(self.root + OWNER_SUFFIX):
            os.remove(self.root + OWNER_SUFFIX)

    def _copy(self, cp: Checkpoint, *rel: str) -> str:
        return self._write(cp.fs.read(cp.path(*rel)), *rel)

    def _write(self, data: bytes, *rel: str) -> str:
        path = os.path.join(self.root, *rel)
        write_bytes(path, data)
        return path


def _batches(cp: Checkpoint, log: str, batch: int) -> list[int]:
    ids = cp.offset_batch_ids if log == "offsets" else cp.commit_batch_ids
    return [n for n in ids if n <= batch]


def _walk(cp: Checkpoint, rel: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Relative paths of the visible files under ``rel`` (none when it is absent)."""
    if not cp.fs.is_dir(cp.path(*rel)):
        return []
    out: list[tuple[str, ...]] = []
    for name, is_dir in cp.fs.names(cp.path(*rel)):
        if name.startswith("."):
            continue
        out += _walk(cp, (*rel, name)) if is_dir else [(*rel, name)]
    return out


def _keeps_state_file(rel: tuple[str, ...], batch: int, partitions: int) -> bool:
    """Whether a file under ``state/`` is copied: metadata and schemas, not state data."""
    name = rel[-1]
    if classify_name(name) is not None or classify_name(name.removesuffix(".crc")) is not None:
        return False
    if _SHARED_DIRS.intersection(rel):
        return False
    if len(rel) > 2 and rel[2].isdigit() and int(rel[2]) >= partitions:
        return False
    if len(rel) > 4 and rel[2:4] == ("_metadata", "v2"):
        return up_to_batch(rel[-1], batch)
    return True


def with_conf(data: bytes, conf: Mapping[str, str], watermark_ms: int | None = None) -> bytes:
    """An offsets entry with ``conf`` (and ``watermark_ms``) set in its metadata line,
    everything else as it was."""
    lines = split_lines(data.decode("utf-8"))
    meta: dict[str, Any] = json.loads(lines[1])
    meta["conf"] = {**meta.get("conf", {}), **conf}
    if watermark_ms is not None:
        meta["batchWatermarkMs"] = watermark_ms
    lines[1] = json.dumps(meta, separators=(",", ":"))
    return "\n".join(lines).encode("utf-8")


_SCHEMA_FILE = re.compile(r"/state/[0-9]+/_stateSchema/[^/]+/[^/]+$")


def with_partitions(data: bytes, partitions: int, root: str | None = None) -> bytes:
    """Operator metadata (v1 or v2) with every store's ``numPartitions`` set and, given the
    destination's ``root``, v2's ``stateSchemaFilePaths`` (absolute URIs into the source)
    pointing at the destination's copies: Spark reads the schema from there on restart."""
    lines = split_lines(data.decode("utf-8"))
    out = [lines[0]]
    for line in lines[1:]:
        doc = json.loads(line) if line.strip() else None
        if isinstance(doc, dict):
            for info in doc.get("stateStoreInfo", []):
                if "numPartitions" in info:
                    info["numPartitions"] = partitions
                if root is not None and isinstance(info.get("stateSchemaFilePaths"), list):
                    info["stateSchemaFilePaths"] = [
                        _moved_schema_path(p, root) for p in info["stateSchemaFilePaths"]
                    ]
            line = json.dumps(doc, separators=(",", ":"))
        out.append(line)
    return "\n".join(out).encode("utf-8")


def _moved_schema_path(path: str, root: str) -> str:
    """A schema file's URI in the source → the same file under the destination ``root``."""
    found = _SCHEMA_FILE.search(path) if isinstance(path, str) else None
    if found is None:
        return path
    return f"file:{os.path.abspath(root)}{found.group(0)}"
