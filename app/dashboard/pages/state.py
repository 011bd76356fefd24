"""The state page."""

from __future__ import annotations

import streamlit as st


def render() -> None:
    st.title("state")
    st.info("Not built yet.")
