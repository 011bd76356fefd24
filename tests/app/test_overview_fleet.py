"""The Overview with 500 checkpoints: one page of cards, search, sort and paging stay cheap.

Six real checkpoints are collected: four samples, a stateless copy (whose card once said
``nan``) and a copy missing a partition's state (ERR). Their rows are then repeated under 494
more directory names, each copy's commits a
few minutes apart, so the database holds 500 checkpoints without collecting 500 copies (which
takes minutes). Every card is still a real checkpoint's history.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app import queries
from stateglass.app.analysis.health import CLOCK_RULES, evaluate, evaluate_many, worst
from stateglass.app.analysis.health.stored import stored_many, storing_verdicts
from stateglass.app.checkpoint_names import distinct_names
from stateglass.app.dashboard import fleet
from stateglass.app.escape import md
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import Scanner
from tests.conftest import SAMPLES

FLEET = 500
ORIGINALS = ["dedup-hdfs", "agg-rocks", "join-hdfs", "session-rocks-cl", "stateless", "broken"]
# A page of 24 cards on a shared 2-core machine; about 5 s on an idle laptop.
PAGE_BUDGET_S = 60.0


def _name(base: Path, i: int) -> str:
    return str(base / "cps" / f"team-{i:03d}" / ORIGINALS[i % len(ORIGINALS)])


def _copy_rows(db: str, copies: list[tuple[str, str, int]]) -> None:
    """Repeat every checkpoint-keyed row of ``src`` under ``new``, commits ``n`` minutes on."""
    conn = duckdb.connect(db)
    try:
        conn.execute("CREATE TEMP TABLE copies (src VARCHAR, new VARCHAR, n INTEGER)")
        conn.executemany("INSERT INTO copies VALUES (?, ?, ?)", copies)
        tables = conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE column_name = 'checkpoint' "
            "AND table_name IN (SELECT table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema = 'main')"
        ).fetchall()
        for (table,) in tables:
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                    "AND table_schema = 'main' ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
            picked = []
            for col in columns:
                if col == "checkpoint":
                    picked.append("c.new")
                elif table == "batches" and col == "committed_at":
                    picked.append("t.committed_at + to_minutes(c.n)")
                else:
                    picked.append(f't."{col}"')
            conn.execute(
                f"INSERT INTO {table} SELECT {', '.join(picked)} "
                f"FROM {table} t JOIN copies c ON t.checkpoint = c.src"
            )
        _shift_clock_facts(conn)
    finally:
        conn.close()


def _shift_clock_facts(conn: duckdb.DuckDBPyConnection) -> None:
    """The copies' stored verdicts quote their own last commit, ``n`` minutes on, as a
    watcher that judged each copy would have stored."""
    rows = conn.execute(
        "SELECT j.checkpoint, j.clock_facts, c.n FROM health_judged j "
        "JOIN copies c ON c.new = j.checkpoint WHERE j.clock_facts IS NOT NULL"
    ).fetchall()
    shifted = []
    for _, stored, n in rows:
        facts = json.loads(stored)
        stalled = facts["rules"].get("stalled_query")
        # A copy of a sample cloned from git is judged on Spark's clock: no file time to shift.
        if stalled and "last" in stalled:
            last = datetime.fromisoformat(stalled["last"]) + timedelta(minutes=n)
            stalled["last"] = last.isoformat()
        shifted.append(json.dumps(facts))
    conn.execute(
        "UPDATE health_judged j SET clock_facts = s.facts FROM (SELECT unnest(?::VARCHAR[]) "
        "AS checkpoint, unnest(?::VARCHAR[]) AS facts) s WHERE j.checkpoint = s.checkpoint",
        [[r[0] for r in rows], shifted],
    )


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_fleet(tmp_path_factory.mktemp("fleet"))


def build_fleet(base: Path) -> str:
    """The 500-checkpoint database under ``base`` (also ``benchmarks/bench_fleet_health.py``)."""
    db = str(base / "fleet.duckdb")
    # A watcher's scanner: each scan is followed by the health verdicts it stores (copied
    # with the rest of the rows below), which the Overview reads.
    writer = Scanner(Database(db), after_write=storing_verdicts())
    for i, sample in enumerate(ORIGINALS):
        target = _name(base, i)
        if sample == "stateless":
            # A query without state keeps offsets, commits and metadata only.
            shutil.copytree(
                SAMPLES / "spark-4.3" / "dedup-hdfs", target, ignore=shutil.ignore_patterns("state")
            )
        elif sample == "broken":
            # Batch 11 is committed, but partition 1 has no state left: the holes rule's ERR.
            shutil.copytree(SAMPLES / "spark-4.3" / "dedup-hdfs", target)
            shutil.rmtree(Path(target) / "state" / "0" / "1")
        else:
            shutil.copytree(SAMPLES / "spark-4.3" / sample, target)
        writer.scan(target)
    n = len(ORIGINALS)
    copies = [(_name(base, i % n), _name(base, i), i) for i in range(n, FLEET)]
    _copy_rows(db, copies)
    return db


@pytest.fixture
def fleet_env(fleet_db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STATEGLASS_DB", fleet_db)
    return fleet_db


def _overview() -> None:
    from stateglass.app.dashboard import context
    from stateglass.app.dashboard.views import overview

    context.live_status()
    overview.render()


def _titles(at: AppTest, overview: pd.DataFrame) -> list[str]:
    """The cards' titles (bold Markdown), top to bottom."""
    wanted = {f"**{md(name)}**" for name in distinct_names(overview["checkpoint"]).values()}
    return [m.value for m in at.markdown if m.value in wanted]


