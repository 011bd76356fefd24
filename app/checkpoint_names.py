"""Names for checkpoint paths that tell them apart: the shortest distinguishing tail.

Checkpoints a team collects often share a long prefix (``/mnt/lake/prod/ckpts/…``) and
sometimes a last component too (``…/v1/orders`` and ``…/v2/orders``). A picker or a list
that shows each path's first or last few components alone shows several options as the
same text. Here each path keeps as many trailing components as it needs to differ from
every other path of the list; the full path goes on hover. Pure: strings in, strings out.

Example::

    names = distinct_names(["/lake/a/orders", "/lake/b/orders", "/lake/b/users"])
    assert names == {
        "/lake/a/orders": "a/orders",
        "/lake/b/orders": "b/orders",
        "/lake/b/users": "users",
    }
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable


def _components(path: str) -> list[str]:
    """A path's components; a leading separator and trailing ones name nothing."""
    pieces = path.rstrip(os.sep).split(os.sep)
    return pieces[1:] if pieces and pieces[0] == "" else pieces


def _shared_tail(a: list[str], b: list[str]) -> int:
    """How many trailing components ``a`` and ``b`` have in common."""
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def tail(path: str, parts: int) -> str:
    """The last ``parts`` components of ``path``; the path itself when that would keep all
    of them (so a short path keeps its leading ``/``)."""
    named = _components(path)
    if parts >= len(named):
        return path
    return os.sep.join(named[-parts:])


def distinct_names(paths: Iterable[str]) -> dict[str, str]:
    """Each path's shortest distinguishing tail: unique paths give unique names.

    A path keeps one component more than it shares, at its end, with any other path of the
    list. Where a tail still reads like another path's name (a relative path, itself a tail
    of another), both show in full.
    """
    unique = list(dict.fromkeys(paths))
    parts = {p: _components(p) for p in unique}
    by_last: dict[str, list[str]] = {}
    for p in unique:
        by_last.setdefault(parts[p][-1] if parts[p] else p, []).append(p)
    names: dict[str, str] = {}
    for group in by_last.values():
        # Only paths ending alike can share a tail: compare within the group, not the list.
        for p in group:
            shared = max((_shared_tail(parts[p], parts[q]) for q in group if q != p), default=0)
            names[p] = tail(p, shared + 1)
    while True:
        counts = Counter(names.values())
        clashing = [p for p, n in names.items() if counts[n] > 1 and n != p]
        if not clashing:
            return names
        for p in clashing:
            names[p] = p
