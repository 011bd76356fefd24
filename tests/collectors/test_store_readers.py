"""Every provider's reader answers the whole ``StoreReader`` protocol the same way, and
callers never ask which reader they hold: a provider outside the package, registered in
``READERS`` alone, counts keys exactly as the built-in one it reads through."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Collection, Iterator, Sequence
from typing import ClassVar

import pytest

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.scan.chains import ChainTask, compute_chain
from stateglass.collectors.stores import READERS, StoreContext, StoreReader, classify_name
from stateglass.collectors.stores.base import Change
from tests.collectors.helpers import ROOT, sample_id, sample_paths


def _partitions(path: str) -> Iterator[tuple[StateSource, str, StoreReader]]:
    """``(source, store directory, reader)`` of every store partition of a checkpoint."""
    cp = Checkpoint.open(path)
    for store in cp.stores():
        source = StateSource(cp, StateRequest(store.operator_id, store.store_name))
        for partition in store.partitions:
            store_dir = cp.store_dir(store.operator_id, partition, store.store_name)
            yield source, store_dir, source.reader(partition)


SAMPLES = [pytest.param(p, id=sample_id(p)) for p in sample_paths()]


@pytest.mark.parametrize("path", SAMPLES)
def test_version_kinds_follow_the_file_names(path: str) -> None:
    """Change and full versions are those of the files ``classify`` names, and every
    rebuildable version has one of them."""
    for source, store_dir, reader in _partitions(path):
        kind = type(reader)
        names = [f.name for f in StoreContext(source.cp.fs, store_dir).listing()]
        classified = [c for c in map(kind.classify, names) if c is not None]
        assert classified, names
        assert {v for v, k in classified if k == kind.CHANGE_KIND} == reader.change_versions()
        assert {v for v, k in classified if k == kind.FULL_KIND} == reader.full_versions()
        assert all(classify_name(n) == kind.classify(n) for n in names)
        assert set(reader.versions()) <= reader.change_versions() | reader.full_versions()


@pytest.mark.parametrize("path", SAMPLES)
def test_key_sets_and_counts_agree_with_a_full_rebuild(path: str) -> None:
    """``load_keys``, ``apply_keys`` and a trusted ``recorded_num_keys`` give the keys of
    ``load`` at every version."""
    for source, _, reader in _partitions(path):
        versions = reader.versions()
        for version in versions:
            full = {k for k, _ in reader.load(version)}
            assert reader.load_keys(version) == full
            if version in reader.change_versions() and (version == 1 or version - 1 in versions):
                keys = reader.load_keys(version - 1)
                before = len(keys)
                added, updated, removed = reader.apply_keys(keys, version)
                assert keys == full
                assert before + added - removed == len(full)
                assert min(added, updated, removed) >= 0
            recorded = reader.recorded_num_keys(version)
            if recorded is not None and not source.store.uses_column_families:
                assert recorded == len(full)


@pytest.mark.parametrize("path", SAMPLES)
def test_shared_files_are_present_with_their_sizes(path: str) -> None:
    for source, store_dir, reader in _partitions(path):
        shared_dir = type(reader).SHARED_DIR
        for version in reader.full_versions():
            shared = reader.shared_files(version)
            if shared_dir is None:
                assert shared is None
                continue
            assert shared is not None
            where = f"{store_dir}/{shared_dir}"
            present = {f.name: f.size for f in source.cp.fs.list(where)}
            assert {n: present.get(n) for n in shared} == shared


class Delegating:
    """A provider that is no built-in reader: every answer comes from one it wraps."""

    CHANGE_KIND: ClassVar[str]
    FULL_KIND: ClassVar[str]
    SHARED_DIR: ClassVar[str | None]
    inner: ClassVar[type[StoreReader]]

    def __init__(self, ctx: StoreContext) -> None:
        self.of = self.inner(ctx)

    @staticmethod
    def classify(name: str) -> tuple[int, str] | None:
        return classify_name(name)

    def versions(self) -> list[int]:
        return self.of.versions()

    def change_versions(self) -> set[int]:
        return self.of.change_versions()

    def full_versions(self) -> set[int]:
        return self.of.full_versions()

    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        return self.of.load(version)

    def load_keys(self, version: int) -> set[bytes]:
        return self.of.load_keys(version)

    def changes(self, version: int) -> Iterator[Change]:
        return self.of.changes(version)

    def apply_keys(self, keys: set[bytes], version: int) -> tuple[int, int, int]:
        return self.of.apply_keys(keys, version)

    def lookup(
        self, keys: Collection[bytes], versions: Sequence[int]
    ) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        return self.of.lookup(keys, versions)

    def differing_keys(self, before: int, after: int) -> list[bytes] | None:
        return self.of.differing_keys(before, after)

    def flushed_changes(self, before: int, after: int) -> dict[bytes, bytes | None] | None:
        return self.of.flushed_changes(before, after)

    def recorded_num_keys(self, version: int) -> int | None:
        return self.of.recorded_num_keys(version)

    def shared_files(self, version: int) -> dict[str, int] | None:
        return self.of.shared_files(version)

    def column_family_id(self, name: str) -> int | None:
        return self.of.column_family_id(name)

    def chain_data(self, version: int) -> tuple[bytes | None, list[bytes]] | None:
        return self.of.chain_data(version)

    def sorted_runs(self, version: int) -> list[list[bytes]] | None:
        return self.of.sorted_runs(version)


def _delegating(provider: str) -> type[StoreReader]:
    inner = READERS[provider]
    attrs = {
        "inner": inner,
        "CHANGE_KIND": inner.CHANGE_KIND,
        "FULL_KIND": inner.FULL_KIND,
        "SHARED_DIR": inner.SHARED_DIR,
    }
    return type(f"Delegating{provider.title()}", (Delegating,), attrs)


@pytest.mark.parametrize(
    "name", ["spark-4.3/agg-hdfs", "spark-4.3/agg-rocks", "spark-4.3/agg-rocks-cl"]
)
def test_a_registered_provider_counts_like_the_one_it_reads_through(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cp = Checkpoint.open(str(ROOT / "sample_checkpoints" / name))
    store = cp.stores()[0]
    monkeypatch.setitem(READERS, "delegating", _delegating(store.provider))
    for partition in store.partitions:
        task = ChainTask(
            cp.root,
            store.operator_id,
            store.store_name,
            partition,
            cp.store_dir(store.operator_id, partition, store.store_name),
            store.provider,
        )
        builtin = compute_chain(task)
        other = compute_chain(dataclasses.replace(task, provider="delegating"))
        assert builtin.versions and not builtin.problems
        assert other.versions == builtin.versions
        assert other.problems == builtin.problems


CONCRETE = {"HdfsStoreReader", "RocksDBStoreReader", "VERSION_FILES"}


def test_callers_never_name_a_concrete_reader() -> None:
    """Outside ``collectors/stores``, code holds a ``StoreReader`` and never asks which: no
    concrete reader class is named, and no reader's private ``_records`` is called."""
    files = [
        path
        for layer in ("app", "collectors")
        for path in sorted((ROOT / layer).rglob("*.py"))
        if (ROOT / "collectors" / "stores") not in path.parents
    ]
    named = [
        f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.Name) and node.id in CONCRETE)
        or (isinstance(node, ast.alias) and node.name in CONCRETE)
        or (isinstance(node, ast.Attribute) and node.attr == "_records")
    ]
    assert len(files) > 50
    assert named == []
