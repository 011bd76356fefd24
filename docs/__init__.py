"""StateGlass's documentation, installed as data of ``stateglass.docs``.

The Markdown files beside this one and ``grafana/stateglass.json`` travel in the wheel, so
that the paths the CLI's messages name exist on a machine that never cloned the repository
(:func:`stateglass.collectors.docs.doc_path`).
"""
