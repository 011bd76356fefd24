"""The state browser behind the dashboard's Browse, Diff and Key history pages.

No Streamlit here: pages call these functions and show what they return.

* :mod:`collectors.checkpoints.state_views` (below this layer) — what can be read (a store, or
  one state variable) and at which versions;
* :mod:`app.browse.store` — one partition at one version held as its stored bytes, read in
  worker processes, in a cache bounded by bytes;
* :mod:`stateglass.app.browse.cells` — decoded rows as flat columns (``key.a``, ``value.b.c``);
* :mod:`stateglass.app.browse.table` — pages with partition filter and key search;
* :mod:`stateglass.app.browse.diff` — added, removed and changed keys between two versions;
* :mod:`stateglass.app.browse.key_history` — one key through every retained version.

Example::

    from stateglass.app.browse.table import PageRequest, read_page
    from stateglass.collectors.checkpoints.state_views import StateView, versions

    view = StateView("/data/checkpoints/orders")
    page = read_page(PageRequest(view, versions(view)[-1], search="user07"))
    print(page.total, page.table.to_pylist())
"""
