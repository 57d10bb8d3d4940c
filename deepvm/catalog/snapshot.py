"""The shipped catalog snapshot and user-supplied catalog files."""

from __future__ import annotations

from pathlib import Path

from deepvm._datasets import dataset_path
from deepvm.catalog.common import CATALOG_COLUMNS, Catalog, validate_catalog
from deepvm.tables import Table, optional_text, read_table

SNAPSHOT_FILE = "catalog-aws.csv"


def load_catalog(path: str | Path | None = None, *, region: str | None = None) -> Catalog:
    """Load the shipped AWS catalog (us-east-1, us-west-2, eu-west-1; built by
    scripts/build_catalog.py), or a user catalog file (CSV/Parquet).

    The snapshot label recorded with results names the file and the date its
    prices are from: the newest ``price_date`` (or ``snapshot_date``) when it has
    one, e.g. ``catalog-aws.csv@2025``, else the file name alone.
    """
    source = Path(path) if path is not None else dataset_path(SNAPSHOT_FILE)
    raw = read_table(source, CATALOG_COLUMNS, "catalog")
    return Catalog(validate_catalog(raw, region=region), snapshot=_snapshot_label(raw, source))


def _snapshot_label(table: Table, source: Path) -> str:
    for column in ("price_date", "snapshot_date"):
        if column in table:
            dates = [d for d in optional_text(table[column]) if d is not None]
            if dates:
                return f"{source.name}@{max(dates)}"
    return source.name
