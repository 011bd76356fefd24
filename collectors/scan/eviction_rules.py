"""Which keys of a store Spark evicts by event time, and by which predicate (pure).

One :class:`EvictionRule` per store (or per transformWithState timer column family), derived
from the operator name and the state schema, whose JSON keeps Spark's
``spark.watermarkDelayMs`` metadata on the event-time column. The predicates are Spark's own
(``docs/eviction.md`` points at the sources); ``wm`` is ``batchWatermarkMs`` of the batch
that wrote the version (Spark's ``eventTimeWatermarkForEviction``):

=========================== =============================== =====================================
operator                    field                           evicted when
=========================== =============================== =====================================
stateStoreSave              key: watermarked column, or     ``col <= wm * 1000``, ``window.end
                            ``window.end`` of a window      <= wm * 1000`` (micros)
sessionWindow…SaveExec      value: ``session_window.end``   ``end <= wm * 1000``
dedupe                      key: watermarked column         ``col <= wm * 1000``
dedupeWithinWatermark       value: ``expiresAtMicros``      ``expiresAt <= wm * 1000``
symmetricHashJoin           key: a join key of the          ``col <= wm * 1000``
                            watermarked column              (the value case needs the join's time
                                                            bound, which no file records)
flatMapGroupsWithState,     value: ``timeoutTimestamp``     ``ts != -1 and ts < wm`` (millis)
applyInPandasWithState
transformWithState          timers: expiry timestamp        ``ts < wm`` (millis)
=========================== =============================== =====================================

Example::

    [rule] = eviction_rules(0, "stateStoreSave", "default", key_schema, value_schema, True)
    if rule.audited:
        overdue = rule.is_overdue(rule.event_time(key_row, value_row), watermark_ms)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stateglass.parsers.schema_file import ColumnFamilySchema
from stateglass.parsers.sparktypes import AtomicType, StructType

DELAY_KEY = "spark.watermarkDelayMs"
TIME_TYPES = ("timestamp", "timestamp_ntz")
# transformWithState's event-time timers (TimerStateUtils), read as Spark's readRegisteredTimers.
EVENT_TIMERS = "$eventTimers_keyToTimestamp"
JOIN_VALUE_STORES = ("left-keyWithIndexToValue", "right-keyWithIndexToValue")
# The column families holding a join side's input rows in join state formats 3 and 4.
JOIN_ROW_FAMILIES = ("keyWithIndexToValue", "keyWithTsToValues")

# Kinds of rule.
WINDOW = "window"  # aggregation keyed by a window (or a watermarked column)
SESSION = "session_window"
DEDUP = "dedup"
DEDUP_WITHIN = "dedup_within_watermark"
JOIN_KEY = "join_key"
JOIN_VALUE = "join_value"
TIMEOUT = "event_time_timeout"
TIMERS = "event_time_timers"
NEVER = "never_evicted"
NOT_AUDITED = "not_audited"


@dataclass(frozen=True)
class EvictionRule:
    """How Spark evicts one store's keys by event time; ``kind`` NEVER names cause and fix."""

    operator_id: int
    store_name: str
    operator_name: str
    kind: str
    # Where the event time is: "key" or "value" row, and the field path (struct nesting).
    side: str = "key"
    path: tuple[int, ...] = ()
    # "us": micros compared with wm * 1000, ``<=``; "ms": millis compared with wm, ``<``.
    unit: str = "us"
    field: str = ""
    state_var: str | None = None
    cause: str | None = None
    fix: str | None = None

    @property
    def audited(self) -> bool:
        """Whether overdue keys can be counted (the predicate is known from the files)."""
        return self.kind not in (NEVER, NOT_AUDITED, JOIN_VALUE)

    @property
    def predicate(self) -> str:
        """Spark's predicate as text, for pages and reports."""
        if self.kind == NEVER:
            return "never evicted"
        if self.kind == NOT_AUDITED:
            return "not audited"
        if self.kind == JOIN_VALUE:
            return f"{self.field} <= state watermark (watermark minus the join's time bound)"
        if self.kind == TIMEOUT:
            return f"{self.field} != -1 and {self.field} < watermark (ms)"
        if self.kind == TIMERS:
            return "timer expiry < watermark (ms)"
        return f"{self.field} <= watermark"

    def event_time(self, key: Any, value: Any) -> int | None:
        """The event time (raw: micros or millis per :attr:`unit`) of one decoded row."""
        node: Any = key if self.side == "key" else value
        for index in self.path:
            # A row shorter than the schema said (another column family, a null struct) has
            # no event time rather than stopping the scan.
            if not isinstance(node, tuple | list) or index >= len(node):
                return None
            node = node[index]
        return node if isinstance(node, int) and not isinstance(node, bool) else None

    def is_overdue(self, ts: int | None, watermark_ms: int | None) -> bool:
        """Spark's eviction predicate at the watermark of the batch that wrote the version."""
        if ts is None or watermark_ms is None:
            return False
        if self.unit == "ms":
            if self.kind == TIMEOUT and ts == -1:
                return False
            return ts < watermark_ms
        return ts <= watermark_ms * 1000


