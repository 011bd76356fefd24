"""Shared fixtures: the corpus of real Spark checkpoints (unpacked once per test session)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

CORPUS_TARBALL = (
    Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "spark-checkpoints.tar.gz"
)


@pytest.fixture(scope="session")
def fixture_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``out`` directory of the corpus: ``out/<version>/<scenario>/checkpoint``."""
    if not CORPUS_TARBALL.exists():
        pytest.skip(f"checkpoint corpus not found at {CORPUS_TARBALL}")
    target = tmp_path_factory.mktemp("corpus")
    with tarfile.open(CORPUS_TARBALL) as tar:
        tar.extractall(target, filter="data")
    return target / "out"
