"""The Parquet store (docs/ARCHITECTURE.md, "The store"): one Parquet dataset per
table, in a local folder or under an object-store prefix (s3://bucket/prefix).

Layout, hive-partitioned by month, with the date a real column of every file::

    <table>/<date column minus _date>_month=YYYY-MM/part-YYYY-MM-DD-<name>.parquet
    <table>/<...>_month=YYYY-MM/part-compacted.parquet     (a compacted month)
    instances/part-<name>.parquet

``name`` is the writer's (a scenario, an instance type, a price source) made
file-safe and recorded in the file's metadata. Every write is staged outside the
table folders, under a name no reader's glob matches, and published by rename
(on disk) or by copy after a journal (object stores): a file is whole or absent,
and a :meth:`Store.transaction` (the nightly run's date) is published whole or
rolled forward by the next writer. Writing the same (table, date, name) again
replaces that writer's rows, so re-running a stage never duplicates rows and
never touches other dates or other writers' files. :meth:`Store.compact` merges
a finished month's daily files into one file. Read with pandas, polars or DuckDB
as-is::

    duckdb.sql("select * from 'store/recommendations/**/*.parquet'")
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import tempfile
import time
import uuid
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from deepvm.config import DEFAULT_STORE as DEFAULT_STORE
from deepvm.config import ENV_STORE as ENV_STORE
from deepvm.errors import InputError, StoreError
from deepvm.names import MAX_NAME_LENGTH as MAX_NAME_LENGTH
from deepvm.names import check_date as check_date
from deepvm.names import check_name, file_safe
from deepvm.storage import Entry, Files, LocalFiles, ObjectFiles, open_files

# 2: the partition date is a column of every file, in month folders (1: day folders,
# the date in the path only). Files of both versions are read.
SCHEMA_VERSION = "2"
READABLE_VERSIONS = ("1", "2")

_ts = pa.timestamp("us", tz="UTC")
_software = [
    pa.field("torch_version", pa.string()),
    pa.field("cuda_version", pa.string()),
    pa.field("deepvm_version", pa.string()),
]

# One cluster, as recommendations and fleet plans both store it.
_cluster = [
    pa.field("region", pa.string()),
    pa.field("zone", pa.string()),
    pa.field("architecture", pa.string()),
    pa.field("worker_type", pa.string()),
    pa.field("n_workers", pa.int64()),
    pa.field("n_spot", pa.int64()),
    pa.field("n_on_demand", pa.int64()),
    pa.field("remote_type", pa.string()),
    pa.field("n_remote", pa.int64()),
    pa.field("hourly_cost", pa.float64()),
    pa.field("throughput_flops", pa.float64()),
]

# table -> (partition column, schema of the other columns stored in the files)
TABLES: dict[str, tuple[str | None, pa.Schema]] = {
    "instances": (
        None,
        pa.schema(
            [
                ("provider", pa.string()),
                ("region", pa.string()),
                ("instance_type", pa.string()),
                ("quota_group", pa.string()),
                ("vcpus", pa.float64()),
                ("memory_gib", pa.float64()),
                ("network_gbps", pa.float64()),
                ("accelerator_name", pa.string()),
                ("accelerator_count", pa.int64()),
                ("accelerator_memory_gib", pa.float64()),
                ("peak_flops", pa.float64()),
            ]
        ),
    ),
    "prices": (
        "snapshot_date",
        pa.schema(
            [
                ("provider", pa.string()),
                ("region", pa.string()),
                ("zone", pa.string()),
                ("instance_type", pa.string()),
                ("market", pa.string()),
                ("usd_per_hour", pa.float64()),
                ("fetched_at", _ts),
                ("source", pa.string()),
                ("stale", pa.bool_()),
                # spot rows: fraction of spot instances reclaimed per month
                ("interruption_rate", pa.float64()),
                # the date the price refers to (ISO 8601, at the source's precision:
                # "2025" for a snapshot known by its year); a live fetch: its day
                ("price_date", pa.string()),
            ]
        ),
    ),
    "benchmarks": (
        "run_date",
        pa.schema(
            [
                ("run_id", pa.string()),
                ("measured_at", _ts),
                ("instance_type", pa.string()),
                ("hostname", pa.string()),
                ("device", pa.string()),
                ("accelerator_name", pa.string()),
                ("accelerator_count", pa.int64()),
                ("workload", pa.string()),
                ("dtype", pa.string()),
                ("batch_size", pa.int64()),
                ("steps", pa.int64()),
                ("step_time_median_s", pa.float64()),
                ("step_time_p10_s", pa.float64()),
                ("step_time_p90_s", pa.float64()),
                ("flops_per_step", pa.float64()),
                ("achieved_flops", pa.float64()),
                ("samples_per_s", pa.float64()),
                ("status", pa.string()),
                ("error", pa.string()),
                # why the measurement is suspect (noisy step times), else null
                ("warning", pa.string()),
                ("cpu_model", pa.string()),
                ("cpu_cores", pa.int64()),
                ("memory_gib", pa.float64()),
                ("wall_s", pa.float64()),
                *_software,
            ]
        ),
    ),
    "scaling": (
        "run_date",
        pa.schema(
            [
                ("run_id", pa.string()),
                ("instance_type", pa.string()),
                ("workload", pa.string()),
                ("n_nodes", pa.int64()),
                ("duration_s", pa.float64()),
                ("speedup", pa.float64()),
                ("source", pa.string()),
                ("measured_at", _ts),
            ]
        ),
    ),
    "checkpoint_transfer": (
        "run_date",
        pa.schema(
            [
                ("run_id", pa.string()),
                ("worker_type", pa.string()),
                ("remote_type", pa.string()),
                ("bandwidth_gbps", pa.float64()),
                ("workers_per_remote", pa.int64()),
                ("checkpoint_gb", pa.float64()),
                ("transfer_s", pa.float64()),
            ]
        ),
    ),
    "overhead_models": (
        "fitted_date",
        pa.schema(
            [
                ("instance_type", pa.string()),
                ("workload", pa.string()),
                ("model", pa.string()),
                ("params", pa.string()),
                ("rmse", pa.float64()),
                ("loo_rmse", pa.float64()),
                ("r2", pa.float64()),
                ("n_points", pa.int64()),
                ("selected", pa.bool_()),
                ("fitted_at", _ts),  # orders fits of one day (null in files before it)
            ]
        ),
    ),
    "flopp": (
        "snapshot_date",
        pa.schema(
            [
                ("region", pa.string()),
                ("instance_type", pa.string()),
                ("workload", pa.string()),
                ("market", pa.string()),
                ("achieved_flops", pa.float64()),
                ("usd_per_hour", pa.float64()),
                ("flopp", pa.float64()),
                ("flops_source", pa.string()),
            ]
        ),
    ),
    "recommendations": (
        "snapshot_date",
        pa.schema(
            [
                ("run_id", pa.string()),
                ("created_at", _ts),
                ("scenario", pa.string()),
                ("workload", pa.string()),
                ("objective", pa.string()),
                ("policy", pa.string()),
                ("rank", pa.int64()),
                *_cluster,
                ("objective_value", pa.float64()),
                ("preemptions_per_h", pa.float64()),
                ("checkpoint_interval_s", pa.float64()),
                ("efficiency", pa.float64()),
                ("goodput_flops", pa.float64()),
                ("expected_makespan_h", pa.float64()),
                ("expected_total_cost", pa.float64()),
                ("work_flops", pa.float64()),
                ("deadline_h", pa.float64()),
                ("budget", pa.float64()),
                ("checkpoint_gb", pa.float64()),
                ("overhead_model", pa.string()),
                ("overhead_source", pa.string()),
                ("flops_source", pa.string()),
                ("status", pa.string()),
                ("solver", pa.string()),
                ("solve_s", pa.float64()),
                ("prices_snapshot", pa.string()),
                # what stops the cluster growing by one node (null in files before it)
                ("binding", pa.string()),
            ]
        ),
    ),
    # One plan for all registered jobs under the shared quotas (deepvm.planner.fleet_plan).
    "fleet": (
        "snapshot_date",
        pa.schema(
            [
                ("run_id", pa.string()),
                ("created_at", _ts),
                ("status", pa.string()),
                ("objective_value", pa.float64()),
                ("team_budget", pa.float64()),
                ("scenario", pa.string()),
                ("planned", pa.bool_()),
                ("priority", pa.float64()),
                ("shared", pa.bool_()),
                ("value", pa.float64()),
                *_cluster,
                ("solo_throughput_flops", pa.float64()),
                ("solo_hourly_cost", pa.float64()),
                ("binding", pa.string()),
                ("note", pa.string()),
                ("prices_snapshot", pa.string()),
            ]
        ),
    ),
}

# Work in progress lives here, outside every table folder, under names that no
# reader's glob (``**/*.parquet``) matches; see docs/ARCHITECTURE.md "The store".
STAGING_DIR = ".deepvm-staging"
COMPACTED = "part-compacted.parquet"
_PUBLISH = "PUBLISH.json"
_LOCK = "lock"
_GUARD = ".deepvm-staging.lock"  # the store-wide staging guard (a file at the root)
_NAME_KEY = b"deepvm_name"
_PARTS_KEY = b"deepvm_parts"  # a compacted month: [date, file key, name, first row, end row]
_DAY_FILE = re.compile(r"part-(\d{4}-\d{2}-\d{2})-(.+)\.parquet")
_LEGACY_FILE = re.compile(r"part-(.+)\.parquet")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MONTH = re.compile(r"\d{4}-\d{2}")
# Object stores have no locks: a journal older than this belongs to a writer that
# died while publishing (publishing takes seconds), and staging older than a day
# without a journal to a writer that died before.
ROLL_FORWARD_AFTER_S = 300.0
ABANDONED_AFTER_S = 86_400.0


def month_column(column: str) -> str:
    """The month folder's hive key for a date column (``snapshot_date`` ->
    ``snapshot_month``)."""
    return column.removesuffix("_date") + "_month"


def file_schema(table: str) -> pa.Schema:
    """The schema of the table's files: its columns, then its date column."""
    column, schema = TABLES[table]
    return schema if column is None else schema.append(pa.field(column, pa.date32()))


