"""Planning across clouds against AWS alone (issue 26's performance targets; run by
hand: `python benchmarks/clouds.py`, not in CI).

Side by side in one run, on the shipped catalogs of the three clouds (the
default) and on their AWS rows alone, both with the shipped quotas:

* one `recommend` (the median of repeated calls, each on fresh Inputs so that the
  offers are built every time, as one CLI call does): target within 1.5x;
* a fleet of 100 jobs (benchmarks/fleet.py's mix, budgets $2-10/h): the whole
  plan, target within 2x.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fleet as fleet_bench

from deepvm.base.config import JobSpec
from deepvm.catalog.common import in_cloud
from deepvm.planner import Inputs, recommend
from deepvm.planner.fleet.plan import plan_fleet


def median_recommend_s(make: object, repeats: int = 15) -> float:
    times = []
    for _ in range(repeats):
        inputs = make()  # type: ignore[operator]
        start = time.perf_counter()
        recommend(6, JobSpec(), inputs=inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    shipped = Inputs.load()
    aws_only = in_cloud(shipped.catalog, "aws")
    overhead = shipped.overhead_tables

    def aws() -> Inputs:
        return Inputs(aws_only, shipped.quotas, overhead_tables=overhead)

    def clouds() -> Inputs:
        return Inputs(shipped.catalog, shipped.quotas, overhead_tables=overhead)

    print(f"catalog: {len(aws_only)} AWS rows; all three clouds {len(shipped.catalog)} rows")
    alone, across = median_recommend_s(aws), median_recommend_s(clouds)
    print(
        f"recommend: AWS {alone * 1000:.1f} ms, three clouds {across * 1000:.1f} ms -> "
        f"{across / alone:.2f}x (target <= 1.5x)"
    )
    jobs = fleet_bench.jobs(100)
    timings = {}
    for label, make in (("AWS", aws), ("three clouds", clouds)):
        start = time.perf_counter()
        plan = plan_fleet(jobs, make())
        timings[label] = time.perf_counter() - start
        print(f"fleet of 100 jobs, {label}: {plan.status}, value {plan.objective_value:.2f}, "
              f"{timings[label]:.2f} s")  # fmt: skip
    ratio = timings["three clouds"] / timings["AWS"]
    print(f"fleet across clouds / AWS alone: {ratio:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
