"""The interface every engine implements."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from stateglass.collectors.fs import FileSystem
from stateglass.collectors.scan.chains import ChainResult, ChainTask


class Engine(Protocol):
    """Runs :func:`collectors.scan.chains.compute_chain` over tasks; results come back in any
    order."""

    name: str
    # Whether tasks may carry key sets (``ChainTask.seed``) cheaply: true when the chains
    # are counted in this process or handed on without shipping them anywhere costly.
    carries_keys: bool

    def run(self, tasks: Sequence[ChainTask], fs: FileSystem) -> Iterator[ChainResult]: ...
