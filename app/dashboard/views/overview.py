"""Overview: every watched checkpoint at a glance, and a box to start watching another."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Literal

import pandas as pd
import streamlit as st

from stateglass.app import allowed, figures, queries
from stateglass.app.checkpoint_names import distinct_names
from stateglass.app.dashboard import context, fleet, url_state
from stateglass.app.dashboard.watcher_child import WatcherRegistry, checkpoints_at
from stateglass.app.errors import AppError
from stateglass.app.escape import md, md_code
from stateglass.app.queries.connection import session_connection
from stateglass.collectors.checkpoints.operator_names import INFERRED, INFERRED_HELP
from stateglass.collectors.errors import CollectorError
from stateglass.parsers.units import fmt_bytes

BadgeColor = Literal["green", "orange", "red", "gray"]
BADGE_COLORS: dict[str, BadgeColor] = {"OK": "green", "WARN": "orange", "ERR": "red", "n/a": "gray"}
# How long "Watch" waits for the first scan to land before leaving it to live refresh.
FIRST_SCAN_WAIT_S = 20.0


@st.cache_resource
def _registry(db: str) -> WatcherRegistry:
    """One registry per server process and database: a path is watched once."""
    return WatcherRegistry(db, log_path=db + ".watchers.log")


def _int(value: Any) -> str:
    return "–" if value is None or pd.isna(value) else f"{int(value):,}"


def _text(value: Any, default: str) -> str:
    """``value`` as text, ``default`` when null: a missing column must not print ``nan``."""
    return default if value is None or pd.isna(value) or value == "" else str(value)


# What a card shows of the health rules: the worst status, and (rule, status, finding, hint).
Verdict = tuple[str, list[tuple[str, ...]]]
# Time-based rules (a stalled query) turn without a scan: a verdict is kept this long.
VERDICT_TTL_S = 60.0


@st.cache_resource
def _verdicts(db: str) -> dict[tuple[str, str], tuple[float, Verdict]]:
    """Verdicts per (checkpoint, last scan) for this server: a new scan makes a new key."""
    return {}


def _verdict(found: Any) -> Verdict:
    if isinstance(found, Exception):
        # A badge must not take the page down (e.g. a database from an older schema).
        why = str(found).splitlines()[0] if str(found) else type(found).__name__
        return "n/a", [("health", "n/a", why, "Re-collect the checkpoint to refresh the rows.")]
    from stateglass.app.analysis.health.base import worst

    return worst(found), [(f.rule, f.status, f.finding, f.hint) for f in found]


def verdicts(db: str, rows: pd.DataFrame) -> dict[str, Verdict]:
    """Each row's verdict: cached ones, and the rest as the watcher stored them (those it
    has not judged since their last scan are judged here, on one database connection)."""
    from stateglass.app.analysis.health.stored import stored_many

    cache = _verdicts(db)
    now = time.monotonic()
    out: dict[str, Verdict] = {}
    missing: list[tuple[str, str]] = []
    for checkpoint, scan in zip(rows["checkpoint"], rows["last_scan"].astype(str), strict=True):
        hit = cache.get((checkpoint, scan))
        if hit is not None and now - hit[0] < VERDICT_TTL_S:
            out[checkpoint] = hit[1]
        else:
            missing.append((checkpoint, scan))
    if not missing:
        return out
    try:
        # On the page's connection when there is one: opening another costs more than
        # reading a page's stored verdicts.
        found: dict[str, Any] = stored_many(
            db,
            [c for c, _ in missing],
            config=context.health_config(),
            conn=session_connection(db),
        )
    except Exception as exc:
        found = {c: exc for c, _ in missing}
    for key in [k for k, (at, _) in cache.items() if now - at >= VERDICT_TTL_S]:
        cache.pop(key, None)
    for checkpoint, scan in missing:
        verdict = _verdict(found.get(checkpoint, KeyError(checkpoint)))
        cache[(checkpoint, scan)] = (now, verdict)
        out[checkpoint] = verdict
    return out


def _watch_box(db: str) -> None:
    with st.form("sg_watch_form", clear_on_submit=False, border=False):
        left, right = st.columns([5, 1], vertical_alignment="bottom")
        path = left.text_input(
            "Watch another checkpoint",
            placeholder="/path/to/checkpointLocation (or a folder of checkpoints)",
            key="sg_watch_path",
        )
        submitted = right.form_submit_button("Watch", width="stretch")
    if not submitted or not path.strip():
        return
    try:
        # Only inside the allowed roots, resolved first; the refusal is one fixed line.
        allowed_roots = allowed.allowed_roots()
        resolved = allowed.resolve(path, allowed_roots)
        roots = checkpoints_at(resolved, within=allowed_roots)
        started = _registry(db).start(roots)
    except (CollectorError, AppError) as exc:
        st.error(md(exc), icon="🚫")
        return
    if not started:
        st.info(f"Already watching {len(roots)} checkpoint(s) at {md(path.strip())}.")
        return
    known = set(context.checkpoints())
    with st.status(f"Collecting {len(started)} checkpoint(s)…", expanded=False) as status:
        deadline = time.monotonic() + FIRST_SCAN_WAIT_S
        bar = st.progress(0.0)
        while time.monotonic() < deadline:
            done = len(set(started) & (set(context.checkpoints()) | known))
            bar.progress(done / len(started), text=f"{done}/{len(started)} collected")
            if done == len(started):
                status.update(label=f"Watching {len(started)} new checkpoint(s)", state="complete")
                break
            time.sleep(0.5)
        else:
            status.update(
                label="Still collecting: the checkpoints appear here when their first scan "
                "ends (live refresh).",
                state="running",
            )


def _cell(box: Any, label: str, value: str, help: str | None = None) -> None:
    """A small label over a bold value: ``st.metric`` is too large for ten cards a screen."""
    box.caption(label, help=help)
    box.markdown(f"**{value}**")


# Sparklines kept per server: enough for a few pages of cards, a new scan makes a new key.
SPARKLINES_KEPT = 256


@st.cache_resource
def _sparklines(db: str) -> tuple[threading.Lock, dict[tuple[str, str], Any]]:
    """Sparkline figures per (checkpoint, last scan) for this server: a commit of one
    checkpoint redraws its card's line alone, not the page's. Every session's script thread
    shares them, hence the lock."""
    return threading.Lock(), {}


def sparklines(db: str, shown: pd.DataFrame) -> dict[str, Any]:
    """Each shown row's sparkline: kept ones, and the rest from one query of their sizes
    (only the page's checkpoints: a fleet's whole history is not read for 24 cards)."""
    lock, cache = _sparklines(db)
    scans = dict(zip(shown["checkpoint"], shown["last_scan"].astype(str), strict=True))
    with lock:
        missing = [c for c, scan in scans.items() if (c, scan) not in cache]
        if missing:
            sizes = queries.size_history(db, missing)
            mine = _by_checkpoint(sizes)
            for checkpoint in missing:
                for old in [k for k in cache if k[0] == checkpoint]:
                    del cache[old]
                found = mine.get(checkpoint, sizes.iloc[:0])
                cache[(checkpoint, scans[checkpoint])] = figures.size_sparkline(found, "num_keys")
            # The oldest first (dicts keep insertion order), never this page's own.
            mine_now = {(c, scan) for c, scan in scans.items()}
            extra = len(cache) - max(SPARKLINES_KEPT, len(mine_now))
            for old in [k for k in cache if k not in mine_now][: max(0, extra)]:
                del cache[old]
        return {c: cache[(c, scan)] for c, scan in scans.items()}


def _by_checkpoint(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``frame``'s rows per checkpoint: one pass, not a filter of the whole frame per card."""
    return {str(c): rows for c, rows in frame.groupby("checkpoint", sort=False)}


