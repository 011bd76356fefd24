"""The history database: its schema, its one writer, roll-up and retention, and reads."""
