"""StateGlass: see inside Spark Structured Streaming state stores, without a JVM.

The notebook API (:mod:`stateglass.app.notebook`)::

    import stateglass

    with stateglass.connect("/data/checkpoints") as session:
        session.tables()                       # every checkpoint a schema, every store a table
        df = session.sql("SELECT count(*) FROM orders.op0_default").df()

    table = stateglass.read_state("/data/checkpoints/orders", batch_id=41)  # pyarrow.Table

The code lives in ``stateglass.app``, ``stateglass.collectors`` and ``stateglass.parsers``;
this module only names the API, and loads it at first use, so ``stateglass`` on the command
line starts without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stateglass.app.notebook import connect, read_state

__all__ = ["connect", "read_state"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from stateglass.app import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'stateglass' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
