"""The wheel and its virtualenv are built beside the suite from the moment it is collected
(tests/installed/wheel_env.py), when a test of this folder is selected."""

from __future__ import annotations

import pytest

from tests.installed.wheel_env import PREBUILT


def pytest_collection_finish(session: pytest.Session) -> None:
    PREBUILT.start_if_needed(session)


def pytest_sessionfinish(session: pytest.Session) -> None:
    PREBUILT.close()