def _footer(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Checkpoints "))


def _titles_of(checkpoints: Iterable[str], overview: pd.DataFrame) -> list[str]:
    """Cards' titles: the tail of each path that tells it apart from every other's."""
    names = distinct_names(overview["checkpoint"])
    return [f"**{md(names[c])}**" for c in checkpoints]


@pytest.mark.slow
def test_first_page_of_500_is_24_cards_in_reasonable_time(fleet_env: str) -> None:
    overview = queries.checkpoint_overview(fleet_env)
    assert len(overview) == FLEET
    at = AppTest.from_function(_overview, default_timeout=PAGE_BUDGET_S * 2)
    started = time.perf_counter()
    at.run()
    took = time.perf_counter() - started
    assert not at.exception, [e.value for e in at.exception]
    assert took < PAGE_BUDGET_S, f"{took:.1f} s (load {os.getloadavg()[0]:.1f})"
    assert len(at.get("plotly_chart")) == fleet.PAGE_SIZE
    assert _footer(at) == f"Checkpoints 1–24 of {FLEET}; page 1 of 21."
    # Sorted by path; titles keep a marker where the path was cut ("…/"), never lose the "/".
    expected = sorted(overview["checkpoint"])[: fleet.PAGE_SIZE]
    assert _titles(at, overview) == _titles_of(expected, overview)
    captions = " ".join(c.value for c in at.caption)
    assert "stateless" in captions and "nan" not in captions


@pytest.mark.slow
def test_search_then_page_then_sort(fleet_env: str) -> None:
    overview = queries.checkpoint_overview(fleet_env)
    at = AppTest.from_function(_overview, default_timeout=PAGE_BUDGET_S * 2)
    at.run()
    # "team-0" matches team-000..team-099: 100 checkpoints, 5 pages, 4 cards on the last.
    at.text_input(key="sg_overview_search").input("team-0").run()
    at.number_input(key="sg_overview_page").set_value(5).run()
    assert not at.exception, [e.value for e in at.exception]
    assert _footer(at) == f"Checkpoints 97–100 of 100 matching (of {FLEET}); page 5 of 5."
    matching = sorted(c for c in overview["checkpoint"] if "team-0" in c)
    assert _titles(at, overview) == _titles_of(matching[96:], overview)

    # Ten checkpoints, worst health first: the order the rules' own verdicts give.
    at.text_input(key="sg_overview_search").input("team-00").run()
    at.selectbox(key="sg_overview_sort").select("health (worst first)").run()
    assert not at.exception, [e.value for e in at.exception]
    ten = overview[overview["checkpoint"].str.contains("team-00", regex=False)]
    # Judged fresh here; the page sorted by the verdicts the watcher stored.
    verdict = {c: worst(evaluate(fleet_env, c)) for c in ten["checkpoint"]}
    assert len(set(verdict.values())) > 1, "the ten must not all share one verdict"
    expected = fleet.order(ten, "health (worst first)", lambda r: verdict[r["checkpoint"]])
    assert _titles(at, overview) == _titles_of(expected["checkpoint"], overview)
    assert _footer(at).endswith("page 1 of 1.")

    at.selectbox(key="sg_overview_sort").select("last commit (newest first)").run()
    newest = ten.sort_values("last_commit_at", ascending=False, na_position="last")
    assert _titles(at, overview) == _titles_of(newest["checkpoint"], overview)


def test_search_matches_path_or_query_id_any_case(fleet_db: str) -> None:
    overview = queries.checkpoint_overview(fleet_db)
    query_id = str(overview["query_id"].dropna().iloc[0])
    by_id = fleet.search(overview, query_id.upper())
    assert len(by_id) == (overview["query_id"] == query_id).sum() > 1
    assert len(fleet.search(overview, "TEAM-042/")) == 1
    assert fleet.search(overview, "  ").equals(overview)
    assert fleet.search(overview, "no such checkpoint").empty


def test_sort_by_last_commit_puts_never_committed_last(fleet_db: str) -> None:
    overview = queries.checkpoint_overview(fleet_db)
    never = overview.iloc[:1].assign(checkpoint="/never", last_commit_at=pd.NaT)
    rows = pd.concat([never, overview], ignore_index=True)
    for how in ("last commit (newest first)", "last commit (oldest first)"):
        ordered = fleet.order(rows, how)
        assert ordered["checkpoint"].iloc[-1] == "/never"
        stamps = ordered["last_commit_at"].dropna()
        assert stamps.is_monotonic_decreasing if "newest" in how else stamps.is_monotonic_increasing
    shown, pages = fleet.page(rows, 99)
    assert pages == 21 and len(shown) == len(rows) - 20 * fleet.PAGE_SIZE


def test_stored_verdicts_equal_fresh_judgements(fleet_db: str) -> None:
    """What the watcher stored, plus the clock's rules judged now, is what judging the whole
    history now gives, finding for finding; and every one of the 500 holds (judged after
    its last scan), so sorting by health judges none of them again."""
    held = read_query(
        fleet_db,
        "SELECT count(*) FROM health_judged j JOIN checkpoints c "
        "ON c.checkpoint = j.checkpoint AND c.last_scan = j.scan_at",
    )
    assert held[0][0] == FLEET
    # The six collected, and one copy of each (its commits minutes later).
    every = [c for (c,) in read_query(fleet_db, "SELECT checkpoint FROM checkpoints")]
    some = sorted(c for c in every if any(f"team-{i:03d}/" in c for i in range(12)))
    assert len(some) == 2 * len(ORIGINALS)
    # One clock for both: the stalled-query rule quotes the seconds since the last commit.
    now = datetime.now(tz=UTC)
    stored, fresh = stored_many(fleet_db, some, now), evaluate_many(fleet_db, some, now)
    assert len({worst(f) for f in fresh.values() if isinstance(f, list)}) > 1
    for checkpoint in some:
        if any(f"team-00{i}/" in checkpoint for i in range(len(ORIGINALS))):
            assert stored[checkpoint] == fresh[checkpoint], checkpoint
        else:
            # A copy's rows are not all a checkpoint's (its restart verdict differs): the
            # clock rules, on its own last commit, are what its stored facts answer for.
            assert _clock(stored[checkpoint]) == _clock(fresh[checkpoint]), checkpoint


def _clock(found: object) -> list[object]:
    assert isinstance(found, list), found
    return [f for f in found if f.rule in CLOCK_RULES]


# What the Overview's sparklines read before: the store_totals view, twice.
_SIZES_BY_VIEW = """
    WITH n AS (
        SELECT checkpoint, count(DISTINCT (operator_id, store_name)) AS stores
        FROM store_totals GROUP BY checkpoint
    )
    SELECT t.checkpoint, t.version,
           CASE WHEN count(*) FILTER (WHERE t.complete) = any_value(n.stores)
                THEN sum(t.num_keys) END AS num_keys,
           CASE WHEN count(*) FILTER (WHERE t.complete) = any_value(n.stores)
                THEN sum(t.bytes) END AS bytes
    FROM store_totals t JOIN n USING (checkpoint)
    GROUP BY t.checkpoint, t.version
    ORDER BY t.checkpoint, t.version
"""


def test_a_pages_sparklines_read_its_checkpoints_alone_as_the_view_sums_them(
    fleet_db: str,
) -> None:
    """One-store and four-store checkpoints: the page's rows are the fleet's rows for it, and
    both are the store_totals view's sums over stores (one store's rows are not grouped)."""
    every = queries.size_history(fleet_db)
    by_view = read_query(fleet_db, _SIZES_BY_VIEW)
    rows = [
        tuple(None if pd.isna(x) else x for x in r)
        for r in every.astype(object).itertuples(index=False)
    ]
    assert rows == [tuple(r) for r in by_view]
    assert any(r[2] is None for r in rows) and any(r[2] is not None for r in rows)
    page = sorted(set(every["checkpoint"]))[100 : 100 + fleet.PAGE_SIZE]
    mine = queries.size_history(fleet_db, page)
    expected = every[every["checkpoint"].isin(page)].reset_index(drop=True)
    assert mine.equals(expected)
