"""The tests every provider's reader passes, for a plugin author to run on their own reader.

A reader (docs/providers.md) is right when StateGlass can rely on what it answers without
asking which reader it holds. Subclass :class:`StoreReaderConformance` in your own tests, and
give it a checkpoint a real query wrote with your provider and the provider's name as the
offset log pins it (its entry point's name); pytest then runs every test below on it::

    import pytest

    from stateglass.collectors.stores.conformance import StoreReaderConformance


    class TestAcmeReader(StoreReaderConformance):
        @pytest.fixture
        def checkpoint(self) -> str:
            return "tests/data/acme-checkpoint"

        @pytest.fixture
        def provider(self) -> str:
            return "com.acme.AcmeStateStoreProvider"

The suite's fixtures are per test; give yours any scope (a checkpoint a query writes once
per session, say). The suite opens each store partition as StateGlass does (the provider's
entry point in the group ``stateglass.providers``, so install your plugin first) and checks,
at every version:

* the entries the reader names (:meth:`~StoreReader.classify`, or
  :meth:`~StoreReader.list_entries` for a store kept outside the checkpoint) are its change and
  full versions, and the versions it can rebuild are among them;
* version 0 is the empty store; the keys of :meth:`~StoreReader.load` are those of
  :meth:`~StoreReader.load_keys`, of the previous version's keys with
  :meth:`~StoreReader.apply_keys`, and the count :meth:`~StoreReader.recorded_num_keys`
  records; a version's :meth:`~StoreReader.changes` replayed on the version before give it;
  :meth:`~StoreReader.lookup`, :meth:`~StoreReader.differing_keys` and
  :meth:`~StoreReader.flushed_changes` agree with whole versions;
* a version never written, a version whose data is gone and a damaged version raise a
  :class:`~stateglass.collectors.errors.CheckpointError` (``MissingVersion`` for the first
  two) with a one-line message that says which version or which file;
* reading writes nothing.

The damaged and missing versions are made on a copy of a local checkpoint, by removing or
overwriting the files of one version. A provider whose state is not files in the checkpoint
overrides the fixtures :meth:`~StoreReaderConformance.missing_version`,
:meth:`~StoreReaderConformance.damaged_version` and
:meth:`~StoreReaderConformance.store_contents` (the DynamoDB reader's tests do, in
tests/dynamodb/test_conformance.py). To compare the rows with those Spark reads, subclass
:class:`stateglass.app.provider_conformance.ProviderConformance` instead: it runs these
tests too.

Only test code imports this module: it needs pytest, which StateGlass itself does not.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.errors import CheckpointError, MissingVersion
from stateglass.collectors.fs import FileInfo
from stateglass.collectors.stores import StoreContext, StoreReader, classify_name, reader_class

try:
    from stateglass.parsers import _speedups
except ImportError:  # not built, or STATEGLASS_PURE: the compiled merge is not checked
    _speedups = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from typing_extensions import Buffer

ROW_LAYOUTS = ("hdfs", "rocksdb")
# Names in a store directory that are no version of any provider's.
FOREIGN_NAMES = ("", "_metadata", "schema", "1.delta.crc", ".1.zip.crc", "x.zip", "SSTs")
# A key no store holds (a lookup of it finds nothing).
ABSENT_KEY = b"\x00stateglass conformance: no such key\x00"
LOOKUP_KEYS = 16


@dataclass(frozen=True)
class StorePartition:
    """One store partition of the checkpoint, and the reader StateGlass opens on it."""

    store: StoreInfo
    partition: int
    store_dir: str
    reader: StoreReader
    context: StoreContext  # what the listing gets: the checkpoint's file system, the directory
    merge_delimiter: bytes

    def __str__(self) -> str:
        return self.store_dir


@dataclass(frozen=True)
class BrokenVersion:
    """A copy of the checkpoint in which one version of one store partition cannot be read.

    Each of ``reads`` (:func:`reads_of`) fails with a one-line error naming one of ``names``
    (the version, or the damaged file or item). A damaged value need not stop ``load_keys``
    of a store that keeps keys apart from values.
    """

    checkpoint: str
    operator_id: int
    store_name: str
    partition: int
    version: int
    names: tuple[str, ...]
    reads: tuple[str, ...] = ("load", "load_keys")


def store_partitions(checkpoint: str) -> list[StorePartition]:
    """Every store partition of ``checkpoint`` with the reader StateGlass opens on it."""
    cp = Checkpoint.open(checkpoint)
    found = []
    for store in cp.stores():
        source = StateSource(cp, StateRequest(store.operator_id, store.store_name))
        for partition in store.partitions:
            store_dir = cp.store_dir(store.operator_id, partition, store.store_name)
            found.append(
                StorePartition(
                    store,
                    partition,
                    store_dir,
                    source.reader(partition),
                    StoreContext(cp.fs, store_dir),
                    source.merge_delimiter,
                )
            )
    return found


def open_broken(broken: BrokenVersion) -> StorePartition:
    """The store partition of a :class:`BrokenVersion`, opened as StateGlass opens it."""
    for found in store_partitions(broken.checkpoint):
        if (found.store.operator_id, found.store.store_name, found.partition) == (
            broken.operator_id,
            broken.store_name,
            broken.partition,
        ):
            return found
    raise AssertionError(f"{broken.checkpoint}: no store partition as {broken} names")


def entries(part: StorePartition) -> list[FileInfo]:
    """The entries the reader names versions by: the store's own, or the directory's files."""
    kept_elsewhere = type(part.reader).list_entries(part.context)
    return kept_elsewhere if kept_elsewhere is not None else part.context.listing()


def replay(state: dict[bytes, bytes], part: StorePartition, version: int) -> dict[bytes, bytes]:
    """``state`` with ``version``'s changes applied as Spark applies them."""
    out = dict(state)
    for change, key, value in part.reader.changes(version):
        if change == "delete":
            out.pop(key, None)
            continue
        assert value is not None, f"{part}: version {version}: {change} of a key without a value"
        old = out.get(key) if change == "append" else None
        out[key] = value if old is None else old + part.merge_delimiter + value
    return out


