"""Tests of progress ingestion (issue 12) on real Spark event logs and listener files."""
