"""A finding's "Plan a fix" panel: the ``stateglass rewrite`` dry run that removes what the
finding is about, and the catalog query listing those keys.

The dashboard writes nothing: it shows the command, and on a click its dry run, the plan the
CLI's dry run makes (keys removed per store and partition, bytes saved, the first removed
rows, what a rollback undoes): computed only when asked, since it reads the state. ``--apply``
writes the new checkpoint beside the source, which is only read (docs/rewrite.md).
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
    """``fix`` in an expander: what it does, the command, its dry run on request, the query
    behind it."""
    with st.expander(f"Plan a fix: {fix.title}", icon="🛠️"):
        st.markdown(md(fix.why))
        if fix.command is not None:
            st.code(fix.command, language="bash")
            st.caption(AFTER)
            _dry_run(fix)
        if fix.query:
            label = "The rows it removes" if fix.command else "The store's rows"
            sql_link.link(fix.query, f"{label}, in SQL")


def _dry_run(fix: Fix) -> None:
    """The command's dry run, here, when asked: what it removes and what it undoes."""
    key = f"sg_dry_run:{fix.command}"
    if st.button("Dry run here (reads the state, writes nothing)", key=f"{key}:button"):
        with st.spinner("Planning the rewrite…"):
            st.session_state[key] = dry_run(fix)
    if key in st.session_state:
        st.code(st.session_state[key], language="text")


def dry_run(fix: Fix) -> str:
    """What ``fix.command`` prints about its edits and rollback, or the one line saying why
    it cannot be planned: the same plan as the CLI's dry run."""
    from stateglass.app.analysis.errors import AnalysisError
    from stateglass.app.analysis.rewrite import plan_rewrite
    from stateglass.app.analysis.rewrite_edits import DropKeys
    from stateglass.app.analysis.rewrite_refusals import RewriteRequest
    from stateglass.app.render.rewrite_dry_run import dry_run_text
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.errors import CollectorError

    request = RewriteRequest(
        batch_id=fix.batch_id, drop_keys=tuple(DropKeys(s, p) for s, p in fix.drop_keys)
    )
    try:
        cp = Checkpoint.open(fix.checkpoint)
        return dry_run_text(cp, plan_rewrite(cp, request))
    except (AnalysisError, CollectorError, OSError) as exc:  # one line, as the CLI says it
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"not planned: {why}"
