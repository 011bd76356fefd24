"""Predict what Spark does when a changed query restarts on an old checkpoint (pure).

``predict(old, new)`` replays, in Spark's order, the checks a restart makes (Spark 4.x):

1. ``OffsetSeqMetadata.setSessionConf`` (checkpointing/OffsetSeq.scala): every conf in the
   offset log's ``conf`` map is pinned; the restart silently keeps OLD's value. Never a refusal,
   but a NEW run under another state format saw other schemas (a caveat).
2. ``IncrementalExecution.state.checkOperatorValidWithMetadata``: on a restart (first batch of
   the run, batch id > 0) with operator metadata in OLD, the map operator id -> short name must
   be the same in OLD's metadata and in the new plan, else
   ``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``.
3. ``StateStoreWriter.validateAndMaybeEvolveStateSchema`` for each operator and store:
   ``StateSchemaCompatibilityChecker.check`` per column family (key, then value; the value is
   ignored for ``dedupe``; transformWithState with ``encodingFormat=avro`` may evolve values
   under Avro's reader rules), then for transformWithState
   ``TransformWithStateOperatorProperties.validateOperatorProperties``.

Spark 3.x (NEW without operator metadata) has no step 2 and one error for steps 3:
``StateSchemaNotCompatible``, an exception without an error class.

Example::

    verdict = predict(read_facts(old_cp), read_facts(new_cp))
    print(verdict.restarts, verdict.error_class)
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from stateglass.app.analysis.compat.facts import CheckpointFacts, OperatorFacts, StoreFacts
from stateglass.app.analysis.compat.types import (
    avro_can_read,
    avro_differences,
    compatible,
    differences,
    same,
)
from stateglass.collectors.checkpoints.checkpoint import INFERRED, TWS_OPERATORS
from stateglass.parsers.logs import CONF_SHUFFLE_PARTITIONS
from stateglass.parsers.schema_file import ColumnFamilySchema

SAME = "same"
COMPATIBLE = "compatible"
NEW = "new"
NOTE = "note"
CAVEAT = "caveat"
REFUSE = "refuse"

OPERATORS_MISMATCH = "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"
KEY_NOT_COMPATIBLE = "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
VALUE_NOT_COMPATIBLE = "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
INVALID_VALUE_EVOLUTION = "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION"
VALUE_EVOLUTION_THRESHOLD = "STATE_STORE_VALUE_SCHEMA_EVOLUTION_THRESHOLD_EXCEEDED"
SCHEMA_FILES_THRESHOLD = "STATE_STORE_STATE_SCHEMA_FILES_THRESHOLD_EXCEEDED"
CONFIG_AFTER_RESTART = "STATE_STORE_INVALID_CONFIG_AFTER_RESTART"
VARIABLE_TYPE_CHANGE = "STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE"
SPARK3_SCHEMA = "StateSchemaNotCompatible"  # Spark 3.x: an exception class, no error class
# PartitioningAwareFileIndex's "Wrong basePath": no error class, the JVM exception's class.
FILE_SOURCE_MOVED = "java.lang.IllegalArgumentException"

# Internal SQL confs' defaults (SQLConf: valueStateSchemaEvolutionThreshold,
# maxNumStateSchemaFiles); a restart may override them, a checkpoint does not record them.
VALUE_EVOLUTION_LIMIT = 16
SCHEMA_FILES_LIMIT = 128

CONF_ENCODING_FORMAT = "spark.sql.streaming.stateStore.encodingFormat"
CONF_ALWAYS_NULLABLE = "spark.sql.streaming.statefulOperator.alwaysNullableOutput.enabled"
CONF_DEDUP_KEY_ORDER = "spark.sql.dropDuplicates.deterministicKeyOrder.enabled"
# OffsetSeqMetadata.relevantSQLConfDefaultValues of Spark 4.3 (read from the bytecode of
# spark-sql_2.13-4.3.0.jar): what a restart assumes for a pinned conf OLD's log lacks (OLD was
# written by an older Spark). A conf missing from both lists keeps the session's value.
PINNED_DEFAULTS = {
    "spark.sql.streaming.multipleWatermarkPolicy": "min",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "1",
    "spark.sql.streaming.aggregation.stateFormatVersion": "1",
    "spark.sql.streaming.join.stateFormatVersion": "1",
    "spark.sql.streaming.stateStore.compression.codec": "lz4",
    "spark.sql.streaming.statefulOperator.useStrictDistribution": "false",
    "spark.sql.optimizer.pruneFiltersCanPruneStreamingSubplan": "true",
    CONF_ENCODING_FORMAT: "unsaferow",
    "spark.sql.streaming.stateStore.rowChecksum.enabled": "false",
    "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion": "1",
    "spark.sql.function.protobufExtensions.enabled": "false",
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": "false",
    CONF_ALWAYS_NULLABLE: "false",
    CONF_DEDUP_KEY_ORDER: "false",
}
# Pinned confs that decide the shape of state: NEW's schemas were computed under NEW's value.
FORMAT_CONFS = frozenset(
    {
        "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion",
        "spark.sql.streaming.aggregation.stateFormatVersion",
        "spark.sql.streaming.join.stateFormatVersion",
        CONF_ENCODING_FORMAT,
        CONF_ALWAYS_NULLABLE,
        CONF_DEDUP_KEY_ORDER,
    }
)

SRC_CHECKER = "StateSchemaCompatibilityChecker.check (state/StateSchemaCompatibilityChecker.scala)"
SRC_OPERATORS = "IncrementalExecution.checkOperatorValidWithMetadata"
SRC_CONF = "OffsetSeqMetadata.setSessionConf (checkpointing/OffsetSeq.scala)"
SRC_TWS = "TransformWithStateOperatorProperties.validateOperatorProperties"
SRC_FILES = "PartitioningAwareFileIndex.basePaths (datasources/PartitioningAwareFileIndex.scala)"


@dataclass(frozen=True)
class Check:
    """One thing compared: its outcome, and Spark's error class when Spark refuses."""

    status: str
    subject: str
    message: str
    error_class: str | None = None
    details: tuple[str, ...] = ()
    source: str = ""
    operator_id: int | None = None
    store: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "subject": self.subject,
            "message": self.message,
            "error_class": self.error_class,
            "details": list(self.details),
            "spark_source": self.source,
            "operator_id": self.operator_id,
            "store": self.store,
        }


