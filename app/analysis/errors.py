"""Errors of the analysis layer.

Hierarchy::

    AnalysisError            what cannot be judged or planned, and why, in one line

Collector errors (``collectors.errors.CollectorError``) pass through unchanged: they already
name the file. The CLI turns every one of them into one line on stderr and exit status 2.
"""

from __future__ import annotations


class AnalysisError(Exception):
    """A one-line, user-facing refusal raised by the analysis layer."""
