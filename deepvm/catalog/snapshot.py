"""The shipped catalog snapshot and user-supplied catalog files."""

from __future__ import annotations

from pathlib import Path

from deepvm._datasets import dataset_path
from deepvm.catalog.common import CATALOG_COLUMNS, Catalog, validate_catalog
from deepvm.inputs import Table, optional_text, read_table

SNAPSHOT_FILE = "catalog-aws-us-east-1.csv"


def load_catalog(path: str | Path | None = None, *, region: str | None = None) -> Catalog:
    """Load the shipped AWS us-east-1 snapshot, or a user catalog file (CSV/Parquet).

    The snapshot label recorded with results is the file's newest
    ``snapshot_date`` when it has that column, else the file name.
    """
    source = Path(path) if path is not None else dataset_path(SNAPSHOT_FILE)
    raw = read_table(source, CATALOG_COLUMNS, "catalog")
    return Catalog(validate_catalog(raw, region=region), snapshot=_snapshot_label(raw, source))


def _snapshot_label(table: Table, source: Path) -> str:
    dates = (
        [d for d in optional_text(table["snapshot_date"]) if d is not None]
        if "snapshot_date" in table
        else []
    )
    return f"{source.name}@{max(dates)}" if dates else source.name
