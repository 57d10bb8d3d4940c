"""Instance types and their prices: where they come from and how they look."""

from deepvm.catalog._snapshot import load_catalog
from deepvm.catalog.common import (
    CATALOG_COLUMNS,
    Catalog,
    load_interruptions,
    validate_catalog,
    with_interruptions,
)

__all__ = [
    "CATALOG_COLUMNS",
    "Catalog",
    "load_catalog",
    "load_interruptions",
    "validate_catalog",
    "with_interruptions",
]
