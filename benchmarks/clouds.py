"""Planning across clouds against AWS alone (issue 26's performance targets; run by
hand: `python benchmarks/clouds.py`, not in CI).

Side by side in one run, on the shipped AWS catalog and on it joined with the
shipped GCP catalog (datasets/catalog-gcp.csv; Azure is not built yet):

* one `recommend` (the median of repeated calls, each on fresh Inputs so that the
  offers are built every time, as one CLI call does): target within 1.5x;
* a fleet of 100 jobs (benchmarks/fleet.py's mix, budgets $2-10/h): the whole
  plan, target within 2x.

Quotas: the shipped AWS defaults, and for GCP a stand-in of 64 GPUs per model
and market and 1,024 vCPUs per region (labelled; a team puts in its own).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fleet as fleet_bench

from deepvm.catalog import Catalog, load_catalog, validate_catalog
from deepvm.config import JobSpec
from deepvm.planner import Inputs, recommend
from deepvm.planner.fleet_plan import plan_fleet
from deepvm.quotas import Quotas, load_quotas

ROOT = Path(__file__).resolve().parent.parent
GCP_MODELS = ("A100", "A100_80GB", "H100", "L4")


def both_clouds() -> tuple[Catalog, Quotas]:
    aws, gcp = load_catalog(), load_catalog(ROOT / "datasets" / "catalog-gcp.csv")
    frames = [aws.table.to_frame(), gcp.table.to_frame()]
    table = validate_catalog(pd.concat(frames, ignore_index=True))
    shipped = load_quotas()
    limits = dict(shipped.limits)
    units = dict(shipped.units)
    for model in GCP_MODELS:
        limits[f"NVIDIA_{model}_GPUS", "on_demand"] = 64
        limits[f"PREEMPTIBLE_NVIDIA_{model}_GPUS", "spot"] = 64
        units[f"NVIDIA_{model}_GPUS"] = units[f"PREEMPTIBLE_NVIDIA_{model}_GPUS"] = "gpus"
    limits["CPUS", "on_demand"] = limits["PREEMPTIBLE_CPUS", "spot"] = 1024
    return Catalog(table, "aws + gcp"), Quotas(limits, shipped.regional, units)


def median_recommend_s(make: object, repeats: int = 15) -> float:
    times = []
    for _ in range(repeats):
        inputs = make()  # type: ignore[operator]
        start = time.perf_counter()
        recommend(6, JobSpec(), inputs=inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    catalog, quotas = both_clouds()
    shipped = Inputs.load()
    overhead = shipped.overhead_tables

    def aws() -> Inputs:
        return Inputs(shipped.catalog, shipped.quotas, overhead_tables=overhead)

    def clouds() -> Inputs:
        return Inputs(catalog, quotas, overhead_tables=overhead)

    print(f"catalog: {len(shipped.catalog)} AWS rows; with GCP {len(catalog)} rows")
    alone, across = median_recommend_s(aws), median_recommend_s(clouds)
    print(
        f"recommend: AWS {alone * 1000:.1f} ms, AWS + GCP {across * 1000:.1f} ms -> "
        f"{across / alone:.2f}x (target <= 1.5x)"
    )
    jobs = fleet_bench.jobs(100)
    timings = {}
    for label, make in (("AWS", aws), ("AWS + GCP", clouds)):
        start = time.perf_counter()
        plan = plan_fleet(jobs, make())
        timings[label] = time.perf_counter() - start
        print(f"fleet of 100 jobs, {label}: {plan.status}, value {plan.objective_value:.2f}, "
              f"{timings[label]:.2f} s")  # fmt: skip
    ratio = timings["AWS + GCP"] / timings["AWS"]
    print(f"fleet across clouds / AWS alone: {ratio:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
