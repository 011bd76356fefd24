"""The Streamlit dashboard: ``main.py`` is the script, one module per page under ``views/``.

Not ``pages/``: Streamlit would take a ``pages/`` folder beside the script for its older
multipage mode and serve ``/browse`` from ``pages/browse.py`` directly, skipping ``main.py``.
"""
