"""Builds the optional compiled speedups; everything else is configured in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and StateGlass runs on
its pure-Python code (``STATEGLASS_PURE=1`` forces that path even when the module is built).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "parsers._speedups",
            sources=["parsers/_speedups.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
