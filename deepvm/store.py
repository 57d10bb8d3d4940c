"""The Parquet store (docs/ARCHITECTURE.md, "The store"): one hive-partitioned dataset per table.

Layout: ``<root>/<table>/<partition>=<value>/part-<name>.parquet``. Each file
carries its table's explicit schema and ``schema_version`` in its metadata, and
the writer's name (a scenario, an instance type) that its file name was made
from. Every write is staged outside the table folders, under a name no reader's
glob matches, and published by rename: a file is whole or absent, and a
:meth:`Store.transaction` (the nightly run's date) is published whole or not at
all. Writing the same (table, partition, name) again replaces that file, so
re-running a stage never duplicates rows and never touches other partitions or
other writers' files.
Read with pandas, polars or DuckDB as-is::

    duckdb.sql("select * from 'store/recommendations/**/*.parquet'")
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from deepvm.config import DEFAULT_STORE as DEFAULT_STORE
from deepvm.config import ENV_STORE as ENV_STORE
from deepvm.errors import InputError, StoreError
from deepvm.names import MAX_NAME_LENGTH as MAX_NAME_LENGTH
from deepvm.names import check_date as check_date
from deepvm.names import check_name, file_safe

SCHEMA_VERSION = "1"

_ts = pa.timestamp("us", tz="UTC")
_software = [
    pa.field("torch_version", pa.string()),
    pa.field("cuda_version", pa.string()),
    pa.field("deepvm_version", pa.string()),
]

# table -> (partition column, schema of the columns stored in the files)
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
                ("region", pa.string()),
                ("zone", pa.string()),
                ("architecture", pa.string()),
                ("worker_type", pa.string()),
                ("n_workers", pa.int64()),
                ("n_spot", pa.int64()),
                ("n_on_demand", pa.int64()),
                ("remote_type", pa.string()),
                ("n_remote", pa.int64()),
                ("hourly_cost", pa.float64()),
                ("throughput_flops", pa.float64()),
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
                ("region", pa.string()),
                ("zone", pa.string()),
                ("architecture", pa.string()),
                ("worker_type", pa.string()),
                ("n_workers", pa.int64()),
                ("n_spot", pa.int64()),
                ("n_on_demand", pa.int64()),
                ("remote_type", pa.string()),
                ("n_remote", pa.int64()),
                ("hourly_cost", pa.float64()),
                ("throughput_flops", pa.float64()),
                ("solo_throughput_flops", pa.float64()),
                ("solo_hourly_cost", pa.float64()),
                ("binding", pa.string()),
                ("note", pa.string()),
                ("prices_snapshot", pa.string()),
            ]
        ),
    ),
}

# Names that become file names: what a writer names its file (a scenario, an
# instance type, a workload, a price source), made file-safe.
# Work in progress lives here, outside every table folder, under names that no
# reader's glob (``**/*.parquet``) matches; see docs/ARCHITECTURE.md "The store".
STAGING_DIR = ".deepvm-staging"
_PUBLISH = "PUBLISH.json"
_LOCK = "lock"
_GUARD = ".deepvm-staging.lock"  # the store-wide staging guard (a file at the root)
_NAME_KEY = b"deepvm_name"
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def store_root(uri: str | os.PathLike[str] | None = None) -> Path:
    """The store's root folder: ``uri``, else $DEEPVM_STORE, else ./deepvm-store."""
    value = os.fspath(uri) if uri is not None else os.environ.get(ENV_STORE) or DEFAULT_STORE
    if value.startswith("file://"):
        value = value[len("file://") :]
    elif "://" in value:
        scheme = value.split("://", 1)[0]
        raise StoreError(
            f"store {value!r}: the {scheme}:// scheme is not supported; "
            "use a local folder or a file:// URI"
        )
    if not value.strip():
        raise StoreError("store path is empty: give a folder, e.g. --store ./deepvm-store")
    return Path(value)


def to_arrow(table: str, df: pd.DataFrame) -> pa.Table:
    """The rows as an Arrow table of the table's schema (columns in schema order;
    a missing column is an error, an extra one is dropped)."""
    _, schema = TABLES[table]
    missing = [f.name for f in schema if f.name not in df.columns]
    if missing:
        raise ValueError(f"{table} rows lack column(s) {', '.join(missing)}")
    arrow = pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)
    return arrow.replace_schema_metadata({"schema_version": SCHEMA_VERSION, "table": table})


def _os_error(exc: OSError, path: Path, doing: str) -> StoreError:
    """An OS failure while using the store as one line that says what to do."""
    if exc.errno in _DISK_FULL:
        return StoreError(
            f"no space left on the device while {doing} {str(path)!r}: free space "
            "there or use another --store; nothing was published"
        )
    if exc.errno in _READ_ONLY:
        return StoreError(
            f"store {str(path)!r} is not writable ({exc.strerror}): fix its "
            "permissions or use another --store"
        )
    return StoreError(f"{doing} {str(path)!r} failed: {exc.strerror or exc}")


