"""Reading and validating user input tables (CSV or Parquet).

Every error names the file, and where it can the column, the row (1-based data
row, as a spreadsheet shows it below the header) and the value.

Tables are read into :class:`Table`, a few numpy columns, not a pandas DataFrame:
the single-job commands plan from small CSVs, and importing pandas alone would
cost them more than reading and planning together (docs/ARCHITECTURE.md,
"Performance"). Code that holds DataFrames converts at its boundary
(:meth:`Table.from_frame`, :meth:`Table.to_frame`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from deepvm.base.errors import InputError

__all__ = [
    "MISSING_TEXT",
    "Table",
    "as_table",
    "concat",
    "numeric_column",
    "optional_text",
    "read_table",
    "reject_duplicates",
    "source_label",
    "text_column",
]

# Cells read as missing, as pandas.read_csv reads them (its default na_values).
MISSING_TEXT = frozenset(
    {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
     "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)  # fmt: skip


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, str):
        return value.strip() in MISSING_TEXT
    return False


class Table:
    """Named columns of equal length (numpy arrays; text as object arrays, None
    where missing), with the file they came from for error messages."""

    __slots__ = ("columns", "source_path")

    def __init__(self, columns: Mapping[str, npt.ArrayLike], source_path: str | None = None):
        arrays = {str(name): np.asarray(values) for name, values in columns.items()}
        lengths = {len(a) for a in arrays.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of unequal length: {sorted(lengths)}")
        self.columns: dict[str, np.ndarray] = arrays
        self.source_path = source_path

    @classmethod
    def from_records(
        cls, records: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None
    ) -> Table:
        names = list(columns) if columns is not None else list(dict.fromkeys(
            name for record in records for name in record
        ))  # fmt: skip
        return cls({name: _column([r.get(name) for r in records]) for name in names})

    @classmethod
    def from_frame(cls, df: Any) -> Table:
        """A pandas DataFrame's columns (missing text as None); pandas is not imported."""
        out: dict[str, np.ndarray] = {}
        for name in df.columns:
            series = df[name]
            if series.dtype.kind in "fiub":
                out[str(name)] = series.to_numpy()
            else:
                values = series.to_numpy(dtype=object, copy=True)
                values[series.isna().to_numpy()] = None
                out[str(name)] = values
        table = cls(out, source_path=df.attrs.get("source_path") if hasattr(df, "attrs") else None)
        if len(df.columns) == 0:
            table.columns = {}
        return table

    def to_frame(self) -> Any:
        """The table as a pandas DataFrame (imports pandas)."""
        import pandas as pd

        df = pd.DataFrame({name: values for name, values in self.columns.items()})
        if self.source_path:
            df.attrs["source_path"] = self.source_path
        return df

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    @property
    def empty(self) -> bool:
        return len(self) == 0

    def with_columns(self, **columns: npt.ArrayLike) -> Table:
        return Table({**self.columns, **columns}, self.source_path)

    def select(self, names: Iterable[str]) -> Table:
        return Table({name: self.columns[name] for name in names}, self.source_path)

    def take(self, rows: npt.ArrayLike) -> Table:
        """The rows a boolean mask or an index array picks, in that order."""
        index = np.asarray(rows)
        return Table({name: a[index] for name, a in self.columns.items()}, self.source_path)

    def records(self) -> list[dict[str, Any]]:
        names = self.names
        values = [a.tolist() for a in self.columns.values()]
        return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)


def as_table(data: Table | Any) -> Table:
    """``data`` as a Table: a Table as is, a pandas DataFrame converted."""
    return data if isinstance(data, Table) else Table.from_frame(data)


def _column(values: list[Any]) -> np.ndarray:
    """Numbers (and missing) as floats, anything else as an object array."""
    if all((isinstance(v, (int, float)) and not isinstance(v, bool)) or v is None for v in values):
        return np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def concat(tables: Sequence[Table]) -> Table:
    """Rows of every table, under the union of their columns (missing: None/NaN)."""
    names = list(dict.fromkeys(name for t in tables for name in t.names))
    columns: dict[str, np.ndarray] = {}
    for name in names:
        parts = []
        for t in tables:
            if name in t:
                parts.append(t[name])
            else:
                parts.append(np.full(len(t), None, dtype=object))
        if all(p.dtype.kind in "fiu" for p in parts):
            columns[name] = np.concatenate([p.astype(float) for p in parts])
        else:
            columns[name] = np.concatenate([p.astype(object) for p in parts])
    return Table(columns)


