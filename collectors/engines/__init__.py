"""One module per engine that runs chain tasks; the registry maps ``--engine`` names to them.

Every engine runs :func:`stateglass.collectors.scan.chains.compute_chain` once per chain and
yields the results in any order; the scan, the only DuckDB writer, stores them. The
conformance suite (``tests/collectors/test_engines.py``) requires identical tables from every
engine.

Importing this package (or :mod:`.signals`, which every command's signal handling uses) loads
no engine: the local one brings the scan's chains, the store readers and multiprocessing, which
``stateglass sql`` never needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stateglass.collectors.engines.base import Engine
    from stateglass.collectors.engines.local import LocalEngine


def _local(master: str | None, jobs: int) -> Engine:
    from stateglass.collectors.engines.local import LocalEngine

    return LocalEngine(jobs)


def _spark(master: str | None, jobs: int) -> Engine:
    # PySpark is heavy and optional: import it only when asked for.
    from stateglass.collectors.engines.spark import SparkEngine

    return SparkEngine(master)


# name -> factory(master, jobs); ``jobs`` is the local engine's (Spark has its executors).
ENGINES: dict[str, Callable[[str | None, int], Engine]] = {
    "local": _local,
    "spark": _spark,
}


def get_engine(name: str, master: str | None = None, jobs: int = 1) -> Engine:
    """The engine registered as ``name`` (``local`` or ``spark``); ``jobs``: worker processes
    of the local engine (0: one per core, 1: none, in this process)."""
    return ENGINES[name](master, jobs)


_HOMES = {"Engine": "base", "LocalEngine": "local"}

__all__ = ["ENGINES", "Engine", "LocalEngine", "get_engine"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
