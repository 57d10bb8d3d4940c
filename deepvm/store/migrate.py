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

import datetime as dt
import json
import re
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from deepvm.errors import StoreError
from deepvm.schemas import TABLES, month_column
from deepvm.store.location import Location

_OLD_VERSIONS = ("1", "2")
_DAY_FILE = re.compile(r"part-(\d{4}-\d{2}-\d{2})-(.+)\.parquet")
_FLAT_FILE = re.compile(r"part-(.+)\.parquet")
_DELTA_FILE = re.compile(r"part-\d{5}-[0-9a-f-]{36}-c\d{3}(\.\w+)*\.parquet")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MONTH = re.compile(r"\d{4}-\d{2}")
_COMPACTED = "part-compacted.parquet"
_STAGING = ".deepvm-staging"


@dataclass(frozen=True)
class _OldFile:
    rel: str
    kind: str  # "day", "month" (compacted), "legacy" (version-1 day folder), "flat"
    date: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class MigrateReport:
    """What `deepvm store migrate` did: per table, the old files read and the rows
    committed to its Delta table."""

    files: dict[str, int]
    rows: dict[str, int]

    @property
    def changed(self) -> bool:
        return any(self.files.values())


def _filesystem(location: Location) -> tuple[pafs.FileSystem, str]:
    """The store's root as a pyarrow file system: the local disk, or delta-rs's own
    object-store client (same settings and timeouts as the Delta tables)."""
    if location.local:
        return pafs.LocalFileSystem(), str(location.root)
    from deltalake.fs import DeltaStorageHandler

    handler = DeltaStorageHandler(location.base, location.options)
    return pafs.PyFileSystem(handler), ""


def _join(base: str, rel: str) -> str:
    return f"{base}/{rel}" if base else rel


def _parse(table: str, rel: str) -> _OldFile | None:
    parts = rel.split("/")
    if parts[0] != table or "_delta_log" in parts or _DELTA_FILE.fullmatch(parts[-1]):
        return None
    column, name = TABLES[table][0], parts[-1]
    if column is None:
        hit = _FLAT_FILE.fullmatch(name)
        return _OldFile(rel, "flat", key=hit[1]) if hit and len(parts) == 2 else None
    if len(parts) != 3:
        return None
    folder, _, value = parts[1].partition("=")
    if folder == month_column(column) and _MONTH.fullmatch(value):
        if name == _COMPACTED:
            return _OldFile(rel, "month")
        hit = _DAY_FILE.fullmatch(name)
        if hit and hit[1].startswith(value):
            return _OldFile(rel, "day", hit[1], hit[2])
    elif folder == column and _DATE.fullmatch(value):
        hit = _FLAT_FILE.fullmatch(name)
        if hit:
            return _OldFile(rel, "legacy", value, hit[1])
    return None


def _listing(location: Location) -> tuple[pafs.FileSystem, str, list[str]]:
    filesystem, base = _filesystem(location)
    try:
        infos = filesystem.get_file_info(
            pafs.FileSelector(base, recursive=True, allow_not_found=True)
        )
    except (OSError, pa.ArrowException) as exc:
        from deepvm.store.delta import store_error

        raise store_error(exc, location, "listing") from None
    rels = [info.path[len(base) :].lstrip("/") for info in infos if info.type == pafs.FileType.File]
    return filesystem, base, rels


def stray_partitions(location: Location) -> dict[str, int]:
    """Partition folders of dated tables whose value is not a month (e.g. a copy
    put there by hand), with their file counts: Delta never lists them, so no
    reader sees their rows, and `store check` names them."""
    if location.local and not location.root.is_dir():
        return {}
    _, _, rels = _listing(location)
    found: dict[str, int] = {}
    for rel in rels:
        parts = rel.split("/")
        if len(parts) < 3 or parts[0] not in TABLES or TABLES[parts[0]][0] is None:
            continue
        column, _, value = parts[1].partition("=")
        if column == month_column(TABLES[parts[0]][0] or "") and not _MONTH.fullmatch(value):
            folder = f"{parts[0]}/{parts[1]}"
            found[folder] = found.get(folder, 0) + 1
    return found