def _watermarked(schema: StructType | None) -> int | None:
    """Index of the field carrying Spark's watermark delay metadata (Spark takes the first)."""
    if schema is None:
        return None
    for i, f in enumerate(schema.fields):
        if DELAY_KEY in f.metadata:
            return i
    return None


def _time_path(schema: StructType, index: int) -> tuple[tuple[int, ...], str] | None:
    """A timestamp column itself, or ``end`` (field 1) of a window struct (Spark: GetStructField
    1 when the watermark attribute is a struct)."""
    f = schema.fields[index]
    if isinstance(f.data_type, AtomicType) and f.data_type.name in TIME_TYPES:
        return (index,), f.name
    if isinstance(f.data_type, StructType) and len(f.data_type.fields) >= 2:
        return (index, 1), f"{f.name}.{f.data_type.fields[1].name}"
    return None


def _is_time(f: Any) -> bool:
    return isinstance(f.data_type, AtomicType) and f.data_type.name in TIME_TYPES


def _base(name: str) -> str:
    return name.split(" (", 1)[0]


@dataclass(frozen=True)
class _Store:
    """What the rule of one store is derived from."""

    operator_id: int
    operator_name: str
    store_name: str
    key_schema: StructType | None
    value_schema: StructType | None
    has_watermark: bool
    time_mode: str | None
    state_var_names: Sequence[str]
    join_row_schema: StructType | None
    column_families: Sequence[ColumnFamilySchema]

    def rule(self, kind: str, **kw: Any) -> EvictionRule:
        return EvictionRule(self.operator_id, self.store_name, self.operator_name, kind, **kw)

    def never(self, cause: str, fix: str) -> EvictionRule:
        return self.rule(NEVER, cause=cause, fix=fix)

    def never_evicted(
        self, with_watermark: tuple[str, str], without: tuple[str, str]
    ) -> list[EvictionRule]:
        """A store Spark never evicts: the (cause, fix) that fits whether a watermark ran."""
        return [self.never(*(with_watermark if self.has_watermark else without))]


def eviction_rules(
    operator_id: int,
    operator_name: str,
    store_name: str,
    key_schema: StructType | None,
    value_schema: StructType | None,
    has_watermark: bool,
    time_mode: str | None = None,
    state_var_names: Sequence[str] = (),
    join_row_schema: StructType | None = None,
    column_families: Sequence[ColumnFamilySchema] = (),
) -> list[EvictionRule]:
    """The rule(s) of one store; ``has_watermark``: some batch ran with a watermark > 0.

    ``join_row_schema``: for a join store, the value schema of its side's
    ``keyWithIndexToValue`` (the input row; ``keyToNumValues`` holds only a count).
    ``column_families``: the schemas of a store kept in column families (join state
    formats 3 and 4 keep both sides in one store)."""
    store = _Store(
        operator_id,
        operator_name,
        store_name,
        key_schema,
        value_schema,
        has_watermark,
        time_mode,
        state_var_names,
        join_row_schema,
        column_families,
    )
    name = _base(operator_name)
    derive = _RULES.get(name)
    if derive is None and name.startswith("transformWithState"):
        derive = _timer_rules
    if derive is None:
        return [
            store.rule(NOT_AUDITED, cause=f"operator {operator_name} does not evict by event time")
        ]
    return derive(store)


