"""The base of every layer (docs/ARCHITECTURE.md, "Layers"): the error tree,
defaults and environment names, name and date checks, atomic output files, the
shipped data's folder, and user tables read without pandas."""
