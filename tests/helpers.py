"""Builders for small fleets and jobs, shared by the planner tests."""

from __future__ import annotations

import dataclasses

import pandas as pd

from deepvm.catalog import Catalog, validate_catalog
from deepvm.catalog.quotas import Quotas
from deepvm.performance.overhead import SaturationModel
from deepvm.planner.candidates import CheckpointNeeds
from deepvm.planner.offers import Offers, build_offers

WORKLOAD = "resnet50"


def gpu_row(
    name: str,
    od: float,
    spot: float | None,
    *,
    vcpus: float = 4,
    gbps: float = 10,
    group: str = "G",
    peak: float = 1e14,
    region: str = "r",
) -> dict[str, object]:
    return {
        "provider": "aws",
        "region": region,
        "instance_type": name,
        "quota_group": group,
        "vcpus": vcpus,
        "memory_gib": 16,
        "network_gbps": gbps,
        "accelerator_name": "X",
        "accelerator_count": 1,
        "accelerator_memory_gib": 16,
        "peak_flops": peak,
        "ondemand_price": od,
        "spot_price": spot,
    }


def cpu_row(
    name: str,
    od: float,
    *,
    memory_gib: float = 8,
    gbps: float = 10,
    vcpus: float = 4,
    group: str = "standard",
    region: str = "r",
) -> dict[str, object]:
    return {
        "provider": "aws",
        "region": region,
        "instance_type": name,
        "quota_group": group,
        "vcpus": vcpus,
        "memory_gib": memory_gib,
        "network_gbps": gbps,
        "accelerator_name": None,
        "accelerator_count": 0,
        "accelerator_memory_gib": 0,
        "peak_flops": None,
        "ondemand_price": od,
        "spot_price": od * 0.5,
    }


def make_fleet(
    rows: list[dict[str, object]],
    *,
    quotas: dict[tuple[str, str], float] | None = None,
    overhead: pd.DataFrame | None = None,
    saturation: SaturationModel | None = None,
    regional: dict[tuple[str, str, str], float] | None = None,
) -> Offers:
    catalog = Catalog(validate_catalog(pd.DataFrame(rows)), snapshot="test")
    return build_offers(
        catalog,
        WORKLOAD,
        quotas=Quotas(quotas or {}, regional or {}),
        overhead_tables=[overhead] if overhead is not None else [],
        saturation=saturation,
    )


def job(checkpoint_gb: float = 1.0, versions: int = 2) -> CheckpointNeeds:
    return CheckpointNeeds(WORKLOAD, checkpoint_gb, versions)


def make_inputs(
    rows: list[dict[str, object]],
    *,
    quotas: dict[tuple[str, str], float] | None = None,
    regional: dict[tuple[str, str, str], float] | None = None,
    overhead: pd.DataFrame | None = None,
    saturation: SaturationModel | None = None,
    units: dict[str, str] | None = None,
):  # type: ignore[no-untyped-def]
    """The planner's Inputs for a small catalog (what the fleet planner takes);
    ``units``: quota keys counted in another unit than vCPUs (GPUs)."""
    from deepvm.base.tables import Table
    from deepvm.planner import Inputs

    catalog = Catalog(validate_catalog(pd.DataFrame(rows)), snapshot="test")
    return Inputs(
        catalog,
        Quotas(quotas or {}, regional or {}, units or {}),
        overhead_tables=(Table.from_frame(overhead),) if overhead is not None else (),
        saturation=saturation or SaturationModel(),
    )


def append_benchmarks(store: str, writer: str, count: int) -> None:
    """One benchmarks row per append, ``count`` times (a machine of many runs;
    the target of the concurrent-writer tests' processes)."""
    from deepvm.store import TABLES, Store

    for k in range(count):
        row = {c: None for c in TABLES["benchmarks"][1].names}
        row.update(
            run_id=f"{writer}-{k}", instance_type=writer, workload="tiny", status="ok",
            achieved_flops=float(k + 1), measured_at=pd.Timestamp.now(tz="UTC"),
        )  # fmt: skip
        Store.open(store).append(
            "benchmarks", pd.DataFrame([row]), partition="2026-12-01", writer=writer
        )


def whole(store, table: str):  # type: ignore[no-untyped-def]
    """A DuckDB relation of the table's rows of completed commits (the README's
    downstream reader: the Delta table joined on the commits table)."""
    from deepvm.store.sql import duckdb_relation

    return duckdb_relation(str(store), table)


