"""Reading and validating user input tables (CSV or Parquet).

Every error names the file, and where it can the column, the row (1-based data
row, as a spreadsheet shows it below the header) and the value.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from deepvm.errors import InputError


def read_table(path: str | Path, required: Iterable[str], what: str) -> pd.DataFrame:
    """Read a CSV or Parquet file and check that it has the ``required`` columns."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} file {str(p)!r} does not exist")
    if p.is_dir():
        raise InputError(f"{what} file {str(p)!r} is a folder: give the file inside it")
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            df = pd.read_parquet(p)
        else:
            df = pd.read_csv(p, comment=None, skipinitialspace=True)
    except Exception as exc:  # pandas/pyarrow raise many kinds; all mean "unreadable"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{what} file {str(p)!r} cannot be read: {first}") from exc
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{what} file {str(p)!r} lacks column(s) {', '.join(missing)}")
    if df.empty:
        raise InputError(f"{what} file {str(p)!r} has no rows")
    df.attrs["source_path"] = str(p)
    return df


def source_label(df: pd.DataFrame, what: str) -> str:
    path = df.attrs.get("source_path")
    return f"{what} file {path!r}" if path else what


def numeric_column(
    df: pd.DataFrame,
    column: str,
    what: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strictly_positive: bool = False,
    allow_missing: bool = False,
    integer: bool = False,
    key: str = "instance_type",
) -> pd.Series:
    """The column as floats, checked; raises InputError naming the first bad row."""
    values = pd.to_numeric(df[column], errors="coerce")
    where = source_label(df, what)

    def row_label(idx: int) -> str:
        label = f"row {idx + 1}"
        if key in df.columns:
            label += f" ({key}={df[key].iloc[idx]})"
        return label

    bad_text = values.isna() & df[column].notna()
    if bad_text.any():
        i = int(np.flatnonzero(bad_text.to_numpy())[0])
        raise InputError(
            f"{where}: {row_label(i)}: {column}={df[column].iloc[i]!r} is not a number"
        )
    if not allow_missing and values.isna().any():
        i = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise InputError(f"{where}: {row_label(i)}: {column} is missing")
    arr = values.to_numpy(dtype=float)
    if np.isinf(arr).any():
        i = int(np.flatnonzero(np.isinf(arr))[0])
        raise InputError(f"{where}: {row_label(i)}: {column}={arr[i]} is not finite")
    if strictly_positive:
        bad = ~np.isnan(arr) & (arr <= 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{where}: {row_label(i)}: {column}={arr[i]:g} must be > 0")
    if minimum is not None:
        bad = ~np.isnan(arr) & (arr < minimum)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{where}: {row_label(i)}: {column}={arr[i]:g} must be >= {minimum:g}")
    if maximum is not None:
        bad = ~np.isnan(arr) & (arr > maximum)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{where}: {row_label(i)}: {column}={arr[i]:g} must be <= {maximum:g}")
    if integer:
        bad = ~np.isnan(arr) & (arr != np.round(arr))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{where}: {row_label(i)}: {column}={arr[i]:g} must be a whole number")
    return pd.Series(arr, index=df.index, name=column)


def text_column(
    df: pd.DataFrame, column: str, what: str, *, key: str = "instance_type"
) -> pd.Series:
    """The column as stripped strings; missing values are an error naming the row."""
    values = df[column]
    blank = values.isna() | (values.astype(str).str.strip() == "")
    if blank.any():
        i = int(np.flatnonzero(blank.to_numpy())[0])
        label = f"row {i + 1}"
        if key in df.columns and key != column:
            label += f" ({key}={df[key].iloc[i]})"
        raise InputError(f"{source_label(df, what)}: {label}: {column} is missing")
    return values.astype(str).str.strip()


def reject_duplicates(df: pd.DataFrame, keys: list[str], what: str) -> None:
    dup = df.duplicated(subset=keys, keep="first")
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        values = ", ".join(f"{k}={df[k].iloc[i]}" for k in keys)
        raise InputError(f"{source_label(df, what)}: row {i + 1}: duplicate entry for {values}")