def read_table(path: str | Path, required: Iterable[str], what: str) -> Table:
    """Read a CSV or Parquet file and check that it has the ``required`` columns."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} file {str(p)!r} does not exist")
    if p.is_dir():
        raise InputError(f"{what} file {str(p)!r} is a folder: give the file inside it")
    try:
        table = _read_parquet(p) if p.suffix.lower() in (".parquet", ".pq") else _read_csv(p)
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{what} file {str(p)!r} cannot be read: {first}") from exc
    except Exception as exc:  # pyarrow raises many kinds; all mean "unreadable"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{what} file {str(p)!r} cannot be read: {first}") from exc
    missing = [c for c in required if c not in table]
    if missing:
        raise InputError(f"{what} file {str(p)!r} lacks column(s) {', '.join(missing)}")
    if table.empty:
        raise InputError(f"{what} file {str(p)!r} has no rows")
    table.source_path = str(p)
    return table


def _read_csv(path: Path) -> Table:
    """A CSV file; ``#`` lines before the header (a ``# source:`` line, say) are
    comments."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        lines = f.readlines()
    while lines and lines[0].lstrip().startswith("#"):
        lines.pop(0)
    rows = list(csv.reader(lines, skipinitialspace=True))
    while rows and not any(cell.strip() for cell in rows[-1]):
        rows.pop()  # blank lines at the end
    if not rows:
        raise ValueError("the file is empty: it needs a header row")
    header = [name.strip() for name in rows[0]]
    body = [row for row in rows[1:] if any(cell.strip() for cell in row)]
    for i, row in enumerate(body):
        if len(row) > len(header):
            raise ValueError(f"row {i + 1} has {len(row)} fields, the header {len(header)}")
    columns: dict[str, np.ndarray] = {}
    for k, name in enumerate(header):
        cells = np.empty(len(body), dtype=object)
        cells[:] = [
            None if k >= len(row) or row[k].strip() in MISSING_TEXT else row[k] for row in body
        ]
        columns[name] = cells
    return Table(columns)


def _read_parquet(path: Path) -> Table:
    import pyarrow.parquet as pq

    data = pq.read_table(path)
    columns: dict[str, np.ndarray] = {}
    for name, column in zip(data.column_names, data.columns, strict=True):
        values = column.to_pylist()
        columns[str(name).strip()] = _column(values)
    return Table(columns)


def source_label(table: Table, what: str) -> str:
    path = table.source_path
    return f"{what} file {path!r}" if path else what


def _as_float(value: object) -> float | None:
    """The cell as a float: NaN where missing, None where it is not a number."""
    if _is_missing(value):
        return math.nan
    if isinstance(value, bool | np.bool_):  # `true` where a number belongs is a mistake
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def numeric_column(
    table: Table,
    column: str,
    what: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strictly_positive: bool = False,
    allow_missing: bool = False,
    integer: bool = False,
    key: str = "instance_type",
) -> npt.NDArray[np.float64]:
    """The column as floats, checked; raises InputError naming the first bad row."""
    raw = table[column]
    where = source_label(table, what)

    def row_label(idx: int) -> str:
        label = f"row {idx + 1}"
        if key in table:
            label += f" ({key}={table[key][idx]})"
        return label

    if raw.dtype.kind in "fiu":  # (a bool column, kind "b", is checked cell by cell)
        arr = raw.astype(float)
    else:
        parsed = [_as_float(v) for v in raw]
        for i, value in enumerate(parsed):
            if value is None:
                raise InputError(f"{where}: {row_label(i)}: {column}={raw[i]!r} is not a number")
        arr = np.array(parsed, dtype=float)
    if not allow_missing and np.isnan(arr).any():
        i = int(np.flatnonzero(np.isnan(arr))[0])
        raise InputError(f"{where}: {row_label(i)}: {column} is missing")
    if np.isinf(arr).any():
        i = int(np.flatnonzero(np.isinf(arr))[0])
        raise InputError(f"{where}: {row_label(i)}: {column}={arr[i]} is not finite")
    checks = []
    if strictly_positive:
        checks.append((arr <= 0, "must be > 0"))
    if minimum is not None:
        checks.append((arr < minimum, f"must be >= {minimum:g}"))
    if maximum is not None:
        checks.append((arr > maximum, f"must be <= {maximum:g}"))
    if integer:
        checks.append((arr != np.round(arr), "must be a whole number"))
    for bad, requirement in checks:
        bad &= ~np.isnan(arr)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{where}: {row_label(i)}: {column}={arr[i]:g} {requirement}")
    return arr


def text_column(table: Table, column: str, what: str, *, key: str = "instance_type") -> np.ndarray:
    """The column as stripped strings; missing values are an error naming the row."""
    values = optional_text(table[column])
    for i, value in enumerate(values):
        if value is None or not value:
            label = f"row {i + 1}"
            if key in table and key != column:
                label += f" ({key}={table[key][i]})"
            raise InputError(f"{source_label(table, what)}: {label}: {column} is missing")
    return values


def optional_text(values: Iterable[object]) -> np.ndarray:
    """Stripped strings, None where missing (numbers written as text, as pandas does)."""
    cells = [None if _is_missing(v) else str(v).strip() for v in values]
    out = np.empty(len(cells), dtype=object)
    out[:] = cells
    return out


def reject_duplicates(table: Table, keys: list[str], what: str) -> None:
    seen: set[tuple[object, ...]] = set()
    for i, row in enumerate(zip(*(table[k] for k in keys), strict=True)):
        if row in seen:
            values = ", ".join(f"{k}={v}" for k, v in zip(keys, row, strict=True))
            raise InputError(
                f"{source_label(table, what)}: row {i + 1}: duplicate entry for {values}"
            )
        seen.add(row)
