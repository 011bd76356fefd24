"""What a report says, read once from the history database: numbers, tables and frames.

Every format (HTML, Markdown, PDF) renders the same :class:`ReportData`; nothing here draws.

Example::

    data = load_report("~/.stateglass/stateglass.duckdb", "/data/checkpoints/orders")
    print(data.verdict, data.numbers)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from stateglass.app import queries
from stateglass.app.errors import AppError
from stateglass.app.report.forensics import StoreForensics, load_forensics
from stateglass.app.report.schemas import VariableSchema, variable_schemas
from stateglass.parsers.units import UNKNOWN, fmt_age, fmt_bytes, fmt_ms

if TYPE_CHECKING:
    from stateglass.app.analysis.health import Finding

STATUS_ORDER = {"SKIP": -1, "OK": 0, "WARN": 1, "ERR": 2}


class FindingLike(Protocol):
    """The fields of ``stateglass.app.analysis.health.Finding`` a report shows."""

    @property
    def rule(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def finding(self) -> str: ...
    @property
    def hint(self) -> str: ...


@dataclass(frozen=True)
class StoreData:
    """One (operator, store): its row of the ``operators`` table and its history frames."""

    operator_id: int
    operator_name: str
    store_name: str
    provider: str
    num_partitions: int | None
    key_schema: str
    value_schema: str
    versions: pd.DataFrame  # queries.partition_cells: one row per (partition, version)
    growth: pd.DataFrame  # queries.state_growth
    skew: pd.DataFrame  # queries.partition_skew
    lag: pd.DataFrame  # queries.snapshot_lag
    files: pd.DataFrame  # queries.bytes_by_kind
    sst: pd.DataFrame  # queries.sst_reuse
    disk: pd.DataFrame  # queries.disk_usage
    history: dict[str, Any] = field(default_factory=dict)  # queries.store_history
    # transformWithState: rows per state variable (queries.variable_rows); empty otherwise
    variable_rows: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Growth attribution and restart cost (app/report/forensics.py).
    forensics: StoreForensics | None = None
    # Column families (transformWithState, join format 3): each state variable's columns,
    # and why they are missing when the checkpoint could not be read.
    variables: tuple[VariableSchema, ...] = ()
    variables_note: str = ""

    @property
    def label(self) -> str:
        return f"operator {self.operator_id} {self.operator_name} / {self.store_name}"

    @property
    def anchor(self) -> str:
        safe = "".join(c if c.isalnum() else "-" for c in self.store_name)
        return f"store-{self.operator_id}-{safe}"

    @property
    def version_range(self) -> tuple[int, int] | None:
        """Versions where every partition is known: the range ``stateglass info`` and the
        State page give too (partitions reaching further back are in :attr:`history_note`)."""
        first, last = self.history.get("first_complete"), self.history.get("last_complete")
        if first is None or last is None:
            return None
        return int(first), int(last)

    @property
    def history_note(self) -> str:
        return queries.history_note(self.history)

    @property
    def rows_line(self) -> str:
        """transformWithState: rows per state variable, timers and TTL entries, in one line
        (``keys_now`` are then raw RocksDB keys); empty for other stores."""
        return "" if self.variable_rows.empty else queries.rows_line(self.variable_rows)

    @property
    def keys_now(self) -> int | None:
        """Keys at each partition's newest version, summed."""
        if self.lag.empty or self.versions.empty:
            return None
        newest = self.versions.merge(
            self.lag[["partition_id", "latest_version"]],
            left_on=["partition_id", "version"],
            right_on=["partition_id", "latest_version"],
        )
        total = pd.to_numeric(newest["num_keys"], errors="coerce").sum(min_count=1)
        return None if pd.isna(total) else int(total)

    @property
    def bytes_on_disk(self) -> int:
        return int(pd.to_numeric(self.disk["bytes"], errors="coerce").fillna(0).sum())

    @property
    def files_on_disk(self) -> int:
        return int(pd.to_numeric(self.disk["files"], errors="coerce").fillna(0).sum())

    @property
    def skew_now(self) -> float | None:
        """Max / median keys across partitions at the newest version."""
        if self.skew.empty:
            return None
        value = self.skew.sort_values("version")["skew"].iloc[-1]
        return None if pd.isna(value) else float(value)

    @property
    def worst_lag(self) -> tuple[int, int, int] | None:
        """(partition, versions since snapshot, replay bytes) of the partition worst off."""
        lag = self.lag.dropna(subset=["versions_since_snapshot"])
        if lag.empty:
            return None
        row = lag.sort_values(["versions_since_snapshot", "replay_bytes"]).iloc[-1]
        replay = row["replay_bytes"]
        return (
            int(row["partition_id"]),
            int(row["versions_since_snapshot"]),
            0 if pd.isna(replay) else int(replay),
        )


