"""Which columns of a state key Spark's offline repartition hashes, and what it refuses.

Spark 4.2+ repartitions a stopped query's state with
``spark._streamingCheckpointManager.repartition(checkpoint, n)`` (SPARK-54345,
``OfflineStateRepartitionRunner``): it reads every store at the last committed batch with the
state reader, adds a ``partition_key`` column, ``repartition(n, col("partition_key"))`` and
writes each row into the store of its new partition. ``partition_key`` comes from
``StatePartitionKeyExtractorFactory`` (Spark 4.3), per operator and store:

===============================  ==============================================================
operator (metadata name)         partition key of a state key row
===============================  ==============================================================
stateStoreSave, dedupe,          the whole key (``NoopStatePartitionKeyExtractor``)
dedupeWithinWatermark,
flatMapGroupsWithState,
applyInPandasWithState
sessionWindowStateStoreSaveExec  the key without its last field, the session
                                 (``DropLastNFieldsStatePartitionKeyExtractor``, 1)
symmetricHashJoin                ``*-keyToNumValues``: the whole key; ``*-keyWithIndexToValue``:
                                 without the last field, the index; join state format 4's
                                 ``*-keyWithTsToValues``/``*-tsWithKey``: the whole key, event
                                 time included (the compiled 4.3 code; apache/spark's source
                                 once said "TODO"): see :func:`shuffle_mismatch`
transformWithState*              ValueState, ListState: the whole key; MapState and the timers
                                 (``*_keyToTimestamp``): field 0, the grouping key struct
anything else                    refused: ``STATE_REPARTITION_INVALID_CHECKPOINT
                                 .UNSUPPORTED_STATEFUL_OPERATOR``; an operator without a state
                                 schema file (``globalLimit``) fails before, when Spark's
                                 reader reads it: ``STDS_FAILED_TO_READ_STATE_SCHEMA``
===============================  ==============================================================

Hashing one struct column is hashing its fields in turn from seed 42, which is what the
query's own shuffle does with its key columns: a key lands where
:func:`stateglass.parsers.partitioning.row_partition` says. The HDFS provider is refused
before any of this (``STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER``, found by
running it).

Example::

    rule = partition_key_rule("symmetricHashJoin", "left-keyWithIndexToValue", None)
    assert rule == DROP_LAST
"""

from __future__ import annotations

from typing import Any

from stateglass.parsers.sparktypes import StructType
from stateglass.parsers.state_rows import LIST_STATE, MAP_STATE, TIMER_STATE, VALUE_STATE

WHOLE_KEY = "whole key"
DROP_LAST = "key without its last field"
FIRST_FIELD = "key's first field (the grouping key)"

_WHOLE_KEY_OPERATORS = frozenset(
    {
        "stateStoreSave",
        "dedupe",
        "dedupeWithinWatermark",
        "flatMapGroupsWithState",
        "applyInPandasWithState",
    }
)
TWS_OPERATORS = frozenset(
    {"transformWithStateExec", "transformWithStateInPandasExec", "transformWithStateInPySparkExec"}
)
# Operators whose state has no schema file: Spark's reader fails on them first.
NO_SCHEMA_FILE_OPERATORS = frozenset({"globalLimit"})
HDFS_PROVIDER_CLASS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


class Refused(Exception):
    """Spark refuses to repartition this store: ``str()`` is Spark's reason."""


def unsupported_provider() -> str:
    """Spark's message for an HDFS-provider checkpoint."""
    return (
        "Spark refuses to repartition it: [STATE_REPARTITION_INVALID_CHECKPOINT."
        f"UNSUPPORTED_PROVIDER] {HDFS_PROVIDER_CLASS} is not supported "
        "(only the RocksDB state store provider can be repartitioned)"
    )