def _card(
    row: pd.Series,
    title: str,
    sparkline: Any,
    events: pd.DataFrame,
    verdict: Verdict,
    copied: str,
    rows: str,
) -> None:
    """One checkpoint's card: ``title`` is the tail of its path that tells it apart, ``copied``
    says its file times are not used, ``rows`` gives transformWithState rows per state variable."""
    now = pd.Timestamp.now(tz="UTC").tz_localize(None)
    with st.container(border=True):
        name, last, since, lag, keys, disk, spark, badge = st.columns(
            [3.2, 0.9, 1.1, 0.8, 1.0, 1.1, 2.2, 1.2], vertical_alignment="center"
        )
        name.markdown(f"**{md(title)}**", help=md(row["checkpoint"]))
        operators = _text(row["operators"], "stateless")
        name.caption(
            f"query {md_code(_text(row['query_id'], '(no metadata)'))}  \n{md(operators)}",
            help=INFERRED_HELP if INFERRED in operators else None,
        )
        _cell(last, "last batch", _int(row["last_committed_batch"]))
        triggered = row.get("last_trigger_at")
        spark_clock = triggered is not None and not pd.isna(triggered)
        _cell(
            since,
            "last batch ran" if spark_clock else "last commit",
            context.ago(triggered if spark_clock else row["last_commit_at"], now),
            "When the last committed batch was triggered: batchTimestampMs in offsets/, "
            "Spark's own clock (a copy or clone keeps it)."
            if spark_clock
            else "The commit file's modification time: these offsets carry no batch timestamp.",
        )
        pending = 0 if pd.isna(row["lag_batches"]) else int(row["lag_batches"])
        # Batches with offsets written but no commit: running, or the query stopped mid-batch.
        _cell(lag, "batch lag", f"{pending}")
        _cell(
            keys,
            "raw keys" if rows else "keys",
            _int(row["total_keys"]),
            "Keys at each partition's newest version, as Spark's numKeys counts them: raw keys "
            "across all of a store's column families. For transformWithState that is every "
            "state variable, timers and TTL indexes together: its rows per state variable are "
            "under the card.",
        )
        _cell(
            disk,
            "on disk",
            fmt_bytes(row["total_bytes"]),
            f"{_int(row['files'])} state files on disk now (purged ones not counted).",
        )
        spark.plotly_chart(
            sparkline,
            width="stretch",
            config={"displayModeBar": False},
            key=f"spark-{row['checkpoint']}",
        )
        _badge(badge, verdict, str(row["checkpoint"]))
        if copied:
            # Said once per card: the age above is Spark's, and no duration is shown.
            st.caption(md(copied))
        if not events.empty:
            _progress_line(events)
        if rows:
            st.caption(f"Rows as Spark's reader returns them: {md(rows)}")
        if row["problems"]:
            st.warning(
                f"{row['problems']} file(s) could not be read; see the Query page.", icon="⚠️"
            )