@dataclass(frozen=True)
class ReportData:
    """Everything a report shows about one checkpoint."""

    db_path: str
    checkpoint: str
    query_id: str
    generated_at: datetime  # wall clock, naive UTC
    as_of: datetime  # what ages and the health rules are measured against (``now``)
    last_scan: datetime | None
    findings: tuple[FindingLike, ...]
    overview: dict[str, Any]  # the checkpoint's row of queries.checkpoint_overview
    batches: pd.DataFrame  # queries.batches
    inputs: pd.DataFrame  # queries.input_from_offsets
    stores: tuple[StoreData, ...]
    problems: pd.DataFrame  # queries.problems
    numbers: tuple[tuple[str, str], ...] = field(default=())
    # Why the checkpoint's file times are not used (they look copied), or None.
    copied: str | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.checkpoint.rstrip("/")) or self.checkpoint

    @property
    def as_of_note(self) -> str:
        """Says when ages are measured at another time than the report was made, else ""."""
        if abs((self.as_of - self.generated_at).total_seconds()) < 60:
            return ""
        return f"ages and health judged as of {self.as_of:%Y-%m-%d %H:%M:%S} UTC"

    @property
    def summary(self) -> str:
        """``1 ERR, 2 WARN, 6 OK, 5 not judged``: how many findings have each status."""
        counts = {s: sum(f.status == s for f in self.findings) for s in ("ERR", "WARN", "OK")}
        counts["not judged"] = sum(f.status == "SKIP" for f in self.findings)
        return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no checks ran"

    @property
    def verdict(self) -> str:
        """The worst status among the findings (``OK`` with none; not judged ones do not count)."""
        judged = (f.status for f in self.findings if f.status != "SKIP")
        return max(judged, key=STATUS_ORDER.__getitem__, default="OK")


# A rule that trips on 200 partitions gives 200 findings: show a few, fold the rest.
MAX_PER_RULE = 5


@dataclass(frozen=True)
class FindingGroup:
    """The findings of one rule with one status: the first few shown, the rest folded."""

    shown: tuple[FindingLike, ...]
    folded: tuple[FindingLike, ...]


def finding_groups(
    findings: Sequence[FindingLike], limit: int = MAX_PER_RULE
) -> list[FindingGroup]:
    """Findings worst first (ERR, WARN, OK), grouped by rule and status, rule order kept."""
    groups: dict[tuple[str, str], list[FindingLike]] = {}
    for f in sorted(findings, key=lambda f: -STATUS_ORDER.get(f.status, 0)):
        groups.setdefault((f.rule, f.status), []).append(f)
    return [FindingGroup(tuple(fs[:limit]), tuple(fs[limit:])) for fs in groups.values()]


def finding_scope(finding: FindingLike) -> str:
    """``operator 0 / default, partition 3`` for a finding about one store; "" for the query."""
    op = getattr(finding, "operator_id", None)
    if op is None:
        return ""
    scope = f"operator {op} / {getattr(finding, 'store_name', None) or '?'}"
    partition = getattr(finding, "partition_id", None)
    return scope + (f", partition {partition}" if partition is not None else "")


