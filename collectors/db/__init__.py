"""The history database (DuckDB), one module per job.

=====================  ==================================================================
``schema``             every ``CREATE TABLE``; columns, types and keys read from that DDL
``progress_tables``    the progress tables' DDL and Spark's progress fields -> columns
``views``              every ``CREATE VIEW``: each metric defined once, in SQL
``schema_versions``    ``SCHEMA_VERSION``, the writer's upgrade, and how an older database
                       is read (the one older-database policy)
``connection``         opening the file (either mode, waiting out the other's lock);
                       :class:`~stateglass.collectors.errors.NoDatabase` when it is not there
``writes``             the frozen rows a collector hands the writer, and what it hands back
``writer``             ``Database``, the one writer: one transaction per write
``upsert``             the writer's bulk upsert and keyed delete
``history_rollup``     the per-store and bucket tables every scan keeps, roll-ups, retention
``history_settings``   the ``[history]`` settings: what is kept at what resolution
``read``               ``reader`` and ``read_query``: read-only connections
=====================  ==================================================================

Import from the module that holds a name: ``from stateglass.collectors.db.writer import
Database``, ``from stateglass.collectors.db.read import read_query``.
"""
