"""Writing new checkpoints: a rewrite of a checkpoint's state into a new directory."""
