"""A finding's "Plan a fix" panel: the ``stateglass rewrite`` dry run that removes what the
finding is about, and the catalog query listing those keys.

The dashboard writes nothing: it shows the command, whose dry run prints the keys removed per
store and partition, the first removed rows and the bytes saved; ``--apply`` writes the new
checkpoint beside the source, which is only read (docs/rewrite.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from stateglass.app.dashboard import sql_link
from stateglass.app.escape import md

if TYPE_CHECKING:
    from stateglass.app.fixes import Fix

AFTER = (
    "Run it where the checkpoint is reachable: it prints its plan and writes nothing; add "
    "`--apply` to write the new checkpoint (the source is only read), then restart the query "
    "on it with its checkpointLocation changed. Stop the query first."
)


def render(fix: Fix) -> None:
    """``fix`` in an expander: what it does, the command, the query behind it."""
    with st.expander(f"Plan a fix: {fix.title}", icon="🛠️"):
        st.markdown(md(fix.why))
        st.code(fix.command, language="bash")
        st.caption(AFTER)
        if fix.query:
            sql_link.link(fix.query, "The rows it removes, in SQL")
