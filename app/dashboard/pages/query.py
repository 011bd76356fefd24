"""The query page."""

from __future__ import annotations

import streamlit as st


def render() -> None:
    st.title("query")
    st.info("Not built yet.")
