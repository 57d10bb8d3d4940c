"""deepvm's earlier store layout (schema 1: day folders; schema 2: month folders of
Parquet files, published by the store's own journal), found and read
(docs/ARCHITECTURE.md, "The store"): the `Store` refuses such a store in one
line naming `deepvm store migrate` (``deepvm.store._migrate``, which reads its
files through this module), and `store check` names stray partition folders."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from deepvm.base.errors import StoreError
from deepvm.model.schemas import TABLES, month_column
from deepvm.store.location import Location

__all__ = [
    "STAGING",
    "OldFile",
    "check_no_journal",
    "check_not_legacy",
    "filesystem_of",
    "join_path",
    "legacy_files",
    "read_old",
    "stray_partitions",
]

_OLD_VERSIONS = ("1", "2")
_DAY_FILE = re.compile(r"part-(\d{4}-\d{2}-\d{2})-(.+)\.parquet")
_FLAT_FILE = re.compile(r"part-(.+)\.parquet")
_DELTA_FILE = re.compile(r"part-\d{5}-[0-9a-f-]{36}-c\d{3}(\.\w+)*\.parquet")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MONTH = re.compile(r"\d{4}-\d{2}")
_COMPACTED = "part-compacted.parquet"
STAGING = ".deepvm-staging"


@dataclass(frozen=True)
class OldFile:
    rel: str
    kind: str  # "day", "month" (compacted), "legacy" (version-1 day folder), "flat"
    date: str | None = None
    key: str | None = None


def filesystem_of(location: Location) -> tuple[pafs.FileSystem, str]:
    """The store's root as a pyarrow file system: the local disk, or delta-rs's own
    object-store client (same settings and timeouts as the Delta tables)."""
    if location.local:
        return pafs.LocalFileSystem(), str(location.root)
    from deltalake.fs import DeltaStorageHandler

    handler = DeltaStorageHandler(location.base, location.options)
    return pafs.PyFileSystem(handler), ""


def join_path(base: str, rel: str) -> str:
    return f"{base}/{rel}" if base else rel


def _parse(table: str, rel: str) -> OldFile | None:
    parts = rel.split("/")
    if parts[0] != table or "_delta_log" in parts or _DELTA_FILE.fullmatch(parts[-1]):
        return None
    column, name = TABLES[table][0], parts[-1]
    if column is None:
        hit = _FLAT_FILE.fullmatch(name)
        return OldFile(rel, "flat", key=hit[1]) if hit and len(parts) == 2 else None
    if len(parts) != 3:
        return None
    folder, _, value = parts[1].partition("=")
    if folder == month_column(column) and _MONTH.fullmatch(value):
        if name == _COMPACTED:
            return OldFile(rel, "month")
        hit = _DAY_FILE.fullmatch(name)
        if hit and hit[1].startswith(value):
            return OldFile(rel, "day", hit[1], hit[2])
    elif folder == column and _DATE.fullmatch(value):
        hit = _FLAT_FILE.fullmatch(name)
        if hit:
            return OldFile(rel, "legacy", value, hit[1])
    return None


def _listing(location: Location) -> tuple[pafs.FileSystem, str, list[str]]:
    filesystem, base = filesystem_of(location)
    try:
        infos = filesystem.get_file_info(
            pafs.FileSelector(base, recursive=True, allow_not_found=True)
        )
    except (OSError, pa.ArrowException) as exc:
        from deepvm.store._delta import store_error

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


def legacy_files(location: Location) -> dict[str, list[OldFile]]:
    """The files of the earlier layout, per table."""
    if location.local and not location.root.is_dir():
        return {}
    _, _, rels = _listing(location)
    found: dict[str, list[OldFile]] = {}
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


def read_old(
    filesystem: pafs.FileSystem, base: str, table: str, f: OldFile
) -> tuple[pa.Table, dict]:
    column = TABLES[table][0]
    where = join_path(base, f.rel)
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


def check_no_journal(filesystem: pafs.FileSystem, base: str, location: Location) -> None:
    selector = pafs.FileSelector(join_path(base, STAGING), recursive=True, allow_not_found=True)
    if any(i.base_name == "PUBLISH.json" for i in filesystem.get_file_info(selector)):
        raise StoreError(
            f"store {location.uri!r} holds a publication that a writer of the earlier deepvm "
            "left half done: run any store command of that deepvm once to finish it, then "
            "`deepvm store migrate`"
        )
