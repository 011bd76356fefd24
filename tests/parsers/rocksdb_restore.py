"""Test helper: restore a Spark RocksDB checkpoint zip and open it with ``rocksdict``.

This is the recipe the collectors follow (see the report in the parsers' PR):

1. unzip every entry of ``<v>.zip`` except ``metadata`` into an empty directory,
2. copy ``SSTs/<dfsSstFileName>`` to ``<localFileName>`` (and ``logs/…`` to ``archive/…``),
3. for Spark 4.3 ``mergeOperatorVersion`` 2, rewrite ``merge_operator`` in ``OPTIONS-*`` to
   ``{id=StringAppendOperator;delimiter=;}`` so unresolved merge operands join without ``,``,
4. open read-only in raw mode.
"""

from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

from stateglass.parsers.rocksdb_zip import (
    METADATA_ENTRY,
    RocksDBCheckpointMetadata,
    check_zip_entries,
)

_MERGE_OPERATOR = re.compile(r"^(\s*merge_operator=).*$", re.MULTILINE)


def restore(
    store_dir: Path, zip_name: str, target: Path, *, merge_delimiter: str | None = None
) -> RocksDBCheckpointMetadata:
    """Restore ``store_dir/zip_name`` into the empty directory ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(store_dir / zip_name) as archive:
        names = archive.namelist()
        check_zip_entries(names)
        meta = RocksDBCheckpointMetadata.from_bytes(archive.read(METADATA_ENTRY))
        for name in names:
            if name != METADATA_ENTRY:
                (target / name).write_bytes(archive.read(name))
    for source, dest in meta.copy_plan():
        (target / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(store_dir / source, target / dest)
    if merge_delimiter is not None:
        # rocksdict cannot configure a merge operator, but RocksDB builds one from OPTIONS.
        operator = f"{{id=StringAppendOperator;delimiter={merge_delimiter};}}"
        for options in target.glob("OPTIONS-*"):
            text = options.read_text()
            options.write_text(_MERGE_OPERATOR.sub(lambda m: m.group(1) + operator, text))
    return meta


def open_read_only(path: Path) -> Any:
    """Open a restored directory read-only; keys and values come back as raw ``bytes``."""
    import rocksdict

    options = rocksdict.Options(raw_mode=True)
    return rocksdict.Rdict(str(path), options=options, access_type=rocksdict.AccessType.read_only())
