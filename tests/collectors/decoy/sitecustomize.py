"""Another job's module, loaded into every Python worker before any task of ours runs."""

import collectors  # noqa: F401  (the decoy next to this file)
