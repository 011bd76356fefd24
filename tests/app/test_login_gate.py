"""The optional login gate: with ``[auth]`` in Streamlit's secrets, no page shows before a login."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from streamlit.testing.v1 import AppTest

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "dashboard" / "main.py")
AUTH = {
    "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
    "cookie_secret": "not-a-real-secret",
    "client_id": "stateglass",
    "client_secret": "not-a-real-secret",
    "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration",
}


def _app() -> AppTest:
    return AppTest.from_file(MAIN, default_timeout=60)


def test_without_auth_the_pages_show(samples_db: str) -> None:
    at = _app()
    at.run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Overview"]
    assert not any(b.label == "Log out" for b in at.sidebar.button)


def test_with_auth_nothing_shows_before_a_login(samples_db: str) -> None:
    at = _app()
    at.secrets["auth"] = AUTH
    at.run()
    assert not at.exception
    assert [t.value for t in at.title] == ["StateGlass"]
    assert not at.get("plotly_chart")
    assert not any("checkpoint(s) in" in str(c.value) for c in at.caption)
    if importlib.util.find_spec("authlib") is None:
        assert "pip install 'stateglass[login]'" in at.error[0].value
    else:
        assert [b.label for b in at.button] == ["Log in"]


def test_a_logged_in_user_sees_the_pages_and_a_log_out(samples_db: str) -> None:
    at = _app()
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "someone@example.com"}
    at.run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Overview"]
    assert [b.label for b in at.sidebar.button] == ["Log out"]
