"""The shipped catalog snapshot and user-supplied catalog files."""

from __future__ import annotations

from pathlib import Path

from deepvm.base.datasets import dataset_path
from deepvm.base.tables import Table, concat, optional_text, read_table
from deepvm.catalog.common import CATALOG_COLUMNS, Catalog, validate_catalog

__all__ = ["SHIPPED_LABEL", "SNAPSHOT_FILES", "load_catalog"]

# The shipped catalogs, one per cloud (built by scripts/build_catalog.py).
SNAPSHOT_FILES = ("catalog-aws.csv", "catalog-gcp.csv", "catalog-azure.csv")
# How results name the shipped catalogs together (with their newest price date).
SHIPPED_LABEL = "catalog-{aws,gcp,azure}.csv"


def load_catalog(path: str | Path | None = None, *, region: str | None = None) -> Catalog:
    """Load the shipped catalogs of every cloud (AWS us-east-1, us-west-2,
    eu-west-1; GCP us-central1, us-east4, europe-west4; Azure's US regions), or a
    user catalog file (CSV/Parquet).

    The snapshot label recorded with results names the file and the date its
    prices are from: the newest ``price_date`` (or ``snapshot_date``) when it has
    one, e.g. ``catalog-aws.csv@2025``, else the file name alone.
    """
    if path is not None:
        source = Path(path)
        raw = read_table(source, CATALOG_COLUMNS, "catalog")
        return Catalog(validate_catalog(raw, region=region), _snapshot_label(raw, source.name))
    return _shipped(region)


def _shipped(region: str | None) -> Catalog:
    files = [dataset_path(name) for name in SNAPSHOT_FILES]
    raw = concat([read_table(f, CATALOG_COLUMNS, "catalog") for f in files])
    raw = Table({n: raw[n] for n in raw.names}, str(files[0].parent / SHIPPED_LABEL))
    return Catalog(validate_catalog(raw, region=region), _snapshot_label(raw, SHIPPED_LABEL))


def _snapshot_label(table: Table, name: str) -> str:
    for column in ("price_date", "snapshot_date"):
        if column in table:
            dates = [d for d in optional_text(table[column]) if d is not None]
            if dates:
                return f"{name}@{max(dates)}"
    return name
