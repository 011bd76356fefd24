"""What every page shares: the history database, the selection, cached loads and live refresh.

The selection lives in ``st.session_state`` so that it carries from one page to the next.
Loads are cached per database version (its file's mtime), so a page re-reads only after a
collector commits, and the sidebar's live fragment re-runs the page when that happens.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from stateglass.app import queries
from stateglass.app.analysis.errors import AnalysisError
from stateglass.app.checkpoint_names import distinct_names
from stateglass.app.dashboard import url_state
from stateglass.app.dashboard.newest import NewestOnly
from stateglass.app.errors import AppError
from stateglass.app.escape import md, md_code
from stateglass.app.memory_trace import gauge
from stateglass.collectors.checkpoints.operator_names import INFERRED, INFERRED_HELP
from stateglass.collectors.db.read import read_query
from stateglass.collectors.errors import BadConfig, CheckpointError
from stateglass.collectors.locations import DEFAULT_DB
from stateglass.parsers.units import fmt_age

if TYPE_CHECKING:
    from stateglass.app.analysis.health import HealthConfig

DB_ENV = "STATEGLASS_DB"
# The health rules' TOML file (``stateglass dashboard --config FILE``); unset: the defaults.
HEALTH_CONFIG_ENV = "STATEGLASS_HEALTH_CONFIG"
# How often the sidebar checks the database for new data (seconds).
REFRESH_S = 2.0
# The stored health verdict before a checkpoint's name in the picker.
HEALTH_MARKS = {"OK": "🟢", "WARN": "🟠", "ERR": "🔴", "n/a": "⚪"}
# Errors a page shows as one line instead of a traceback.
USER_ERRORS = (CheckpointError, BadConfig, AppError, AnalysisError)


def db_path() -> str:
    """The DuckDB file: ``--db`` after the script's ``--``, else ``$STATEGLASS_DB``, else default.

    ``--db`` is read from argv (``streamlit run main.py -- --db PATH``); tests set the env.
    """
    argv = sys.argv[1:]
    if "--db" in argv and argv.index("--db") + 1 < len(argv):
        return os.path.abspath(os.path.expanduser(argv[argv.index("--db") + 1]))
    return os.path.abspath(os.path.expanduser(os.environ.get(DB_ENV, DEFAULT_DB)))


def health_config_path() -> str | None:
    """The ``--config`` file the dashboard was started with, if any."""
    return os.environ.get(HEALTH_CONFIG_ENV) or None


def health_config() -> HealthConfig:
    """The health thresholds: the ``--config`` file's, else every default."""
    return _health_config(health_config_path())


@st.cache_resource(show_spinner=False)
def _health_config(path: str | None) -> HealthConfig:
    from stateglass.app.settings import load_settings

    return load_settings(path).health


def disabled_rules() -> list[str]:
    """Ids of the rules the ``--config`` file turns off."""
    from stateglass.app.analysis.health import RULES

    config = health_config()
    return [rule for rule in RULES if not config.enabled(rule)]


@dataclass(frozen=True)
class StoreSelection:
    checkpoint: str
    operator_id: int
    operator_name: str
    store_name: str


# Frames are kept as objects (like the figures): cache_data would keep a second, pickled copy
# of each and unpickle it at every hit. Pages only read them. One per question, for the
# newest version only: a commit replaces the stale frame instead of adding one.
@st.cache_resource(show_spinner=False)
def _frames() -> NewestOnly:
    cache = NewestOnly(max_entries=256, ttl_s=600)
    gauge("frames_cached", cache.__len__)
    return cache


def _version(db: str, args: tuple[Any, ...]) -> str:
    """The cache key's version: what changed of the checkpoint a load is about (its first
    argument, when it is one), so a commit of one checkpoint leaves the others' loads cached."""
    checkpoint = args[0] if args and isinstance(args[0], str) else None
    return queries.change_key(db, checkpoint)