def store_uri(uri: str | os.PathLike[str] | None = None) -> str:
    """The store's location: ``uri``, else $DEEPVM_STORE, else ./deepvm-store
    (a local folder, a file:// URI, or an object-store URI such as s3://bucket/prefix)."""
    value = os.fspath(uri) if uri is not None else os.environ.get(ENV_STORE) or DEFAULT_STORE
    if not value.strip():
        raise StoreError("store path is empty: give a folder, e.g. --store ./deepvm-store")
    return value[len("file://") :] if value.startswith("file://") else value


def to_arrow(table: str, df: pd.DataFrame, partition: str | None = None) -> pa.Table:
    """The rows as an Arrow table of the table's file schema (columns in schema
    order, then the date ``partition``; a missing column is an error, an extra one
    is dropped)."""
    column, schema = TABLES[table]
    missing = [f.name for f in schema if f.name not in df.columns]
    if missing:
        raise ValueError(f"{table} rows lack column(s) {', '.join(missing)}")
    arrow = pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)
    if column is not None:
        if partition is None:
            raise ValueError(f"table {table!r} rows need their {column}")
        day = dt.date.fromisoformat(partition)
        arrow = arrow.append_column(
            pa.field(column, pa.date32()), pa.array([day] * len(arrow), pa.date32())
        )
    return arrow.replace_schema_metadata({"schema_version": SCHEMA_VERSION, "table": table})