def _badge(where: Any, verdict: Verdict, checkpoint: str) -> None:
    """The worst status, how many rules did not judge, and the findings worth a look."""
    worst, findings = verdict
    skipped = sum(f[1] == "SKIP" for f in findings)
    with where:
        st.badge(
            worst,
            color=BADGE_COLORS.get(worst, "gray"),
            help="The health rules' worst status"
            + (f"; {skipped} not judged (not counted as OK)" if skipped else ""),
        )
        st.markdown(
            url_state.markdown_link("Health →", url_state.link("health", checkpoint=checkpoint)),
            help="Every rule's verdict for this checkpoint, and what to do.",
        )
        if skipped:
            st.caption(f"{skipped} not judged")
        bad = [f for f in findings if f[1] in ("WARN", "ERR", "n/a")]
        if bad:
            # The badge says how bad; the popover says what and what to do.
            with st.popover(f"{len(bad)} finding{'s' if len(bad) > 1 else ''}", type="tertiary"):
                for rule, status, finding, hint in bad:
                    st.markdown(f"**{md(status)} {md(rule)}**: {md(finding)}  \n_{md(hint)}_")


def _reset_page_when(changed: tuple[object, ...]) -> None:
    """Back to page 1 when the search or the sort changes."""
    if st.session_state.get("sg_overview_query") != changed:
        st.session_state["sg_overview_query"] = changed
        st.session_state["sg_overview_page"] = 1


