"""Planner benchmarks (run by hand: `python benchmarks/planner.py`; not in CI).
Every figure is a ratio against a baseline run side by side in the same run.

1. The whole `deepvm recommend --budget 3 --json` command against
   `python -c "import pandas"` (target: at most 1.8x).
2. The paper's 101-budget sweep 0:10.1:0.1 (every policy): the whole `deepvm
   sweep` command against `benchmarks/numpy_sweep.py`, a numpy-only process doing
   the same sweep (target: at most 4x), and against exhaustive pure-Python
   enumeration over (i, n, j, m); planning alone in-process against that numpy
   process's planning (target: at most 2x); the optima compared with both.
3. One recommend on synthetic catalogs of 1,000 and 5,000 GPU types (and 40 CPU
   types), n <= 256, every candidate within budget, each in a fresh process:
   seconds and peak RSS (target: about a second and under 400 MiB at 5,000).
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

from deepvm.base.config import POLICIES
from deepvm.catalog import Catalog, validate_catalog
from deepvm.catalog.quotas import Quotas
from deepvm.cli._plan import parse_budgets
from deepvm.planner import Inputs, Planner
from deepvm.planner._exhaustive import best_configs, enumerate_feasible
from deepvm.planner.api import checkpoint_needs
from deepvm.planner.candidates import ON_DEMAND, SINGLE_ANCHOR, hourly_cost, throughput

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


def best_of(cmd: list[str], runs: int = 5) -> float:
    return min(wall(cmd) for _ in range(runs))


def one_job() -> None:
    pairs = [
        (wall(["deepvm", "recommend", "--budget", "3", "--json"]),
         wall([sys.executable, "-c", "import pandas"]))
        for _ in range(7)
    ]  # fmt: skip
    cli, pandas_ = min(p[0] for p in pairs), min(p[1] for p in pairs)
    print(
        f"[1] whole `deepvm recommend --budget 3 --json`: {cli:.2f} s; "
        f"`python -c 'import pandas'`: {pandas_:.2f} s -> {cli / pandas_:.2f}x (target <= 1.8x)"
    )


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


def _same(got: object, want: list | None, fleet, key) -> bool:  # type: ignore[no-untyped-def]
    """A planner Config against the numpy process's [type, arch, n, cost, ...]."""
    if got is None or want is None:
        return got is None and want is None
    return (
        fleet.gpu_types[got.worker] == want[0]  # type: ignore[attr-defined]
        and got.architecture == want[1]  # type: ignore[attr-defined]
        and got.n_workers == want[2]  # type: ignore[attr-defined]
        and math.isclose(hourly_cost(fleet, got), want[3], rel_tol=1e-9)
    )


def paper_sweep() -> None:
    import json

    inputs = Inputs.load(
        catalog=PAPER / "catalog.csv",
        throughput=PAPER / "throughput.csv",
        overhead=PAPER / "overhead.csv",
        quotas=PAPER / "quotas.csv",
    )
    budgets = parse_budgets(SWEEP)
    fleet = inputs.offers("resnet50")
    job = checkpoint_needs("resnet50", None, 2)
    max_nodes = 256

    plan_times = []
    for _ in range(5):
        start = time.perf_counter()
        planner = Planner(fleet, job, budget_cap=max(budgets), max_nodes=max_nodes)
        swept = planner.sweep(POLICIES, budgets)
        plan_times.append(time.perf_counter() - start)
    t_plan = min(plan_times)
    planned = {(b, policy): c for (policy, b), c in swept.items()}

    numpy_cmd = [sys.executable, str(ROOT / "benchmarks" / "numpy_sweep.py"), str(PAPER)]
    sweep_cmd = ["deepvm", "sweep", "--budgets", SWEEP, "--json", *PAPER_ARGS]
    pairs = [(wall(sweep_cmd), wall(numpy_cmd)) for _ in range(5)]
    t_cli, t_numpy = min(p[0] for p in pairs), min(p[1] for p in pairs)
    baseline = json.loads(subprocess.run(numpy_cmd, check=True, capture_output=True).stdout)
    t_numpy_plan = min(
        json.loads(subprocess.run(numpy_cmd, check=True, capture_output=True).stdout)["plan_s"]
        for _ in range(5)
    )

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
    numpy_same = sum(
        _same(planned[b, p], baseline["results"][f"{b}|{p}"], fleet, (b, p)) for b, p in planned
    )
    print(
        f"[2] paper scenario, {len(budgets)} budgets x {len(POLICIES)} policies "
        f"({len(reference)} optima):"
    )
    print(
        f"    whole `deepvm sweep` command: {t_cli:.2f} s; numpy-only process: {t_numpy:.2f} s "
        f"-> {t_cli / t_numpy:.2f}x (target <= 4x)"
    )
    print(
        f"    planning alone: {t_plan * 1000:.1f} ms; the numpy process's planning: "
        f"{t_numpy_plan * 1000:.1f} ms -> {t_plan / t_numpy_plan:.2f}x (target <= 2x)"
    )
    print(
        f"    exhaustive enumeration (pure Python): {t_enum:.2f} s -> the whole command is "
        f"{t_enum / t_cli:.0f}x faster, planning alone {t_enum / t_plan:.0f}x"
    )
    print(
        f"    optima identical: {len(reference) - mismatches}/{len(reference)} with the "
        f"enumerator, {numpy_same}/{len(planned)} with the numpy process"
    )


def synthetic_catalog(n_gpu: int, n_cpu: int = 40, seed: int = 0) -> Catalog:
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n_gpu + n_cpu):
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


def synthetic_child(n_gpu: int) -> None:
    """One recommend on a synthetic catalog, in this (fresh) process."""
    import resource

    from deepvm.performance.overhead import shipped_overhead_table
    from deepvm.planner.api import recommend

    cat = synthetic_catalog(n_gpu)
    inputs = Inputs(cat, Quotas({}), overhead_tables=(shipped_overhead_table(),))
    budget = 1e7  # every candidate fits: the worst case
    recommend(1.0, inputs=inputs, top=1)  # warm the code paths on a small problem
    start = time.perf_counter()
    result = recommend(budget, inputs=inputs, top=3)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    best = result.recommendations[0]
    print(
        f"    {n_gpu:5d} GPU types: one recommend (top 3) {seconds:.2f} s, peak RSS "
        f"{rss:.0f} MiB; best {best.n_workers} x {best.worker_type} ({best.architecture})"
    )


def scaling(sizes: list[int]) -> None:
    print("[3] synthetic catalogs, no quotas, n <= 256, 40 CPU types, every candidate in budget:")
    for size in sizes:
        subprocess.run([sys.executable, __file__, "--child", str(size)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: 1,2,3")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        synthetic_child(args.child)
        return
    skip = set(args.skip.split(","))
    if "1" not in skip:
        one_job()
    if "2" not in skip:
        paper_sweep()
    if "3" not in skip:
        scaling([int(s) for s in args.sizes.split(",")])
    sys.stdout.flush()


if __name__ == "__main__":
    main()
