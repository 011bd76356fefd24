"""A rewrite's destination on an object store (S3, GCS, ADLS): staged, checked, then uploaded
with Spark's ``metadata`` last.

An object store has no rename, so "DST appears only complete" is made of order instead:

1. the destination prefix must hold no object (or only a killed rewrite's leftovers, below);
2. the tree is written and self-checked in a local staging directory, as for a local DST;
3. an owner object ``DST/.stateglass-rewrite.owner`` (the process, ``owner.py``) goes up
   first, then every file but ``metadata``, then ``metadata``: the file that makes a prefix a
   checkpoint for Spark (and for StateGlass) arrives only after everything it needs;
4. the owner object is removed. A failure before ``metadata`` removes every object written.

A killed upload leaves objects and the owner object but no ``metadata``: the next rewrite to
the same DST removes them when the owner names a process of this host that is gone, and
refuses any other non-empty prefix.

Example::

    dest = create_destination("s3://bucket/cp/orders-16")   # an ObjectStoreDestination
    dest.copy_logs(cp, 41, conf, 16)                        # into dest.root (local staging)
    dest.commit()                                           # uploads, metadata last
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from stateglass.collectors.errors import CollectorError, RewriteRefused
from stateglass.collectors.remote import object_client
from stateglass.collectors.remote.failures import storage_error
from stateglass.collectors.remote.urls import parse_location
from stateglass.collectors.rewrite.destination import Destination
from stateglass.collectors.rewrite.owner import OwnerMark

OWNER_KEY = ".stateglass-rewrite.owner"
T = TypeVar("T")


def create_destination(dst: str) -> Destination:
    """Where a rewrite to ``dst`` writes: an :class:`ObjectStoreDestination` for an
    object-store URL, else the local temporary sibling of :class:`Destination`."""
    try:
        location = parse_location(dst)
    except ValueError as exc:
        raise RewriteRefused(dst.split("://", 1)[0] + "://…", str(exc)) from exc
    if location.is_local:
        return Destination.create(location.canonical)
    return ObjectStoreDestination.create(dst)


class RemotePrefix:
    """The objects under one prefix, through the fsspec client of its store; every failure
    a one-line error."""

    def __init__(self, url: str, client: Any, key: str, secrets: Mapping[str, object]) -> None:
        self.url = url
        self._client = client
        self.key = key.rstrip("/")
        self._secrets = secrets

    @classmethod
    def of(cls, url: str) -> RemotePrefix:
        client, loc, secrets = object_client(url)
        return cls(loc.canonical, client, loc.key, secrets)

    def objects(self) -> list[str]:
        """Keys of every object under the prefix."""
        found = self._call(lambda: self._client.find(self.key))
        return [k for k in found if k.startswith(self.key + "/")]

    def read(self, key: str) -> bytes:
        return self._call(lambda: bytes(self._client.cat_file(key)))

    def put(self, key: str, data: bytes) -> None:
        self._call(lambda: self._client.pipe_file(key, data))

    def remove(self, keys: list[str]) -> None:
        if keys:
            self._call(lambda: self._client.rm(keys))

    def remove_quietly(self, keys: list[str]) -> None:
        """Best effort after a failure: the failure itself is what the user must see."""
        for key in keys:
            try:
                self._client.rm_file(key)
            except Exception:  # a key never written is not there
                continue

    def _call(self, fn: Callable[[], T]) -> T:
        """``fn()``, a storage failure wrapped as the one-line error of its kind."""
        try:
            return fn()
        except CollectorError:
            raise
        except Exception as exc:
            wrapped = storage_error(self.url, exc, self._secrets)
            if wrapped is None:
                raise RewriteRefused(self.url, f"cannot write: {exc}") from exc
            raise wrapped from exc


class ObjectStoreDestination(Destination):
    """A local staging tree whose :meth:`commit` uploads it under a remote prefix."""

    def __init__(self, dst: str, root: str, prefix: RemotePrefix) -> None:
        super().__init__(dst, root)
        self.prefix = prefix

    @classmethod
    def create(cls, dst: str) -> ObjectStoreDestination:
        """Refused unless the prefix at ``dst`` is empty (or a killed rewrite's, removed)."""
        prefix = RemotePrefix.of(dst)
        existing = prefix.objects()
        if existing:
            if not _killed_leftovers(prefix, existing):
                raise RewriteRefused(prefix.url, "the destination exists and is not empty")
            prefix.remove(existing)
        return cls(prefix.url, tempfile.mkdtemp(prefix="stateglass-rewrite-"), prefix)

    def commit(self) -> None:
        """Upload the staged tree, ``metadata`` last; on failure remove what was uploaded."""
        files = sorted(_relative_files(self.root), key=lambda rel: rel == "metadata")
        owner = f"{self.prefix.key}/{OWNER_KEY}"
        uploaded = [owner]
        try:
            self.prefix.put(owner, OwnerMark.of_this_process().to_bytes())
            for rel in files:
                with open(os.path.join(self.root, rel), "rb") as f:
                    data = f.read()
                uploaded.append(f"{self.prefix.key}/{rel}")
                self.prefix.put(uploaded[-1], data)
        except BaseException:
            self.prefix.remove_quietly(uploaded)
            raise
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
        self.prefix.remove([owner])

    def discard(self) -> None:
        """Remove the staging tree (nothing was uploaded before :meth:`commit`)."""
        shutil.rmtree(self.root, ignore_errors=True)


def _killed_leftovers(prefix: RemotePrefix, existing: list[str]) -> bool:
    """Whether ``existing`` is what a killed upload of ours left: no ``metadata``, and an
    owner object naming a process of this host that is gone."""
    owner = f"{prefix.key}/{OWNER_KEY}"
    if f"{prefix.key}/metadata" in existing or owner not in existing:
        return False
    mark = OwnerMark.from_bytes(prefix.read(owner))
    return mark is not None and mark.gone()


def _relative_files(root: str) -> list[str]:
    """Every file under ``root`` as a POSIX path relative to it."""
    out = []
    for dirpath, _, names in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in names:
            out.append(name if rel == "." else posixpath.join(*rel.split(os.sep), name))
    return out
