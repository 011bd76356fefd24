"""StateGlass never writes inside a checkpoint: hash every sample's tree before and after."""

from __future__ import annotations

import hashlib
import os

from stateglass.app.cli import main as cli_main
from stateglass.app.discovery import find_checkpoints
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from tests.e2e.oracle import SAMPLES, state_reads


def tree_digest(root: str) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + [d + "/" for d in dirnames]:
            path = os.path.join(dirpath, name.rstrip("/"))
            st = os.lstat(path)
            digest = ""
            if not name.endswith("/"):
                with open(path, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
            out[os.path.relpath(path, root)] = f"{digest}:{st.st_mode}:{st.st_mtime_ns}"
    return out


def test_reading_everything_changes_nothing(tmp_path: object) -> None:
    before = tree_digest(SAMPLES)
    out = os.path.join(str(tmp_path), "out.jsonl")
    for path in find_checkpoints(SAMPLES):
        assert cli_main(["info", path]) == 0
        cp = Checkpoint.open(path)
        for store in cp.stores():
            for _, _, args in state_reads(store):
                base = [
                    "--operator", str(store.operator_id), "--store", store.store_name,
                    *args, "-o", out,
                ]  # fmt: skip
                assert cli_main(["state", path, *base]) == 0
                first = cp.commit_batch_ids[0]
                if "--no-flatten" not in args:
                    cli_main(["changes", path, "--from", str(first), *base])
    assert tree_digest(SAMPLES) == before
