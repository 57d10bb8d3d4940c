"""Builders for small fleets and jobs, shared by the planner tests."""

from __future__ import annotations

import pandas as pd

from deepvm.catalog import Catalog, validate_catalog
from deepvm.overhead import SaturationModel
from deepvm.planner.candidates import CheckpointNeeds
from deepvm.planner.offers import Offers, build_offers
from deepvm.quotas import Quotas

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
    from deepvm.planner import Inputs
    from deepvm.tables import Table

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
