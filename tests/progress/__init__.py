"""Tests of progress ingestion on real Spark event logs and listener files."""
