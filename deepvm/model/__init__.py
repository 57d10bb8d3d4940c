"""The data model (docs/ARCHITECTURE.md, "Layers"): a cluster as every answer names
it, the store's tables and their columns' meanings, and where each figure is
from."""
