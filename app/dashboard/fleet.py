"""The Overview's list of checkpoints at fleet scale: search, sort and paging, all pure.

A team may collect hundreds of checkpoints. The Overview filters the one-row-per-checkpoint
frame (``app.queries.checkpoint_overview``), sorts it and draws one page of cards, so a page
costs the same with 5 checkpoints or 500. Nothing here touches Streamlit or the database.

Example::

    rows = search(overview, "orders")
    rows = order(rows, "last commit (newest first)", health_of)
    shown, pages = page(rows, 2, PAGE_SIZE)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

PAGE_SIZE = 24
# How bad a verdict is, worst first when sorting; "n/a" (rules could not run) sits with WARN.
HEALTH_RANK: Mapping[str, int] = {"ERR": 0, "WARN": 1, "n/a": 1, "OK": 2}
SORTS = (
    "path",
    "health (worst first)",
    "last commit (newest first)",
    "last commit (oldest first)",
)


def search(rows: pd.DataFrame, text: str) -> pd.DataFrame:
    """Rows whose path or query id contains ``text`` (any case); all rows for empty text."""
    needle = text.strip().lower()
    if not needle:
        return rows
    path = rows["checkpoint"].astype("string").str.lower().str.contains(needle, regex=False)
    query = rows["query_id"].astype("string").str.lower().str.contains(needle, regex=False)
    return rows[(path.fillna(False) | query.fillna(False)).astype(bool)]


def order(
    rows: pd.DataFrame, how: str, health_of: Callable[[pd.Series], str] | None = None
) -> pd.DataFrame:
    """``rows`` sorted as ``how`` (one of :data:`SORTS`); ties and unknowns by path.

    ``health_of(row)`` gives a row's verdict; it is asked only when sorting by health.
    """
    if how not in SORTS:
        raise ValueError(f"unknown sort {how!r}; one of {', '.join(SORTS)}")
    by_path = rows.sort_values("checkpoint", kind="stable")
    if how == "path" or by_path.empty:
        return by_path
    if how == "health (worst first)":
        if health_of is None:
            raise ValueError("sorting by health needs health_of")
        rank = [HEALTH_RANK.get(health_of(row), 1) for _, row in by_path.iterrows()]
        return by_path.assign(_rank=rank).sort_values("_rank", kind="stable").drop(columns="_rank")
    newest_first = how == "last commit (newest first)"
    # Never-committed checkpoints go last either way: "no commit" is not "oldest commit".
    return by_path.sort_values(
        "last_commit_at", ascending=not newest_first, na_position="last", kind="stable"
    )


def page(rows: pd.DataFrame, number: int, size: int = PAGE_SIZE) -> tuple[pd.DataFrame, int]:
    """Page ``number`` (1-based, clamped to the last) of ``rows``, and how many pages there are."""
    pages = max(1, -(-len(rows) // size))
    number = min(max(1, number), pages)
    start = (number - 1) * size
    return rows.iloc[start : start + size], pages
