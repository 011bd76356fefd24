"""Watching checkpoints: file-system events, polling object stores, and a watcher's memory."""