def _aggregation_rules(store: _Store) -> list[EvictionRule]:
    key_schema = store.key_schema
    at = _watermarked(key_schema)
    found = _time_path(key_schema, at) if key_schema is not None and at is not None else None
    if found:
        return [store.rule(WINDOW, path=found[0], field=found[1])]
    return store.never_evicted(
        (
            "the query has a watermark, but the grouping key holds no watermarked "
            "column: Spark evicts aggregation state only by a key column",
            "group by window(<event-time column>, ...) or by the watermarked column "
            "itself, e.g. groupBy(window('ts', '10 minutes'), ...)",
        ),
        (
            "no watermark: an aggregation keeps every group forever",
            "add withWatermark('<event-time column>', '<delay>') and group by a window "
            "of that column",
        ),
    )


def _session_rules(store: _Store) -> list[EvictionRule]:
    value_schema = store.value_schema
    if value_schema is None:
        return [store.rule(NOT_AUDITED, cause="the session window's state schema was not read")]
    at = _watermarked(value_schema)
    if at is None:
        # Spark closes a session only when the watermark passes its end, and only in append
        # mode, which needs the watermark on the session window's column. Without it Spark
        # allows only complete mode (update is refused for session windows), and complete
        # mode never evicts: every session stays in the state.
        return store.never_evicted(
            (
                "the query has a watermark, but not on the column of session_window(...): "
                "no session ever closes, and complete output mode keeps every one",
                "put withWatermark('<event-time column>', '<delay>') on the column of "
                "session_window(...) and write in append mode",
            ),
            (
                "no watermark: a session window keeps every session forever (Spark then "
                "allows only complete output mode, which never evicts)",
                "add withWatermark('<event-time column>', '<delay>') on the column of "
                "session_window(...) and write in append mode",
            ),
        )
    found = _time_path(value_schema, at)
    if found:
        return [store.rule(SESSION, side="value", path=found[0], field=found[1])]
    return [store.rule(NOT_AUDITED, cause="no session window in the value schema")]


def _dedup_rules(store: _Store) -> list[EvictionRule]:
    key_schema = store.key_schema
    at = _watermarked(key_schema)
    if key_schema is not None and at is not None and _is_time(key_schema.fields[at]):
        return [store.rule(DEDUP, path=(at,), field=key_schema.fields[at].name)]
    return store.never_evicted(
        (
            "the query has a watermark, but the event-time column is not among the "
            "dropDuplicates columns: Spark evicts dedup state only by a key column",
            "add the event-time column to dropDuplicates(...), or use "
            "dropDuplicatesWithinWatermark(...)",
        ),
        (
            "no watermark: dropDuplicates keeps every key it has seen forever",
            "add withWatermark('<event-time column>', '<delay>') and include that column "
            "in dropDuplicates(...), or use dropDuplicatesWithinWatermark(...)",
        ),
    )


def _dedup_within_rules(store: _Store) -> list[EvictionRule]:
    return [store.rule(DEDUP_WITHIN, side="value", path=(0,), field="expiresAtMicros")]


def _join_rules(store: _Store) -> list[EvictionRule]:
    if store.key_schema is None and store.value_schema is None:
        return [_join_family_rule(store)]
    rows = store.join_row_schema if store.join_row_schema is not None else store.value_schema
    return [_join_rule(store, rows)]


