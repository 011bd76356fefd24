"""What runs inside a Spark executor's Python worker: count one chain.

This module is pickled *by value* (``cloudpickle.register_pickle_by_value``) and imports
nothing of StateGlass at module level, so that a worker without our dependencies reports the
missing one in a single line rather than failing while Spark unpickles the task. Our code
arrives as the zip the driver shipped (``addPyFile`` puts it on the worker's ``sys.path``);
everything in it lives under ``stateglass.``, so no other job's ``collectors`` can shadow it.

Errors meant for the user cross back to the driver inside Spark's exception text, between
:data:`MARK` and :data:`END`, so the driver can print one line instead of a Java stack trace.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterable, Iterator
from typing import Any

MARK = "[stateglass-executor] "
END = " [/stateglass-executor]"
DOCS = "see docs/spark-engine.md"


class ExecutorSetupError(RuntimeError):
    """A worker cannot run StateGlass's code as shipped; the text is the user's one line."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{MARK}{why}{END}")


def _missing(exc: ModuleNotFoundError, zip_name: str) -> ExecutorSetupError:
    if exc.name and exc.name.split(".", 1)[0] == "stateglass":
        return ExecutorSetupError(f"{exc}: the shipped code {zip_name} is incomplete")
    name = (exc.name or str(exc)).split(".", 1)[0]
    return ExecutorSetupError(
        f"executor Python {sys.executable} has no module {name!r} (a dependency of StateGlass): "
        f"ship a packed environment with spark.archives, {DOCS}"
    )


def _driver_path(store_dir: str, hadoop_path: str, sst_names: frozenset[str]) -> str:
    parent, name = hadoop_path.rstrip("/").rsplit("/", 1)
    if name in sst_names and parent.endswith("/SSTs"):
        return f"{store_dir}/SSTs/{name}"
    return f"{store_dir}/{name}"


def _held(
    memory_fs: Any,
    store_dir: str,
    store_files: Any,
    sst_files: Any,
    pairs: Iterable[tuple[str, bytes]],
) -> Any:
    """The files Spark read for one task, under the driver's paths, as a file system."""
    store_dir = store_dir.rstrip("/")
    sst_names = frozenset(f.name for f in sst_files or ())
    data = {_driver_path(store_dir, path, sst_names): bytes(content) for path, content in pairs}
    return memory_fs(store_dir, store_files, sst_files, data)


def run_chain(
    zip_name: str, payload: bytes, index: int, pairs: Iterable[tuple[str, bytes]]
) -> Iterator[Any]:
    """Spark partition ``index`` holds the files of chain ``index``: count its keys."""
    try:
        from stateglass.collectors.engines.memfs import MemoryFileSystem
        from stateglass.collectors.scan.chains import compute_chain
    except ModuleNotFoundError as exc:
        raise _missing(exc, zip_name) from exc

    plans = pickle.loads(payload)
    task, files = plans[index]
    fs = _held(MemoryFileSystem, task.store_dir, files.store_files, files.sst_files, pairs)
    try:
        yield compute_chain(task, fs)
    except ModuleNotFoundError as exc:
        # lz4, rocksdict, zstandard...: imported lazily, per codec and provider.
        raise _missing(exc, zip_name) from exc


def decode_partition(
    zip_name: str, payload: bytes, index: int, pairs: Iterable[tuple[str, bytes]]
) -> Iterator[Any]:
    """Spark partition ``index`` holds the files of decode task ``index``: decode one store
    partition at one batch into a Parquet file (the SQL catalog's ``--engine spark``)."""
    try:
        from stateglass.collectors.catalog.decode_task import run_decode
        from stateglass.collectors.engines.memfs import MemoryFileSystem
    except ModuleNotFoundError as exc:
        raise _missing(exc, zip_name) from exc

    task = pickle.loads(payload)[index]
    fs = _held(MemoryFileSystem, task.store_dir, task.store_files, task.sst_files, pairs)
    try:
        yield run_decode(task, fs)
    except ModuleNotFoundError as exc:
        raise _missing(exc, zip_name) from exc
    except Exception as exc:
        # A corrupt file or a row that does not decode: the driver prints this one line.
        if type(exc).__module__.startswith("stateglass."):
            raise RuntimeError(f"{MARK}{exc}{END}") from exc
        raise
