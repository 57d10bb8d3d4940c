"""Cluster architectures, the configurations they allow, and their exact checks
(DESIGN §4.3).

A *candidate* is a worker choice (architecture, GPU type i, node count n); the
MILP picks one candidate and, for Tiering, the remote CPU type j and count m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from deepvm.config import DEFAULT_CHECKPOINT_VERSIONS as DEFAULT_CHECKPOINT_VERSIONS
from deepvm.config import DEFAULT_MAX_NODES as DEFAULT_MAX_NODES
from deepvm.planner.fleet import REMOTE_MEMORY_FRACTION, Fleet, FloatArray, IntArray

SINGLE_ANCHOR = "single_anchor"
TIERING = "tiering"
ON_DEMAND = "on_demand"
# All spot, checkpoints in object storage: the DeepVM paper rejects it; it is
# planned only where preemption risk is priced (objectives goodput and cost).
OBJECT_STORE = "spot_object_store"
ARCHITECTURES = (SINGLE_ANCHOR, TIERING, ON_DEMAND, OBJECT_STORE)
# What the throughput objective plans over (DESIGN §4.3).
DESIGN_ARCHITECTURES = (SINGLE_ANCHOR, TIERING, ON_DEMAND)


# Relative slack when comparing a cost with the budget: prices carry 4-6 decimals.
BUDGET_RTOL = 1e-9


@dataclass(frozen=True)
class Job:
    """What is being trained: its checkpoint size C (GB) and the number of
    checkpoint versions k the remote tier holds."""

    workload: str
    checkpoint_gb: float
    checkpoint_versions: int = DEFAULT_CHECKPOINT_VERSIONS

    @property
    def remote_memory_needed_gb(self) -> float:
        return self.checkpoint_versions * self.checkpoint_gb


@dataclass(frozen=True)
class Config:
    """One cluster: ``n_workers`` GPU nodes of ``worker`` (an index into the
    fleet's GPU types) in ``architecture``, plus ``n_remote`` CPU nodes of
    ``remote`` (an index into its CPU types) for Tiering."""

    architecture: str
    worker: int
    n_workers: int
    remote: int | None = None
    n_remote: int = 0

    @property
    def n_spot(self) -> int:
        if self.architecture == SINGLE_ANCHOR:
            return self.n_workers - 1
        return self.n_workers if self.architecture in (TIERING, OBJECT_STORE) else 0

    @property
    def n_on_demand(self) -> int:
        return self.n_workers - self.n_spot

    def key(self) -> tuple[str, int, int]:
        """Configurations are distinct when their worker side differs; the remote
        side of a Tiering cluster is always the cheapest that works."""
        return (self.architecture, self.worker, self.n_workers)


def hourly_cost(fleet: Fleet, config: Config) -> float:
    i, n = config.worker, config.n_workers
    if config.architecture == SINGLE_ANCHOR:
        return float(fleet.gpu_ondemand[i] + (n - 1) * fleet.gpu_spot[i])
    if config.architecture == ON_DEMAND:
        return float(n * fleet.gpu_ondemand[i])
    if config.architecture == OBJECT_STORE:
        return float(n * fleet.gpu_spot[i] + fleet.object_store_usd_per_hour)
    assert config.remote is not None
    return float(n * fleet.gpu_spot[i] + config.n_remote * fleet.cpu_ondemand[config.remote])


def cluster_words(fleet: Fleet, config: Config) -> str:
    """A configuration for messages, e.g. ``17 x g4dn.xlarge (tiering + 1 x c5.xlarge)``."""
    words = f"{config.n_workers} x {fleet.gpu_types[config.worker]} ({config.architecture}"
    if config.remote is not None:
        words += f" + {config.n_remote} x {fleet.cpu_types[config.remote]}"
    return words + ")"


def throughput(fleet: Fleet, config: Config) -> float:
    """F_i * s_i(n) with the fleet's (selected) speedup model."""
    i = config.worker
    return float(fleet.gpu_flops[i] * fleet.speedups(i, config.n_workers))


def within_budget(cost: float, budget: float) -> bool:
    return cost <= budget * (1 + BUDGET_RTOL) + 1e-12


def violations(fleet: Fleet, job: Job, config: Config, budget: float) -> list[str]:
    """Every constraint of DESIGN §4.3 the configuration breaks (empty: feasible).
    Written directly from the model, independent of the MILP, to check its answers."""
    i, n, arch = config.worker, config.n_workers, config.architecture
    q = fleet.quotas
    group, vcpus = fleet.gpu_group[i], fleet.gpu_vcpus[i]
    broken: list[str] = []
    if arch not in ARCHITECTURES:
        return [f"unknown architecture {arch!r}"]
    if arch in (SINGLE_ANCHOR, TIERING, OBJECT_STORE) and not np.isfinite(fleet.gpu_spot[i]):
        return ["worker type has no spot price"]
    if arch == SINGLE_ANCHOR:
        if n < 2:
            broken.append("single anchor needs n >= 2")
        if (n - 1) * vcpus > q.limit(group, "spot"):
            broken.append("spot quota")
        if vcpus > q.limit(group, "on_demand"):
            broken.append("on-demand quota")
    elif arch == ON_DEMAND:
        if n < 1:
            broken.append("on-demand needs n >= 1")
        if n * vcpus > q.limit(group, "on_demand"):
            broken.append("on-demand quota")
    elif arch == OBJECT_STORE:
        if n < 1:
            broken.append("object-store cluster needs n >= 1")
        if n * vcpus > q.limit(group, "spot"):
            broken.append("spot quota")
    else:
        j, m = config.remote, config.n_remote
        if j is None or m < 1 or n < 1:
            return [*broken, "tiering needs n >= 1 workers and m >= 1 remote nodes"]
        beta = min(fleet.gpu_gbps[i], fleet.cpu_gbps[j])
        if n > int(fleet.saturation(beta)) * m:
            broken.append("network saturation")
        if m * REMOTE_MEMORY_FRACTION * fleet.cpu_memory_gb[j] < job.remote_memory_needed_gb:
            broken.append("checkpoint memory")
        if n * vcpus > q.limit(group, "spot"):
            broken.append("spot quota")
        if m * fleet.cpu_vcpus[j] > q.limit(fleet.cpu_group[j], "on_demand"):
            broken.append("remote on-demand quota")
    if not math.isfinite(hourly_cost(fleet, config)) or not within_budget(
        hourly_cost(fleet, config), budget
    ):
        broken.append("budget")
    return broken


@dataclass(frozen=True)
class Candidates:
    """The worker side of every configuration the quotas and node cap allow."""

    architecture: np.ndarray  # int8: index into ARCHITECTURES
    worker: np.ndarray  # int32
    n: np.ndarray  # int32
    speedup: FloatArray  # s_i(n) with the fleet's models

    def __len__(self) -> int:
        return len(self.n)

    def arch_mask(self, *architectures: str) -> np.ndarray:
        codes = [ARCHITECTURES.index(a) for a in architectures]
        return np.isin(self.architecture, codes)

    def cost(self, fleet: Fleet) -> FloatArray:
        """Hourly cost of the worker side at the fleet's current prices."""
        return worker_cost(fleet, self.architecture, self.worker, self.n)


def worker_cost(
    fleet: Fleet, architecture: np.ndarray, worker: np.ndarray, n: np.ndarray
) -> FloatArray:
    """Hourly cost of worker sides (arrays of architecture codes, GPU types, counts;
    one code broadcasts to all). Filled per architecture, in place: few temporaries
    on catalogs of millions of candidates."""
    code = np.broadcast_to(architecture, n.shape)
    cost = n * fleet.gpu_spot[worker]  # Tiering, spot_object_store: all spot
    for arch in (SINGLE_ANCHOR, ON_DEMAND, OBJECT_STORE):
        at = np.flatnonzero(code == ARCHITECTURES.index(arch))
        if not at.size:
            continue
        i, nodes = worker[at], n[at]
        if arch == SINGLE_ANCHOR:
            cost[at] = fleet.gpu_ondemand[i] + (nodes - 1) * fleet.gpu_spot[i]
        elif arch == ON_DEMAND:
            cost[at] = nodes * fleet.gpu_ondemand[i]
        else:
            cost[at] += fleet.object_store_usd_per_hour
    return cost


def node_limits(fleet: Fleet, max_nodes: int = DEFAULT_MAX_NODES) -> dict[str, IntArray]:
    """Largest n per GPU type and architecture that the quotas and the cap allow."""
    q = fleet.quotas
    spot_q = np.array([q.limit(g, "spot") for g in fleet.gpu_group])
    od_q = np.array([q.limit(g, "on_demand") for g in fleet.gpu_group])
    c = fleet.gpu_vcpus
    has_spot = np.isfinite(fleet.gpu_spot)
    with np.errstate(invalid="ignore"):
        spot_n = np.minimum(np.floor(spot_q / c), max_nodes)
        od_n = np.minimum(np.floor(od_q / c), max_nodes)
    anchor_ok = (c <= od_q) & has_spot
    return {
        SINGLE_ANCHOR: np.where(anchor_ok, np.minimum(spot_n + 1, max_nodes), 0).astype(np.int64),
        TIERING: np.where(has_spot, spot_n, 0).astype(np.int64),
        ON_DEMAND: od_n.astype(np.int64),
        OBJECT_STORE: np.where(has_spot, spot_n, 0).astype(np.int64),
    }


def build_candidates(
    fleet: Fleet,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    budget_cap: float | None = None,
    architectures: tuple[str, ...] = DESIGN_ARCHITECTURES,
) -> Candidates:
    """Every (architecture, i, n) within quotas and ``max_nodes``; with
    ``budget_cap``, only those whose worker side alone costs at most that much.
    Built without a loop over instance types (catalogs of thousands of types)."""
    limits = node_limits(fleet, max_nodes)
    table = fleet.speedup_table(max_nodes)
    parts = []
    for code, arch in enumerate(ARCHITECTURES):
        if arch not in architectures:
            continue
        low = 2 if arch == SINGLE_ANCHOR else 1
        counts = np.maximum(limits[arch] - low + 1, 0)
        worker = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        starts = np.cumsum(counts) - counts
        n = (np.arange(int(counts.sum())) - np.repeat(starts, counts) + low).astype(np.int32)
        codes = np.full(len(n), code, dtype=np.int8)
        if budget_cap is not None:
            # one architecture per part: its code broadcasts
            keep = worker_cost(fleet, codes[:1], worker, n) <= budget_cap * (1 + BUDGET_RTOL)
            codes, worker, n = codes[keep], worker[keep], n[keep]
        parts.append((codes, worker, n))
    if not parts:
        empty = np.zeros(0, dtype=np.int32)
        return Candidates(empty.astype(np.int8), empty, empty, np.zeros(0))
    codes = np.concatenate([p[0] for p in parts])
    worker = np.concatenate([p[1] for p in parts])
    n = np.concatenate([p[2] for p in parts])
    return Candidates(codes, worker, n, table[worker, n])
