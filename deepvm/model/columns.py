"""What every stored column means: its unit and a one-line meaning (the store's
table contract, docs/ARCHITECTURE.md, "The store"; `deepvm store schema` prints
it with each column's type and the table's partitioning). A column means the same
in every table that has it unless ``_PER_TABLE`` says otherwise; a new column gets
its line here in the change that adds it (tests/test_table_contract.py fails
otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from deepvm.model.schemas import (
    COMMITS,
    COMMITS_SCHEMA,
    SCHEMA_VERSION,
    TABLE_DOCS,
    TABLES,
    month_column,
    table_schema,
)

__all__ = ["Column", "TableContract", "contract", "contract_markdown", "contracts"]

# unit words: "" for text, names and flags
USD_H, FLOPS, FLOP, H, S = "USD/h", "FLOP/s", "FLOP", "h", "s"

_COLUMNS: dict[str, tuple[str, str]] = {
    # who, where, what
    "provider": ("", "cloud of the price source: aws, gcp or azure"),
    "cloud": ("", "cloud the cluster runs in: aws, gcp or azure"),
    "region": ("", "the cloud's region name (us-east-1, us-central1, eastus)"),
    "zone": ("", "availability zone of the spot nodes; null where prices are per region"),
    "instance_type": ("", "the cloud's instance type name"),
    "market": ("", "spot or on_demand"),
    "quota_group": ("", "the quota key on-demand nodes of this type count against"),
    "spot_quota_group": ("", "the quota key spot nodes count against (null: quota_group)"),
    "regional_quota_group": ("", "a second, regional quota key (Azure's; null: none)"),
    "spot_regional_quota_group": ("", "the regional quota key of spot nodes (null: none)"),
    "vcpus": ("vCPU", "virtual CPUs per instance"),
    "memory_gib": ("GiB", "memory per instance (benchmarks: of the measuring machine)"),
    "network_gbps": ("Gbit/s", "network bandwidth per instance"),
    "accelerator_name": ("", "GPU model (null: a CPU instance)"),
    "accelerator_count": ("GPU", "GPUs per instance"),
    "accelerator_memory_gib": ("GiB", "memory per GPU"),
    "peak_flops": (FLOPS, "the instance's GPUs' peak dense FLOP/s at the workload's precision"),
    # prices and interruptions
    "usd_per_hour": (USD_H, "price of one instance per hour in this market"),
    "fetched_at": ("UTC", "when deepvm fetched it"),
    "source": ("", "where the figure is from (a price source's name, measured, file)"),
    "stale": ("", "true: the source failed and the last snapshot was carried forward"),
    "interruption_rate": ("fraction/month", "share of spot instances reclaimed per month"),
    "price_date": ("ISO date", "the date the price refers to, at the source's precision"),
    "interruption_bucket": ("", "AWS Spot Instance Advisor's bucket (<5%, 5-10%, ...)"),
    "savings_pct": ("%", "the region's average spot saving over on-demand"),
    "feed_date": ("ISO date", "the date the feed refers to"),
    # measurements
    "run_id": ("", "one benchmark, scaling or planning run"),
    "measured_at": ("UTC", "when it was measured"),
    "hostname": ("", "the machine that measured it"),
    "device": ("", "the torch device (cuda:0, cpu)"),
    "workload": ("", "the sample model measured or planned (resnet50, gpt2, ...)"),
    "dtype": ("", "the training precision (float32, bfloat16, ...)"),
    "batch_size": ("samples", "samples per step"),
    "steps": ("steps", "timed training steps"),
    "step_time_median_s": (S, "median time of one training step"),
    "step_time_p10_s": (S, "10th percentile of the step time"),
    "step_time_p90_s": (S, "90th percentile of the step time"),
    "flops_per_step": (FLOP, "floating-point operations of one step (forward and backward)"),
    "achieved_flops": (FLOPS, "FLOP/s the instance sustains on the workload"),
    "samples_per_s": ("samples/s", "training samples per second"),
    "status": ("", "ok, or what went wrong (benchmarks); the solver's status (plans)"),
    "error": ("", "the error of a failed run (null: none)"),
    "warning": ("", "what to know about a run that completed"),
    "cpu_model": ("", "the measuring machine's CPU"),
    "cpu_cores": ("cores", "the measuring machine's CPU cores"),
    "wall_s": (S, "wall time of the whole run"),
    "torch_version": ("", "PyTorch of the run"),
    "cuda_version": ("", "CUDA of the run (null: none)"),
    "deepvm_version": ("", "deepvm of the run"),
    "n_nodes": ("nodes", "nodes the data-parallel work ran on"),
    "duration_s": (S, "time of the fixed amount of work"),
    "speedup": ("x", "one node's duration over this one's"),
    "worker_type": ("", "the GPU workers' instance type"),
    "remote_type": ("", "the remote tier's instance type (Tiering; null: none)"),
    "bandwidth_gbps": ("Gbit/s", "the remote node's network bandwidth"),
    "workers_per_remote": ("nodes", "workers sending checkpoints to one remote node"),
    "checkpoint_gb": ("GB", "checkpoint size"),
    "transfer_s": (S, "time to transfer one checkpoint"),
    # fits
    "model": ("", "the speedup model's kind (deepvm, amdahl, logistic, ...)"),
    "params": ("JSON", "the fitted parameters"),
    "rmse": ("x", "root-mean-square error of the fit's speedup"),
    "loo_rmse": ("x", "leave-one-out RMSE (the model is selected by it)"),
    "r2": ("", "coefficient of determination of the fit"),
    "n_points": ("points", "scaling points fitted"),
    "selected": ("", "true: the model the planner uses for this group"),
    "fitted_at": ("UTC", "when the fit ran"),
    # FLOPP
    "flopp": ("FLOP/USD", "FLOP per dollar: achieved_flops x 3600 / usd_per_hour"),
    "flops_source": ("", "where achieved_flops is from: measured, file, published, estimate"),
    # plans
    "created_at": ("UTC", "when the plan was made"),
    "scenario": ("", "the registered job's name"),
    "objective": ("", "what the plan maximises or minimises (throughput, goodput, cost)"),
    "policy": ("", "the policy that chose the cluster (deepvm, cost_first, ...)"),
    "rank": ("", "1 is the best cluster of the policy"),
    "architecture": ("", "single_node, multi_node, single_anchor, tiering, ..."),
    "n_workers": ("nodes", "GPU worker nodes"),
    "n_spot": ("nodes", "worker nodes bought spot"),
    "n_on_demand": ("nodes", "worker nodes bought on demand"),
    "n_remote": ("nodes", "remote-tier nodes (Tiering)"),
    "hourly_cost": (USD_H, "the whole cluster's price per hour"),
    "throughput_flops": (FLOPS, "the cluster's training throughput, scaling overhead included"),
    "objective_value": ("", "the objective's value (its unit: the objective's)"),
    "preemptions_per_h": ("1/h", "expected spot preemptions per hour of the cluster"),
    "checkpoint_interval_s": (S, "time between checkpoints the plan sets"),
    "efficiency": ("fraction", "useful share of the time, after checkpoints and preemptions"),
    "goodput_flops": (FLOPS, "throughput x efficiency"),
    "expected_makespan_h": (H, "expected time to finish the job's work"),
    "expected_total_cost": ("USD", "expected cost of finishing the job's work"),
    "work_flops": (FLOP, "the job's total work"),
    "deadline_h": (H, "the job's deadline (null: none)"),
    "budget": (USD_H, "the job's budget"),
    "overhead_model": ("", "the speedup model used for the worker type"),
    "overhead_source": ("", "where the speedup model is from"),
    "solver": ("", "the solver that planned it (highs, enumeration)"),
    "solve_s": (S, "time the solve took"),
    "prices_snapshot": ("", "the price snapshot planned on (source@date)"),
    "binding": ("", "what limits the plan (budget, a quota key, max_nodes, ...)"),
    "flops_basis": ("", "how achieved_flops was obtained (estimate: says so)"),
    "flops_date": ("ISO date", "the date achieved_flops refers to"),
    "overhead_basis": ("", "how the speedup model was obtained"),
    "overhead_date": ("ISO date", "the date the speedup model refers to"),
    "price_source": ("", "the prices' source"),
    "interruption_source": ("", "where the interruption rate is from"),
    "interruption_date": ("ISO date", "the date the interruption rate refers to"),
    "spot_saving_pct": ("%", "the spot price's saving over on-demand, this instance"),
    "regional_saving_pct": ("%", "the region's average spot saving (the advisor's)"),
    "spot_outlier": ("", "true: this spot price is far from the regional saving"),
    "run_kind": ("", "nightly (the night's record) or what-if (an on-demand run)"),
    "team_budget": (USD_H, "the team's budget for all jobs (null: none)"),
    "planned": ("", "true: the job got a cluster in the fleet plan"),
    "priority": ("", "the job's weight in the fleet objective (0.001 to 1000)"),
    "shared": ("", "true: the job shares quotas and budget with the others"),
    "value": ("fraction", "the job's objective in the fleet over what it gets alone"),
    "solo_throughput_flops": (FLOPS, "throughput of the job's cluster planned alone"),
    "solo_hourly_cost": (USD_H, "price of the job's cluster planned alone"),
    "note": ("", "why the job got less than alone, in words"),
    "running_cluster": ("", "the cluster a running job is on, in words"),
    "decision": ("", "a running job's decision tonight: stay, move or stop"),
    "gain": ("fraction", "the move's gain in the objective, net of the move's cost"),
    "migration_h": (H, "time a move costs (checkpoint, restart, lost progress)"),
    "migration_usd": ("USD", "what a move costs"),
    "break_even_h": (H, "hours after which the move has paid for itself"),
    "decision_reason": ("", "the decision, in words"),
    "adopted_at": ("UTC", "when the job was adopted (or finished)"),
    "plan_date": ("ISO date", "the plan the running cluster was adopted from"),
    "work_done_flops": (FLOP, "the job's work done so far"),
    "started_at": ("UTC", "when the job started on this cluster"),
    "finished_at": ("UTC", "when the job ended (null: running)"),
    # dates, partitions, lineage
    "snapshot_date": ("date", "the night (prices' date) the row belongs to"),
    "run_date": ("date", "the day of the run"),
    "fitted_date": ("date", "the day of the fit"),
    "adopted_date": ("date", "the day of the adoption"),
    "writer": ("", "who wrote the row: a job, a price source, a run; one per date"),
    "commit_id": ("", "the deepvm commit that wrote the row (see the commits table)"),
    "committed_at": ("UTC", "when the commit completed"),
    "command": ("", "the command that made the commit (nightly, recommend, compact, ...)"),
    "table_name": ("", "the table the commit wrote"),
    "table_version": ("", "the Delta version of that table the commit left"),
    "date": ("date", "the date the commit wrote (null: an undated table)"),
}
_PER_TABLE: dict[tuple[str, str], tuple[str, str]] = {
    ("running", "source"): ("", "what the job was adopted from (nightly, fleet, a file)"),
    ("scaling", "source"): ("", "measured, or the file it was read from"),
    ("fleet", "status"): ("", "the fleet solve's status (optimal, limit_with_incumbent, ...)"),
    ("fleet", "objective_value"): ("", "the fleet's objective: the priority-weighted values"),
    ("fleet", "tie_break_status"): (
        "",
        "optimal: the plan is proven the cheapest of its value; limit_with_incumbent: "
        "the time limit stopped that search (the value is still proven where status is "
        "optimal); not_run: the value is not proven",
    ),
}


@dataclass(frozen=True)
class Column:
    """One column of the contract."""

    name: str
    type: str
    unit: str
    meaning: str
    nullable: bool


@dataclass(frozen=True)
class TableContract:
    """One table: its columns, its partitioning and what a row is."""

    name: str
    description: str
    date_column: str | None
    partition_column: str | None
    columns: list[Column]

    def as_dict(self) -> dict[str, object]:
        return {
            "table": self.name,
            "schema_version": SCHEMA_VERSION,
            "description": self.description,
            "date_column": self.date_column,
            "partitioned_by": [self.partition_column] if self.partition_column else [],
            "columns": [vars(c) for c in self.columns],
        }


def _column(table: str, field: pa.Field) -> Column:
    unit, meaning = _PER_TABLE.get((table, field.name)) or _month_or(field.name)
    return Column(field.name, str(field.type), unit, meaning, field.nullable)


def _month_or(name: str) -> tuple[str, str]:
    if name in _COLUMNS:
        return _COLUMNS[name]
    for column, _ in TABLES.values():
        if column is not None and name == month_column(column):
            return ("YYYY-MM", f"the month of {column}: the table's partition")
    raise KeyError(f"column {name!r} has no line in deepvm/model/columns.py")


def contract(table: str) -> TableContract:
    """The contract of ``table`` (a table name or ``commits``)."""
    if table == COMMITS:
        fields = list(COMMITS_SCHEMA)
        return TableContract(
            COMMITS,
            "the completed commits, one row per (commit, table, date, writer): which "
            "versions of which tables one deepvm run left",
            "date",
            None,
            [_column(COMMITS, f) for f in fields],
        )
    if table not in TABLES:
        raise KeyError(table)
    column = TABLES[table][0]
    return TableContract(
        table,
        TABLE_DOCS[table],
        column,
        month_column(column) if column else None,
        [_column(table, f) for f in table_schema(table)],
    )


def contracts() -> list[TableContract]:
    """Every table's contract, the commits table first."""
    return [contract(COMMITS), *(contract(t) for t in TABLES)]


def contract_markdown(tables: list[TableContract]) -> str:
    """The contracts as Markdown: a heading, a line and a column table per table."""
    out = [f"Schema version {SCHEMA_VERSION} (the table property `deepvm.schemaVersion`).", ""]
    for t in tables:
        where = f"partitioned by `{t.partition_column}`" if t.partition_column else "unpartitioned"
        out += [f"### {t.name}", "", f"{t.description} ({where}).", ""]
        out += ["| column | type | unit | meaning |", "|---|---|---|---|"]
        out += [f"| `{c.name}` | {c.type} | {c.unit} | {c.meaning} |" for c in t.columns]
        out.append("")
    return "\n".join(out).rstrip() + "\n"
