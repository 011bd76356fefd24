"""An optional login gate: Streamlit's OIDC login when ``secrets.toml`` has an ``[auth]`` section.

Without that section the dashboard has no login of its own (it binds 127.0.0.1 by default;
docs/security.md shows how to put it behind a proxy or single sign-on). With it, every page
asks for a login first: Streamlit runs the OpenID Connect flow (``st.login``) against the
provider configured there, which needs the ``Authlib`` package.

Example ``.streamlit/secrets.toml`` beside where ``stateglass dashboard`` runs::

    [auth]
    redirect_uri = "https://stateglass.example.com/oauth2callback"
    cookie_secret = "a long random string"
    client_id = "..."
    client_secret = "..."
    server_metadata_url = "https://accounts.example.com/.well-known/openid-configuration"
"""

from __future__ import annotations

import importlib.util

import streamlit as st


def auth_configured() -> bool:
    """True when Streamlit's secrets hold an ``[auth]`` section."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file, or one Streamlit cannot read: no gate configured
        return False


def gate() -> bool:
    """True when the pages may be shown: no login configured, or the visitor is logged in."""
    # ``get``: st.user has no is_logged_in until Streamlit itself has read the [auth] section.
    if not auth_configured() or st.user.get("is_logged_in", False):
        return True
    st.title("StateGlass")
    if importlib.util.find_spec("authlib") is None:
        st.error(
            "Login is configured ([auth] in secrets.toml) but the Authlib package is missing: "
            "pip install 'stateglass[login]'",
            icon="🚫",
        )
        return False
    st.caption("This dashboard shows collected streaming state: log in to see it.")
    st.button("Log in", on_click=st.login, type="primary")
    return False