def _join_family_rule(store: _Store) -> EvictionRule:
    """Join state formats 3 and 4, whose stores are column families of one: their values are
    not audited, but a side whose input rows hold no watermarked column is never evicted."""
    rows = {
        cf.name.split("-", 1)[0]: cf.value_schema
        for cf in store.column_families
        if cf.name.split("-", 1)[-1] in JOIN_ROW_FAMILIES
    }
    unwatermarked = [side for side, schema in rows.items() if _watermarked(schema) is None]
    if unwatermarked:
        return _join_never(store, " and ".join(unwatermarked))
    return store.rule(
        NOT_AUDITED, cause="join state in column families (state format 3 or 4) is not audited"
    )


def _join_never(store: _Store, side: str) -> EvictionRule:
    """A join side (or both) whose input has no watermark: Spark never evicts its rows."""
    if store.has_watermark:
        return store.never(
            f"the {side} input has no watermark: its join state is never evicted",
            f"add withWatermark(...) on the {side} input and a time-range condition "
            "on both event times to the join",
        )
    return store.never(
        "no watermark: a stream-stream join keeps every row of both sides forever",
        "add withWatermark(...) on both inputs and a time-range condition on their "
        "event times (e.g. l.ts BETWEEN r.ts - INTERVAL 10 MINUTES AND r.ts)",
    )


def _timeout_rules(store: _Store) -> list[EvictionRule]:
    value_schema = store.value_schema
    if value_schema is not None and "timeoutTimestamp" in value_schema.names:
        at = value_schema.names.index("timeoutTimestamp")
        if store.has_watermark:
            return [
                store.rule(TIMEOUT, side="value", path=(at,), unit="ms", field="timeoutTimestamp")
            ]
    return [
        store.rule(
            NOT_AUDITED,
            cause="state is removed by the user's function (no event-time timeout audited: "
            "processing-time or no timeout, or no watermark)",
        )
    ]


def _timer_rules(store: _Store) -> list[EvictionRule]:
    if store.time_mode == "EventTime" and EVENT_TIMERS in store.state_var_names:
        return [
            store.rule(
                TIMERS, path=(1,), unit="ms", field="expiryTimestampMs", state_var=EVENT_TIMERS
            )
        ]
    return [
        store.rule(
            NOT_AUDITED,
            cause=f"time mode {store.time_mode or 'None'}: no event-time timers to audit "
            "(state is removed by the processor or its TTL)",
        )
    ]


# Operator name (as the state metadata writes it) -> how its stores are evicted.
_RULES: dict[str, Callable[[_Store], list[EvictionRule]]] = {
    "stateStoreSave": _aggregation_rules,
    "sessionWindowStateStoreSaveExec": _session_rules,
    "dedupe": _dedup_rules,
    "dedupeWithinWatermark": _dedup_within_rules,
    "symmetricHashJoin": _join_rules,
    "flatMapGroupsWithState": _timeout_rules,
    "applyInPandasWithState": _timeout_rules,
}


def _join_rule(store: _Store, value_schema: StructType | None) -> EvictionRule:
    """One side of a stream-stream join (``getOneSideStateWatermarkPredicate``).

    Join keys are stored as ``field0..`` without metadata; a key of the watermarked column's
    type is taken as the watermarked join key (Spark's case 1: a key predicate).
    """
    store_name, key_schema = store.store_name, store.key_schema
    at = _watermarked(value_schema)
    side = store_name.split("-", 1)[0]
    if at is None or value_schema is None:
        return _join_never(store, side)
    wm_field = value_schema.fields[at]
    if key_schema is not None:
        for i, f in enumerate(key_schema.fields):
            if f.data_type == wm_field.data_type and (
                _is_time(f) or isinstance(f.data_type, StructType)
            ):
                found = _time_path(key_schema, i)
                if found:
                    return store.rule(JOIN_KEY, path=found[0], field=f"key {found[1]}")
    if store_name in JOIN_VALUE_STORES:
        found = _time_path(value_schema, at)
        if found:
            return store.rule(JOIN_VALUE, side="value", path=found[0], field=found[1])
    return store.rule(JOIN_VALUE, side="value", field=wm_field.name)
