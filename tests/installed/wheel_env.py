"""The wheel as a user installs it, built beside the suite (tests/prebuild.py): the sdist,
the wheel built from it, a wheel built from the sdist with no working C compiler, and a
fresh virtualenv with the wheel installed.

The virtualenv has no access to the repository's ``.venv`` and runs from a folder outside the
repository, so nothing here can import the source tree by accident. Dependencies come from
the package index pip is configured with (its cache, after ``make install``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT
from tests.prebuild import Prebuild

INSTALL_TIMEOUT_S = 900.0
# What a clone holds beside its sources: none of it goes into the build's copy.
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "out",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    ".stateglass",
)


@dataclass(frozen=True)
class Venv:
    root: Path
    home: Path

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.root / "bin" / "stateglass"), *args],
            cwd=self.home,
            env={**self.env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def env(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env["HOME"] = str(self.home)
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def pip(self, *args: str) -> None:
        # --no-compile: pip would byte-compile every dependency's modules (thousands of files)
        # up front; Python writes the bytecode of what the tests import on first import.
        proc = subprocess.run(
            [self.python, "-m", "pip", "--disable-pip-version-check", *args, "--no-compile"],
            cwd=self.home,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]


def build(source: Path, dist: Path, environment: dict[str, str], *flags: str) -> None:
    """``python -m build`` with no build isolation, so no download: setuptools and build come
    from the repository's pinned set."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            *flags,
            "--outdir",
            str(dist),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=environment,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@dataclass(frozen=True)
class Built:
    dist: Path  # the sdist and the wheel built from it
    pure: Path  # the wheel built from the sdist with no working C compiler
    venv: Venv  # a fresh virtualenv with the wheel installed (its core, no extra)


def build_all(directory: Path, environment: dict[str, str]) -> Built:
    # The builds run in a copy of the clone: building writes stateglass.egg-info into the
    # source folder, and a process a test starts meanwhile in the clone reads the one there
    # (``python -m`` puts the working folder first on sys.path).
    source = directory / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCE)
    dist = directory / "dist"
    build(source, dist, environment)
    assert len(list(dist.glob("stateglass-*.tar.gz"))) == 1
    (wheel,) = dist.glob("stateglass-*.whl")
    home = directory / "home"
    home.mkdir()
    root = home / "venv"
    # The base interpreter, not this .venv's: a new environment sees none of our packages.
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(root)], check=True, timeout=120)
    venv = Venv(root, home)
    venv.pip("install", "--quiet", str(wheel))
    (sdist,) = dist.glob("stateglass-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(directory / "sdist", filter="data")
    (unpacked,) = (directory / "sdist").iterdir()
    pure = directory / "pure"
    # No working C compiler: the speedups are optional, so the build still succeeds.
    build(unpacked, pure, {**environment, "CC": "false", "LDSHARED": "false"}, "--wheel")
    return Built(dist, pure, venv)


PREBUILT = Prebuild(Path(__file__).parent, build_all)
