"""Instance types and their prices: where they come from and how they look."""

from deepvm.catalog.common import CATALOG_COLUMNS, Catalog, validate_catalog
from deepvm.catalog.snapshot import load_catalog

__all__ = ["CATALOG_COLUMNS", "Catalog", "load_catalog", "validate_catalog"]
