"""The baseline for `benchmarks/planner.py`: the paper's 101-budget sweep done by a
process that imports numpy alone, reads the scenario's CSVs with the csv module
and evaluates deepvm's model directly, written apart from the package (it shares
no code with it). It prints one JSON object: planning seconds and every
(budget, policy) answer, so the benchmark can time it and compare the optima.

    python benchmarks/numpy_sweep.py datasets/scenarios/paper
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

SAT = np.array([(0.3, 2), (1.7, 12), (5, 16), (10, 20), (12.5, 24), (15, 24), (25, 28), (30, 32)])
RESNET50_CHECKPOINT_GB = 25_557_032 * 12 / 1e9  # fp32 weights + Adam, as deepvm's default
VERSIONS, MAX_NODES, RTOL, GIB = 2, 256, 1e-7, 1.073741824
SA, TIER, OD = "single_anchor", "tiering", "on_demand"


def rows(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def nsat(gbps: np.ndarray) -> np.ndarray:
    return np.floor(np.interp(gbps, SAT[:, 0], SAT[:, 1]))


def deepvm_speedup(n: np.ndarray, a: float, b: float, c: float) -> np.ndarray:
    s_logistic = c / (1 + np.exp(-a * (n - b)))
    tangent = a * c / 4 * (n - b) + c / 2
    k = np.where(n > b, s_logistic / np.where(n > b, tangent, 1), 1.0)
    return np.where(n == 1, 1.0, n * k)


def main(folder: Path, budgets: list[float]) -> dict[str, object]:
    catalog = rows(folder / "catalog.csv")
    flops = {r["instance_type"]: float(r["flops"]) for r in rows(folder / "throughput.csv")}
    fits = {r["instance_type"]: r for r in rows(folder / "overhead.csv")}
    quota = {
        (r["quota_group"], r["market"]): float(r["vcpus"]) for r in rows(folder / "quotas.csv")
    }
    start = time.perf_counter()
    gpu = [r for r in catalog if int(float(r["accelerator_count"])) > 0]
    cpu = [r for r in catalog if int(float(r["accelerator_count"])) == 0]
    cpu_price = np.array([float(r["ondemand_price"]) for r in cpu])
    cpu_nsat = nsat(np.array([float(r["network_gbps"]) for r in cpu]))
    cpu_usable = np.array([0.8 * float(r["memory_gib"]) * GIB for r in cpu])
    cpu_upper = np.minimum(
        np.floor(np.array([quota[r["quota_group"], "on_demand"] / float(r["vcpus"]) for r in cpu])),
        np.minimum(np.floor(max(budgets) / cpu_price + 1e-9), 4096),
    )
    need = VERSIONS * RESNET50_CHECKPOINT_GB
    cand = []  # (type, arch, n, cost, remote, m, real flops, linear flops)
    for r in gpu:
        name, vcpus = r["instance_type"], float(r["vcpus"])
        od, spot, f = float(r["ondemand_price"]), float(r["spot_price"]), flops[name]
        p = fits[name]
        speed = deepvm_speedup(np.arange(1, MAX_NODES + 1.0), *(float(p[k]) for k in "abc"))
        spot_n = int(min(quota[r["quota_group"], "spot"] // vcpus, MAX_NODES))
        od_n = int(min(quota[r["quota_group"], "on_demand"] // vcpus, MAX_NODES))
        n = np.arange(1, MAX_NODES + 1)
        if vcpus <= quota[r["quota_group"], "on_demand"]:
            for k in range(2, min(spot_n + 1, MAX_NODES) + 1):
                cand.append((name, SA, k, od + (k - 1) * spot, None, 0, f * speed[k - 1], f * k))
        for k in range(1, od_n + 1):
            cand.append((name, OD, k, k * od, None, 0, f * speed[k - 1], f * k))
        gpu_nsat = nsat(np.array([float(r["network_gbps"])]))[0]
        m = np.maximum.reduce(
            [
                np.ones((len(cpu), len(n))),
                np.ceil(n[None, :] / cpu_nsat[:, None] - 1e-9),
                np.ceil(n[None, :] / gpu_nsat - 1e-9) + 0 * cpu_nsat[:, None],
                np.ceil(need / cpu_usable - 1e-9)[:, None] + 0 * n[None, :],
            ]
        )
        remote_cost = np.where(m <= cpu_upper[:, None], m * cpu_price[:, None], np.inf)
        best_j = np.argmin(remote_cost, axis=0)
        for k in range(1, spot_n + 1):
            j = int(best_j[k - 1])
            cost = k * spot + remote_cost[j, k - 1]
            if math.isfinite(cost):
                cand.append(
                    (name, TIER, k, cost, cpu[j]["instance_type"], int(m[j, k - 1]),
                     f * speed[k - 1], f * k)
                )  # fmt: skip
    cost = np.array([c[3] for c in cand])
    arch = np.array([c[1] for c in cand])
    real, linear = np.array([c[6] for c in cand]), np.array([c[7] for c in cand])
    limits = np.array(budgets) * (1 + 1e-9) + 1e-12
    out: dict[str, object] = {}
    for policy, score, mask in (
        ("deepvm", real, np.ones(len(cand), bool)),
        ("deepvm_noscale", linear, np.ones(len(cand), bool)),
        ("on_demand", real, arch == OD),
    ):
        idx = np.flatnonzero(mask)
        order = idx[np.lexsort((idx, cost[idx]))]
        running = np.maximum.accumulate(score[order])
        fit = np.searchsorted(cost[order], limits, side="right")
        for budget, count in zip(budgets, fit, strict=True):
            if count == 0:
                out[f"{budget}|{policy}"] = None
                continue
            best = running[count - 1]
            k = order[np.searchsorted(running, best - RTOL * abs(best))]
            out[f"{budget}|{policy}"] = list(cand[k][:6])
    for policy in ("cost_first", "performance_first"):
        for budget in budgets:
            best_key, pick = None, None
            for r in gpu:
                od, spot, vcpus = (
                    float(r["ondemand_price"]),
                    float(r["spot_price"]),
                    float(r["vcpus"]),
                )
                if vcpus > quota[r["quota_group"], "on_demand"]:
                    continue
                limit = int(min(quota[r["quota_group"], "spot"] // vcpus + 1, MAX_NODES))
                n = min(limit, math.floor((budget - od) / spot + 1e-9) + 1)
                if n < 2:
                    continue
                f, c = flops[r["instance_type"]], od + (n - 1) * spot
                key = (n, f, -c) if policy == "cost_first" else (f, n, -c)
                if best_key is None or key > best_key:
                    best_key, pick = key, [r["instance_type"], SA, n, c, None, 0]
            out[f"{budget}|{policy}"] = pick
    return {"plan_s": time.perf_counter() - start, "results": out}


if __name__ == "__main__":
    budgets = [round(0 + k * 0.1, 10) for k in range(101)]
    print(json.dumps(main(Path(sys.argv[1]), budgets)))
