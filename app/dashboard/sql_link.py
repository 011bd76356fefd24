"""Links into the SQL page with a query filled in: ``sql?q=<the query, URL-encoded>``.

The State, Browse and Health pages draw one each. This module imports nothing heavy (the
catalog's names load when a link is drawn): pages import it and must open without a DuckDB
session or a state reader (tests/app/test_page_imports.py).

Example::

    sql_link.link(sql_examples.partition_sizes(sql_link.table_of(cp, 0, "default")))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import streamlit as st

from stateglass.app.dashboard import context

if TYPE_CHECKING:
    from stateglass.collectors.checkpoints.state_views import StateView

URL_PATH = "sql"
QUERY_PARAM = "q"


def sql_url(query: str) -> str:
    """The SQL page's URL holding ``query``, relative to the app: ``sql?q=<urlencoded>``."""
    return f"{URL_PATH}?{urlencode({QUERY_PARAM: query})}"


def link(query: str, label: str = "Ask in SQL", box: Any = st) -> None:
    """A link to the SQL page (in this tab) that opens with ``query`` in the editor and runs it."""
    box.page_link(
        st.Page(_render, title="SQL", url_path=URL_PATH),
        label=label,
        icon="🔎",
        query_params={QUERY_PARAM: query},
    )


def _render() -> None:
    """Never run: navigation opens the page main.py registers under the same path (a page is
    known by its path), so this module need not import the page."""


def table_of(checkpoint: str, operator_id: int, label: str) -> str:
    """A state table's SQL name in the page's session (every collected checkpoint is a schema)."""
    from stateglass.app.sql_examples import table_ref
    from stateglass.collectors.catalog.names import schema_names

    schema = schema_names(context.checkpoints()).get(checkpoint, "")
    return table_ref(schema, operator_id, label)


def store_history_query(checkpoint: str, operator_id: int, store_name: str) -> str:
    """The State page's question in SQL: the store's keys and bytes per batch (history)."""
    from stateglass.app.sql_examples import store_history

    return store_history(checkpoint, operator_id, store_name)


def rows_query(view: StateView, version: int, partition: int | None) -> str:
    """The Browse page's rows in SQL: one view at one version (batch ``version - 1``)."""
    from stateglass.app.sql_examples import store_rows

    ref = table_of(view.checkpoint, view.operator_id, view.label)
    return store_rows(ref, batch_id=version - 1, partition=partition)