def load(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(db_path(), *args)``, cached until the checkpoint it reads changes.

    Example: ``load(queries.batches, checkpoint)``.
    """
    db = db_path()
    name = f"{fn.__module__}.{fn.__qualname__}"
    key = "|".join([name, db, repr(args)])
    return _frames().get(key, _version(db, args), lambda: fn(db, *args))


# Figures are kept as objects: unpickling one rebuilds it, which costs about as much as
# building it. Streamlit only reads them (to_dict), so sharing them is safe.
@st.cache_resource(show_spinner=False)
def _figures() -> NewestOnly:
    cache = NewestOnly(max_entries=64, ttl_s=600)
    gauge("figures_cached", cache.__len__)
    return cache


def figure(builder: Callable[..., Any], fn: Callable[..., Any], *args: Any, **options: Any) -> Any:
    """``builder(load(fn, *args), **options)``, kept until the database changes.

    Example: ``figure(figures.partition_heatmap, queries.partition_cells, cp, 0, "default",
    metric="bytes")``.
    """
    db = db_path()
    names = [builder.__module__, builder.__qualname__, fn.__module__, fn.__qualname__]
    key = "|".join([*names, db, repr(args), repr(sorted(options.items()))])
    return _figures().get(key, _version(db, args), lambda: builder(load(fn, *args), **options))


def checkpoints() -> list[str]:
    if not os.path.exists(db_path()):
        return []
    return [r[0] for r in read_query(db_path(), "SELECT checkpoint FROM checkpoints ORDER BY 1")]


def pick_checkpoint(where: str = "sidebar") -> str | None:
    """A checkpoint picker (sidebar by default); ``None`` when nothing has been collected.

    Each option is its path's shortest distinguishing tail (``app.checkpoint_names``) after
    its stored health; the full path is on hover and under the picker.
    """
    options = checkpoints()
    if not options:
        st.info(
            f"No checkpoints in {md_code(db_path())} yet. Add one on the Overview page, or run "
            "`stateglass collect PATH`."
        )
        return None
    box = st.sidebar if where == "sidebar" else st
    names = distinct_names(options)
    health = load(queries.stored_health)
    index = url_state.start_index(
        url_state.CHECKPOINT, options, st.session_state.get("sg_checkpoint")
    )
    choice = str(
        box.selectbox(
            "Checkpoint",
            options,
            index=index,
            key="sg_checkpoint_widget",
            format_func=lambda path: (
                f"{HEALTH_MARKS.get(health.get(path, ''), '')} {names[path]}".strip()
            ),
            help="Each checkpoint by the end of its path that tells it apart from the others, "
            "after its health as the watcher last judged it: "
            + ", ".join(f"{m} {s}" for s, m in HEALTH_MARKS.items())
            + ".",
        )
    )
    st.session_state["sg_checkpoint"] = choice
    url_state.keep(checkpoint=choice)
    # The select shows the distinguishing tail; the caption below wraps the full path.
    box.caption(md_code(choice))
    return choice


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
        url_state.keep(operator=None, store=None)
        st.info("This checkpoint has no stateful operator.")
        return None
    labels = [f"{op} {name} / {store}" for op, name, store in rows]
    # In the URL as operator id and store name: what `stateglass state` takes too.
    in_url = [f"{op}/{store}" for op, _, store in rows]
    wanted = f"{url_state.read(url_state.OPERATOR)}/{url_state.read(url_state.STORE)}"
    remembered = st.session_state.get("sg_store")
    index = (
        in_url.index(wanted) if wanted in in_url else url_state.start_index("", labels, remembered)
    )
    box = st.sidebar if where == "sidebar" else st
    label = box.selectbox("Operator / store", labels, index=index, key="sg_store_widget", help=None)
    st.session_state["sg_store"] = label
    box.caption(md(label) + (f"  \n{md(INFERRED_HELP)}" if INFERRED in label else ""))
    op, name, store = rows[labels.index(label)]
    url_state.keep(operator=int(op), store=str(store))
    return StoreSelection(checkpoint, int(op), str(name), str(store))


def show_error(message: object) -> None:
    """An error line on the page; checkpoint paths inside it stay plain text."""
    st.error(md(message), icon="🚫")


def ago(then: Any, now: pd.Timestamp | None = None) -> str:
    """``then`` (naive UTC) as how long before ``now`` (default: this moment) it was:
    "12m 5s ago" (:func:`stateglass.parsers.units.fmt_age`)."""
    if then is None or pd.isna(then):
        return fmt_age(None)
    now = now if now is not None else pd.Timestamp.now(tz="UTC").tz_localize(None)
    return fmt_age((now - pd.Timestamp(then)).total_seconds())


def live_status() -> None:
    """Sidebar: when the data was last updated; re-runs the page when a collector commits.

    A fragment polls the database file's mtime every ``REFRESH_S`` seconds: cheap, and the page
    itself re-runs (and re-queries) only when there is something new.
    """

    @st.fragment(run_every=REFRESH_S if st.session_state.get("sg_live", True) else None)
    def _status() -> None:
        db = db_path()
        version = queries.data_version(db)
        seen = st.session_state.get("sg_data_version")
        st.session_state["sg_data_version"] = version
        # Only the fragment's own runs re-run the page. In a run of the whole page the page
        # reads the database after this, so it draws at least this version; a rerun there
        # would drop what started the run (a form's submit, a button's click).
        inline = st.session_state.get("sg_status_inline", False)
        if seen is not None and version != seen and not inline:
            st.rerun(scope="app")
        updated = queries.last_updated(db) if version else None
        when = ago(updated) if updated is not None else "never"
        st.caption(
            f"Data last updated **{when}**"
            + (f" ({updated:%Y-%m-%d %H:%M:%S} UTC)" if updated is not None else "")
            + f"  \nchecked {time.strftime('%H:%M:%S')}"
        )

    with st.sidebar:
        st.toggle(
            "Live refresh",
            value=True,
            key="sg_live",
            help=f"Check the database every {REFRESH_S:.0f} s and redraw when a collector "
            "has written new batches.",
        )
        st.session_state["sg_status_inline"] = True
        try:
            _status()
        finally:
            st.session_state["sg_status_inline"] = False
        st.caption(f"Database: {md_code(db_path())}")
