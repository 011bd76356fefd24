"""``python -m app.dashboard.launch run SCRIPT ...``: ``streamlit run`` with no outward lookup.

Streamlit asks checkip.amazonaws.com for this machine's external IP when it prints its
"External URL" banner and whenever a browser connects from another origin (its CORS and
WebSocket origin checks); for the "Network URL" it connects a UDP socket towards 8.8.8.8 to
learn the internal IP. A dashboard over private state must not announce itself to an outside
host, so both answers are fixed to "none known" before Streamlit starts: the banner names no
other address, and the origin checks fall through to their other rules (same-origin pages,
``server.corsAllowedOrigins``).
"""

from __future__ import annotations

from streamlit import net_util
from streamlit.web import cli


def main() -> None:
    # ``get_external_ip``/``get_internal_ip`` return these cached values when they are not None;
    # "" means "none known". Private attributes: streamlit is pinned, and
    # tests/app/test_dashboard_server.py fails if a lookup leaves this machine.
    for cached in ("_external_ip", "_internal_ip"):
        setattr(net_util, cached, "")
    from stateglass.app.memory_trace import start_from_env

    start_from_env("streamlit")
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
