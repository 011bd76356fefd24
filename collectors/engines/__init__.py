"""One module per engine that runs chain tasks; the registry maps ``--engine`` names to them.

Every engine runs :func:`stateglass.collectors.scan.chains.compute_chain` once per chain and yields
the
results in any order; the scan, the only DuckDB writer, stores them. The conformance suite
(``tests/collectors/test_engines.py``) requires identical tables from every engine.
"""

from __future__ import annotations

from collections.abc import Callable

from stateglass.collectors.engines.base import Engine
from stateglass.collectors.engines.local import LocalEngine


def _spark(master: str | None, jobs: int) -> Engine:
    # PySpark is heavy and optional: import it only when asked for.
    from stateglass.collectors.engines.spark import SparkEngine

    return SparkEngine(master)


# name -> factory(master, jobs); ``jobs`` is the local engine's (Spark has its executors).
ENGINES: dict[str, Callable[[str | None, int], Engine]] = {
    "local": lambda master, jobs: LocalEngine(jobs),
    "spark": _spark,
}


def get_engine(name: str, master: str | None = None, jobs: int = 1) -> Engine:
    """The engine registered as ``name`` (``local`` or ``spark``); ``jobs``: worker processes
    of the local engine (0: one per core, 1: none, in this process)."""
    return ENGINES[name](master, jobs)


__all__ = ["ENGINES", "Engine", "LocalEngine", "get_engine"]
