"""The Streamlit dashboard: ``main.py`` is the script, one module per page under ``pages/``."""
