"""A decoy: another team's package that happens to be called ``collectors`` too."""

DECOY = True
