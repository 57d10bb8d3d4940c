"""The shipped catalog snapshot and user-supplied catalog files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from deepvm._datasets import dataset_path
from deepvm.catalog.common import CATALOG_COLUMNS, Catalog, validate_catalog
from deepvm.inputs import read_table

SNAPSHOT_FILE = "catalog-aws-us-east-1.csv"


def load_catalog(path: str | Path | None = None, *, region: str | None = None) -> Catalog:
    """Load the shipped AWS us-east-1 snapshot, or a user catalog file (CSV/Parquet).

    The snapshot label recorded with results is the file's newest
    ``snapshot_date`` when it has that column, else the file name.
    """
    source = Path(path) if path is not None else dataset_path(SNAPSHOT_FILE)
    df = read_table(source, CATALOG_COLUMNS, "catalog")
    instances = validate_catalog(df, region=region)
    return Catalog(instances=instances, snapshot=_snapshot_label(df, source))


def _snapshot_label(df: pd.DataFrame, source: Path) -> str:
    if "snapshot_date" in df.columns and df["snapshot_date"].notna().any():
        return f"{source.name}@{df['snapshot_date'].dropna().astype(str).max()}"
    return source.name