def evaluate_health(db_path: str, checkpoint: str, now: datetime | None) -> list[Finding]:
    """The health rules' findings for the checkpoint (``stateglass.app.analysis.health``)."""
    from stateglass.app.analysis.health import evaluate

    return evaluate(db_path, checkpoint, now=now)


def load_report(
    db_path: str,
    checkpoint: str,
    now: datetime | None = None,
    findings: Sequence[FindingLike] | None = None,
) -> ReportData:
    """Read everything a report needs; ``findings`` default to the health rules' verdicts.

    ``checkpoint`` is the path it was collected under (made absolute, as the collector does).
    """
    from stateglass.collectors.db.connection import existing_database
    from stateglass.collectors.remote import canonical

    checkpoint = canonical(checkpoint)
    db_path = existing_database(db_path)
    # One read-only connection for the thirty-odd queries (each open costs tens of ms).
    with queries.session(db_path):
        return _load(db_path, checkpoint, now, findings)


def _load(
    db_path: str, checkpoint: str, now: datetime | None, findings: Sequence[FindingLike] | None
) -> ReportData:
    overview = queries.checkpoint_overview(db_path)
    rows = overview[overview["checkpoint"] == checkpoint]
    if rows.empty:
        raise AppError(
            f"{checkpoint}: not in the database {db_path}; collect it first "
            "(stateglass collect CHECKPOINT --db DB)"
        )
    row = _records(rows)[0]
    if findings is None:
        findings = evaluate_health(db_path, checkpoint, now)
    batches = queries.batches(db_path, checkpoint)
    stores = tuple(
        _store(db_path, checkpoint, s) for s in _records(queries.stores(db_path, checkpoint))
    )
    generated = datetime.now(UTC).replace(tzinfo=None)
    as_of = generated if now is None else _naive_utc(now)
    data = ReportData(
        db_path=db_path,
        checkpoint=checkpoint,
        query_id=str(row.get("query_id") or "unknown"),
        generated_at=generated,
        as_of=as_of,
        last_scan=_datetime(row.get("last_scan")),
        findings=tuple(findings),
        overview=row,
        batches=batches,
        inputs=queries.input_from_offsets(batches, checkpoint),
        stores=stores,
        problems=queries.problems(db_path, checkpoint),
        copied=queries.file_times(db_path, checkpoint).note or None,
    )
    return ReportData(**{**data.__dict__, "numbers": key_numbers(data)})


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if _isna(v) else v) for k, v in r.items()} for r in frame.to_dict("records")]


