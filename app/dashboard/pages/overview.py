"""The overview page."""

from __future__ import annotations

import streamlit as st


def render() -> None:
    st.title("overview")
    st.info("Not built yet.")