@dataclass(frozen=True)
class Verdict:
    """The prediction: the first refusal is what Spark raises (it stops there)."""

    spark_rules: str
    checks: tuple[Check, ...] = field(default=())

    @property
    def refusals(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == REFUSE)

    @property
    def restarts(self) -> bool:
        return not self.refusals

    @property
    def error_class(self) -> str | None:
        return self.refusals[0].error_class if self.refusals else None


def spark_rules_of(new: CheckpointFacts) -> str:
    """The rule set of the Spark that wrote NEW: operator metadata exists from Spark 4.0 on."""
    if new.has_operator_metadata:
        return "4.x"
    if new.operators:
        return "3.x"
    # A stateless NEW says nothing through operators; Spark 4.0 added encodingFormat to the
    # pinned confs.
    if new.conf and CONF_ENCODING_FORMAT not in new.conf:
        return "3.x"
    return "4.x"


def predict(old: CheckpointFacts, new: CheckpointFacts) -> Verdict:
    """What Spark (the rules of the version that wrote ``new``) does on the restart."""
    rules = spark_rules_of(new)
    checks: list[Check] = []
    checks += _pinned_confs(old, new)
    checks += _file_sources(old, new)
    if rules == "4.x":
        checks += _operator_map(old, new)
    for op in new.operators:
        checks += _operator(op, old.operator(op.operator_id), old, rules)
    for op in old.operators:
        if new.operator(op.operator_id) is None and rules == "3.x":
            checks.append(
                Check(
                    NOTE,
                    f"operator {op.operator_id} {op.name}",
                    "not in the new query: Spark 3.x leaves its state unused",
                    operator_id=op.operator_id,
                )
            )
    return Verdict(rules, tuple(checks))


