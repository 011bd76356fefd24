"""The diff page."""

from __future__ import annotations

import streamlit as st


def render() -> None:
    st.title("diff")
    st.info("Not built yet.")