@dataclass(frozen=True)
class _File:
    """A data file of a table, as its path says."""

    rel: str
    kind: str  # "day", "month" (compacted), "legacy" (a version-1 day folder) or "flat"
    date: str | None = None  # day and legacy files
    key: str | None = None  # the writer's file-safe name (day, legacy, flat files)
    month: str | None = None
    source: str | None = None  # where to read it (a staged file in an open transaction)


def _parse(table: str, rel: str) -> _File | None:
    """What a path in the table's folder is (None: not a data file)."""
    parts = rel.split("/")
    if len(parts) < 2 or parts[0] != table:
        return None
    column = TABLES[table][0]
    name = parts[-1]
    if column is None:
        hit = _LEGACY_FILE.fullmatch(name)
        return _File(rel, "flat", key=hit[1]) if hit and len(parts) == 2 else None
    if len(parts) != 3:
        return None
    folder_key, _, value = parts[1].partition("=")
    if folder_key == month_column(column) and _MONTH.fullmatch(value):
        if name == COMPACTED:
            return _File(rel, "month", month=value)
        hit = _DAY_FILE.fullmatch(name)
        if hit and hit[1].startswith(value):
            return _File(rel, "day", date=hit[1], key=hit[2], month=value)
    elif folder_key == column and _DATE.fullmatch(value):
        hit = _LEGACY_FILE.fullmatch(name)
        if hit:
            return _File(rel, "legacy", date=value, key=hit[1], month=value[:7])
    return None


def _parts_of(meta: dict[bytes, bytes]) -> list[list]:
    """A compacted month's parts: [date, writer's file key, name, first row, end row]."""
    return list(json.loads(meta.get(_PARTS_KEY, b"[]")))


_Piece = tuple[str, str, str, pa.Table]  # date, writer's file key, name, rows


def _month_file(table: str, pieces: list[_Piece]) -> pa.Table:
    """One compacted month from its pieces, sorted, each piece's rows in its parts."""
    pieces = sorted(pieces, key=lambda p: (p[0], p[1]))
    parts, start = [], 0
    for date, key, name, rows in pieces:
        parts.append([date, key, name, start, start + len(rows)])
        start += len(rows)
    merged = (
        pa.concat_tables([p[3] for p in pieces]) if pieces else file_schema(table).empty_table()
    )
    return merged.replace_schema_metadata(
        {"schema_version": SCHEMA_VERSION, "table": table, _PARTS_KEY.decode(): json.dumps(parts)}
    )


def _pieces_of(data: pa.Table, meta: dict[bytes, bytes]) -> list[_Piece]:
    return [
        (date, key, name, data.slice(start, stop - start))
        for date, key, name, start, stop in _parts_of(meta)
    ]


