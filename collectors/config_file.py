"""The ``--config`` file: one TOML file, read once, its sections declared once, every failure
one line naming the file.

Each layer declares the sections it reads where it reads them, as a :class:`Section`: the
tables it owns and how they become typed settings. The collectors declare ``[history]``
(``collectors/db/history_settings.py``) and ``[storage]`` (``collectors/remote/settings.py``);
the health rules' sections and ``[limits]`` are the app's (``app/analysis/thresholds.py``).
The app lists them all, once (``app/settings.py``), and :meth:`ConfigFile.read` refuses any
other table: a typo must not silently fall back to a default.

Example::

    HISTORY = Section(("history",), from_config)          # beside HistorySettings
    config = ConfigFile.read("~/stateglass.toml", [HISTORY, STORAGE, HEALTH])
    history = config.parse(HISTORY)                        # a HistorySettings
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from stateglass.collectors.errors import BadConfig

T = TypeVar("T")

# What a file's messages name when there is no file (every default).
NO_FILE = "<config>"

Tables = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Section(Generic[T]):
    """Tables of a ``--config`` file one layer reads, and how they become its settings.

    ``parse(tables, shown)`` gets the file's tables among ``names`` (none: the defaults) and the
    file's path for its messages; it refuses a key or value it does not know with
    :class:`BadConfig` (:func:`refuse_unknown_keys`).
    """

    names: tuple[str, ...]
    parse: Callable[[Tables, str], T]


@dataclass(frozen=True)
class ConfigFile:
    """A ``--config`` file's tables, each in a known section."""

    shown: str = NO_FILE
    tables: Tables = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | None, sections: Iterable[Section[Any]]) -> ConfigFile:
        """Read ``path`` (None: no file, every default), refusing a table none of ``sections``
        owns, or one that is not a table of keys."""
        if path is None:
            return cls()
        data, shown = _read_toml(path)
        known = {name for section in sections for name in section.names}
        for name, table in data.items():
            if name not in known:
                raise BadConfig(
                    shown, f"unknown section [{name}]; known: {', '.join(sorted(known))}"
                )
            if not isinstance(table, dict):
                raise BadConfig(shown, f"[{name}] must be a table of keys, got {table!r}")
        return cls(shown, data)

    def parse(self, section: Section[T]) -> T:
        """``section``'s settings from its tables in this file (defaults for those absent)."""
        mine = {name: self.tables[name] for name in section.names if name in self.tables}
        return section.parse(mine, self.shown)


def refuse_unknown_keys(
    shown: str, name: str, table: Mapping[str, Any], keys: Sequence[str]
) -> None:
    """One line naming the first key of ``[name]`` that is not one of ``keys``."""
    for key in table:
        if key not in keys:
            raise BadConfig(
                shown, f"unknown key {key!r} in [{name}]; known: {', '.join(sorted(keys))}"
            )


def _read_toml(path: str) -> tuple[dict[str, Any], str]:
    """The file's tables and its absolute path; :class:`BadConfig` when it cannot be used."""
    import tomllib  # only a command given a file pays for it

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
