"""Planner benchmarks (run by hand: `python benchmarks/planner.py`; not in CI).

1. One job on the shipped catalog: in-process and as the whole CLI command.
2. The 101-budget sweep 0:10.1:0.1 on the paper scenario (DESIGN §7), every
   policy, against exhaustive pure-Python enumeration over (i, n, j, m) of the
   same model: ratios and a check that the optima are identical.
3. Solve time on synthetic catalogs of up to 1,000 instance types, n <= 256.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from deepvm.catalog import Catalog, validate_catalog
from deepvm.planner import Inputs, parse_budgets
from deepvm.planner.api import make_job
from deepvm.planner.candidates import ON_DEMAND, SINGLE_ANCHOR, hourly_cost, throughput
from deepvm.planner.exhaustive import best_configs, enumerate_feasible
from deepvm.planner.fleet import build_fleet
from deepvm.planner.policies import POLICIES, Planner
from deepvm.quotas import Quotas

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "datasets" / "scenarios" / "paper"
PAPER_ARGS = [
    "--catalog",
    str(PAPER / "catalog.csv"),
    "--throughput",
    str(PAPER / "throughput.csv"),
    "--overhead",
    str(PAPER / "overhead.csv"),
    "--quotas",
    str(PAPER / "quotas.csv"),
]
SWEEP = "0:10.1:0.1"


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def one_job() -> None:
    from deepvm.planner import recommend

    recommend(3.0)  # warm imports
    start = time.perf_counter()
    result = recommend(3.0)
    t = time.perf_counter() - start
    best = result.recommendations[0]
    print(
        f"[1] shipped catalog, budget $3/h, top 3: {t * 1000:.0f} ms in-process; "
        f"best {best.n_workers} x {best.worker_type} ({best.architecture})"
    )
    cli = min(wall(["deepvm", "recommend", "--budget", "3"]) for _ in range(3))
    print(f"    whole `deepvm recommend --budget 3` (interpreter start included): {cli:.2f} s")


def baseline_key(fleet, policy, config, cost):  # type: ignore[no-untyped-def]
    flops = fleet.gpu_flops[config.worker]
    if policy == "cost_first":  # most nodes; ties: faster type, then cheaper
        return (config.n_workers, flops, -cost)
    return (flops, config.n_workers, -cost)  # performance_first: fastest type


def enumerate_sweep(fleet, job, budgets, max_nodes):  # type: ignore[no-untyped-def]
    """The exhaustive reference for every policy at every budget."""
    out = {}
    for budget in budgets:
        feasible = enumerate_feasible(fleet, job, budget, max_nodes=max_nodes)
        for policy in POLICIES:
            if policy in ("cost_first", "performance_first"):
                sa = [(c, cost) for c, cost in feasible if c.architecture == SINGLE_ANCHOR]
                best_n: dict[int, tuple] = {}
                for c, cost in sa:
                    if c.worker not in best_n or c.n_workers > best_n[c.worker][0].n_workers:
                        best_n[c.worker] = (c, cost)
                if not best_n:
                    out[budget, policy] = None
                    continue
                out[budget, policy] = max(
                    best_n.values(), key=lambda v, p=policy: baseline_key(fleet, p, *v)
                )[0]
                continue
            pool = [
                (c, cost)
                for c, cost in feasible
                if policy != "on_demand" or c.architecture == ON_DEMAND
            ]
            linear = policy == "deepvm_noscale"
            scored = [
                (
                    c,
                    cost,
                    fleet.gpu_flops[c.worker]
                    * (c.n_workers if linear else float(fleet.speedups(c.worker, c.n_workers))),
                )
                for c, cost in pool
            ]
            best = best_configs(scored, 1)
            out[budget, policy] = best[0][0] if best else None
    return out


def paper_sweep() -> None:
    inputs = Inputs.load(
        catalog=PAPER / "catalog.csv",
        throughput=PAPER / "throughput.csv",
        overhead=PAPER / "overhead.csv",
        quotas=PAPER / "quotas.csv",
    )
    budgets = parse_budgets(SWEEP)
    fleet = inputs.fleet("resnet50")
    job = make_job("resnet50", None, 2)
    max_nodes = 256

    start = time.perf_counter()
    planner = Planner(fleet, job, budget_cap=max(budgets), max_nodes=max_nodes)
    planned = {}
    for (policy, b), c in planner.sweep(POLICIES, budgets).items():
        planned[b, policy] = c
    t_plan = time.perf_counter() - start

    start = time.perf_counter()
    reference = enumerate_sweep(fleet, job, budgets, max_nodes)
    t_enum = time.perf_counter() - start

    mismatches = 0
    for key, want in reference.items():
        got = planned[key]
        if want is None or got is None:
            mismatches += (want is None) != (got is None)
        elif not (
            math.isclose(throughput(fleet, got), throughput(fleet, want), rel_tol=1e-9)
            and math.isclose(hourly_cost(fleet, got), hourly_cost(fleet, want), rel_tol=1e-9)
        ):
            mismatches += 1
    t_cli = min(
        wall(["deepvm", "sweep", "--budgets", SWEEP, "--json", *PAPER_ARGS]) for _ in range(3)
    )
    print(
        f"[2] paper scenario, {len(budgets)} budgets x {len(POLICIES)} policies "
        f"({len(reference)} optima):"
    )
    print(f"    exhaustive enumeration (pure Python): {t_enum:.2f} s")
    print(
        f"    planning (build + MILP sweep, in-process): {t_plan:.3f} s  -> "
        f"{t_enum / t_plan:.0f}x faster"
    )
    print(
        f"    whole `deepvm sweep` command (interpreter start included): {t_cli:.2f} s  -> "
        f"{t_enum / t_cli:.1f}x faster"
    )
    print(f"    optima identical: {len(reference) - mismatches}/{len(reference)}")


def synthetic_catalog(n_types: int, seed: int = 0) -> Catalog:
    rng = np.random.default_rng(seed)
    n_gpu = n_types // 2
    rows = []
    for k in range(n_types):
        gpu = k < n_gpu
        od = float(rng.uniform(0.5, 8.0) if gpu else rng.uniform(0.05, 1.0))
        rows.append(
            {
                "provider": "synthetic",
                "region": "r",
                "instance_type": f"t{k}",
                "quota_group": "G" if gpu else "standard",
                "vcpus": float(rng.choice([4, 8, 16])),
                "memory_gib": float(rng.choice([8, 16, 32, 64])),
                "network_gbps": float(rng.choice([1.7, 5, 10, 12.5, 25, 50, 100])),
                "accelerator_name": "X" if gpu else None,
                "accelerator_count": 1 if gpu else 0,
                "accelerator_memory_gib": 24 if gpu else 0,
                "peak_flops": float(rng.uniform(1e13, 1e15)) if gpu else None,
                "ondemand_price": round(od, 4),
                "spot_price": round(od * rng.uniform(0.25, 0.6), 4),
            }
        )
    return Catalog(validate_catalog(pd.DataFrame(rows)), snapshot="synthetic")


def scaling(sizes: list[int], budget: float) -> None:
    from deepvm.overhead import shipped_overhead_table

    print(
        f"[3] synthetic catalogs, no quotas, n <= 256, budget ${budget:g}/h "
        "(half GPU, half CPU types):"
    )
    for size in sizes:
        cat = synthetic_catalog(size)
        fleet = build_fleet(
            cat, "resnet50", quotas=Quotas({}), overhead_tables=[shipped_overhead_table()]
        )
        job = make_job("resnet50", None, 2)
        start = time.perf_counter()
        planner = Planner(fleet, job, budget_cap=budget, max_nodes=256)
        t_build = time.perf_counter() - start
        times = []
        for _ in range(3):
            start = time.perf_counter()
            found = planner.optimise("deepvm", budget, 1)
            times.append(time.perf_counter() - start)
        best = found[0][0]
        print(
            f"    {size:5d} types, {len(planner.candidates):7d} candidates: build "
            f"{t_build:.2f} s, first solve {times[0]:.2f} s, re-solve {min(times[1:]):.2f} s; "
            f"best {best.n_workers} x {fleet.gpu_types[best.worker]} ({best.architecture})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,300,1000")
    parser.add_argument("--budget", type=float, default=100.0)
    parser.add_argument("--skip", default="", help="comma list of parts to skip: 1,2,3")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    if "1" not in skip:
        one_job()
    if "2" not in skip:
        paper_sweep()
    if "3" not in skip:
        scaling([int(s) for s in args.sizes.split(",")], args.budget)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
