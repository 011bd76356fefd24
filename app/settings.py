"""The settings a ``--config`` file gives a run: every section of the file, typed, each layer's
apart.

The file is read once, and only the sections of :data:`SECTIONS` may be in it; each is
declared beside the settings it makes (``collectors/config_file.py`` says how):

- ``[storage]``: where checkpoints live (``collectors/remote/settings.py``), for every command
  that reads checkpoints;
- ``[history]``: what the database keeps (``collectors/db/history_settings.py``), for every
  writer: collect, watch, check, report, the dashboard and maintain;
- one per health rule, ``[spark]`` and ``[limits]`` (``app/analysis/thresholds.py``): the
  verdicts a watcher stores, check, the dashboard and /metrics.

Example::

    settings = settings_of(args)        # args.config read once, then kept on args
    settings.history                    # a HistorySettings: what the writer keeps
    load_settings("stateglass.toml").health.stalled_query.enabled
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from stateglass.app.analysis import thresholds
from stateglass.app.analysis.thresholds import HealthConfig
from stateglass.collectors.config_file import ConfigFile
from stateglass.collectors.db import history_settings
from stateglass.collectors.db.history_settings import HistorySettings
from stateglass.collectors.remote import settings as storage
from stateglass.collectors.remote.settings import StorageConfig

# Every section a --config file may hold: any other table is refused.
SECTIONS = (storage.SECTION, history_settings.SECTION, thresholds.SECTION)


@dataclass(frozen=True)
class Settings:
    """What a ``--config`` file sets; every default without one."""

    storage: StorageConfig = field(default_factory=StorageConfig)
    history: HistorySettings = field(default_factory=HistorySettings)
    health: HealthConfig = field(default_factory=HealthConfig)


def load_settings(path: str | None) -> Settings:
    """The settings of the TOML file at ``path`` (None: every default). A file that cannot be
    used is a one-line :class:`~collectors.errors.BadConfig` naming it."""
    config = ConfigFile.read(path, SECTIONS)
    return Settings(
        storage=config.parse(storage.SECTION),
        history=config.parse(history_settings.SECTION),
        health=config.parse(thresholds.SECTION),
    )


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings of the ``--config`` file ``args`` name, read at the first call and kept
    on ``args`` (the CLI reads it before the command runs)."""
    found = getattr(args, "settings", None)
    if not isinstance(found, Settings):
        found = load_settings(getattr(args, "config", None))
        args.settings = found
    return found