class _Transaction:
    """Files staged by one writer, published together (see Store.transaction)."""

    def __init__(self, folder: Path, lock: IO[bytes]) -> None:
        self.folder = folder
        self.lock = lock
        self.staged: dict[str, tuple[Path, str]] = {}  # final rel path -> (staged file, name)


@dataclass(frozen=True)
class Store:
    """A store rooted at a local folder. Inside :meth:`transaction`, writes are
    staged and reads see them; they are published when the block ends."""

    root: Path
    _tx: _Transaction | None = field(default=None, compare=False, repr=False)

    @classmethod
    def open(cls, uri: StoreLike | None = None) -> Store:
        """A store by URI (a Store is returned as it is, so that stages run inside
        a caller's transaction). Raises StoreError when the path cannot be a store."""
        if isinstance(uri, Store):
            return uri
        store = cls(store_root(uri))
        store._check_path()
        return store

    # --- checks -------------------------------------------------------------------

    def _check_path(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(
                f"store {str(self.root)!r} is a file, not a folder: give a folder with --store"
            )
        above = self.root.parent
        while not above.exists() and above != above.parent:
            above = above.parent
        if above.exists() and not above.is_dir():
            raise StoreError(
                f"store {str(self.root)!r} is under {str(above)!r}, which is a file: "
                "give a folder with --store"
            )

    def ensure_writable(self) -> Store:
        """Check, before any work, that writes can land here; creates nothing."""
        self._check_path()
        target = self.root
        while not target.exists() and target != target.parent:
            target = target.parent
        if not os.access(target, os.W_OK | os.X_OK):
            raise StoreError(
                f"store {str(self.root)!r} is not writable ({str(target)!r} is read-only): "
                "fix its permissions or use another --store"
            )
        if target == self.root:  # root bypasses permission bits: try for real
            try:
                fd, probe = tempfile.mkstemp(prefix=".deepvm-probe-", suffix=".partial", dir=target)
                os.close(fd)
                os.unlink(probe)
            except OSError as exc:
                raise _os_error(exc, self.root, "writing to") from None
        return self

    # --- layout -------------------------------------------------------------------

    def partition_dir(self, table: str, value: str | None) -> Path:
        column, _ = TABLES[table]
        base = self.root / table
        return base if column is None else base / f"{column}={value}"

    def _rel(self, table: str, partition: str | None, name: str) -> str:
        return str(
            (self.partition_dir(table, partition) / f"part-{file_safe(name)}.parquet").relative_to(
                self.root
            )
        )

    def _files(self, table: str, partitions: Collection[str] | None = None) -> dict[str, Path]:
        """rel path -> file for every data file of the table (of the given partition
        values only, listing just their folders), staged ones overlaid."""
        folder = self.root / table
        column = TABLES[table][0]
        found: Iterable[Path]
        if partitions is not None and column is not None:
            folders = [folder / f"{column}={value}" for value in partitions]
            found = [p for f in folders if f.is_dir() for p in f.glob("part-*.parquet")]
        else:
            found = folder.rglob("part-*.parquet") if folder.is_dir() else iter(())
        files = {str(p.relative_to(self.root)): p for p in found}
        if self._tx is not None:
            prefix = f"{table}{os.sep}"
            staged = {
                rel: path for rel, (path, _) in self._tx.staged.items() if rel.startswith(prefix)
            }
            if partitions is not None and column is not None:
                wanted = {f"{column}={value}" for value in partitions}
                staged = {rel: p for rel, p in staged.items() if Path(rel).parent.name in wanted}
            files.update(staged)
        return files

    def partitions(self, table: str) -> list[str]:
        """The table's partition values (dates), sorted, from folder names alone:
        nothing is read. Staged partitions of an open transaction count."""
        column = TABLES[table][0]
        if column is None:
            return []
        folder = self.root / table
        values = {
            p.name.split("=", 1)[1]
            for p in (folder.iterdir() if folder.is_dir() else ())
            if p.name.startswith(f"{column}=") and any(p.glob("part-*.parquet"))
        }
        if self._tx is not None:
            prefix = f"{table}{os.sep}"
            values |= {
                Path(rel).parent.name.split("=", 1)[1]
                for rel in self._tx.staged
                if rel.startswith(prefix)
            }
        return sorted(values)

    # --- transactions -------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """Stage every write made through the yielded store; publish them all when
        the block ends without an error, drop them all when it raises. A writer
        killed while staging leaves nothing a reader sees; one killed while
        publishing is rolled forward by the next writer (its journal lists the
        renames)."""
        if self._tx is not None:  # nested: part of the enclosing transaction
            yield self
            return
        self.ensure_writable()
        self.recover()
        staging = self.root / STAGING_DIR / f"{uuid.uuid4().hex}"
        # Under the staging guard, so that no other writer's recover() sees the
        # folder before its lock is held (and takes it for a dead writer's).
        with self._staging_guard():
            try:
                staging.mkdir(parents=True)
                lock = open(staging / _LOCK, "wb")  # noqa: SIM115 - held for the whole block
            except OSError as exc:
                raise _os_error(exc, self.root, "writing to") from None
            fcntl.flock(lock, fcntl.LOCK_EX)
        tx = _Transaction(staging, lock)
        try:
            yield replace(self, _tx=tx)
            self._publish(tx)
        finally:
            # Removed while still locked: no other writer's recovery sees it unlocked.
            shutil.rmtree(staging, ignore_errors=True)
            lock.close()
            with self._staging_guard():
                self._remove_empty_staging()

    @contextmanager
    def _staging_guard(self) -> Iterator[None]:
        """A store-wide lock around creating, scanning and removing staging folders
        (held for milliseconds; writers still publish in parallel)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            guard = open(self.root / _GUARD, "ab")  # noqa: SIM115
        except OSError as exc:
            raise _os_error(exc, self.root, "writing to") from None
        with guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            yield

    def _publish(self, tx: _Transaction) -> None:
        if not tx.staged:
            return
        journal = [(str(path), rel) for rel, (path, _) in tx.staged.items()]
        try:
            with open(tx.folder / _PUBLISH, "w") as f:
                json.dump(journal, f)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise _os_error(exc, self.root, "publishing to") from None
        _apply(self.root, journal)

    def recover(self) -> None:
        """Finish publications a killed writer left half done; drop the staging
        folders of dead writers; remove temporaries older versions left in the
        table folders. Live writers (their lock held) are left alone."""
        staging = self.root / STAGING_DIR
        if staging.is_dir():
            with self._staging_guard():
                self._recover_staging(staging)
        # deepvm <= 0.1 left temporaries in the table folders (only those: staging
        # folders come and go under other writers while this runs).
        for table in TABLES:
            for pattern in (".tmp-*.parquet", "*/.tmp-*.parquet"):
                with contextlib.suppress(OSError):
                    for leftover in (self.root / table).glob(pattern):
                        leftover.unlink(missing_ok=True)

    def _recover_staging(self, staging: Path) -> None:
        if staging.is_dir():
            for folder in staging.iterdir():
                if not folder.is_dir():
                    continue
                try:
                    lock = open(folder / _LOCK, "ab")  # noqa: SIM115
                except OSError:
                    continue
                with lock:
                    try:
                        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        continue  # a live writer
                    journal = folder / _PUBLISH
                    try:
                        renames = json.loads(journal.read_text())
                    except FileNotFoundError:
                        renames = []  # not published (or its writer just cleaned up)
                    _apply(self.root, renames)
                    shutil.rmtree(folder, ignore_errors=True)
            self._remove_empty_staging()

    def _remove_empty_staging(self) -> None:
        with contextlib.suppress(OSError):
            (self.root / STAGING_DIR).rmdir()

    # --- writing ------------------------------------------------------------------

    def write(
        self, table: str, df: pd.DataFrame, *, partition: str | None, name: str = "0"
    ) -> Path:
        """Write ``df`` as the partition's file for ``name`` (made file-safe),
        replacing that writer's earlier file; whole or not at all. Two different
        names that map to one file are refused, naming both. Returns the path
        the file has once published."""
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
        arrow = to_arrow(table, df)  # fails before anything touches the disk
        rel = self._rel(table, partition, name)
        self._check_collision(rel, name)
        arrow = arrow.replace_schema_metadata(
            {**(arrow.schema.metadata or {}), _NAME_KEY: name.encode()}
        )
        staged = self._tx.folder / f"{len(self._tx.staged)}-{file_safe(name)}.parquet.partial"
        try:
            pq.write_table(arrow, staged)
        except OSError as exc:
            staged.unlink(missing_ok=True)
            raise _os_error(exc, self.root, "writing to") from None
        self._tx.staged[rel] = (staged, name)
        return self.root / rel

    def _check_collision(self, rel: str, name: str) -> None:
        assert self._tx is not None
        other: str | None = None
        if rel in self._tx.staged:
            other = self._tx.staged[rel][1]
        elif (self.root / rel).exists():
            with contextlib.suppress(OSError, pa.ArrowException):  # unreadable: just replaced
                meta = pq.read_schema(self.root / rel).metadata or {}
                other = meta[_NAME_KEY].decode() if _NAME_KEY in meta else None
        if other is not None and other != name:
            raise InputError(
                f"names {other!r} and {name!r} map to the same store file {rel!r}; "
                "rename one of them (letters, digits, '.', '_' and '-' are kept as they are)"
            )

    def append(self, table: str, df: pd.DataFrame, *, partition: str | None, writer: str) -> Path:
        """Write ``df`` as a new file of its own (``writer`` plus a unique suffix):
        nothing is read or replaced, so any number of processes on any number of
        machines can append to one table at once without losing rows. Readers
        pick the newest row per key (docs/ARCHITECTURE.md, "The store")."""
        check_name(writer, table)
        name = f"{writer[: MAX_NAME_LENGTH - 14]}.{uuid.uuid4().hex[:12]}"
        return self.write(table, df, partition=partition, name=name)

    def has(self, table: str) -> bool:
        """Whether anything was written to ``table`` (without reading it)."""
        return bool(self._files(table))

    def _read_file(self, table: str, path: Path) -> pa.Table:
        """One file, checked: readable Parquet, this table's, a known schema version."""
        _, schema = TABLES[table]
        fix = "move it out of the store (or restore it), then re-run the stage that wrote it"
        try:
            data = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several kinds; all mean "not Parquet"
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreError(
                f"store file {str(path)!r} is not a readable Parquet file ({first}): {fix}"
            ) from None
        meta = data.schema.metadata or {}
        found = meta.get(b"table", b"").decode()
        version = meta.get(b"schema_version", b"").decode()
        if found != table or version != SCHEMA_VERSION:
            raise StoreError(
                f"store file {str(path)!r} is not a deepvm {table!r} file of schema version "
                f"{SCHEMA_VERSION} (found table {found or 'none'!r}, version "
                f"{version or 'none'!r}): {fix}"
            )
        columns = []
        for f in schema:
            if f.name in data.column_names:
                try:
                    columns.append(data.column(f.name).cast(f.type))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise StoreError(
                        f"store file {str(path)!r}: column {f.name} is "
                        f"{data.schema.field(f.name).type}, not {f.type}: {fix}"
                    ) from None
            else:  # a column added after the file was written
                columns.append(pa.nulls(len(data), f.type))
        return pa.Table.from_arrays(columns, schema=schema).to_pandas()

    def read(self, table: str, partitions: Collection[str] | None = None) -> pd.DataFrame:
        """All partitions of a table (or the given partition values only) as one
        DataFrame, the partition column included (as a string). Empty, with the
        schema's columns, when nothing was written. A file that is not this table's
        names itself in the StoreError raised."""
        column, schema = TABLES[table]
        files = self._files(table, partitions)
        frames = []
        for rel in sorted(files):
            part = self._read_file(table, files[rel])
            if column is not None:
                part[column] = Path(rel).parent.name.split("=", 1)[1]
            frames.append(part)
        frames = [f for f in frames if len(f)]
        if not frames:
            empty = schema.empty_table().to_pandas()
            if column is not None:
                empty[column] = pd.Series(dtype="object")
            return empty
        out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        return out.reset_index(drop=True)


StoreLike = str | os.PathLike[str] | Store


@dataclass(frozen=True)
class StoreCheck:
    """What `deepvm store check` found: per table its files and rows, the files
    that cannot be read as that table's (each with why and how to fix it), and
    staging folders that dead writers left (the next writer removes them)."""

    files: dict[str, int]
    rows: dict[str, int]
    bad: list[str]
    dead_staging: int

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
    for table in TABLES:
        found = store._files(table)
        files[table] = len(found)
        rows[table] = 0
        for rel in sorted(found):
            try:
                rows[table] += len(store._read_file(table, found[rel]))
            except StoreError as exc:
                bad.append(str(exc))
    staging = store.root / STAGING_DIR
    dead = 0
    if staging.is_dir():
        for folder in staging.iterdir():
            try:
                with open(folder / _LOCK, "rb") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    dead += 1
            except OSError:
                continue  # a live writer, or no lock file
    return StoreCheck(files, rows, bad, dead)


def _apply(root: Path, journal: list[tuple[str, str]]) -> None:
    """The renames of a publication; each one atomic, the whole list idempotent."""
    for staged, rel in journal:
        final = root / rel
        if not Path(staged).exists():
            continue  # already moved (a roll-forward after a kill)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, final)
        except OSError as exc:
            raise _os_error(exc, final, "publishing") from None


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
            f"`{table}/{partition}=YYYY-MM-DD/part-*.parquet`"
            if partition
            else f"`{table}/part-*.parquet`"
        )
        lines.append(f"**{table}** ({where}): {TABLE_DOCS[table]}.")
        columns = [f"`{f.name}` {f.type}" for f in schema]
        if partition:
            columns.append(f"`{partition}` date (from the path)")
        lines.append("")
        lines.append(", ".join(columns))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
