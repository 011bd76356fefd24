"""Maps the repository's folders into the ``stateglass`` namespace and builds the speedups.

Everything else is configured in pyproject.toml. The repository keeps ``app/``,
``collectors/`` and ``parsers/`` at its top; installed, they are ``stateglass.app``,
``stateglass.collectors`` and ``stateglass.parsers``, so that StateGlass never takes a
common top-level name such as ``app`` in a user's site-packages. ``stateglass`` itself
(``stateglass/__init__.py``) only names the notebook API, loaded at first use; the version
lives in pyproject.toml alone.

``optional=True``: without a C compiler the install still succeeds and StateGlass runs on
its pure-Python code (``STATEGLASS_PURE=1`` forces that path even when the module is built).
"""

from setuptools import Extension, find_packages, setup

LAYERS = ("app", "collectors", "parsers")


def _packages() -> list[str]:
    found = ["stateglass"]
    for layer in LAYERS:
        found += [f"stateglass.{layer}"]
        found += [f"stateglass.{layer}.{sub}" for sub in find_packages(layer)]
    # The docs the CLI points to, and the Grafana dashboard, travel in the wheel as data.
    return [*found, "stateglass.docs", "stateglass.docs.grafana"]


setup(
    packages=_packages(),
    package_dir={
        "stateglass": "stateglass",
        **{f"stateglass.{layer}": layer for layer in LAYERS},
        "stateglass.docs": "docs",
    },
    package_data={
        # PEP 561: the notebook API's types reach the users' type checkers.
        "stateglass": ["py.typed"],
        "stateglass.parsers": ["*.pyi"],
        # The plotly.js bundle the HTML report inlines, and its licence.
        "stateglass.app.report": ["vendor/*"],
        "stateglass.docs": ["*.md"],
        "stateglass.docs.grafana": ["*.json"],
    },
    ext_modules=[
        Extension(
            "stateglass.parsers._speedups",
            # xxHash and LZ4 as the Python packages we depend on are built from, vendored:
            # RocksDB's blocks are checked and decompressed in C (parsers/vendor/README.md).
            sources=["parsers/_speedups.c", "parsers/vendor/lz4.c"],
            depends=["parsers/vendor/xxhash.h", "parsers/vendor/lz4.h"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ],
)
