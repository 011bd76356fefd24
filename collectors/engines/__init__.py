"""One module per engine that runs chain tasks; the registry maps ``--engine`` names to them.

Every engine runs :func:`collectors.chains.compute_chain` once per chain and yields the
results in any order; the scan, the only DuckDB writer, stores them. The conformance suite
(``tests/collectors/test_engines.py``) requires identical tables from every engine.
"""

from __future__ import annotations

from collections.abc import Callable

from collectors.engines.base import Engine
from collectors.engines.local import LocalEngine


def _spark(master: str | None) -> Engine:
    # PySpark is heavy and optional: import it only when asked for.
    from collectors.engines.spark import SparkEngine

    return SparkEngine(master)


ENGINES: dict[str, Callable[[str | None], Engine]] = {
    "local": lambda master: LocalEngine(),
    "spark": _spark,
}


def get_engine(name: str, master: str | None = None) -> Engine:
    """The engine registered as ``name`` (``local`` or ``spark``)."""
    return ENGINES[name](master)


__all__ = ["ENGINES", "Engine", "LocalEngine", "get_engine"]
