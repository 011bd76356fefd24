"""Arrow's dataset module for a ``stateglass sql`` process, without pandas.

``pyarrow.dataset`` imports pandas as it loads (its module builds a constant through
``pa.scalar``, which asks pyarrow's pandas shim whether the value is a pandas object), and
pandas costs about 0.6 s of a 2 s start-up. The SQL catalog needs the dataset module (its
tables are datasets DuckDB pushes filters into), never pandas: a whole ``stateglass sql``
process loads the dataset module here with pandas out of sight, so the shim records "no
pandas" once and never looks again.

That record is for the life of the process (pyarrow's ``to_pandas`` would fail in it), so
only a process of its own does this, never a caller of :func:`stateglass.app.cli.main` that
passes its arguments (tests, notebooks), and never once pandas is loaded already.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec


class _PandasOutOfSight:
    """A finder that answers "not installed" for pandas, while Arrow's dataset module loads."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: object = None
    ) -> ModuleSpec | None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def load_datasets_without_pandas() -> None:
    """Import ``pyarrow.dataset`` so that pyarrow never imports pandas in this process."""
    if "pandas" in sys.modules or "pyarrow.dataset" in sys.modules:
        return
    finder = _PandasOutOfSight()
    sys.meta_path.insert(0, finder)
    try:
        import pyarrow.dataset  # noqa: F401
    finally:
        sys.meta_path.remove(finder)