# ---- 1. pinned confs ------------------------------------------------------------------------


def _pinned(conf: Mapping[str, str], key: str) -> str | None:
    return conf.get(key, PINNED_DEFAULTS.get(key))


def _pinned_confs(old: CheckpointFacts, new: CheckpointFacts) -> list[Check]:
    out = []
    for key in sorted(set(old.conf) | set(new.conf)):
        now = _pinned(new.conf, key)
        # Missing from OLD and without a default: the restart's session value stays (NEW's).
        was = _pinned(old.conf, key) or now
        if was == now:
            continue
        detail = f"{key}: OLD {was!r}, NEW ran with {now!r}; the restart uses {was!r}"
        if key == CONF_SHUFFLE_PARTITIONS:
            detail += " (stateful operators keep OLD's partitions)"
        out.append(
            Check(NOTE, "pinned conf", "restored from OLD's offset log", None, (detail,), SRC_CONF)
        )
        if key in FORMAT_CONFS and new.operators:
            out.append(
                Check(
                    CAVEAT,
                    "pinned conf",
                    f"NEW's state schemas were made under {key}={now}, the restart uses {was}: "
                    f"rerun NEW with {key}={was} for an exact prediction",
                    source=SRC_CONF,
                )
            )
    return out


# ---- file sources ---------------------------------------------------------------------------


def _local(path: str) -> str:
    return urlsplit(path).path if "://" in path or path.startswith("file:") else path


def _file_sources(old: CheckpointFacts, new: CheckpointFacts) -> list[Check]:
    """A restart lists OLD's newest batch again under the source path of the new query: a file
    outside it fails the restart (before any state is read)."""
    out = []
    by_id = {s.source_id: s for s in new.file_sources}
    for was in old.file_sources:
        now = by_id.get(was.source_id)
        if now is None:
            continue
        root = posixpath.commonpath([posixpath.dirname(_local(f)) for f in now.files])
        outside = [f for f in was.files if not _local(f).startswith(root.rstrip("/") + "/")]
        subject = f"file source {was.source_id}"
        if outside:
            out.append(
                Check(
                    REFUSE,
                    subject,
                    f"the input path changed: OLD's batch {was.batch_id} read files outside "
                    f"{root}, which the new query reads",
                    FILE_SOURCE_MOVED,
                    tuple(f"Wrong basePath {root} for the root path: {f}" for f in outside[:3]),
                    SRC_FILES,
                )
            )
        else:
            out.append(
                Check(SAME, subject, f"OLD's newest files are under {root}", source=SRC_FILES)
            )
    return out


# ---- 2. operators ----------------------------------------------------------------------------


def _name(op: OperatorFacts) -> str:
    return op.name.removesuffix(INFERRED)


def _operator_map(old: CheckpointFacts, new: CheckpointFacts) -> list[Check]:
    if old.last_committed_batch is None:
        # The restart re-plans batch 0: `isFirstBatch && currentBatchId != 0` is false.
        return []
    in_metadata = {o.operator_id: o.name for o in old.operators if o.metadata_version is not None}
    if not in_metadata:
        return [
            Check(
                NOTE,
                "stateful operators",
                "OLD has no operator metadata (written by Spark 3.x): Spark skips this check",
                source=SRC_OPERATORS,
            )
        ]
    in_plan = {o.operator_id: _name(o) for o in new.operators}
    ids = sorted(set(in_metadata) | set(in_plan))
    diff = tuple(
        f"operator {i}: {in_metadata.get(i, 'not found')} in OLD, "
        f"{in_plan.get(i, 'not found')} in the new query"
        for i in ids
        if in_metadata.get(i, "not found") != in_plan.get(i, "not found")
    )
    summary = (
        f"{len(in_metadata)} in OLD ({_names(in_metadata)}), {len(in_plan)} new ({_names(in_plan)})"
    )
    if diff:
        return [
            Check(
                REFUSE,
                "stateful operators",
                f"the stateful operators changed: {summary}",
                OPERATORS_MISMATCH,
                diff,
                SRC_OPERATORS,
            )
        ]
    return [Check(SAME, "stateful operators", summary, source=SRC_OPERATORS)]


