"""The incremental scan of a checkpoint into the database: load, plan, run, write."""
