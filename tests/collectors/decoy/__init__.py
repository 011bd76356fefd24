"""Not a package to import: a directory put on executors' PYTHONPATH by the cluster tests."""
