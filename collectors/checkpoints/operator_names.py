"""How an operator's name read from its state schema is marked (Spark 3.x writes no operator
metadata). Its own module so that the dashboard's every page can say so without importing the
checkpoint reader and its store readers."""

from __future__ import annotations

# Marks an operator name read from the state schema.
INFERRED = " (inferred)"
INFERRED_HELP = (
    "(inferred): Spark 3.x writes no operator metadata, so the operator's name is inferred "
    "from its state schema"
)

__all__ = ["INFERRED", "INFERRED_HELP"]
