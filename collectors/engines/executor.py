"""What runs inside a Spark executor's Python worker: guard the imports, then count one chain.

This module is pickled *by value* (``cloudpickle.register_pickle_by_value``) and imports
nothing of StateGlass at module level: an executor that unpickles it must not resolve
``collectors`` or ``parsers`` before :func:`ensure_shipped` has made sure those names mean the
zip the driver shipped. Our package names are common words; on a shared cluster a worker may
already hold another job's ``collectors`` in ``sys.modules`` or find one earlier on its path.

Errors meant for the user cross back to the driver inside Spark's exception text, between
:data:`MARK` and :data:`END`, so the driver can print one line instead of a Java stack trace.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import pickle
import sys
from collections.abc import Iterable, Iterator, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

SHIPPED = ("collectors", "parsers")
MARK = "[stateglass-executor] "
END = " [/stateglass-executor]"
DOCS = "see docs/spark-engine.md"


class ExecutorSetupError(RuntimeError):
    """A worker cannot run StateGlass's code as shipped; the text is the user's one line."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{MARK}{why}{END}")


def _from_zip(module: object, prefix: str) -> bool:
    file = getattr(module, "__file__", None)
    return isinstance(file, str) and file.startswith(prefix)


def _ours(name: str) -> bool:
    return name.split(".", 1)[0] in SHIPPED


class ShippedFinder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: ``collectors``/``parsers`` come from the zip or not at all.

    ``sys.path`` order is not enough: an editable install (setuptools puts a finder on
    ``sys.meta_path``, ahead of every path entry) or a ``.pth`` hook on the worker would win
    over a zip at ``sys.path[0]``. A name missing from the zip (``parsers._speedups``, a
    compiled module a zip cannot hold) is an ImportError, never a module from elsewhere.
    """

    def __init__(self, zip_path: str) -> None:
        self.zip_path = zip_path

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not _ours(fullname):
            return None
        parent = fullname.rpartition(".")[0]
        where = getattr(sys.modules.get(parent), "__path__", None) if parent else [self.zip_path]
        spec = importlib.machinery.PathFinder.find_spec(fullname, where)
        if spec is None or not (spec.origin or "").startswith(self.zip_path + os.sep):
            raise ModuleNotFoundError(f"{fullname} is not in {self.zip_path}", name=fullname)
        return spec


def ensure_shipped(zip_path: str) -> None:
    """Make ``collectors``/``parsers`` resolve to ``zip_path``, whatever the worker had before.

    A :class:`ShippedFinder` goes first on ``sys.meta_path`` and the zip first on
    ``sys.path``; modules of those names loaded from anywhere else are evicted from
    ``sys.modules``; after importing ours, every such module must come from the zip, or the
    task fails with one clear error rather than run someone else's code.
    """
    if not os.path.isfile(zip_path):
        raise ExecutorSetupError(f"the shipped code {zip_path} is not on this executor")
    head = sys.meta_path[0] if sys.meta_path else None
    if getattr(head, "zip_path", None) != zip_path:
        # Also drops the finder of an earlier zip, should this worker process be reused.
        sys.meta_path[:] = [f for f in sys.meta_path if not hasattr(f, "zip_path")]
        sys.meta_path.insert(0, ShippedFinder(zip_path))
        while zip_path in sys.path:
            sys.path.remove(zip_path)
        sys.path.insert(0, zip_path)
        importlib.invalidate_caches()
    prefix = zip_path + os.sep
    for name in [n for n, m in sys.modules.items() if _ours(n) and not _from_zip(m, prefix)]:
        del sys.modules[name]
    try:
        importlib.import_module("collectors.chains")
        importlib.import_module("collectors.engines.memfs")
    except ModuleNotFoundError as exc:
        raise _missing(exc) from exc
    foreign = sorted(
        f"{n} ({getattr(m, '__file__', None)})"
        for n, m in list(sys.modules.items())
        if _ours(n) and not _from_zip(m, prefix)
    )
    if foreign:
        raise ExecutorSetupError(
            f"modules named like StateGlass's do not come from the shipped {zip_path}: "
            + ", ".join(foreign)
        )


def _missing(exc: ModuleNotFoundError) -> ExecutorSetupError:
    if exc.name and _ours(exc.name):
        return ExecutorSetupError(f"{exc}: the shipped code is incomplete")
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


def run_chain(
    zip_name: str, payload: bytes, index: int, pairs: Iterable[tuple[str, bytes]]
) -> Iterator[Any]:
    """Spark partition ``index`` holds the files of chain ``index``: count its keys."""
    from pyspark import SparkFiles

    ensure_shipped(os.path.join(SparkFiles.getRootDirectory(), zip_name))
    from collectors.chains import compute_chain
    from collectors.engines.memfs import MemoryFileSystem

    plans = pickle.loads(payload)
    task, files = plans[index]
    store_dir = task.store_dir.rstrip("/")
    sst_names = frozenset(f.name for f in files.sst_files or ())
    data = {_driver_path(store_dir, path, sst_names): bytes(content) for path, content in pairs}
    fs = MemoryFileSystem(store_dir, files.store_files, files.sst_files, data)
    try:
        yield compute_chain(task, fs)
    except ModuleNotFoundError as exc:
        # lz4, rocksdict, zstandard...: imported lazily, per codec and provider.
        raise _missing(exc) from exc
