"""What the SQL catalog calls things: one schema per checkpoint, one table per readable view.

Rules (``docs/architecture.md``, "The SQL catalog"):

* A checkpoint's schema is its folder's own name, lower-cased, every run of characters other
  than ``a-z``, ``0-9`` and ``_`` made one ``_`` (``s3://b/jobs/Orders-v2`` → ``orders_v2``).
  When another checkpoint of the session has a folder of that name, the parent folders are
  taken in too, as few as make it unique, joined by ``_`` (``/jobs/orders/checkpoint`` and
  ``/jobs/clicks/checkpoint`` → ``orders_checkpoint``, ``clicks_checkpoint``).
  A name that starts with a digit or is empty gets a ``cp_`` prefix. Names DuckDB or the
  catalog itself uses (``main``, ``history``, ``stateglass``, ``temp``, …) get a ``_cp``
  suffix. Names that still meet (``a-b`` and ``a_b``; DuckDB's names are case-insensitive)
  get ``_2``, ``_3``… in the order of their paths.
* A store's table is ``op<operator id>_<store name>`` with the same slug rule
  (``op0_default``, ``op1_left_keytonumvalues``); a transformWithState state variable's is
  ``op<id>_<variable>``, its registered timers ``op<id>_timers``; a join store kept as
  column families of one store (state format 3) gets one table per family, named by it.
* Each state table has a change feed ``<table>_changes``.
* Every schema has ``state_metadata``, ``batches``, ``offsets`` and ``commits``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

# Catalogs and schemas of a session: a checkpoint named like one would shadow it.
RESERVED = frozenset(
    {
        "main",
        "history",
        "stateglass",
        "temp",
        "system",
        "memory",
        "information_schema",
        "pg_catalog",
    }
)
CATALOG_SCHEMA = "stateglass"
HISTORY = "history"
CHANGES_SUFFIX = "_changes"
TIMERS = "timers"
METADATA_TABLES = ("state_metadata", "batches", "offsets", "commits")

_MAX_DEPTH = 8  # path elements a schema name takes in at most
_NOT_NAME = re.compile(r"[^a-z0-9_]+")


def slug(text: str) -> str:
    """``text`` as an unquoted SQL name: lower case, ``[a-z0-9_]``, runs made one ``_``."""
    return _NOT_NAME.sub("_", text.lower()).strip("_")


def _tail(path: str, depth: int) -> str:
    """The slug of the last ``depth`` elements of ``path`` joined by ``_``."""
    parts = [p for p in path.replace("\\", "/").split("/") if p and not p.endswith(":")]
    return slug("_".join(parts[-depth:]))


def schema_names(checkpoints: Iterable[str]) -> dict[str, str]:
    """A schema name per checkpoint path, unique and never reserved (see the module's rules)."""
    paths = sorted(set(checkpoints))
    # The shortest tail of each path no other checkpoint shares: jobs often keep their
    # checkpoints in folders of one name (``<job>/checkpoint``).
    bases: dict[str, str] = {}
    depth = 1
    while len(bases) < len(paths) and depth <= _MAX_DEPTH:
        tails = {path: _tail(path, depth) for path in paths}
        counts = Counter(tails.values())
        for path, tail in tails.items():
            if path not in bases and (counts[tail] == 1 or depth == _MAX_DEPTH):
                bases[path] = tail
        depth += 1
    out: dict[str, str] = {}
    taken: set[str] = set()
    for path in paths:
        base = bases[path]
        if not base or base[0].isdigit():
            base = f"cp_{base}".rstrip("_")
        if base in RESERVED:
            base = f"{base}_cp"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        out[path] = name
    return out


def state_table(operator_id: int, label: str) -> str:
    """The table of one view: ``op<id>_<store, variable or column family>``."""
    return f"op{operator_id}_{slug(label) or 'state'}"


def unique(names: Iterable[str]) -> list[str]:
    """``names`` with repeats made distinct by ``_2``, ``_3``… (slugs of two labels can meet)."""
    seen: set[str] = set()
    out = []
    for base in names:
        name, n = base, 1
        while name in seen:
            n += 1
            name = f"{base}_{n}"
        seen.add(name)
        out.append(name)
    return out


def quoted(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
