"""`deepvm store export`: a table's whole nights as plain Parquet or CSV files,
for tools that do not read Delta (docs/ARCHITECTURE.md, "The store"). The rows
are those deepvm's own reader returns (the newest completed commit per date and
writer), one file per date, each written whole or not at all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from deepvm.base.errors import ParameterError
from deepvm.base.names import check_date
from deepvm.base.output_files import atomic_output
from deepvm.model.schemas import TABLES
from deepvm.store.core import Store

__all__ = ["FORMATS", "ExportReport", "export_table"]

Format = Literal["parquet", "csv"]
FORMATS: tuple[Format, ...] = ("parquet", "csv")


@dataclass(frozen=True)
class ExportReport:
    """What :func:`export_table` wrote: the files (one per date; one for an undated
    table), the dates and the rows."""

    table: str
    format: str
    folder: str
    files: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)
    rows: int = 0


def export_table(
    store: Store,
    table: str,
    out: str | Path,
    fmt: Format = "parquet",
    since: str | None = None,
    until: str | None = None,
    on_date: Callable[[str], None] | None = None,
) -> ExportReport:
    """Write ``table``'s rows of the dates from ``since`` to ``until`` (both
    included; default every date) under ``out/table/`` as ``DATE.parquet`` (or
    ``.csv``), or ``out/table.parquet`` for an undated table. A month is read at a
    time, so the memory is a month's rows however long the history."""
    if table not in TABLES:
        raise ParameterError("table", table, f"is not a table; the tables: {', '.join(TABLES)}")
    if fmt not in FORMATS:
        raise ParameterError("format", fmt, f"must be one of {', '.join(FORMATS)}")
    column = TABLES[table][0]
    since = check_date(since, "since") if since else None
    until = check_date(until, "until") if until else None
    if column is None and (since or until):
        raise ParameterError(
            "since", since or until, f"applies to dated tables only; {table!r} has no dates"
        )
    if since and until and since > until:
        raise ParameterError("until", until, f"is before since {since}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ParameterError("out", str(out), "is a file: give a folder")
    if column is None:
        rows = store.rows(table)
        target = folder / f"{table}.{fmt}"
        _write(rows, target, fmt)
        return ExportReport(table, fmt, str(folder), [str(target)], [], rows.num_rows)
    dates = [
        d
        for d in store.partitions(table)
        if (since is None or d >= since) and (until is None or d <= until)
    ]
    files: list[str] = []
    total = 0
    for month in sorted({d[:7] for d in dates}):
        days = [d for d in dates if d[:7] == month]
        rows = store.rows(table, days)
        values = rows.column(column).cast(pa.string())
        for day in days:
            part = rows.filter(pc.equal(values, day))
            target = folder / table / f"{day}.{fmt}"
            _write(part, target, fmt)
            files.append(str(target))
            total += part.num_rows
            if on_date is not None:
                on_date(day)
    return ExportReport(table, fmt, str(folder), files, dates, total)


def _write(rows: pa.Table, target: Path, fmt: Format) -> None:
    with atomic_output(target) as tmp:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(rows, tmp)
        else:
            import pyarrow.csv as csv

            csv.write_csv(rows, tmp)