def legacy_files(location: Location) -> dict[str, list[_OldFile]]:
    """The files of the earlier layout, per table."""
    if location.local and not location.root.is_dir():
        return {}
    _, _, rels = _listing(location)
    found: dict[str, list[_OldFile]] = {}
    for rel in sorted(rels):
        table = rel.split("/", 1)[0]
        if table in TABLES:
            parsed = _parse(table, rel)
            if parsed is not None:
                found.setdefault(table, []).append(parsed)
    return found


def check_not_legacy(location: Location) -> None:
    """One line naming `deepvm store migrate` when the store is in the earlier layout."""
    if legacy_files(location):
        raise StoreError(
            f"store {location.uri!r} is in deepvm's earlier layout (Parquet files, schema "
            f"version 1 or 2): run `deepvm store migrate --store {location.uri}` once"
        )


def _read(filesystem: pafs.FileSystem, base: str, table: str, f: _OldFile) -> tuple[pa.Table, dict]:
    column = TABLES[table][0]
    where = _join(base, f.rel)
    try:
        data = pq.read_table(where, filesystem=filesystem)
    except Exception as exc:  # pyarrow raises several kinds; all mean "not Parquet"
        raise StoreError(
            f"store file {where!r} is not a readable Parquet file ({str(exc).splitlines()[0]}): "
            "move it out of the store, then run `deepvm store migrate` again"
        ) from None
    meta = dict(data.schema.metadata or {})
    version = meta.get(b"schema_version", b"").decode()
    if meta.get(b"table", b"").decode() != table or version not in _OLD_VERSIONS:
        raise StoreError(
            f"store file {where!r} is not a deepvm {table!r} file of schema version 1 or 2: "
            "move it out of the store, then run `deepvm store migrate` again"
        )
    schema = TABLES[table][1]
    columns = {}
    for fld in schema:
        if fld.name in data.column_names:
            columns[fld.name] = data.column(fld.name).cast(fld.type)
        else:  # a column added after the file was written
            columns[fld.name] = pa.nulls(len(data), fld.type)
    if column is not None:
        if column in data.column_names:
            columns[column] = data.column(column).cast(pa.date32())
        else:  # version 1: the date in the path only
            day = dt.date.fromisoformat(f.date or "")
            columns[column] = pa.array([day] * len(data), pa.date32())
    return pa.table(columns), meta


def _pieces(
    filesystem: pafs.FileSystem, base: str, table: str, files: list[_OldFile]
) -> list[tuple[str | None, str, pa.Table]]:
    """(date, writer name, rows) per writer and date, the earlier reader's precedence."""
    chosen: dict[tuple[str | None, str], tuple[int, str, pa.Table]] = {}
    rank = {"day": 3, "flat": 3, "legacy": 2, "month": 1}
    for f in files:
        data, meta = _read(filesystem, base, table, f)
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
    from deepvm.store.core import Store
    from deepvm.store.location import locate

    store = Store(locate(uri), check_legacy=False)  # type: ignore[arg-type]
    store.ensure_writable()
    location = store.location
    old = legacy_files(location)
    filesystem, base = _filesystem(location)
    _check_no_journal(filesystem, base, location)
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
            filesystem.delete_file(_join(base, f.rel))
    for leftover in (_STAGING, f"{_STAGING}.lock"):
        info = filesystem.get_file_info(_join(base, leftover))
        if info.type == pafs.FileType.Directory:
            filesystem.delete_dir(info.path)
        elif info.type == pafs.FileType.File:
            filesystem.delete_file(info.path)
    return MigrateReport(files, rows)


def _check_no_journal(filesystem: pafs.FileSystem, base: str, location: Location) -> None:
    selector = pafs.FileSelector(_join(base, _STAGING), recursive=True, allow_not_found=True)
    if any(i.base_name == "PUBLISH.json" for i in filesystem.get_file_info(selector)):
        raise StoreError(
            f"store {location.uri!r} holds a publication that a writer of the earlier deepvm "
            "left half done: run any store command of that deepvm once to finish it, then "
            "`deepvm store migrate`"
        )
