"""Which paths a dashboard visitor may name: the roots given at start, plus ``--allow-path``.

Anyone who reaches the dashboard can type a path into the Watch box. Only paths inside the
allowed roots are looked at, after resolving ``~``, ``..`` and symlinks, and every refusal is
the same line, so that the answer tells nothing about what exists outside them.

Example::

    roots = allowed_roots()                  # from $STATEGLASS_ALLOWED_PATHS, set by the CLI
    path = resolve("/data/cp/orders", roots)  # or AppError(REFUSAL)
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from stateglass.app.errors import AppError

# JSON list of allowed roots (paths or URLs), set by ``stateglass dashboard`` for its server.
ALLOWED_ENV = "STATEGLASS_ALLOWED_PATHS"
REFUSAL = (
    "Refused: this dashboard watches only paths under the folders it was started with "
    "(its owner can add one with --allow-path)."
)


def allowed_roots() -> list[str]:
    """The allowed roots passed by the CLI; none (everything refused) when unset or unreadable."""
    try:
        roots = json.loads(os.environ.get(ALLOWED_ENV, "[]"))
    except ValueError:
        return []
    if not isinstance(roots, list):
        return []
    return [canonical(r) for r in roots if isinstance(r, str) and r.strip()]


def encode(roots: Sequence[str]) -> str:
    """The value of :data:`ALLOWED_ENV` for ``roots``."""
    return json.dumps([canonical(r) for r in roots])


def is_url(path: str) -> bool:
    return "://" in path


def canonical(path: str) -> str:
    """A root's comparable form: a URL without trailing ``/``, a local path fully resolved."""
    path = path.strip()
    if is_url(path):
        from stateglass.collectors.remote import canonical as canonical_url

        # No user:password@ or token in what is shown or stored; s3a:// and s3:// compare equal.
        return canonical_url(path)
    return os.path.realpath(os.path.expanduser(path))


def inside(path: str, roots: Sequence[str]) -> bool:
    """Whether the canonical ``path`` is one of ``roots`` or below one."""
    for root in roots:
        if is_url(path) != is_url(root):
            continue
        if is_url(path):
            if path == root or path.startswith(root + "/"):
                return True
        elif os.path.commonpath([path, root]) == root:
            return True
    return False


def resolve(typed: str, roots: Sequence[str]) -> str:
    """The canonical form of ``typed`` when it lies inside ``roots``; else AppError(REFUSAL)."""
    text = typed.strip()
    # ``..`` in a URL is not resolved by object stores the way a shell would: refuse it.
    if not text or "\0" in text or (is_url(text) and "/../" in text.rstrip("/") + "/"):
        raise AppError(REFUSAL)
    from stateglass.collectors.errors import CollectorError

    try:
        path = canonical(text)
    except (OSError, ValueError, CollectorError) as exc:  # an unknown URL scheme, say
        raise AppError(REFUSAL) from exc
    if not inside(path, roots):
        raise AppError(REFUSAL)
    return path
