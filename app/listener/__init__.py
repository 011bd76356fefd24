"""The StateGlass listener, a single file users attach to their own Spark driver."""
