"""``stateglass rewrite`` of transformWithState checkpoints of the corpus, judged by StateGlass's
own reader (the Spark oracle is test_rewrite_tws.py): every state variable and the registered
timers read back as the source's rows, with row checksums (4.3) and with TTL (4.0's value,
list and map state with TTL and processing-time timers); join state formats 3 and 4, also
kept in column families, and Avro-encoded state are refused in one line.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.checkpoints.state_views import views_of
from stateglass.collectors.stores.rocksdb import RocksDBStoreReader
from stateglass.parsers.rocksdb_encoding import split_cf_prefix
from tests.conftest import copy_checkpoint

SOURCES = ["4.3.0/tws-rocks-cl", "4.3.0-rowck/tws-rocks-cl", "4.0.5b/tws-rocks"]


def _view_rows(root: Path) -> dict[str, Counter[str]]:
    """Each view's decoded rows (as text, partition left out) at the last committed batch."""
    cp = Checkpoint.open(str(root))
    (store,) = cp.stores()
    batch = cp.last_committed_batch
    assert batch is not None
    out = {}
    for view in views_of(store, cp.root):
        source = StateSource(cp, view.request())
        rows: Counter[str] = Counter()
        for part in source.partitions:
            with source.decoding(part):
                for key, value in source.load(part, batch + 1):
                    rows.update(repr(r) for r in source.row_codec.rows(key, value))
        out[view.label] = rows
    return out


@pytest.mark.parametrize("name", SOURCES)
def test_every_state_variable_reads_back_as_the_source(
    fixture_corpus: Path, tmp_path: Path, name: str
) -> None:
    src = copy_checkpoint(fixture_corpus / name / "checkpoint", tmp_path / "src")
    dst = tmp_path / "dst"
    assert main(["rewrite", str(src), str(dst), "--partitions", "3", "--apply"]) == 0
    before = _view_rows(src)
    assert len(before) >= 4 and all(before.values())
    assert _view_rows(dst) == before
    _counts_match_the_keys(dst)


def _counts_match_the_keys(root: Path) -> None:
    """Each zip's ``numKeys``/``numInternalKeys`` count its user and ``$`` (internal) keys,
    as Spark's metadata does."""
    cp = Checkpoint.open(str(root))
    source = StateSource(cp, StateRequest(0, "default"))
    version = (cp.last_committed_batch or 0) + 1
    for part in source.partitions:
        reader = source.reader(part)
        assert isinstance(reader, RocksDBStoreReader)
        meta = reader.zip_metadata(version)
        assert meta is not None
        names = meta.column_family_names()
        keys = [names[split_cf_prefix(k)[0]] for k, _ in source.load(part, version)]
        internal = sum(name.startswith("$") for name in keys)
        assert (meta.num_keys, meta.num_internal_keys) == (len(keys) - internal, internal)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("4.3.0-joinv3/join-rocks-cl", "join state formats 3 and 4"),
        ("4.3.0/tws-rocks-cl-avro", "state encoding avro"),
    ],
)
def test_refused_in_one_line(
    fixture_corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    why: str,
) -> None:
    src = fixture_corpus / name / "checkpoint"
    assert main(["rewrite", str(src), str(tmp_path / "dst"), "--partitions", "3"]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1
