"""From deepvm's earlier layout (schema 1: day folders; schema 2: month folders of
Parquet files, published by the store's own journal) to Delta tables: `deepvm
store migrate` (docs/ARCHITECTURE.md, "The store").

Every row keeps its date and its writer (the name each file recorded), and deepvm
reads the same rows after as before: of a writer's rows of a date, its day file
wins over its part of a compacted month and over a version-1 day folder, as the
earlier reader had it. The rows are committed in one commit; then the old files
are deleted. A migration killed before its commit point changes nothing deepvm
reads, and a second run finishes one killed after it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs

from deepvm.model.schemas import TABLES
from deepvm.store._legacy import (
    STAGING,
    OldFile,
    check_no_journal,
    filesystem_of,
    join_path,
    legacy_files,
    read_old,
)
from deepvm.store.core import Store
from deepvm.store.location import locate

__all__ = ["MigrateReport", "migrate_store"]


@dataclass(frozen=True)
class MigrateReport:
    """What `deepvm store migrate` did: per table, the old files read and the rows
    committed to its Delta table."""

    files: dict[str, int]
    rows: dict[str, int]

    @property
    def changed(self) -> bool:
        return any(self.files.values())


def _pieces(
    filesystem: pafs.FileSystem, base: str, table: str, files: list[OldFile]
) -> list[tuple[str | None, str, pa.Table]]:
    """(date, writer name, rows) per writer and date, the earlier reader's precedence."""
    chosen: dict[tuple[str | None, str], tuple[int, str, pa.Table]] = {}
    rank = {"day": 3, "flat": 3, "legacy": 2, "month": 1}
    for f in files:
        data, meta = read_old(filesystem, base, table, f)
        if f.kind == "month":
            parts = json.loads(meta.get(b"deepvm_parts", b"[]"))
            found = [(d, k, n, data.slice(a, b - a)) for d, k, n, a, b in parts]
        else:
            name = meta.get(b"deepvm_name", (f.key or "0").encode()).decode()
            found = [(f.date, f.key or "0", name, data)]
        for date, key, name, rows in found:
            if chosen.get((date, key), (0,))[0] < rank[f.kind]:
                chosen[(date, key)] = (rank[f.kind], name, rows)
    return [(date, name, rows) for (date, _), (_, name, rows) in sorted(chosen.items(), key=str)]


def migrate_store(uri: object) -> MigrateReport:
    """Turn a store of the earlier layout into Delta tables (see the module's doc)."""
    store = Store(locate(uri), check_legacy=False)  # type: ignore[arg-type]
    store.ensure_writable()
    location = store.location
    old = legacy_files(location)
    filesystem, base = filesystem_of(location)
    check_no_journal(filesystem, base, location)
    files = {t: len(old.get(t, [])) for t in TABLES}
    rows = dict.fromkeys(TABLES, 0)
    if not old:
        return MigrateReport(files, rows)
    done = store.has_command("migrate")
    if not done:
        with store.transaction(command="migrate") as tx:
            for table, found in old.items():
                column = TABLES[table][0]
                for date, name, data in _pieces(filesystem, base, table, found):
                    frame = data.to_pandas()
                    if column is not None:
                        frame = frame.drop(columns=column)
                        frame = frame if len(frame) else pd.DataFrame(columns=frame.columns)
                    tx.write(table, frame, partition=date, name=name)
                    rows[table] += len(frame)
    for found in old.values():  # committed: the old files go
        for f in found:
            filesystem.delete_file(join_path(base, f.rel))
    for leftover in (STAGING, f"{STAGING}.lock"):
        info = filesystem.get_file_info(join_path(base, leftover))
        if info.type == pafs.FileType.Directory:
            filesystem.delete_dir(info.path)
        elif info.type == pafs.FileType.File:
            filesystem.delete_file(info.path)
    return MigrateReport(files, rows)
