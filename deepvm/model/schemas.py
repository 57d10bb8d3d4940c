"""The store's tables: their columns, partitions and schema version
(docs/ARCHITECTURE.md, "The store"). Below the catalog and the store
(docs/ARCHITECTURE.md, "Layers"): the catalog names the instances table's columns
from here without importing the store.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa

from deepvm.model.cluster import CLUSTER_COLUMNS

__all__ = [
    "COMMITS",
    "COMMITS_SCHEMA",
    "COMMIT_ID",
    "PROVENANCE_COLUMNS",
    "SCHEMA_PROPERTY",
    "SCHEMA_VERSION",
    "TABLES",
    "TABLE_DOCS",
    "WRITER",
    "date_column",
    "describe_tables",
    "month_column",
    "partition_columns",
    "table_schema",
    "to_arrow",
]

# 3: Delta Lake tables with a `writer` and a `commit_id` column (2: Parquet files in
# month folders; 1: day folders). Stores of 1 and 2 are turned into 3 by
# `deepvm store migrate`.
SCHEMA_VERSION = "3"
SCHEMA_PROPERTY = "deepvm.schemaVersion"  # the table property that holds it

# Every row says who wrote it (a scenario, a price source, a workload, a benchmark
# run) and in which store commit; the commits table says which commits completed.
WRITER = "writer"
COMMIT_ID = "commit_id"

_ts = pa.timestamp("us", tz="UTC")
_software = [
    pa.field("torch_version", pa.string()),
    pa.field("cuda_version", pa.string()),
    pa.field("deepvm_version", pa.string()),
]

# One cluster, as recommendations and fleet plans both store it: the fields of
# deepvm.model.cluster.Cluster, in its order.
_cluster = [pa.field(name, getattr(pa, arrow_type)()) for name, arrow_type in CLUSTER_COLUMNS]

# A recommendation's provenance (deepvm.planner._policies.Recommendation), added to
# the recommendations table in place: older tables gain them as nulls on write.
PROVENANCE_COLUMNS = [
    ("flops_basis", pa.string()),
    ("flops_date", pa.string()),
    ("overhead_basis", pa.string()),
    ("overhead_date", pa.string()),
    ("price_source", pa.string()),
    ("price_date", pa.string()),
    ("interruption_source", pa.string()),
    ("interruption_bucket", pa.string()),
    ("interruption_date", pa.string()),
    ("spot_saving_pct", pa.float64()),
    ("regional_saving_pct", pa.float64()),
    ("spot_outlier", pa.bool_()),
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
                # The quota keys beyond quota_group (deepvm.catalog.quotas; null: none), added
                # with GCP and Azure: stores written before read them as nulls.
                ("spot_quota_group", pa.string()),
                ("regional_quota_group", pa.string()),
                ("spot_regional_quota_group", pa.string()),
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
    # AWS's Spot Instance Advisor feed per fetch (deepvm.catalog.spot_advisor): the
    # planner takes the newest snapshot at or before the prices' date.
    "spot_advisor": (
        "snapshot_date",
        pa.schema(
            [
                ("region", pa.string()),
                ("instance_type", pa.string()),
                ("interruption_bucket", pa.string()),
                ("interruption_rate", pa.float64()),  # deepvm.catalog.advisor_buckets.bucket_rate
                ("savings_pct", pa.float64()),  # the region's average spot saving, %
                ("feed_date", pa.string()),  # the date the feed refers to
                ("source", pa.string()),
                ("fetched_at", _ts),
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
                # where its figures are from (deepvm.model.provenance) and its spot price in
                # context (null in tables written before them)
                *PROVENANCE_COLUMNS,
                # "nightly" (the night's record) or "what-if" (an on-demand run);
                # null in rows written before it: nightly (deepvm.records.results.RUN_KINDS)
                ("run_kind", pa.string()),
            ]
        ),
    ),
    # One plan for all registered jobs under the shared quotas (deepvm.planner.fleet.plan).
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
                # a running job's one decision tonight (deepvm.planner.fleet.types.
                # RunningDecision; null for other jobs and in plans written before it)
                ("running_cluster", pa.string()),
                ("decision", pa.string()),
                ("gain", pa.float64()),
                ("migration_h", pa.float64()),
                ("migration_usd", pa.float64()),
                ("break_even_h", pa.float64()),
                ("decision_reason", pa.string()),
                ("run_kind", pa.string()),  # as the recommendations table's
                # whether the plan is the cheapest of its value (FleetPlan.
                # tie_break_status; null in plans written before it)
                ("tie_break_status", pa.string()),
            ]
        ),
    ),
    # What each registered job runs on now (deepvm.records.running, `deepvm adopt`): one row
    # per adoption, the newest per job is the one that holds.
    "running": (
        "adopted_date",
        pa.schema(
            [
                ("scenario", pa.string()),
                ("adopted_at", _ts),
                ("plan_date", pa.string()),
                ("source", pa.string()),
                *_cluster,
                ("checkpoint_interval_s", pa.float64()),
                ("efficiency", pa.float64()),
                ("work_done_flops", pa.float64()),
                ("started_at", _ts),
                # `deepvm finish`: the job ended; a row with no cluster (null before it)
                ("finished_at", _ts),
            ]
        ),
    ),
}


# The completed commits (docs/ARCHITECTURE.md, "The store"): one row per (commit,
# table, date, writer) that a commit wrote, appended after every table of the
# commit is in. Rows whose commit_id is not here are invisible to deepvm's readers;
# of several commits of one (table, date, writer), the newest (committed_at, then
# commit_id) is the one read. table_version is that table's Delta version after the
# commit wrote it: a reader reads each table at the newest version it finds here.
COMMITS = "commits"
COMMITS_SCHEMA = pa.schema(
    [
        (COMMIT_ID, pa.string()),
        ("committed_at", _ts),
        ("command", pa.string()),
        ("table_name", pa.string()),
        ("table_version", pa.int64()),
        ("date", pa.date32()),
        (WRITER, pa.string()),
    ]
)


def month_column(column: str) -> str:
    """The month partition column for a date column (``snapshot_date`` ->
    ``snapshot_month``)."""
    return column.removesuffix("_date") + "_month"


def date_column(table: str) -> str | None:
    return TABLES[table][0]


def partition_columns(table: str) -> list[str]:
    column = TABLES[table][0]
    return [] if column is None else [month_column(column)]


def table_schema(table: str) -> pa.Schema:
    """The Delta table's columns: the table's own, its date and month (when it has
    a date), then who wrote the row and in which commit."""
    column, schema = TABLES[table]
    if column is not None:
        schema = schema.append(pa.field(column, pa.date32()))
        schema = schema.append(pa.field(month_column(column), pa.string()))
    return schema.append(pa.field(WRITER, pa.string())).append(pa.field(COMMIT_ID, pa.string()))


def to_arrow(
    table: str, df: pd.DataFrame, partition: str | None, writer: str, commit_id: str
) -> pa.Table:
    """The rows as an Arrow table of the table's schema (columns in schema order; a
    missing column is an error, an extra one is dropped)."""
    column, schema = TABLES[table]
    missing = [f.name for f in schema if f.name not in df.columns]
    if missing:
        raise ValueError(f"{table} rows lack column(s) {', '.join(missing)}")
    arrow = pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)
    n = len(arrow)
    if column is not None:
        if partition is None:
            raise ValueError(f"table {table!r} rows need their {column}")
        day = dt.date.fromisoformat(partition)
        arrow = arrow.append_column(pa.field(column, pa.date32()), pa.array([day] * n, pa.date32()))
        arrow = arrow.append_column(
            pa.field(month_column(column), pa.string()),
            pa.array([partition[:7]] * n, pa.string()),
        )
    arrow = arrow.append_column(pa.field(WRITER, pa.string()), pa.array([writer] * n, pa.string()))
    arrow = arrow.append_column(
        pa.field(COMMIT_ID, pa.string()), pa.array([commit_id] * n, pa.string())
    )
    return arrow


TABLE_DOCS = {
    "instances": "instance types and their specs, the rows of each price source under its "
    "own writer",
    "prices": "USD per hour per instance type, market and zone; `stale` marks a snapshot "
    "carried forward because the source failed",
    "spot_advisor": "AWS's Spot Instance Advisor feed per fetch: the interruption bucket and "
    "the region's average spot saving per region and instance type "
    "(`deepvm prices refresh --source spot-advisor`)",
    "benchmarks": "one row per measured workload per machine and run",
    "scaling": "duration of a fixed amount of data-parallel work per node count",
    "checkpoint_transfer": "checkpoint transfer measurements (for the saturation model)",
    "overhead_models": "every fitted speedup model per group; `params` is JSON",
    "flopp": "FLOP per USD per instance type, workload and market",
    "recommendations": "each job's own ranked clusters (`scenario`, planned alone), per "
    "policy and snapshot; `run_kind` nightly (the night's record) or what-if (`recommend "
    "--store`, the recommend flow: written beside the night, never in its place)",
    "fleet": "one plan for all registered jobs under the shared quotas and team budget: "
    "per job its cluster, `value` (its objective over what it gets alone), what binds it, "
    "its solo cluster's cost and throughput, and for a running job the night's one decision "
    "(`decision` stay, move or stop; `gain` net of the move, `migration_h`, `migration_usd`, "
    "`break_even_h`, `decision_reason`); `run_kind` nightly or what-if (the fleet flow run "
    "on demand)",
    "running": "the cluster each registered job runs on (`deepvm adopt`): the plan it was "
    "adopted from, its checkpoint interval and efficiency, and the work done so far; the "
    "newest row per job holds, and one with `finished_at` (`deepvm finish`) says it ended",
}


def describe_tables() -> str:
    """Markdown for every table: partition, columns and Arrow types (the README's
    table section is generated from this, so it cannot drift from the schemas)."""
    lines = [
        f"**{COMMITS}** (`{COMMITS}/`): the completed commits, one row per (commit, table, "
        "date, writer); join on `commit_id` to read only whole commits.",
        "",
        ", ".join(f"`{f.name}` {f.type}" for f in COMMITS_SCHEMA),
        "",
    ]
    for table, (partition, _) in TABLES.items():
        where = (
            f"`{table}/`, partitioned by `{month_column(partition)}`"
            if partition
            else f"`{table}/`"
        )
        lines.append(f"**{table}** ({where}): {TABLE_DOCS[table]}.")
        columns = [f"`{f.name}` {f.type}" for f in table_schema(table)]
        lines.append("")
        lines.append(", ".join(columns))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
