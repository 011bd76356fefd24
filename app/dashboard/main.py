"""StateGlass dashboard (Streamlit script). Started by ``stateglass dashboard`` / ``make run``."""

from __future__ import annotations

import streamlit as st

from stateglass.app.dashboard import context, login, sql_link
from stateglass.app.dashboard.views import (
    browse,
    diff,
    health,
    key_history,
    overview,
    query,
    sql,
    state,
)

st.set_page_config(page_title="StateGlass", page_icon="🔍", layout="wide")

PAGES = [
    st.Page(overview.render, title="Overview", url_path="overview", default=True),
    st.Page(health.render, title="Health", url_path="health"),
    st.Page(query.render, title="Query", url_path="query"),
    st.Page(state.render, title="State", url_path="state"),
    st.Page(browse.render, title="Browse", url_path="browse"),
    st.Page(diff.render, title="Diff", url_path="diff"),
    st.Page(key_history.render, title="Key history", url_path="key-history"),
    st.Page(sql.render, title="SQL", url_path=sql_link.URL_PATH),
]

# With an [auth] section in secrets.toml, nothing is shown before a login (docs/security.md).
if login.gate():
    page = st.navigation(PAGES)
    context.live_status()
    page.run()
    if login.auth_configured():
        st.sidebar.button("Log out", on_click=st.logout)
