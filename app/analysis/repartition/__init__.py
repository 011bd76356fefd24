"""The repartition planner: Spark's partition key per store, and what N partitions would hold."""
