"""The schemas of a store's state variables, as Spark's State Data Source gives their columns.

A transformWithState store (and a join store of state format 3) keeps several column families
in one store, so the ``operators`` table has no one key and value schema for it. A report
reads each state variable's columns from the checkpoint's schema files instead, through the
same row codec as ``stateglass state --state-var``: a map state's key is its grouping key,
beside ``user_map_key`` and ``user_map_value``, as Spark's reader names them.

Example::

    for var in variable_schemas("/data/checkpoints/tws", 0, "default"):
        print(var.label, var.key, var.value)
"""

from __future__ import annotations

from dataclasses import dataclass

from stateglass.app.errors import AppError
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import open_source, views_of
from stateglass.collectors.errors import BadConfig, CheckpointError, StorageError
from stateglass.parsers.errors import ParseError


@dataclass(frozen=True)
class VariableSchema:
    """One state variable (or the registered timers): its grouping key and other columns."""

    label: str  # "stats (ValueState)", "registered timers"
    key: str  # the grouping key's type
    columns: tuple[tuple[str, str], ...]  # (name, type) of every column after the key

    @property
    def value(self) -> str:
        """The columns after the key: the bare type for a value, else ``name type`` pairs."""
        if len(self.columns) == 1 and self.columns[0][0] == "value":
            return self.columns[0][1]
        return ", ".join(f"{name} {type_}" for name, type_ in self.columns)

    @property
    def all_columns(self) -> tuple[tuple[str, str], ...]:
        """(name, type) of every column, the key first, as ``stateglass info`` lists them."""
        return (("key", self.key), *self.columns)


def variable_schemas(
    checkpoint: str, operator_id: int, store_name: str
) -> tuple[tuple[VariableSchema, ...], str]:
    """The store's state variables and ``""``; none for a plain store; none and why on failure."""
    try:
        cp = Checkpoint.open(checkpoint)
        store = cp.store(operator_id, store_name)
        if not store.uses_column_families:
            return (), ""
        out = []
        for view in views_of(store, cp.root):
            (_, key), *rest = open_source(view).row_codec.columns
            var = store.state_variable(view.state_var or "")
            label = view.label if var is None else f"{view.label} ({var.kind})"
            columns = tuple((name, type_.simple_string()) for name, type_ in rest)
            out.append(VariableSchema(label, key.simple_string(), columns))
        return tuple(out), ""
    # A schema file that does not parse costs the schemas, not the report.
    except (CheckpointError, BadConfig, StorageError, AppError, ParseError) as exc:
        return (), f"state variable schemas not available: {exc}"