class _Transaction:
    """Files staged by one writer, published together (see Store.transaction)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder  # relative to the store's root
        self.staged: dict[str, tuple[str, str]] = {}  # final rel -> (staged rel, name)
        self.deletes: set[str] = set()  # published files this transaction removes
        self.drop_parts: dict[str, set[tuple[str, str]]] = {}  # compacted rel -> (date, key)


@dataclass(frozen=True)
class CompactReport:
    """What :meth:`Store.compact` did: per table, the months merged into one file
    and the files that were merged (or moved out of version-1 day folders)."""

    before: str
    months: dict[str, list[str]]
    files_merged: dict[str, int]
    legacy_moved: dict[str, int]

    @property
    def changed(self) -> bool:
        return any(self.months.values()) or any(self.legacy_moved.values())


@dataclass(frozen=True)
class Store:
    """A store in a local folder or under an object-store prefix. Inside
    :meth:`transaction`, writes are staged and reads see them; they are
    published when the block ends."""

    files: Files
    _tx: _Transaction | None = field(default=None, compare=False, repr=False)

    @classmethod
    def open(cls, uri: StoreLike | None = None) -> Store:
        """A store by URI (a Store is returned as it is, so that stages run inside
        a caller's transaction). Raises StoreError when the path cannot be a store."""
        if isinstance(uri, Store):
            return uri
        store = cls(open_files(store_uri(uri)))
        store._check_path()
        return store

    @property
    def uri(self) -> str:
        """Where the store is, as the user gave it (a folder or a URI)."""
        return self.files.uri

    @property
    def local(self) -> bool:
        return self.files.local

    def exists(self) -> bool:
        """Whether anything is there (a folder, or objects under the prefix)."""
        if isinstance(self.files, LocalFiles):
            return self.files.root.is_dir()
        try:
            return bool(self.files.listdir(""))
        except OSError as exc:
            raise self.files.error(exc, "", "listing") from None

    # --- checks -------------------------------------------------------------------

    def _check_path(self) -> None:
        if not isinstance(self.files, LocalFiles):
            return  # an object store: checked by ensure_writable's probe
        root = self.files.root
        if root.exists() and not root.is_dir():
            raise StoreError(
                f"store {str(root)!r} is a file, not a folder: give a folder with --store"
            )
        above = root.parent
        while not above.exists() and above != above.parent:
            above = above.parent
        if above.exists() and not above.is_dir():
            raise StoreError(
                f"store {str(root)!r} is under {str(above)!r}, which is a file: "
                "give a folder with --store"
            )

    def ensure_writable(self) -> Store:
        """Check, before any work, that writes can land here; leaves nothing behind."""
        self._check_path()
        if not isinstance(self.files, LocalFiles):
            probe = f"{STAGING_DIR}/probe-{uuid.uuid4().hex}"
            try:
                self.files.write_bytes(probe, b"")
                self.files.delete(probe)
            except OSError as exc:
                raise self.files.error(exc, "", "writing to") from None
            return self
        root = self.files.root
        target = root
        while not target.exists() and target != target.parent:
            target = target.parent
        if not os.access(target, os.W_OK | os.X_OK):
            raise StoreError(
                f"store {str(root)!r} is not writable ({str(target)!r} is read-only): "
                "fix its permissions or use another --store"
            )
        if target == root:  # root bypasses permission bits: try for real
            try:
                fd, probe_path = tempfile.mkstemp(
                    prefix=".deepvm-probe-", suffix=".partial", dir=target
                )
                os.close(fd)
                os.unlink(probe_path)
            except OSError as exc:
                raise self.files.error(exc, "", "writing to") from None
        return self

    # --- layout -------------------------------------------------------------------

    def _rel(self, table: str, partition: str | None, key: str) -> str:
        column = TABLES[table][0]
        if column is None or partition is None:
            return f"{table}/part-{key}.parquet"
        return f"{table}/{month_column(column)}={partition[:7]}/part-{partition}-{key}.parquet"

    def _month_rel(self, table: str, month: str) -> str:
        column = TABLES[table][0]
        assert column is not None
        return f"{table}/{month_column(column)}={month}/{COMPACTED}"

    def _published(self, table: str, partitions: Collection[str] | None) -> list[str]:
        """Paths of the table's published files (listing only the month folders, and
        any version-1 day folders, of the given dates)."""
        column = TABLES[table][0]
        if column is None or partitions is None:
            return self.files.walk(table)
        months = sorted({p[:7] for p in partitions})
        folders = [f"{table}/{month_column(column)}={m}" for m in months]
        if any(e.is_dir and e.name.startswith(f"{column}=") for e in self.files.listdir(table)):
            folders += [f"{table}/{column}={p}" for p in sorted(partitions)]
        return [f"{f}/{e.name}" for f in folders for e in self.files.listdir(f) if not e.is_dir]

    def _listing(self, table: str, partitions: Collection[str] | None = None) -> list[_File]:
        """The table's data files (of the given dates only), staged ones overlaid and
        files this transaction removes left out."""
        found: dict[str, _File] = {}
        for rel in self._published(table, partitions):
            parsed = _parse(table, rel)
            if parsed is not None:
                found[rel] = parsed
        if self._tx is not None:
            for rel in self._tx.deletes:
                found.pop(rel, None)
            for rel, (staged, _) in self._tx.staged.items():
                parsed = _parse(table, rel)
                if parsed is not None:
                    found[rel] = replace(parsed, source=staged)
        files = list(found.values())
        if partitions is not None and TABLES[table][0] is not None:
            wanted = set(partitions)
            months = {p[:7] for p in wanted}
            files = [
                f for f in files if (f.month in months if f.kind == "month" else f.date in wanted)
            ]
        return sorted(files, key=lambda f: f.rel)

    def partitions(self, table: str) -> list[str]:
        """The table's dates, sorted, from file names (and a compacted month's
        footer): no rows are read. Staged dates of an open transaction count."""
        if TABLES[table][0] is None:
            return []
        dates: set[str] = set()
        for f in self._listing(table):
            if f.kind == "month":
                dates |= {part[0] for part in self._parts(f)}
            elif f.date is not None:
                dates.add(f.date)
        return sorted(dates)

    def _parts(self, f: _File) -> list[list]:
        try:
            meta = self.files.read_metadata(f.source or f.rel)
        except (OSError, pa.ArrowException):
            raise StoreError(
                f"store file {self.files.location(f.rel)!r} is not a readable Parquet file: {_FIX}"
            ) from None
        return _parts_of(meta)

    # --- transactions -------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """Stage every write made through the yielded store; publish them all when
        the block ends without an error, drop them all when it raises. A writer
        killed while staging leaves nothing a reader sees; one killed while
        publishing is rolled forward by the next writer (its journal lists the
        moves)."""
        if self._tx is not None:  # nested: part of the enclosing transaction
            yield self
            return
        self.ensure_writable()
        self.recover()
        folder = f"{STAGING_DIR}/{uuid.uuid4().hex}"
        local = isinstance(self.files, LocalFiles)
        try:
            with contextlib.ExitStack() as held:
                if isinstance(self.files, LocalFiles):
                    # Under the staging guard, so that no other writer's recover() sees
                    # the folder before its lock is held (and takes it for a dead one's).
                    with self._staging_guard():
                        try:
                            self.files.path(folder).mkdir(parents=True)
                            held.enter_context(self.files.lock(f"{folder}/{_LOCK}"))
                        except OSError as exc:
                            raise self.files.error(exc, "", "writing to") from None
                tx = _Transaction(folder)
                try:
                    yield replace(self, _tx=tx)
                    self._publish(tx)
                finally:
                    # Removed while still locked: no other writer's recovery sees it
                    # unlocked.
                    with contextlib.suppress(OSError):
                        self.files.delete_dir(folder)
        finally:
            if local:
                with self._staging_guard():
                    self._remove_empty_staging()

    @contextmanager
    def _staging_guard(self) -> Iterator[None]:
        """A store-wide lock around creating, scanning and removing staging folders
        (held for milliseconds; writers still publish in parallel). Local only."""
        assert isinstance(self.files, LocalFiles)
        try:
            self.files.root.mkdir(parents=True, exist_ok=True)
            self.files.path(_GUARD).touch()
        except OSError as exc:
            raise self.files.error(exc, "", "writing to") from None
        with self.files.lock(_GUARD):
            yield

    def _publish(self, tx: _Transaction) -> None:
        if not tx.staged and not tx.deletes and not tx.drop_parts:
            return
        moves = [[staged, rel] for rel, (staged, _) in tx.staged.items()]
        deletes = set(tx.deletes)
        for rel, dropped in tx.drop_parts.items():  # compacted months that lose rewritten days
            if rel in tx.staged:
                continue
            kept = self._month_without(rel, dropped)
            if kept is None:
                deletes.add(rel)
            else:
                staged = f"{tx.folder}/{len(moves)}-compacted.parquet.partial"
                self._stage_table(staged, kept)
                moves.append([staged, rel])
        journal = {"moves": moves, "deletes": sorted(deletes)}
        try:
            self.files.write_bytes(f"{tx.folder}/{_PUBLISH}", json.dumps(journal).encode())
        except OSError as exc:
            raise self.files.error(exc, "", "publishing to") from None
        _apply(self.files, journal)

    def recover(self) -> None:
        """Finish publications a killed writer left half done; drop the staging
        of dead writers; remove temporaries older versions left in the table
        folders. Live writers are left alone."""
        if isinstance(self.files, LocalFiles):
            if self.files.path(STAGING_DIR).is_dir():
                with self._staging_guard():
                    self._recover_local()
            # deepvm <= 0.1 left temporaries in the table folders (only those: staging
            # folders come and go under other writers while this runs).
            for table in TABLES:
                for pattern in (".tmp-*.parquet", "*/.tmp-*.parquet"):
                    with contextlib.suppress(OSError):
                        for leftover in self.files.path(table).glob(pattern):
                            leftover.unlink(missing_ok=True)
        else:
            self._recover_object()

    def _recover_local(self) -> None:
        assert isinstance(self.files, LocalFiles)
        for entry in self.files.listdir(STAGING_DIR):
            if not entry.is_dir:
                continue
            folder = f"{STAGING_DIR}/{entry.name}"
            with (
                contextlib.suppress(FileNotFoundError),  # its writer just removed it
                self.files.lock(f"{folder}/{_LOCK}", wait=False) as held,
            ):
                if held is not None:  # else a live writer
                    self._roll_forward(folder)
        self._remove_empty_staging()

    def _recover_object(self) -> None:
        for entry in self.files.listdir(STAGING_DIR):
            folder = f"{STAGING_DIR}/{entry.name}"
            if not entry.is_dir:  # a probe object left by a killed check
                if time.time() - entry.mtime > ABANDONED_AFTER_S:
                    self.files.delete(folder)
                continue
            inside = self.files.listdir(folder)
            journal = [e for e in inside if e.name == _PUBLISH]
            if journal and time.time() - journal[0].mtime > ROLL_FORWARD_AFTER_S:
                self._roll_forward(folder)
            elif not journal and inside and self._age_s(inside) > ABANDONED_AFTER_S:
                self.files.delete_dir(folder)

    @staticmethod
    def _age_s(entries: list[Entry]) -> float:
        """Seconds since the newest of ``entries`` was written."""
        return time.time() - max((e.mtime for e in entries), default=0.0)

    def _roll_forward(self, folder: str) -> None:
        try:
            journal = json.loads(self.files.read_bytes(f"{folder}/{_PUBLISH}"))
        except FileNotFoundError:
            journal = {}  # not published (or its writer just cleaned up)
        if isinstance(journal, list):  # written by deepvm 0.1: [[staged path, rel], ...]
            journal = {"moves": journal, "deletes": []}
        _apply(self.files, journal)
        self.files.delete_dir(folder)

    def _remove_empty_staging(self) -> None:
        if isinstance(self.files, LocalFiles):
            with contextlib.suppress(OSError):
                self.files.path(STAGING_DIR).rmdir()

    # --- writing ------------------------------------------------------------------

    def write(self, table: str, df: pd.DataFrame, *, partition: str | None, name: str = "0") -> str:
        """Write ``df`` as the date's file for ``name`` (made file-safe), replacing
        that writer's earlier rows of that date; whole or not at all. Two different
        names that map to one file are refused, naming both. Returns where the
        file is once published."""
        if self._tx is None:
            with self.transaction() as tx:
                return tx.write(table, df, partition=partition, name=name)
        column, _ = TABLES[table]
        if (column is None) != (partition is None):
            raise ValueError(
                f"table {table!r} partition must be {'None' if column is None else column}"
            )
        if partition is not None:
            check_date(partition, column or "partition")
        check_name(name, table)
        arrow = to_arrow(table, df, partition)  # fails before anything is written
        key = file_safe(name)
        rel = self._rel(table, partition, key)
        self._check_collision(rel, name)
        arrow = arrow.replace_schema_metadata(
            {**(arrow.schema.metadata or {}), _NAME_KEY: name.encode()}
        )
        staged = f"{self._tx.folder}/{len(self._tx.staged)}-{key}.parquet.partial"
        self._stage_table(staged, arrow)
        self._tx.staged[rel] = (staged, name)
        if partition is not None and column is not None:
            self._replaces(table, partition, key)
        return self.files.location(rel)

    def _replaces(self, table: str, date: str, key: str) -> None:
        """Earlier rows of (date, writer) outside the new file: a version-1 day
        file, or a part of a compacted month. Both go when the new file lands."""
        assert self._tx is not None
        column = TABLES[table][0]
        legacy = f"{table}/{column}={date}/part-{key}.parquet"
        if self.files.exists(legacy):
            self._tx.deletes.add(legacy)
        month = self._month_rel(table, date[:7])
        if self.files.exists(month):
            parts = self._parts(_File(month, "month"))
            if any(p[0] == date and p[1] == key for p in parts):
                self._tx.drop_parts.setdefault(month, set()).add((date, key))

    def _stage_table(self, staged: str, arrow: pa.Table) -> None:
        try:
            self.files.write_table(staged, arrow)
        except OSError as exc:
            self.files.delete(staged)
            raise self.files.error(exc, "", "writing to") from None

    def _check_collision(self, rel: str, name: str) -> None:
        assert self._tx is not None
        other: str | None = None
        if rel in self._tx.staged:
            other = self._tx.staged[rel][1]
        else:
            with contextlib.suppress(OSError, pa.ArrowException):  # absent or unreadable
                meta = self.files.read_metadata(rel)
                other = meta[_NAME_KEY].decode() if _NAME_KEY in meta else None
        if other is not None and other != name:
            raise InputError(
                f"names {other!r} and {name!r} map to the same store file {rel!r}; "
                "rename one of them (letters, digits, '.', '_' and '-' are kept as they are)"
            )

    def append(self, table: str, df: pd.DataFrame, *, partition: str | None, writer: str) -> str:
        """Write ``df`` as a new file of its own (``writer`` plus a unique suffix):
        nothing is read or replaced, so any number of processes on any number of
        machines can append to one table at once without losing rows. Readers
        pick the newest row per key (docs/ARCHITECTURE.md, "The store")."""
        check_name(writer, table)
        name = f"{writer[: MAX_NAME_LENGTH - 14]}.{uuid.uuid4().hex[:12]}"
        return self.write(table, df, partition=partition, name=name)

    def has(self, table: str) -> bool:
        """Whether anything was written to ``table`` (without reading it)."""
        return bool(self._listing(table))

    # --- reading ------------------------------------------------------------------

    def _read_file(self, table: str, f: _File) -> tuple[pa.Table, dict[bytes, bytes]]:
        """One file, checked (readable Parquet, this table's, a known schema
        version), as the table's file schema; and its metadata."""
        column = TABLES[table][0]
        where = self.files.location(f.rel)
        try:
            data = self.files.read_table(f.source or f.rel)
        except FileNotFoundError:
            raise StoreError(
                f"store file {where!r} vanished while it was read (another writer "
                "compacted or replaced it): run the command again"
            ) from None
        except Exception as exc:  # pyarrow raises several kinds; all mean "not Parquet"
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreError(
                f"store file {where!r} is not a readable Parquet file ({first}): {_FIX}"
            ) from None
        meta = dict(data.schema.metadata or {})
        found = meta.get(b"table", b"").decode()
        version = meta.get(b"schema_version", b"").decode()
        if found != table or version not in READABLE_VERSIONS:
            raise StoreError(
                f"store file {where!r} is not a deepvm {table!r} file of schema version "
                f"{' or '.join(READABLE_VERSIONS)} (found table {found or 'none'!r}, version "
                f"{version or 'none'!r}): {_FIX}"
            )
        columns = []
        for fld in file_schema(table):
            if fld.name in data.column_names:
                try:
                    columns.append(data.column(fld.name).cast(fld.type))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise StoreError(
                        f"store file {where!r}: column {fld.name} is "
                        f"{data.schema.field(fld.name).type}, not {fld.type}: {_FIX}"
                    ) from None
            elif fld.name == column and f.date is not None:  # version 1: from the path
                day = dt.date.fromisoformat(f.date)
                columns.append(pa.array([day] * len(data), pa.date32()))
            else:  # a column added after the file was written
                columns.append(pa.nulls(len(data), fld.type))
        return pa.Table.from_arrays(columns, schema=file_schema(table)), meta

    def _rows(self, table: str, partitions: Collection[str] | None = None) -> pa.Table:
        """The table's rows (of the given dates only) as Arrow: a writer's day file
        wins over its rows in a version-1 folder or a compacted month."""
        files = self._listing(table, partitions)
        days = {(f.date, f.key) for f in files if f.kind == "day"}
        legacy = {(f.date, f.key) for f in files if f.kind == "legacy"} - days
        wanted = set(partitions) if partitions is not None else None
        tables = []
        for f in files:
            if f.kind == "legacy" and (f.date, f.key) in days:
                continue
            data, meta = self._read_file(table, f)
            if f.kind == "month":
                keep = [
                    np.arange(start, stop)
                    for date, key, _, start, stop in _parts_of(meta)
                    if (wanted is None or date in wanted) and (date, key) not in days | legacy
                ]
                if sum(len(k) for k in keep) != len(data):
                    data = data.take(np.concatenate(keep) if keep else np.array([], np.int64))
            tables.append(data)
        if not tables:
            return file_schema(table).empty_table()
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def read(self, table: str, partitions: Collection[str] | None = None) -> pd.DataFrame:
        """All rows of a table (or of the given dates only) as one DataFrame, the
        date column included as ISO strings. Empty, with the schema's columns, when
        nothing was written. A file that is not this table's names itself in the
        StoreError raised."""
        column = TABLES[table][0]
        rows = self._rows(table, partitions)
        if column is not None:
            index = rows.schema.get_field_index(column)
            rows = rows.set_column(index, column, pc.cast(rows.column(index), pa.string()))
        out = rows.to_pandas()
        if column is not None and not len(out):
            out[column] = pd.Series(dtype="object")
        return out

    # --- compaction ---------------------------------------------------------------

    def compact(self, before: str | None = None) -> CompactReport:
        """Merge each month that ended before ``before`` (default: today, UTC, so
        every finished month) into one file per table, and move files out of
        version-1 day folders; one transaction, so readers see the store before or
        after. Every row keeps its date column; a writer's rows stay replaceable."""
        cutoff = check_date(before, "--before") if before else dt.date.today().isoformat()
        months: dict[str, list[str]] = {}
        merged: dict[str, int] = {}
        moved: dict[str, int] = {}
        with self.transaction() as tx:
            for table, (column, _) in TABLES.items():
                months[table], merged[table], moved[table] = [], 0, 0
                if column is None:
                    continue
                by_month: dict[str, list[_File]] = {}
                for f in tx._listing(table):
                    by_month.setdefault(f.month or "", []).append(f)
                for month, files in sorted(by_month.items()):
                    if month < cutoff[:7]:
                        if [f.kind for f in files] != ["month"]:
                            tx._compact_month(table, month, files)
                            months[table].append(month)
                            merged[table] += len(files)
                    else:
                        moved[table] += tx._move_legacy(table, files)
        return CompactReport(cutoff, months, merged, moved)

    def _compact_month(self, table: str, month: str, files: list[_File]) -> None:
        assert self._tx is not None
        days = {(f.date, f.key) for f in files if f.kind == "day"}
        pieces: list[_Piece] = []
        for f in files:
            data, meta = self._read_file(table, f)
            if f.kind == "month":
                pieces += [p for p in _pieces_of(data, meta) if (p[0], p[1]) not in days]
            elif f.kind == "legacy" and (f.date, f.key) in days:
                pass  # replaced by the writer's day file
            else:
                assert f.date is not None and f.key is not None
                name = meta.get(_NAME_KEY, f.key.encode()).decode()
                pieces.append((f.date, f.key, name, data))
            self._tx.deletes.add(f.rel)
        merged = _month_file(table, pieces)
        rel = self._month_rel(table, month)
        self._tx.deletes.discard(rel)
        staged = f"{self._tx.folder}/{len(self._tx.staged)}-compacted.parquet.partial"
        self._stage_table(staged, merged)
        self._tx.staged[rel] = (staged, "compacted")

    def _move_legacy(self, table: str, files: list[_File]) -> int:
        """Version-1 day files of an unfinished month rewritten as day files."""
        assert self._tx is not None
        days = {(f.date, f.key) for f in files if f.kind == "day"}
        moved = 0
        for f in files:
            if f.kind != "legacy":
                continue
            if (f.date, f.key) not in days:
                assert f.date is not None and f.key is not None
                data, meta = self._read_file(table, f)
                rel = self._rel(table, f.date, f.key)
                data = data.replace_schema_metadata(
                    {
                        "schema_version": SCHEMA_VERSION,
                        "table": table,
                        _NAME_KEY.decode(): meta.get(_NAME_KEY, f.key.encode()).decode(),
                    }
                )
                staged = f"{self._tx.folder}/{len(self._tx.staged)}-{f.key}.parquet.partial"
                self._stage_table(staged, data)
                self._tx.staged[rel] = (staged, f.key)
            self._tx.deletes.add(f.rel)
            moved += 1
        return moved

    def _month_without(self, rel: str, dropped: set[tuple[str, str]]) -> pa.Table | None:
        """A compacted month less the parts of rewritten (date, writer) pairs."""
        table = rel.split("/", 1)[0]
        data, meta = self._read_file(table, _File(rel, "month"))
        kept = [p for p in _pieces_of(data, meta) if (p[0], p[1]) not in dropped]
        return _month_file(table, kept) if kept else None


StoreLike = str | os.PathLike[str] | Store
_FIX = "move it out of the store (or restore it), then re-run the stage that wrote it"


@dataclass(frozen=True)
class StoreCheck:
    """What `deepvm store check` found: per table its files and rows, the files
    that cannot be read as that table's (each with why and how to fix it), files
    still in version-1 day folders, and staging that dead writers left (the next
    writer removes it)."""

    files: dict[str, int]
    rows: dict[str, int]
    bad: list[str]
    dead_staging: int
    legacy_files: int = 0

    @property
    def ok(self) -> bool:
        return not self.bad


def check_store(uri: StoreLike) -> StoreCheck:
    """Read every file of every table and check its schema version; reading stops
    at nothing, so every bad file is named."""
    store = Store.open(uri)
    files: dict[str, int] = {}
    rows: dict[str, int] = {}
    bad: list[str] = []
    legacy = 0
    for table in TABLES:
        found = store._listing(table)
        files[table] = len(found)
        rows[table] = 0
        for f in found:
            legacy += f.kind == "legacy"
            try:
                rows[table] += len(store._read_file(table, f)[0])
            except StoreError as exc:
                bad.append(str(exc))
    return StoreCheck(files, rows, bad, _dead_staging(store), legacy)


def _dead_staging(store: Store) -> int:
    dead = 0
    for entry in store.files.listdir(STAGING_DIR):
        folder = f"{STAGING_DIR}/{entry.name}"
        if isinstance(store.files, LocalFiles):
            if not entry.is_dir:
                continue
            with (
                contextlib.suppress(FileNotFoundError),
                store.files.lock(f"{folder}/{_LOCK}", wait=False) as held,
            ):
                dead += held is not None
        elif isinstance(store.files, ObjectFiles) and entry.is_dir:
            inside = store.files.listdir(folder)
            dead += bool(inside) and store._age_s(inside) > ROLL_FORWARD_AFTER_S
    return dead


def _apply(files: Files, journal: dict) -> None:
    """A publication: its moves, then its deletes; each step atomic, the whole
    idempotent (a roll-forward after a kill repeats what was done)."""
    for staged, rel in journal.get("moves", []):
        try:
            files.move(staged, rel)
        except OSError as exc:
            raise files.error(exc, rel, "publishing") from None
    for rel in journal.get("deletes", []):
        try:
            files.delete(rel)
        except OSError as exc:
            raise files.error(exc, rel, "publishing") from None


TABLE_DOCS = {
    "instances": "instance types and their specs (one file per price source)",
    "prices": "USD per hour per instance type, market and zone; `stale` marks a snapshot "
    "carried forward because the source failed",
    "benchmarks": "one row per measured workload per machine and run",
    "scaling": "duration of a fixed amount of data-parallel work per node count",
    "checkpoint_transfer": "checkpoint transfer measurements (for the saturation model)",
    "overhead_models": "every fitted speedup model per group; `params` is JSON",
    "flopp": "FLOP per USD per instance type, workload and market",
    "recommendations": "each job's own ranked clusters (`scenario`, planned alone), per "
    "policy and snapshot",
    "fleet": "one plan for all registered jobs under the shared quotas and team budget: "
    "per job its cluster, `value` (its objective over what it gets alone), what binds it, "
    "and its solo cluster's cost and throughput",
}


def describe_tables() -> str:
    """Markdown for every table: partition, columns and Arrow types (the README's
    table section is generated from this, so it cannot drift from the schemas)."""
    lines = []
    for table, (partition, schema) in TABLES.items():
        where = (
            f"`{table}/{month_column(partition)}=YYYY-MM/part-*.parquet`"
            if partition
            else f"`{table}/part-*.parquet`"
        )
        lines.append(f"**{table}** ({where}): {TABLE_DOCS[table]}.")
        columns = [f"`{f.name}` {f.type}" for f in schema]
        if partition:
            columns.append(f"`{partition}` date")
        lines.append("")
        lines.append(", ".join(columns))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