def _isna(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _int(row: dict[str, Any], key: str) -> int | None:
    value = row.get(key)
    return None if value is None or _isna(value) else int(value)


def _naive_utc(moment: datetime) -> datetime:
    """The database's convention: naive datetimes in UTC."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def _datetime(value: Any) -> datetime | None:
    if value is None or _isna(value):
        return None
    return pd.Timestamp(value).to_pydatetime()


def _store(db: str, cp: str, row: dict[str, Any]) -> StoreData:
    op, store = int(row["operator_id"]), str(row["store_name"])
    provider = str(row.get("provider") or "?")
    key_schema, value_schema = row.get("key_schema"), row.get("value_schema")
    # One schema in the operators table: a plain store. None: read its column families.
    variables, note = ((), "") if key_schema else variable_schemas(cp, op, store)
    return StoreData(
        operator_id=op,
        operator_name=str(row.get("operator_name") or "?"),
        store_name=store,
        provider=provider,
        num_partitions=_int(row, "num_partitions"),
        key_schema=str(key_schema or UNKNOWN),
        value_schema=str(value_schema or UNKNOWN),
        versions=queries.partition_cells(db, cp, op, store),
        growth=queries.state_growth(db, cp, op, store),
        skew=queries.partition_skew(db, cp, op, store),
        lag=queries.snapshot_lag(db, cp, op, store),
        files=queries.bytes_by_kind(db, cp, op, store),
        sst=queries.sst_reuse(db, cp, op, store),
        disk=queries.disk_usage(db, cp, op, store),
        history=queries.store_history(db, cp, op, store),
        variable_rows=queries.variable_rows(db, cp, op, store),
        forensics=load_forensics(db, cp, op, store, provider),
        variables=variables,
        variables_note=note,
    )


# ---- key numbers ----------------------------------------------------------------------------


def fmt_int(value: int | None) -> str:
    return UNKNOWN if value is None else f"{value:,}"


def _stat(series: pd.Series, how: str) -> float | None:
    values = pd.to_numeric(series, errors="coerce").dropna()
    if values.empty:
        return None
    return float(values.quantile(0.95) if how == "p95" else getattr(values, how)())


def key_numbers(data: ReportData) -> tuple[tuple[str, str], ...]:
    """The figures a ticket needs, as (label, value) pairs, in reading order."""
    o, b = data.overview, data.batches
    # Spark's clock (batchTimestampMs in offsets/) when the offsets carry it: a copied or
    # cloned checkpoint keeps it, while its files' modification times are the copy's.
    triggered = _datetime(o.get("last_trigger_at"))
    last_commit = triggered if triggered is not None else _datetime(o.get("last_commit_at"))
    when = (
        "last batch triggered (batchTimestampMs)"
        if triggered is not None
        else "last commit (commit file's time)"
    )
    # A commit "in the future" means the checkpoint's clock is ahead of this machine's.
    age = fmt_age(None if last_commit is None else (data.as_of - last_commit).total_seconds())
    durations, intervals = b["duration_ms"], b["interval_ms"]
    delays = b["delay_ms"].dropna()
    operators = {s.operator_id for s in data.stores}
    numbers = [
        ("query id", data.query_id),
        ("batches in the log", f"{len(b):,}" + (f" ({_range(b['batch_id'])})" if len(b) else "")),
        ("last committed batch", fmt_int(_int(o, "last_committed_batch"))),
        ("pending batches (offsets, no commit)", fmt_int(_int(o, "uncommitted_batches"))),
        (
            when,
            UNKNOWN if last_commit is None else f"{last_commit:%Y-%m-%d %H:%M:%S} UTC ({age})",
        ),
        (
            # Only file times see a batch end: say so, and show none of a copy's.
            "batch duration (median / p95 / max; offsets → commit file times)",
            " / ".join(fmt_ms(_stat(durations, h)) for h in ("median", "p95", "max"))
            if data.copied is None
            else f"not shown: {data.copied}",
        ),
        ("trigger interval (median; batchTimestampMs)", fmt_ms(_stat(intervals, "median"))),
        (
            "watermark delay (last batch)",
            fmt_ms(float(delays.iloc[-1])) if len(delays) else "no watermark",
        ),
        ("stateful operators / stores", f"{len(operators)} / {len(data.stores)}"),
        ("keys (newest version, all stores)", fmt_int(_int(o, "total_keys"))),
        (
            "state on disk (files not purged)",
            f"{fmt_bytes(_int(o, 'total_bytes') or 0)} in {fmt_int(_int(o, 'files'))} files",
        ),
        ("unreadable files (problems)", fmt_int(_int(o, "problems"))),
    ]
    if "partitions_before" in b.columns:
        moved = b[b["partitions_before"].notna()]
        numbers += [
            (
                f"repartition (batch {int(r.batch_id)})",
                f"partitions {int(r.partitions_before)} → {int(r.shuffle_partitions)}",
            )
            for r in moved.itertuples(index=False)
        ]
    return tuple(numbers)


def _range(ids: pd.Series) -> str:
    return f"{int(ids.min())}..{int(ids.max())}"
