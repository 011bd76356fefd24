"""Pure decoders for Spark Structured Streaming checkpoint files: bytes in, typed records out.

Nothing in this package touches the filesystem, DuckDB or Streamlit.
"""
