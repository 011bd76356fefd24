"""Shadows StateGlass's module of the same name: a task that imports it has run foreign code."""

raise ImportError("the decoy stateglass.collectors.chains was imported instead of StateGlass's")
