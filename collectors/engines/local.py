"""The local engine: chains one after the other in this process, one partition in memory."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from collectors.chains import ChainResult, ChainTask, compute_chain
from collectors.fs import FileSystem


class LocalEngine:
    name = "local"

    def run(self, tasks: Sequence[ChainTask], fs: FileSystem) -> Iterator[ChainResult]:
        for task in tasks:
            yield compute_chain(task, fs)
