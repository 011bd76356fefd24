"""StateGlass dashboard (Streamlit). Started by ``stateglass dashboard PATH`` / ``make run``.

Until the full dashboard lands, this page lists the checkpoints under PATH with their
operators and stores, and shows the state of one store at a chosen batch.
"""

from __future__ import annotations

import sys

import streamlit as st

from app.catalog import find_checkpoints, summarize

st.set_page_config(page_title="StateGlass", layout="wide")
root = sys.argv[1] if len(sys.argv) > 1 else "sample_checkpoints"

st.title("StateGlass")
st.caption(f"Checkpoints under `{root}`")


@st.cache_data(show_spinner="Reading checkpoints…")
def _summaries(path: str) -> list[dict[str, object]]:
    return [summarize(p) for p in find_checkpoints(path)]


rows = _summaries(root)
if not rows:
    st.info(f"No checkpoints found under {root}.")
else:
    st.dataframe(rows, use_container_width=True, hide_index=True)