def _names(ops: Mapping[int, str]) -> str:
    return ", ".join(f"{i}:{n}" for i, n in sorted(ops.items())) or "none"


# ---- 3. stores -------------------------------------------------------------------------------


def _operator(
    new_op: OperatorFacts, old_op: OperatorFacts | None, old: CheckpointFacts, rules: str
) -> list[Check]:
    subject = f"operator {new_op.operator_id} {_name(new_op)}"
    if old_op is None:
        return [
            Check(
                NEW,
                subject,
                "no state in OLD: Spark creates it",
                operator_id=new_op.operator_id,
            )
        ]
    out: list[Check] = []
    is_tws = _name(new_op) in TWS_OPERATORS
    evolve = is_tws and _pinned(old.conf, CONF_ENCODING_FORMAT) == "avro"
    ignore_value = _name(new_op) == "dedupe"
    for store in new_op.stores:
        old_store = old_op.store(store.name)
        where = f"{subject} store {store.name}"
        if old_store is None or old_store.current is None:
            out.append(
                Check(
                    NEW,
                    where,
                    "no schema in OLD: Spark writes one",
                    operator_id=new_op.operator_id,
                    store=store.name,
                )
            )
            continue
        out += _store(store, old_store, where, new_op.operator_id, rules, ignore_value, evolve)
    if is_tws and rules == "4.x":
        out += _tws_properties(old_op, new_op, subject)
    return out


def _store(
    new: StoreFacts,
    old: StoreFacts,
    where: str,
    op_id: int,
    rules: str,
    ignore_value: bool,
    evolve: bool,
) -> list[Check]:
    assert new.current is not None and old.current is not None
    history: dict[str, list[ColumnFamilySchema]] = {}
    for version in old.schemas:
        for cf in version.families:
            history.setdefault(cf.name, []).append(cf)
    out: list[Check] = []
    several = len(new.current.families) > 1 or old.current.format_version >= 3
    for cf in sorted(new.current.families, key=lambda c: c.name):
        subject = f"{where} column family {cf.name}" if several else where
        olds = history.get(cf.name)
        if not olds:
            out.append(Check(NEW, subject, "new column family", operator_id=op_id, store=new.name))
            continue
        out.append(_family(cf, olds, subject, op_id, new.name, rules, ignore_value, evolve))
    added = {c.name for c in new.current.families} - {c.name for c in old.current.families}
    removed = {c.name for c in old.current.families} - {c.name for c in new.current.families}
    if (added or removed) and len(old.schemas) == SCHEMA_FILES_LIMIT and rules == "4.x":
        out.append(
            Check(
                REFUSE,
                where,
                f"{len(old.schemas)} schema files already (maxNumStateSchemaFiles = "
                f"{SCHEMA_FILES_LIMIT}) and column families change",
                SCHEMA_FILES_THRESHOLD,
                (f"added {sorted(added)}", f"removed {sorted(removed)}"),
                SRC_CHECKER,
                op_id,
                new.name,
            )
        )
    return out


