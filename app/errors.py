"""Errors of the app layer.

Hierarchy::

    AppError                 a user-facing problem with the command line or an output file
    ├── OutputError          the output file cannot be written
    ├── UnprintableValue     a result's column holds a value no text output can print
    └── ReportError          a report cannot be made (unknown suffix, no Chromium for PDF)

Collector errors (``collectors.errors.CollectorError``) pass through unchanged: they already
name the file. The CLI turns both into one line on stderr and exit status 2.
"""

from __future__ import annotations


class AppError(Exception):
    """A one-line, user-facing error raised by the app layer."""


class OutputError(AppError):
    """The output file cannot be written."""


class UnprintableValue(AppError):
    """A column of a SQL result holds a value no text output (table, CSV, JSON lines) can
    print; the message names the column and says to cast it."""

    def __init__(self, column: str, why: str) -> None:
        super().__init__(f"column {column!r}: {why}; cast it to VARCHAR")
        self.column = column
        self.why = why


class ReportError(AppError):
    """A report cannot be produced: an unknown output suffix, or no Chromium to print a PDF."""
