"""A read-only :class:`~collectors.fs.FileSystem` over one chain's files, held in memory.

On a Spark executor the files come from Spark's Hadoop file system (``binaryFiles``), not from
a path Python could open: this hands them to :func:`collectors.scan.chains.compute_chain` under
the very paths the driver planned, with the listing the driver took. Nothing else is visible,
so a task's memory is bounded by its chain's files.
"""

from __future__ import annotations

import builtins
import posixpath

from stateglass.collectors.errors import CheckpointError, NotACheckpoint
from stateglass.collectors.fs import FileInfo


class MemoryFileSystem:
    """The files of one store directory (and its ``SSTs/``), keyed by the driver's paths."""

    def __init__(
        self,
        store_dir: str,
        store_files: tuple[FileInfo, ...],
        sst_files: tuple[FileInfo, ...] | None,
        data: dict[str, bytes],
    ) -> None:
        self.store_dir = store_dir.rstrip("/")
        self.sst_dir = f"{self.store_dir}/SSTs"
        entries = list(store_files)
        if sst_files is not None:
            entries.append(FileInfo("SSTs", True, 0, 0.0))
        self.dirs: dict[str, tuple[FileInfo, ...]] = {self.store_dir: tuple(entries)}
        if sst_files is not None:
            self.dirs[self.sst_dir] = sst_files
        self.data = data

    def _norm(self, path: str) -> str:
        # Readers join with os.path or posixpath; both give "dir/name" on the executors we run.
        return path.rstrip("/")

    def list(self, path: str) -> builtins.list[FileInfo]:
        try:
            return builtins.list(self.dirs[self._norm(path)])
        except KeyError:
            raise NotACheckpoint(path, "no such directory") from None

    def names(self, path: str) -> builtins.list[tuple[str, bool]]:
        return [(f.name, f.is_dir) for f in self.list(path)]

    def stat(self, path: str) -> FileInfo | None:
        path = self._norm(path)
        if path in self.dirs:
            return FileInfo(posixpath.basename(path), True, 0, 0.0)
        parent, name = posixpath.split(path)
        for f in self.dirs.get(parent, ()):
            if f.name == name:
                return f
        return None

    def read(self, path: str) -> bytes:
        try:
            return self.data[self._norm(path)]
        except KeyError:
            # Listed by the driver, gone when the executor read it: Spark purged it meanwhile.
            raise CheckpointError(path, "file disappeared (purged by Spark?)") from None

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def is_dir(self, path: str) -> bool:
        return self._norm(path) in self.dirs
