"""The zip of StateGlass's pure-Python code that the Spark engine ships with ``addPyFile``.

Executors run ``collectors`` and ``parsers`` (``app`` never runs there). Only ``.py`` files go
in: a zip cannot hold an importable compiled module, so executors run the pure-Python
decoders (``stateglass.parsers._speedups`` falls back by design) and take the compiled third-party
dependencies (lz4, rocksdict, zstandard...) from their own Python or a packed environment.
The name carries a digest of the content, so two versions of StateGlass never share a name.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import shutil
import tempfile
import zipfile
from functools import lru_cache

import stateglass.collectors
import stateglass.parsers

PACKAGES = {
    "stateglass/collectors": stateglass.collectors,
    "stateglass/parsers": stateglass.parsers,
}
# Fixed timestamps: the same sources always give the same bytes, hence the same digest.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _sources() -> list[tuple[str, str]]:
    """``(name in the zip, path on disk)`` of every ``.py`` file of the shipped packages."""
    out = []
    for package, module in PACKAGES.items():
        root = os.path.dirname(os.path.abspath(module.__file__ or ""))
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, root).replace(os.sep, "/")
                    out.append((f"{package}/{rel}", path))
    return out


def _folders(names: list[str]) -> list[str]:
    """Every folder above ``names``: zipimport finds the ``stateglass`` namespace only by its
    directory entry, since the namespace has no ``__init__.py``."""
    return sorted({n.rsplit("/", k)[0] + "/" for n in names for k in range(1, n.count("/") + 1)})


def build_zip() -> bytes:
    """The zip's bytes: deterministic for the same sources."""
    buf = io.BytesIO()
    sources = _sources()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for folder in _folders([name for name, _ in sources]):
            zf.writestr(zipfile.ZipInfo(folder, date_time=_EPOCH), b"")
        for arcname, path in sources:
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as fh:
                zf.writestr(info, fh.read())
    return buf.getvalue()


@lru_cache(maxsize=1)
def shipped_zip() -> str:
    """Path of this process's zip, written once into a private temporary directory."""
    data = build_zip()
    digest = hashlib.sha256(data).hexdigest()[:12]
    folder = tempfile.mkdtemp(prefix="stateglass-ship-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, f"stateglass-{digest}.zip")
    with open(path, "wb") as fh:
        fh.write(data)
    return path