def _listed(db: str, overview: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """Search box, sort and page picker: the page's rows, its number, how many rows match."""
    find, how, at = st.columns([4, 2, 1], vertical_alignment="bottom")
    text = find.text_input(
        "Search checkpoints",
        key="sg_overview_search",
        placeholder="a part of the path or the query id, any case",
        # Filters live in the URL too: a shared link shows the same cards.
        bind="query-params",
    )
    sort = how.selectbox("Sort by", fleet.SORTS, key="sg_overview_sort", bind="query-params")
    _reset_page_when((text.strip(), sort))
    rows = fleet.search(overview, text)
    if sort == fleet.SORTS[1]:
        # Every row's verdict is needed: kept per scan, so only the first such sort waits.
        with st.spinner(f"Checking the health of {len(rows)} checkpoint(s)…"):
            known = verdicts(db, rows)
        rows = fleet.order(rows, sort, lambda r: known[r["checkpoint"]][0])
    else:
        rows = fleet.order(rows, sort)
    number = int(at.number_input("Page", min_value=1, step=1, key="sg_overview_page"))
    shown, pages = fleet.page(rows, number, fleet.PAGE_SIZE)
    return shown, min(number, pages), len(rows)


def _count_caption(db: str, overview: pd.DataFrame) -> None:
    watched = _registry(db).watched()
    live = sum(1 for c in overview["checkpoint"] if c in watched)
    st.caption(
        f"{len(overview)} checkpoint(s) in the database, {live} watched live. Each card: the "
        "last committed batch, how long ago it ran (Spark's batch timestamp), the batch lag "
        "(batches with offsets "
        "but no commit yet), the keys at each partition's newest version, the state files on "
        "disk now, total keys over versions (sparkline) and the health rules' worst status."
    )


def render() -> None:
    st.title("Overview")
    db = context.db_path()
    _watch_box(db)
    if not os.path.exists(db):
        st.info(f"No database at {md_code(db)} yet: watch a checkpoint above.")
        return
    # One read-only connection for the page's queries; the cards are drawn after it closes.
    with queries.session(db):
        overview = context.load(queries.checkpoint_overview)
        if overview.empty:
            st.info("No checkpoints collected yet: watch one above.")
            return
        _count_caption(db, overview)
        shown, number, matching = _listed(db, overview)
        if matching == 0:
            st.info("No checkpoint's path or query id contains that text.")
            return
        lines = sparklines(db, shown)
        events = context.load(queries.progress_overview, tuple(shown["checkpoint"]))
        page_verdicts = verdicts(db, shown)
        clocks = {c: context.load(queries.file_times, c).note for c in shown["checkpoint"]}
        rows = context.load(queries.rows_lines, tuple(shown["checkpoint"]))
    mine, none = _by_checkpoint(events), events.iloc[:0]
    # Told apart from every collected checkpoint, not only this page's: a name stays put.
    titles = distinct_names(overview["checkpoint"].astype(str))
    for _, row in shown.iterrows():
        checkpoint = row["checkpoint"]
        _card(
            row,
            titles[checkpoint],
            lines[checkpoint],
            mine.get(checkpoint, none),
            page_verdicts[checkpoint],
            clocks[checkpoint],
            rows.get(checkpoint, ""),
        )
    if len(mine) < len(shown):
        # Said once for the page, not on every card without events.
        st.caption("Input rate and lag trend: " + queries.NO_PROGRESS)
    pages = max(1, -(-matching // fleet.PAGE_SIZE))
    first = (number - 1) * fleet.PAGE_SIZE + 1
    st.caption(
        f"Checkpoints {first:,}–{first + len(shown) - 1:,} of {matching:,}"
        + ("" if matching == len(overview) else f" matching (of {len(overview):,})")
        + f"; page {number} of {pages:,}."
    )


# ---- input rate and lag from Spark's progress events ---------------------------------------------


def lag_trend(events: pd.DataFrame) -> str:
    """How the newest batches kept up: processing against input rate, and Kafka's backlog."""
    with_input = events[events["input_rows_per_second"].fillna(0) > 0]
    if with_input.empty:
        return "no input in the newest batches"
    ratio = with_input["processed_rows_per_second"] / with_input["input_rows_per_second"]
    behind = int((ratio < 1).sum())
    text = (
        f"falling behind: {behind} of the last {len(with_input)} batches processed slower than "
        "their input arrived"
        if behind > len(with_input) / 2
        else f"keeping up: processing at {float(ratio.median()):.1f}x the input rate"
    )
    backlog = events["kafka_max_offsets_behind_latest"].dropna()
    if len(backlog) >= 2:
        first, last = backlog.iloc[0], backlog.iloc[-1]
        arrow = "↑" if last > first else "↓" if last < first else "→"
        text += f"; Kafka offsets behind latest {int(last):,} {arrow}"
    return text


def _progress_line(mine: pd.DataFrame) -> None:
    """The card's last line: input rate and lag trend from the checkpoint's progress events."""
    label, line = st.columns([1.2, 4], vertical_alignment="center")
    last = float(mine["input_rows_per_second"].iloc[-1] or 0)
    label.caption(
        f"input **{last:,.1f} rows/s** (batch {int(mine['batch_id'].iloc[-1])})",
        help="inputRowsPerSecond of the newest progress event.",
    )
    line.caption(f"lag trend: {lag_trend(mine)}")
