"""Finding checkpoints and reading what they hold: files, operators, stores, state at a batch."""