def runs(versions: list[int]) -> list[list[int]]:
    """``versions`` cut where a version is missing: ``[1, 2, 4]`` -> ``[[1, 2], [4]]``."""
    out: list[list[int]] = []
    for v in versions:
        if out and out[-1][-1] == v - 1:
            out[-1].append(v)
        else:
            out.append([v])
    return out


def merged_pairs(
    rows: int, keys: tuple[Buffer, Buffer] | None, values: tuple[Buffer, Buffer] | None
) -> list[tuple[bytes, bytes]]:
    """The ``(key, value)`` rows of a compiled merge's columns, each ``(int64 offsets,
    data)`` as Arrow's large_binary buffers."""

    def side(buffers: tuple[Buffer, Buffer] | None) -> list[bytes]:
        assert buffers is not None
        offsets, data = buffers
        at, held = memoryview(offsets).cast("q"), memoryview(data)
        return [bytes(held[at[i] : at[i + 1]]) for i in range(rows)]

    return list(zip(side(keys), side(values), strict=True))


def assert_one_line(exc: BaseException, where: str, names: tuple[str, ...]) -> None:
    """A checkpoint error a user can read: one line, naming one of ``names``."""
    assert isinstance(exc, CheckpointError), f"{where}: {type(exc).__name__}, not a CheckpointError"
    message = str(exc)
    assert message and "\n" not in message, f"{where}: not one line: {message!r}"
    named = [
        n for n in names if re.search(rf"(?<![0-9A-Za-z]){re.escape(n)}(?![0-9A-Za-z])", message)
    ]
    assert named, f"{where}: {message!r} names none of {names}"


def reads_of(reader: StoreReader, version: int) -> dict[str, Callable[[], object]]:
    """Each way to read ``version``, run to its end."""
    return {
        "load": lambda: list(reader.load(version)),
        "load_keys": lambda: reader.load_keys(version),
        "changes": lambda: list(reader.changes(version)),
        "lookup": lambda: list(reader.lookup([ABSENT_KEY], [version])),
    }


