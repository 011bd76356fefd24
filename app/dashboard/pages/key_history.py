"""The key history page."""

from __future__ import annotations

import streamlit as st


def render() -> None:
    st.title("key history")
    st.info("Not built yet.")
