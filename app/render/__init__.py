"""Renderers of Spark's text and JSON: decoded values as ``toJSON()`` and ``show()`` write them."""