def file_contents(root: str) -> dict[str, str]:
    """Every file under local directory ``root``: its path below it, and a hash of its bytes."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _local_copy(checkpoint: str, target: Path, fixture: str) -> Path:
    if not os.path.isdir(checkpoint):
        pytest.fail(
            f"{checkpoint} is not a local directory: override the fixture {fixture!r}",
            pytrace=False,
        )
    copy = target / "checkpoint"
    shutil.copytree(checkpoint, copy, symlinks=True)
    return copy


def break_a_version(
    checkpoint: str, parts: list[StorePartition], target: Path, fixture: str, damage: bool
) -> BrokenVersion:
    """A copy of a local checkpoint in which one version's files are removed, or overwritten
    with bytes no provider writes (``damage``): a middle version of the first partition that
    has more than one."""
    part = next((p for p in parts if len(p.reader.versions()) > 1), None)
    assert part is not None, f"{checkpoint}: no store partition has two versions to read"
    if type(part.reader).list_entries(part.context) is not None:
        pytest.fail(
            f"{part}: the store is kept outside the checkpoint: override the fixture {fixture!r}",
            pytrace=False,
        )
    versions = part.reader.versions()
    version = versions[len(versions) // 2]
    copy = _local_copy(checkpoint, target, fixture)
    store_dir = copy / os.path.relpath(part.store_dir, Checkpoint.open(checkpoint).root)
    classify = type(part.reader).classify
    names = sorted(
        f.name for f in part.context.listing() if (classify(f.name) or (-1,))[0] == version
    )
    for name in names:
        if damage:
            (store_dir / name).write_bytes(b"\x00not a state file\xff" * 64)
        else:
            (store_dir / name).unlink()
    return BrokenVersion(
        str(copy),
        part.store.operator_id,
        part.store.store_name,
        part.partition,
        version,
        tuple(names) if damage else (str(version),),
    )


class StoreReaderConformance:
    """The reader protocol (:class:`~stateglass.collectors.stores.base.StoreReader`), checked
    on a real checkpoint of one provider. Subclass it with a name pytest collects
    (``Test…``) and override :meth:`checkpoint` and :meth:`provider`."""

    # ---- fixtures: override the first two -------------------------------------------------

    @pytest.fixture
    def checkpoint(self) -> str:
        """The path or URL of a checkpoint a query wrote with the provider."""
        raise NotImplementedError("override the fixture 'checkpoint' in your subclass")

    @pytest.fixture
    def provider(self) -> str:
        """The provider's name as the offset log pins it (its entry point's name)."""
        raise NotImplementedError("override the fixture 'provider' in your subclass")

    @pytest.fixture
    def store_contents(self, checkpoint: str) -> Callable[[], object]:
        """What the provider stores, in a form two readings compare equal when nothing
        changed: every file of a local checkpoint. A store kept elsewhere adds its own."""
        if not os.path.isdir(checkpoint):
            pytest.fail(f"{checkpoint}: override the fixture 'store_contents'", pytrace=False)
        return lambda: file_contents(checkpoint)

    @pytest.fixture
    def pristine(self, store_contents: Callable[[], object]) -> object:
        """The store's contents before the suite read anything."""
        return store_contents()

    @pytest.fixture
    def parts(self, checkpoint: str, pristine: object) -> list[StorePartition]:
        return store_partitions(checkpoint)

    @pytest.fixture
    def missing_version(
        self, checkpoint: str, parts: list[StorePartition], tmp_path: Path
    ) -> BrokenVersion:
        """A copy of the checkpoint without one version's data (its files removed)."""
        return break_a_version(checkpoint, parts, tmp_path, "missing_version", damage=False)

    @pytest.fixture
    def damaged_version(
        self, checkpoint: str, parts: list[StorePartition], tmp_path: Path
    ) -> BrokenVersion:
        """A copy of the checkpoint with one version's data damaged (its files overwritten)."""
        return break_a_version(checkpoint, parts, tmp_path, "damaged_version", damage=True)

    # ---- what the reader is -----------------------------------------------------------------

    def test_the_checkpoint_is_read_by_the_providers_reader(
        self, provider: str, parts: list[StorePartition]
    ) -> None:
        assert parts, "the checkpoint has no state store"
        reader = reader_class(provider)
        members = {n for n in vars(StoreReader) if not n.startswith("_")}
        members |= set(StoreReader.__annotations__)
        assert sorted(m for m in members if not hasattr(reader, m)) == []
        for part in parts:
            assert part.store.provider == provider, f"{part}: written by {part.store.provider}"
            assert type(part.reader) is reader

    def test_the_reader_names_its_kinds(self, provider: str) -> None:
        reader = reader_class(provider)
        kinds = (reader.CHANGE_KIND, reader.FULL_KIND)
        assert all(isinstance(k, str) and k for k in kinds) and kinds[0] != kinds[1], kinds
        assert reader.SHARED_DIR is None or (
            isinstance(reader.SHARED_DIR, str) and reader.SHARED_DIR
        )
        assert reader.ROW_LAYOUT in ROW_LAYOUTS
        assert [n for n in FOREIGN_NAMES if reader.classify(n) is not None] == []

    def test_versions_are_those_of_the_entries(self, parts: list[StorePartition]) -> None:
        """Change and full versions are those of the entries ``classify`` names; every
        version that can be rebuilt is one of them; no other provider reads the names."""
        for part in parts:
            kind = type(part.reader)
            found = entries(part)
            named = {f.name: kind.classify(f.name) for f in found if not f.is_dir}
            classified = [c for c in named.values() if c is not None]
            assert [f.name for f in found if named.get(f.name) and f.size <= 0] == [], str(part)
            assert {k for _, k in classified} <= {kind.CHANGE_KIND, kind.FULL_KIND}, str(part)
            changes = {v for v, k in classified if k == kind.CHANGE_KIND}
            assert part.reader.change_versions() == changes, str(part)
            assert part.reader.full_versions() == {v for v, k in classified if k == kind.FULL_KIND}
            versions = part.reader.versions()
            assert versions == sorted(set(versions)), str(part)
            assert set(versions) <= changes | part.reader.full_versions(), str(part)
            assert {n: classify_name(n) for n in named} == named, str(part)
        assert any(part.reader.versions() for part in parts), "no version can be read"

    # ---- what a version holds ---------------------------------------------------------------

    def test_version_zero_is_the_empty_store(self, parts: list[StorePartition]) -> None:
        for part in parts:
            assert list(part.reader.load(0)) == [], str(part)
            assert part.reader.load_keys(0) == set(), str(part)

    def test_keys_and_counts_are_those_of_the_rows(self, parts: list[StorePartition]) -> None:
        """One value per key; ``load_keys``, ``apply_keys`` on the version before and a
        recorded count give the keys of ``load``."""
        for part in parts:
            readable = set(part.reader.versions())
            for version in sorted(readable):
                where = f"{part} version {version}"
                items = list(part.reader.load(version))
                assert all(isinstance(k, bytes) and isinstance(v, bytes) for k, v in items), where
                keys = {k for k, _ in items}
                assert len(keys) == len(items), f"{where}: a key twice"
                assert part.reader.load_keys(version) == keys, where
                if version in part.reader.change_versions() and (
                    version == 1 or version - 1 in readable
                ):
                    applied = part.reader.load_keys(version - 1)
                    before = len(applied)
                    added, updated, removed = part.reader.apply_keys(applied, version)
                    assert applied == keys, where
                    assert min(added, updated, removed) >= 0, where
                    assert before + added - removed == len(keys), where
                recorded = part.reader.recorded_num_keys(version)
                if recorded is not None and not part.store.uses_column_families:
                    assert recorded == len(keys), where

    def test_changes_replayed_on_the_version_before_give_the_version(
        self, parts: list[StorePartition]
    ) -> None:
        for part in parts:
            readable = set(part.reader.versions())
            for version in sorted(readable):
                where = f"{part} version {version}"
                if version not in part.reader.change_versions():
                    with pytest.raises(MissingVersion):
                        list(part.reader.changes(version))
                elif version == 1 or version - 1 in readable:
                    before = dict(part.reader.load(version - 1))
                    assert replay(before, part, version) == dict(part.reader.load(version)), where

    def test_lookup_finds_what_load_holds(self, parts: list[StorePartition]) -> None:
        for part in parts:
            for versions in runs(part.reader.versions()):
                states = {v: dict(part.reader.load(v)) for v in versions}
                keys = sorted(set().union(*states.values()))
                wanted = [*keys[:: max(1, len(keys) // LOOKUP_KEYS)], ABSENT_KEY]
                expected = [
                    (v, {k: states[v][k] for k in wanted if k in states[v]}) for v in versions
                ]
                assert list(part.reader.lookup(wanted, versions)) == expected, str(part)

    def test_shared_files_are_present_with_their_sizes(self, parts: list[StorePartition]) -> None:
        for part in parts:
            shared_dir = type(part.reader).SHARED_DIR
            for version in sorted(part.reader.full_versions()):
                shared = part.reader.shared_files(version)
                if shared_dir is None:
                    assert shared is None, f"{part} version {version}"
                    continue
                assert shared is not None, f"{part} version {version}"
                present = {
                    f.name: f.size for f in part.context.fs.list(part.context.join(shared_dir))
                }
                assert {n: present.get(n) for n in shared} == shared, f"{part} version {version}"

    def test_what_two_full_versions_differ_in_covers_every_change(
        self, parts: list[StorePartition]
    ) -> None:
        """``differing_keys`` names every key whose value changed, in order; applying
        ``flushed_changes`` to the older version gives the newer; either may say None."""
        for part in parts:
            full = sorted(set(part.reader.versions()) & part.reader.full_versions())
            for before, after in itertools.pairwise(full):
                where = f"{part} versions {before} and {after}"
                old, new = dict(part.reader.load(before)), dict(part.reader.load(after))
                keys = part.reader.differing_keys(before, after)
                if keys is not None:
                    assert keys == sorted(set(keys)), where
                    changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
                    assert changed <= set(keys), where
                flushed = part.reader.flushed_changes(before, after)
                if flushed is not None:
                    merged = {**old, **flushed}
                    assert {k: v for k, v in merged.items() if v is not None} == new, where

    def test_optional_answers_are_answers_or_none(self, parts: list[StorePartition]) -> None:
        for part in parts:
            assert part.reader.column_family_id(ABSENT_KEY.decode("latin-1")) is None
            for version in part.reader.versions():
                data = part.reader.chain_data(version)
                if data is not None:
                    snapshot, deltas = data
                    assert snapshot is None or isinstance(snapshot, bytes), str(part)
                    assert all(isinstance(d, bytes) for d in deltas), str(part)
                runs = part.reader.sorted_runs(version)
                if runs is not None:
                    assert all(isinstance(b, bytes) for run in runs for b in run), str(part)

    def test_sorted_runs_merge_to_the_loaded_state(self, parts: list[StorePartition]) -> None:
        """Tables a reader gives for the compiled merge hold what :meth:`load` reads."""
        merge = getattr(_speedups, "runs_columns", None)
        if merge is None:
            pytest.skip("the compiled speedups are not built")
        for part in parts:
            for version in part.reader.versions():
                runs = part.reader.sorted_runs(version)
                if runs is None:
                    continue
                merged = merge(runs, True, True, False)
                if merged is None:
                    continue  # an entry only RocksDB resolves (a merge operand, say)
                assert merged_pairs(*merged) == sorted(part.reader.load(version)), (
                    f"{part} version {version}"
                )

    # ---- what cannot be read ----------------------------------------------------------------

    def test_a_version_never_written_is_missing(self, parts: list[StorePartition]) -> None:
        for part in parts:
            known = part.reader.change_versions() | part.reader.full_versions()
            version = max(known, default=0) + 1
            for name, read in reads_of(part.reader, version).items():
                with pytest.raises(MissingVersion) as raised:
                    read()
                assert_one_line(raised.value, f"{part} {name}({version})", (str(version),))

    def test_a_version_whose_data_is_gone_is_missing(self, missing_version: BrokenVersion) -> None:
        part = open_broken(missing_version)
        version = missing_version.version
        assert version not in part.reader.versions()
        for name in missing_version.reads:
            with pytest.raises(MissingVersion) as raised:
                reads_of(part.reader, version)[name]()
            assert_one_line(raised.value, f"{part} {name}({version})", missing_version.names)

    def test_a_damaged_version_is_a_one_line_checkpoint_error(
        self, damaged_version: BrokenVersion
    ) -> None:
        part = open_broken(damaged_version)
        version = damaged_version.version
        for name in damaged_version.reads:
            with pytest.raises(CheckpointError) as raised:
                reads_of(part.reader, version)[name]()
            assert_one_line(raised.value, f"{part} {name}({version})", damaged_version.names)

    def test_reading_writes_nothing(
        self,
        parts: list[StorePartition],
        pristine: object,
        store_contents: Callable[[], object],
    ) -> None:
        for part in parts:
            for version in part.reader.versions():
                list(part.reader.load(version))
                if version in part.reader.change_versions():
                    list(part.reader.changes(version))
        assert store_contents() == pristine
