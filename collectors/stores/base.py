"""The interface every provider's reader implements, and what it needs to know."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from stateglass.collectors.errors import wrap_parse_error
from stateglass.collectors.fs import FileInfo, FileSystem
from stateglass.collectors.limits import active
from stateglass.parsers.errors import ParseError
from stateglass.parsers.limits import DecodeLimits

T = TypeVar("T")
ChangeType = Literal["update", "delete", "append"]
Change = tuple[ChangeType, bytes, "bytes | None"]


@dataclass(frozen=True)
class StoreContext:
    """Everything a reader needs about one store of one partition."""

    fs: FileSystem
    store_dir: str
    # The directory's files when the caller listed them already (a scan does).
    files: tuple[FileInfo, ...] | None = None
    codec: str = "lz4"
    row_checksum: bool = False
    # RocksDB list-state merges: "," before Spark 4.3's mergeOperatorVersion 2, empty after.
    merge_delimiter: bytes = b","
    # Checkpoint format v2: the committed unique id of each version (from commits/).
    unique_ids: dict[int, str] = field(default_factory=dict)
    # How far a compressed file may expand (docs/limits.md).
    limits: DecodeLimits = field(default_factory=active)

    def join(self, *parts: str) -> str:
        if self.store_dir.startswith("/") and os.sep == "/":
            return os.path.join(self.store_dir, *parts)
        return posixpath.join(self.store_dir, *parts)

    def listing(self) -> list[FileInfo]:
        if self.files is not None:
            return list(self.files)
        if not self.fs.is_dir(self.store_dir):
            return []
        return [f for f in self.fs.list(self.store_dir) if not f.name.startswith(".")]

    def decode_file(self, name: str, parser: Callable[[bytes], T]) -> T:
        path = self.join(name)
        data = self.fs.read(path)
        try:
            return parser(data)
        except ParseError as exc:
            raise wrap_parse_error(path, exc) from exc


class StoreReader(Protocol):
    """Rebuilds raw (key, value) bytes of one store partition at a state version."""

    def __init__(self, ctx: StoreContext) -> None: ...

    def versions(self) -> list[int]:
        """Versions whose state can be rebuilt from the files present."""
        ...

    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of the store at ``version``."""
        ...

    def changes(self, version: int) -> Iterator[Change]:
        """The records written by ``version`` (its delta or changelog), in file order."""
        ...

    def lookup(
        self, keys: Collection[bytes], versions: Sequence[int]
    ) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        """``(version, {key: value})`` of the ``keys`` present, for each of ``versions`` in
        ascending order: one replay of the chain that never builds the whole store."""
        ...
