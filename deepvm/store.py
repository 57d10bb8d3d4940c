"""The Parquet store (DESIGN §3): one hive-partitioned dataset per table.

Layout: ``<root>/<table>/<partition>=<value>/part-<name>.parquet``. Each file
carries its table's explicit schema and ``schema_version`` in its metadata.
Writes are atomic per file (temporary name, then rename), and writing the same
(table, partition, name) again replaces that file, so re-running a stage never
duplicates rows and never touches other partitions or other writers' files.
Read with pandas, polars or DuckDB as-is::

    duckdb.sql("select * from 'store/recommendations/**/*.parquet'")
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

SCHEMA_VERSION = "1"
ENV_STORE = "DEEPVM_STORE"
DEFAULT_STORE = "deepvm-store"

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
            ]
        ),
    ),
    "flopp": (
        "snapshot_date",
        pa.schema(
            [
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
}

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def store_root(uri: str | os.PathLike[str] | None = None) -> Path:
    """The store's root folder: ``uri``, else $DEEPVM_STORE, else ./deepvm-store."""
    value = os.fspath(uri) if uri is not None else os.environ.get(ENV_STORE, DEFAULT_STORE)
    if value.startswith("file://"):
        value = value[len("file://") :]
    elif "://" in value:
        raise ValueError(f"store {value!r}: only local paths and file:// URIs are supported")
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


@dataclass(frozen=True)
class Store:
    root: Path

    @classmethod
    def open(cls, uri: str | os.PathLike[str] | None = None) -> Store:
        return cls(store_root(uri))

    def partition_dir(self, table: str, value: str | None) -> Path:
        column, _ = TABLES[table]
        base = self.root / table
        return base if column is None else base / f"{column}={value}"

    def write(
        self, table: str, df: pd.DataFrame, *, partition: str | None, name: str = "0"
    ) -> Path:
        """Write ``df`` as ``part-<name>.parquet`` of the partition, atomically,
        replacing a file of the same name. Validates everything before writing."""
        import pyarrow.parquet as pq

        column, _ = TABLES[table]
        if (column is None) != (partition is None):
            raise ValueError(
                f"table {table!r} partition must be {'None' if column is None else column}"
            )
        if not _SAFE_NAME.match(name) or (
            partition is not None and not _SAFE_NAME.match(partition)
        ):
            raise ValueError(f"unsafe partition or file name: {partition!r}, {name!r}")
        arrow = to_arrow(table, df)  # fails before anything touches the disk
        folder = self.partition_dir(table, partition)
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"part-{name}.parquet"
        # A leading dot keeps readers' globs (*.parquet) and DuckDB off the temp file.
        tmp = folder / f".tmp-{uuid.uuid4().hex}.parquet"
        try:
            pq.write_table(arrow, tmp)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        return final

    def upsert(
        self, table: str, df: pd.DataFrame, *, partition: str | None, name: str, key: list[str]
    ) -> Path:
        """Like write, but rows of the existing file whose ``key`` the new rows do
        not carry are kept: a re-run replaces what it measured again, nothing else."""
        import pyarrow.parquet as pq

        path = self.partition_dir(table, partition) / f"part-{name}.parquet"
        if path.exists():
            old = pq.read_table(path).to_pandas()
            new_keys = set(map(tuple, df[key].astype(str).to_numpy()))
            keep = [tuple(row) not in new_keys for row in old[key].astype(str).to_numpy()]
            df = pd.concat([old[keep], df], ignore_index=True) if any(keep) else df
        return self.write(table, df, partition=partition, name=name)

    def has(self, table: str) -> bool:
        """Whether anything was written to ``table`` (without reading it)."""
        folder = self.root / table
        return folder.exists() and next(folder.rglob("part-*.parquet"), None) is not None

    def read(self, table: str) -> pd.DataFrame:
        """All partitions of a table as one DataFrame, the partition column included
        (as a string). Empty, with the schema's columns, when nothing was written."""
        import pyarrow.dataset as ds

        column, schema = TABLES[table]
        folder = self.root / table
        files = sorted(str(p) for p in folder.rglob("part-*.parquet")) if folder.exists() else []
        if not files:
            empty = schema.empty_table().to_pandas()
            if column is not None:
                empty[column] = pd.Series(dtype="string")
            return empty
        partitioning = (
            ds.partitioning(pa.schema([(column, pa.string())]), flavor="hive") if column else None
        )
        dataset = ds.dataset(
            files,
            schema=schema.append(pa.field(column, pa.string())) if column else schema,
            partitioning=partitioning,
            partition_base_dir=str(folder),
        )
        return dataset.to_table().to_pandas()


TABLE_DOCS = {
    "instances": "instance types and their specs (one file per price source)",
    "prices": "USD per hour per instance type, market and zone; `stale` marks a snapshot "
    "carried forward because the source failed",
    "benchmarks": "one row per measured workload per machine and run",
    "scaling": "duration of a fixed amount of data-parallel work per node count",
    "checkpoint_transfer": "checkpoint transfer measurements (for the saturation model)",
    "overhead_models": "every fitted speedup model per group; `params` is JSON",
    "flopp": "FLOP per USD per instance type, workload and market",
    "recommendations": "ranked clusters per job (`scenario`), policy and snapshot",
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
