"""What every page shares: the history database and the selected checkpoint/operator/store.

The selection lives in ``st.session_state`` so that it carries from one page to the next.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import streamlit as st

from collectors.db import read_query
from collectors.locations import DEFAULT_DB

DB_ENV = "STATEGLASS_DB"


def db_path() -> str:
    """The DuckDB file: ``--db`` after the script's ``--``, else ``$STATEGLASS_DB``, else default.

    ``--db`` is read from argv (``streamlit run main.py -- --db PATH``); tests set the env.
    """
    argv = sys.argv[1:]
    if "--db" in argv and argv.index("--db") + 1 < len(argv):
        return os.path.abspath(os.path.expanduser(argv[argv.index("--db") + 1]))
    return os.path.abspath(os.path.expanduser(os.environ.get(DB_ENV, DEFAULT_DB)))


@dataclass(frozen=True)
class StoreSelection:
    checkpoint: str
    operator_id: int
    operator_name: str
    store_name: str


def checkpoints() -> list[str]:
    if not os.path.exists(db_path()):
        return []
    return [r[0] for r in read_query(db_path(), "SELECT checkpoint FROM checkpoints ORDER BY 1")]


def pick_checkpoint(where: str = "sidebar") -> str | None:
    """A checkpoint picker (sidebar by default); ``None`` when nothing has been collected."""
    options = checkpoints()
    if not options:
        st.info(f"No checkpoints in {db_path()} yet. Collect one with `stateglass collect PATH`.")
        return None
    box = st.sidebar if where == "sidebar" else st
    current = st.session_state.get("sg_checkpoint")
    index = options.index(current) if current in options else 0
    choice = box.selectbox("Checkpoint", options, index=index, key="sg_checkpoint_widget")
    st.session_state["sg_checkpoint"] = choice
    return str(choice)


def pick_store(where: str = "sidebar") -> StoreSelection | None:
    """Checkpoint, then operator and store; ``None`` when the checkpoint has no state."""
    checkpoint = pick_checkpoint(where)
    if checkpoint is None:
        return None
    rows = read_query(
        db_path(),
        "SELECT operator_id, coalesce(operator_name, ''), store_name FROM operators "
        "WHERE checkpoint = ? ORDER BY operator_id, store_name",
        [checkpoint],
    )
    if not rows:
        st.info("This checkpoint has no stateful operator.")
        return None
    labels = [f"{op} {name} / {store}" for op, name, store in rows]
    current = st.session_state.get("sg_store")
    index = labels.index(current) if current in labels else 0
    box = st.sidebar if where == "sidebar" else st
    label = box.selectbox("Operator / store", labels, index=index, key="sg_store_widget")
    st.session_state["sg_store"] = label
    op, name, store = rows[labels.index(label)]
    return StoreSelection(checkpoint, int(op), str(name), str(store))