def partition_key_rule(operator_name: str, store_name: str, state_kind: str | None) -> str:
    """How Spark takes the partition key from a key row of this store (one of the constants
    above); raises :class:`Refused` with Spark's reason when it cannot be repartitioned.

    ``store_name`` is the store or, for stores of column families, the column family;
    ``state_kind`` the transformWithState variable kind (None elsewhere).
    """
    if operator_name in _WHOLE_KEY_OPERATORS:
        return WHOLE_KEY
    if operator_name == "sessionWindowStateStoreSaveExec":
        return DROP_LAST
    if operator_name == "symmetricHashJoin":
        if store_name.endswith("keyToNumValues"):
            return WHOLE_KEY
        if store_name.endswith("keyWithIndexToValue"):
            return DROP_LAST
        if store_name.endswith(("keyWithTsToValues", "tsWithKey")):
            return WHOLE_KEY
        raise Refused(f"IllegalArgumentException: Unsupported join store name: {store_name}")
    if operator_name in TWS_OPERATORS:
        if state_kind in (VALUE_STATE, LIST_STATE):
            return WHOLE_KEY
        if state_kind in (MAP_STATE, TIMER_STATE):
            return FIRST_FIELD
        raise Refused(
            "[STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_TRANSFORM_WITH_STATE_VARIABLE_TYPE]"
            f" Unsupported transformWithState variable type {state_kind} ({store_name})"
        )
    if operator_name in NO_SCHEMA_FILE_OPERATORS:
        raise Refused(no_schema(operator_name))
    raise Refused(
        "[STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_STATEFUL_OPERATOR] Unsupported "
        f"stateful operator {operator_name}. Please use a checkpoint with supported stateful "
        "operators."
    )


def shuffle_mismatch(operator_name: str, store_name: str) -> str | None:
    """Why keys of this store would not sit where the query's shuffle sends their rows after
    Spark's repartition, or None when they would.

    Join state format 4 keys are ``(join key…, event time)`` and Spark 4.3 hashes all of it,
    while the join's shuffle hashes the join key alone: measured on a real repartition (5
    partitions), Spark's reader finds the rows where the whole-key hash says, not where the
    join key's does.
    """
    if operator_name == "symmetricHashJoin" and store_name.endswith(
        ("keyWithTsToValues", "tsWithKey")
    ):
        return (
            "Spark 4.3 hashes the join key and the event time together here (join state "
            "format 4), while the query's shuffle sends rows by the join key alone: after the "
            "repartition, one join key's buffered rows lie in several partitions, most of them "
            "not the one its new rows go to"
        )
    return None


def no_schema(operator_name: str) -> str:
    """Spark's reason for an operator whose state has no schema file (``globalLimit``)."""
    return (
        "[STDS_FAILED_TO_READ_STATE_SCHEMA] Failed to read the state schema "
        f"({operator_name} writes no state schema file; Spark's repartition reads every "
        "store with the state reader, which needs one)"
    )


# transformWithState's internal column families, by name prefix: where the grouping key sits
# in their keys (Spark's TransformWithStatePartitionKeyExtractorFactory).
_TIMER_FAMILIES = ("$eventTimers_", "$procTimers_")
_GROUPING_KEY_FAMILIES = ("$rowCounter_", "$min_", "$count_")
TTL_FAMILY = "$ttl_"


def column_family_key_path(column_family: str, kinds: dict[str, str]) -> tuple[int, ...]:
    """Where the grouping key sits in a key of a transformWithState column family: the
    fields to descend into, ``()`` for the whole key. ``kinds`` maps each state variable to
    its type. Timers: ``(key, ts)`` and ``(ts, key)``; TTL indexes: ``(expirationMs,
    elementKey)``, a map's element key being ``(key, userKey)``; map state ``(key,
    userKey)``; value and list state, their row counters and list TTL's min and count
    indexes: the grouping key itself."""
    if column_family.startswith(_TIMER_FAMILIES):
        return (1,) if column_family.endswith("_timestampToKey") else (0,)
    if column_family.startswith(TTL_FAMILY):
        return (1, 0) if kinds.get(column_family[len(TTL_FAMILY) :]) == MAP_STATE else (1,)
    if column_family.startswith(_GROUPING_KEY_FAMILIES):
        return ()
    kind = kinds.get(column_family)
    if kind in (VALUE_STATE, LIST_STATE):
        return ()
    if kind == MAP_STATE:
        return (0,)
    raise Refused(f"column family {column_family!r}: not a transformWithState state variable")


def key_at(
    path: tuple[int, ...], key_schema: StructType, key: tuple[Any, ...]
) -> tuple[StructType, tuple[Any, ...]]:
    """The struct at ``path`` (field indexes) of a decoded key row: (schema, values)."""
    schema, values = key_schema, key
    for index in path:
        inner = schema.fields[index].data_type
        if not isinstance(inner, StructType):
            raise Refused(f"key field {index} is {inner.simple_string()}, not a struct")
        schema, values = inner, tuple(values[index])
    return schema, values


def partition_key(
    rule: str, key_schema: StructType, key: tuple[Any, ...]
) -> tuple[StructType, tuple[Any, ...]]:
    """The partition key (schema, values) of a decoded key row under ``rule``."""
    if rule == WHOLE_KEY:
        return key_schema, key
    if rule == DROP_LAST:
        return StructType(key_schema.fields[:-1]), key[:-1]
    return key_at((0,), key_schema, key)
