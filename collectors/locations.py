"""Default locations, in a module light enough for the CLI to import at start-up."""

from __future__ import annotations

import os

# The history database when ``--db`` is not given (``~`` is expanded when it is opened).
DEFAULT_DB = os.path.join("~", ".stateglass", "stateglass.duckdb")
