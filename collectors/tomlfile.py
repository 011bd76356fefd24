"""A TOML file a user names with ``--config``: read once, every failure one line.

Example::

    data, shown = read_toml("~/stateglass.toml")   # shown: the absolute path messages name
"""

from __future__ import annotations

import os
import tomllib
from typing import Any

from stateglass.collectors.errors import BadConfig


def read_toml(path: str) -> tuple[dict[str, Any], str]:
    """The file's tables and its absolute path; :class:`BadConfig` when it cannot be used."""
    shown = os.path.abspath(os.path.expanduser(path))
    try:
        with open(shown, "rb") as fh:
            return tomllib.load(fh), shown
    except FileNotFoundError as exc:
        raise BadConfig(shown, "no such config file") from exc
    except IsADirectoryError as exc:
        raise BadConfig(shown, "is a directory, expected a TOML file") from exc
    except OSError as exc:
        raise BadConfig(shown, f"cannot read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BadConfig(shown, f"not valid TOML: {exc}") from exc
