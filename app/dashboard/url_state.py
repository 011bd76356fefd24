"""A page's selection in its URL, so that a reload or a pasted link shows the same thing.

Every page keeps what it shows (checkpoint, operator and store, state variable, batch, key,
filters) in ``st.query_params`` under the names of :data:`PARAMS`. A widget starts at the
URL's value when the session has none of its own (a new tab, a reload, a pasted link), and
each run writes the page's selection back, so the address bar always holds it. Within a
session the selection also lives in ``st.session_state``, so it carries from page to page
(Streamlit clears the URL's parameters when the page changes).

The selection is written by hand rather than with widgets' ``bind="query-params"``: a bound
widget stores its *label* in the URL, and the checkpoint picker's labels (a short name, a
health badge) change while the path does not. Filters whose labels are their values (the
Overview's search and sort, Browse's key search and *Overdue only*, the State page's tab)
are bound widgets: their key is their parameter.

Example::

    index = url_state.start_index(CHECKPOINT, paths, remembered="/data/cp")
    ...
    url_state.keep(checkpoint=choice)
    st.markdown(f"[Health]({url_state.link('health', checkpoint=choice)})")
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode

import streamlit as st

CHECKPOINT = "checkpoint"
OPERATOR = "operator"
STORE = "store"
STATE_VAR = "var"
BATCH = "batch"
# The older of two batches compared (the Diff page's); ``batch`` is then the newer.
FROM_BATCH = "from"
KEY = "key"
TAB = "tab"
# Every parameter a page reads; a link carries only these.
PARAMS = (CHECKPOINT, OPERATOR, STORE, STATE_VAR, BATCH, FROM_BATCH, KEY, TAB)


def read(name: str) -> str | None:
    """The URL's value of ``name``; None when absent or empty."""
    value = st.query_params.get(name)
    return value or None


def read_int(name: str) -> int | None:
    """The URL's value of ``name`` as a whole number; None when absent or not one."""
    value = read(name)
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def start_index(name: str, options: Sequence[str], remembered: object = None) -> int:
    """Where a picker over ``options`` starts: at the URL's value of ``name``, else at the
    one the session remembers, else at the first option."""
    for wanted in (read(name), remembered):
        if wanted in options:
            return options.index(str(wanted))
    return 0


def keep(**values: object) -> None:
    """Write the page's selection into the URL; a None value removes its parameter.

    Only changed parameters are written: each write is a message to the browser.
    """
    for name, value in values.items():
        if name not in PARAMS:
            raise ValueError(f"unknown URL parameter {name!r}; one of {', '.join(PARAMS)}")
        text = None if value is None else str(value)
        if text is None:
            if name in st.query_params:
                del st.query_params[name]
        elif st.query_params.get(name) != text:
            st.query_params[name] = text


def link(page: str, **values: object) -> str:
    """A relative link to ``page`` (its url_path) with ``values`` as its parameters.

    Relative, so it holds under ``server.baseUrlPath``; None values are left out.
    """
    unknown = [name for name in values if name not in PARAMS]
    if unknown:
        raise ValueError(f"unknown URL parameter(s) {unknown}; one of {', '.join(PARAMS)}")
    query = urlencode({k: str(v) for k, v in values.items() if v is not None})
    return f"{page}?{query}" if query else page


def markdown_link(text: str, url: str) -> str:
    """``[text](url)`` with the URL's parentheses and spaces escaped for Markdown."""
    safe = url.replace("(", "%28").replace(")", "%29").replace(" ", "%20")
    return f"[{text}]({safe})"
