"""Which files the checkpoint corpus holds, known at collection time (from the tarball index).

Tests get the unpacked files from the session fixture ``fixture_corpus``; parametrizing needs
the names earlier, so they are read from the tarball's member list, which is cheap.
"""

from __future__ import annotations

import re
import tarfile
from functools import lru_cache
from typing import Any

import pytest

from tests.conftest import CORPUS_MISSING, CORPUS_TARBALL

TARBALL = CORPUS_TARBALL


@lru_cache(maxsize=1)
def member_names() -> tuple[str, ...]:
    """Paths of the regular files in the corpus, relative to its ``out`` directory."""
    if not TARBALL.exists():
        raise FileNotFoundError(CORPUS_MISSING)
    with tarfile.open(TARBALL) as tar:
        return tuple(sorted(m.name.removeprefix("out/") for m in tar.getmembers() if m.isfile()))


def readable_id(path: str) -> str:
    """``4.3.0/tws-rocks-cl/checkpoint/offsets/0`` → ``4.3.0/tws-rocks-cl/offsets/0``."""
    return path.replace("/checkpoint/", "/").removesuffix("/checkpoint")


def files(pattern: str) -> list[Any]:
    """``pytest.param`` per corpus file whose relative path fully matches ``pattern``."""
    regex = re.compile(pattern)
    params = [pytest.param(n, id=readable_id(n)) for n in member_names() if regex.fullmatch(n)]
    assert params, f"no corpus file matches {pattern!r}"
    return params


def checkpoints() -> list[Any]:
    """``pytest.param`` per checkpoint directory that has a ``metadata`` file."""
    roots = sorted(
        n.removesuffix("/metadata") for n in member_names() if n.endswith("/checkpoint/metadata")
    )
    params = [pytest.param(r, id=readable_id(r)) for r in roots]
    assert params, "the corpus holds no checkpoint"
    return params
