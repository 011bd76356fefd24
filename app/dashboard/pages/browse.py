"""The browse page."""

from __future__ import annotations

import streamlit as st


def render() -> None:
    st.title("browse")
    st.info("Not built yet.")