def plain_readers(store, table: str) -> dict[str, dict[tuple, int]]:  # type: ignore[no-untyped-def]
    """Rows per (date, writer, commit) of ``table`` as readers that know nothing of
    deepvm's commits read it: the newest version through delta-rs, polars'
    read_delta, and DuckDB over the Delta table's list of active files."""
    import collections

    import duckdb
    import polars as pl
    from deltalake import DeltaTable

    from deepvm.model.schemas import COMMIT_ID, TABLES, WRITER
    from deepvm.store import Store

    location = Store.open(str(store)).location
    uri, options = location.table_uri(table), location.options
    column = TABLES[table][0]
    keys = [c for c in (column, WRITER, COMMIT_ID) if c is not None]

    def count(rows) -> dict[tuple, int]:  # type: ignore[no-untyped-def]
        if column is None:
            rows = rows.assign(**{"_date": ""})
        return dict(
            collections.Counter(
                (str(d)[:10], w, c)
                for d, w, c in zip(
                    rows[column or "_date"], rows[WRITER], rows[COMMIT_ID], strict=True
                )
            )
        )

    delta_table = DeltaTable(uri, storage_options=options)
    seen = {"delta-rs": count(delta_table.to_pyarrow_table(columns=keys).to_pandas())}
    polars_options = {k: v for k, v in options.items() if "retr" not in k}
    seen["polars"] = count(
        pl.read_delta(uri, storage_options=polars_options).select(keys).to_pandas()
    )
    files = delta_table.file_uris()
    if location.local:
        listed = ", ".join("'" + f.removeprefix("file://") + "'" for f in files)
        query = f"select {', '.join(keys)} from read_parquet([{listed}])" if files else None
        frame = duckdb.sql(query).df() if query else delta_table.to_pandas(columns=keys)
    else:  # no DuckDB extension offline: the same files through pyarrow's S3 client
        import pyarrow.dataset as ds

        con = duckdb.connect()
        filesystem = delta_table.to_pyarrow_dataset().filesystem
        paths = [f.removeprefix(uri.rstrip("/") + "/") for f in files]  # the table is its root
        data = ds.dataset(paths, format="parquet", filesystem=filesystem) if files else None
        con.register("data", data if data is not None else delta_table.to_pyarrow_table())
        frame = con.sql(f"select {', '.join(keys)} from data").df()
    if column is not None and len(frame):
        frame[column] = frame[column].astype(str).str[:10]
    seen["duckdb"] = count(frame)
    return seen


def deepvm_reader(store, table: str) -> dict[tuple, int]:  # type: ignore[no-untyped-def]
    """Rows per (date, writer, commit) of ``table`` as deepvm's own readers read it."""
    import collections

    from deepvm.model.schemas import COMMIT_ID, TABLES, WRITER
    from deepvm.store import Store

    rows = Store.open(str(store)).rows(table).to_pandas()
    column = TABLES[table][0]
    dates = [str(d) for d in rows[column]] if column else [""] * len(rows)
    return dict(collections.Counter(zip(dates, rows[WRITER], rows[COMMIT_ID], strict=True)))


def assert_whole_for_plain_readers(store, tables, *, same_as_deepvm: bool = True) -> None:  # type: ignore[no-untyped-def]
    """Every plain reader sees each (date, writer) of each table once, from one
    commit, with as many rows as deepvm's reader has for it; with
    ``same_as_deepvm``, the very rows deepvm reads (the same commits)."""
    for table in tables:
        mine = deepvm_reader(store, table)
        shape = {(d, w): n for (d, w, _), n in mine.items()}
        for reader, seen in plain_readers(store, table).items():
            if same_as_deepvm:
                assert seen == mine, (reader, table)
                continue
            pairs = [(d, w) for d, w, _ in seen]
            assert len(pairs) == len(set(pairs)), (reader, table, "a date twice")
            assert {(d, w): n for (d, w, _), n in seen.items()} == shape, (reader, table)


def stopped_just_under(monkeypatch) -> list[float]:  # type: ignore[no-untyped-def]
    """Every fleet plan ends as 300 jobs over three clouds did at the limit: 0.0015 %
    under its bound (the plan is the real one, its status and figures that plan's).
    Returns the time limits plan_fleet is given, as they are given."""
    from deepvm.base.config import DEFAULT_TIME_LIMIT_S
    from deepvm.planner.fleet import plan as fleet_plan

    real, limits = fleet_plan.plan_fleet, []

    def stopped(*args, time_limit_s: float = DEFAULT_TIME_LIMIT_S, **kwargs):
        limits.append(time_limit_s)
        plan = real(*args, time_limit_s=time_limit_s, **kwargs)
        return dataclasses.replace(
            plan, status="limit_with_incumbent", objective_value=344.264924,
            objective_bound=344.269971, tie_break_status="not_run",
        )  # fmt: skip

    monkeypatch.setattr(fleet_plan, "plan_fleet", stopped)
    return limits
