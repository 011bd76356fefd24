"""I/O layer: finds checkpoints on disk, runs the pure parsers over their files, and owns DuckDB.

Nothing here ever writes inside a checkpoint directory.
"""
