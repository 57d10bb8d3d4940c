"""One job's candidates for the fleet plan (docs/ARCHITECTURE.md, "For the
fleet"): every cluster within the job's budget that the ``deepvm`` policy may
pick, Tiering with every remote type that can host it, less the clusters another
one dominates (no worse objective, no dearer, no more vCPUs in any quota).
Pruning only the dominated keeps the fleet plan exact: a dominated cluster can be
swapped for its dominator in any plan without breaking a constraint or losing
value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepvm.planner import architectures as arch
from deepvm.planner.candidates import TIERING, Config
from deepvm.planner.enumeration import budget_limit, remote_upper_bounds
from deepvm.planner.fleet import REMOTE_MEMORY_FRACTION, Fleet, FloatArray
from deepvm.planner.policies import Planner

# (region, quota group, market): what one quota limit counts.
QuotaKey = tuple[str, str, str]


@dataclass(frozen=True)
class JobOptions:
    """One job's undominated clusters within its budget: per row its cluster,
    score (higher is better), hourly cost and vCPUs per quota key."""

    configs: list[Config]
    score: FloatArray
    cost: FloatArray
    usage: FloatArray  # rows x len(keys)
    keys: list[QuotaKey]
    considered: int  # rows before pruning

    def __len__(self) -> int:
        return len(self.configs)

    def take(self, rows: np.ndarray) -> JobOptions:
        return JobOptions(
            [self.configs[r] for r in rows],
            self.score[rows],
            self.cost[rows],
            self.usage[rows],
            self.keys,
            self.considered,
        )


def cluster_usage(fleet: Fleet, config: Config) -> dict[QuotaKey, float]:
    """vCPUs per quota key of one cluster, from its node roles (the check's own code)."""
    i, a = config.worker, arch.architecture(config.architecture)
    region = fleet.gpu_region_of(i)
    out: dict[QuotaKey, float] = {}

    def add(key: QuotaKey, vcpus: float) -> None:
        if vcpus > 0:
            out[key] = out.get(key, 0.0) + vcpus

    add((region, fleet.gpu_group[i], "spot"), config.n_spot * float(fleet.gpu_vcpus[i]))
    add((region, fleet.gpu_group[i], "on_demand"), config.n_on_demand * float(fleet.gpu_vcpus[i]))
    if a.remote_tier and config.remote is not None:
        j = config.remote
        key = (fleet.cpu_region_of(j), fleet.cpu_group[j], "on_demand")
        add(key, config.n_remote * float(fleet.cpu_vcpus[j]))
    return out


@dataclass(frozen=True)
class PlannerRows:
    """Every cluster of one planner within its budget cap (see job_options), as
    arrays: candidate, remote type (-1: none) and count, hourly cost, score, and
    vCPUs per quota key (``keys``, the usage matrix's columns)."""

    candidate: np.ndarray
    remote: np.ndarray
    count: np.ndarray
    cost: FloatArray
    score: FloatArray
    usage: FloatArray
    keys: list[QuotaKey]


def planner_rows(planner: Planner) -> PlannerRows:
    """Every cluster the planner's ``deepvm`` policy may pick within its budget cap."""
    fleet, c = planner.fleet, planner.candidates
    scores, allowed = planner.policy_scores("deepvm")
    live = np.flatnonzero(allowed & np.isfinite(scores) & np.isfinite(planner.least_cost))
    worker_cost = np.nan_to_num(c.cost(fleet), nan=np.inf)
    tier = c.architecture[live] == arch.code(TIERING)
    plain = live[~tier]
    cand, remote, count, cost = (
        [plain],
        [np.full(len(plain), -1)],
        [np.zeros(len(plain))],
        [worker_cost[plain]],
    )
    tiered = live[tier]
    if tiered.size and len(fleet.cpu_types):
        k, j, m, total = _remote_options(planner, tiered, worker_cost, math.inf)
        cand.append(k)
        remote.append(j)
        count.append(m)
        cost.append(total)
    k_all = np.concatenate(cand).astype(np.int64)
    j_all = np.concatenate(remote).astype(np.int64)
    m_all = np.concatenate(count).astype(np.int64)
    cost_all = np.concatenate(cost)
    if planner.objective == "cost":  # minus expected total cost: makespan x hourly cost
        makespan = -scores[k_all] / planner.least_cost[k_all]
        score_all = -makespan * cost_all
    else:
        score_all = scores[k_all]
    usage, keys = _usage_matrix(fleet, c, k_all, j_all, m_all)
    return PlannerRows(k_all, j_all, m_all, cost_all, score_all, usage, keys)


def _usage_matrix(
    fleet: Fleet, c: Any, k: np.ndarray, j: np.ndarray, m: np.ndarray
) -> tuple[FloatArray, list[QuotaKey]]:
    """vCPUs per quota key of every row, from the architectures' node roles."""
    worker, n, codes = c.worker[k], c.n[k].astype(float), c.architecture[k]
    spot = np.zeros(len(k))
    for code, a in enumerate(arch.REGISTRY):
        at = codes == code
        spot[at] = a.n_spot(n[at])
    vcpus = fleet.gpu_vcpus[worker]
    keys: dict[QuotaKey, int] = {}

    def key_ids(regions: Sequence[str], groups: Sequence[str], market: str) -> np.ndarray:
        return np.array(
            [
                keys.setdefault((r, g, market), len(keys))
                for r, g in zip(regions, groups, strict=True)
            ],
            dtype=np.int64,
        )

    gpu_regions = [fleet.gpu_region_of(i) for i in range(len(fleet.gpu_types))]
    cpu_regions = [fleet.cpu_region_of(i) for i in range(len(fleet.cpu_types))]
    spot_key = key_ids(gpu_regions, fleet.gpu_group, "spot")
    od_key = key_ids(gpu_regions, fleet.gpu_group, "on_demand")
    cpu_key = key_ids(cpu_regions, fleet.cpu_group, "on_demand")
    usage = np.zeros((len(k), len(keys)))
    rows = np.arange(len(k))
    np.add.at(usage, (rows, spot_key[worker]), spot * vcpus)
    np.add.at(usage, (rows, od_key[worker]), (n - spot) * vcpus)
    remote = np.flatnonzero(j >= 0)
    if remote.size:
        np.add.at(usage, (remote, cpu_key[j[remote]]), m[remote] * fleet.cpu_vcpus[j[remote]])
    used = np.flatnonzero(usage.any(axis=0))
    names = list(keys)
    return usage[:, used], [names[u] for u in used]


def job_options(planner: Planner, budget: float, every: PlannerRows | None = None) -> JobOptions:
    """Every cluster the ``deepvm`` policy may pick within ``budget``, Tiering with
    each remote type that can host it, less the dominated ones. ``every``: the
    planner's rows (planner_rows), when jobs of one spec share them."""
    every = every if every is not None else planner_rows(planner)
    within = np.flatnonzero(every.cost <= float(budget_limit(budget)))
    points = np.column_stack([-every.score[within], every.cost[within], every.usage[within]])
    kept = within[undominated(points)]
    c = planner.candidates
    configs = [
        Config(arch.REGISTRY[int(c.architecture[k])].name, int(c.worker[k]), int(c.n[k]))
        if j < 0
        else Config(TIERING, int(c.worker[k]), int(c.n[k]), int(j), int(m))
        for k, j, m in zip(
            every.candidate[kept], every.remote[kept], every.count[kept], strict=True
        )
    ]
    return JobOptions(
        configs,
        every.score[kept],
        every.cost[kept],
        every.usage[kept],
        every.keys,
        len(within),
    )


def _remote_options(
    planner: Planner, tiered: np.ndarray, worker_cost: FloatArray, limit: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, FloatArray]:
    """Per Tiering candidate, every remote type of its region that can host it
    within the budget (its least node count), less those another type of the same
    quota group beats on both cost and vCPUs."""
    fleet, c, job = planner.fleet, planner.candidates, planner.job
    i, n = c.worker[tiered], c.n[tiered].astype(float)
    upper = remote_upper_bounds(fleet, limit)
    cpu_nsat = fleet.saturation(fleet.cpu_gbps).astype(float)
    gpu_nsat = fleet.saturation(fleet.gpu_gbps).astype(float)[i]
    usable = REMOTE_MEMORY_FRACTION * fleet.cpu_memory_gb
    need = job.remote_memory_needed_gb
    with np.errstate(divide="ignore", invalid="ignore"):
        memory = np.where(need > 0, np.ceil(need / usable - 1e-9), 1.0)
        per_worker = np.ceil(n / gpu_nsat - 1e-9)[:, None]
        per_remote = np.ceil(n[:, None] / cpu_nsat[None, :] - 1e-9)
        m = np.maximum(np.maximum(per_worker, per_remote), np.maximum(memory, 1.0)[None, :])
    gpu_region = np.array([fleet.gpu_region_of(int(w)) for w in i], dtype=object)
    cpu_region = np.array([fleet.cpu_region_of(j) for j in range(len(usable))], dtype=object)
    total = worker_cost[tiered][:, None] + m * fleet.cpu_ondemand[None, :]
    ok = (gpu_region[:, None] == cpu_region[None, :]) & (m <= upper[None, :]) & (total <= limit)
    vcpus = m * fleet.cpu_vcpus[None, :]
    beaten = np.zeros_like(ok)
    groups = np.array(fleet.cpu_group, dtype=object)
    for j in range(len(usable)):
        for other in np.flatnonzero((groups == groups[j]) & (cpu_region == cpu_region[j])):
            if other == j:
                continue
            no_worse = (
                ok[:, other] & (total[:, other] <= total[:, j]) & (vcpus[:, other] <= vcpus[:, j])
            )
            better = (total[:, other] < total[:, j]) | (vcpus[:, other] < vcpus[:, j]) | (other < j)
            beaten[:, j] |= no_worse & better
    rows, cols = np.nonzero(ok & ~beaten)
    return tiered[rows], cols, m[rows, cols].astype(np.int64), total[rows, cols]


def undominated(points: FloatArray, chunk: int = 256, margin: float = 0.0) -> np.ndarray:
    """Indices (ascending) of the rows no other row dominates, every column to be
    minimised; of identical rows the first is kept. With ``margin``, a row dominates
    only where it is better by more than ``margin`` in column 0 and no worse in the
    others. Rows are taken best first, so a dominator always comes before what it
    dominates, and each block is checked against the kept rows and itself."""
    if len(points) == 0:
        return np.zeros(0, dtype=np.int64)
    rest = points[:, 2:].sum(axis=1) if points.shape[1] > 2 else np.zeros(len(points))
    second = points[:, 1] if points.shape[1] > 1 else np.zeros(len(points))
    order = np.lexsort((np.arange(len(points)), rest, second, points[:, 0]))
    ranked = points[order]
    kept: list[np.ndarray] = []
    frontier = np.zeros((0, points.shape[1]))
    earlier_all = np.triu(np.ones((chunk, chunk), dtype=bool), k=1)  # a before b

    def beats(a: FloatArray, b: FloatArray) -> np.ndarray:
        """beats[i, k]: row a[i] dominates row b[k]."""
        out = a[:, None, 0] <= b[None, :, 0] - margin
        for col in range(1, a.shape[1]):  # column by column: no 3-d temporary
            if not out.any():
                break
            out &= a[:, None, col] <= b[None, :, col]
        return out

    for start in range(0, len(ranked), chunk):
        block = ranked[start : start + chunk]
        beaten = beats(frontier, block).any(axis=0) if len(frontier) else np.zeros(len(block), bool)
        earlier = earlier_all[: len(block), : len(block)]
        beaten |= (beats(block, block) & earlier).any(axis=0)
        frontier = np.vstack([frontier, block[~beaten]])
        kept.append(order[start : start + chunk][~beaten])
    return np.sort(np.concatenate(kept))