def _family(
    cf: ColumnFamilySchema,
    olds: list[ColumnFamilySchema],
    subject: str,
    op_id: int,
    store: str,
    rules: str,
    ignore_value: bool,
    evolve: bool,
) -> Check:
    last = olds[-1]
    key_diff = differences(cf.key_schema, last.key_schema, "key")
    value_diff = [] if ignore_value else differences(cf.value_schema, last.value_schema, "value")

    def check(
        status: str, message: str, error: str | None = None, details: Iterable[str] = ()
    ) -> Check:
        return Check(status, subject, message, error, tuple(details), SRC_CHECKER, op_id, store)

    key_same = same(cf.key_schema, last.key_schema)
    value_same = ignore_value or same(cf.value_schema, last.value_schema)
    if key_same and value_same:
        note = " (value not checked: dedupe)" if ignore_value else ""
        return check(SAME, f"key and value schemas unchanged{note}")
    if rules == "3.x":
        ok = compatible(cf.key_schema, last.key_schema) and (
            ignore_value or compatible(cf.value_schema, last.value_schema)
        )
        if ok:
            return check(
                COMPATIBLE, "compatible change (names and nullability)", None, key_diff + value_diff
            )
        return check(
            REFUSE, "key or value schema not compatible", SPARK3_SCHEMA, key_diff + value_diff
        )
    if not compatible(cf.key_schema, last.key_schema):
        return check(REFUSE, "key schema not compatible", KEY_NOT_COMPATIBLE, key_diff)
    if not ignore_value and evolve:
        for old in reversed(olds):
            if not avro_can_read(cf.value_schema, old.value_schema):
                return check(
                    REFUSE,
                    "value schema cannot evolve (Avro reader rules)",
                    INVALID_VALUE_EVOLUTION,
                    avro_differences(cf.value_schema, old.value_schema, "value"),
                )
        if last.value_schema_id + 1 >= VALUE_EVOLUTION_LIMIT:
            return check(
                REFUSE,
                f"value schema evolved {last.value_schema_id + 1} times "
                f"(valueStateSchemaEvolutionThreshold = {VALUE_EVOLUTION_LIMIT})",
                VALUE_EVOLUTION_THRESHOLD,
            )
        return check(
            COMPATIBLE,
            f"value schema evolves (Avro): schema id {last.value_schema_id} -> "
            f"{last.value_schema_id + 1}",
            None,
            key_diff + value_diff,
        )
    if not ignore_value and not compatible(cf.value_schema, last.value_schema):
        return check(REFUSE, "value schema not compatible", VALUE_NOT_COMPATIBLE, value_diff)
    return check(
        COMPATIBLE, "compatible change (names or nullability)", None, key_diff + value_diff
    )


def _tws_properties(old: OperatorFacts, new: OperatorFacts, subject: str) -> list[Check]:
    was, now = old.properties or {}, new.properties or {}
    if not was or not now:
        return []
    for conf in ("timeMode", "outputMode"):
        if was.get(conf) != now.get(conf):
            return [
                Check(
                    REFUSE,
                    subject,
                    f"{conf} changed",
                    CONFIG_AFTER_RESTART,
                    (f"{conf}: {was.get(conf)} -> {now.get(conf)}",),
                    SRC_TWS,
                    new.operator_id,
                )
            ]
    kinds = {
        v.get("stateName"): v.get("stateVariableType")
        for v in now.get("stateVariables") or ()
        if isinstance(v, dict)
    }
    for var in was.get("stateVariables") or ():
        if not isinstance(var, dict):
            continue
        name, kind = var.get("stateName"), var.get("stateVariableType")
        if name in kinds and kinds[name] != kind:
            return [
                Check(
                    REFUSE,
                    subject,
                    f"state variable {name} changed kind",
                    VARIABLE_TYPE_CHANGE,
                    (f"{name}: {kind} -> {kinds[name]}",),
                    SRC_TWS,
                    new.operator_id,
                )
            ]
    return [
        Check(
            SAME,
            subject,
            "time mode, output mode and state variable kinds unchanged",
            source=SRC_TWS,
            operator_id=new.operator_id,
        )
    ]
