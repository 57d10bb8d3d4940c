"""The configurations the architectures allow (deepvm.planner.architectures)
and their costs; the limits they must keep are deepvm.planner._constraints.

A *candidate* is a worker choice (architecture, GPU type i, node count n); a
Tiering cluster adds the remote CPU type j and count m (deepvm.planner._enumeration).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deepvm.base.config import DEFAULT_CHECKPOINT_VERSIONS, DEFAULT_MAX_NODES
from deepvm.model.cluster import Cluster
from deepvm.planner import architectures as arch
from deepvm.planner.offers import FloatArray, IntArray, Offers

__all__ = [
    "ARCHITECTURES",
    "BUDGET_RTOL",
    "DESIGN_ARCHITECTURES",
    "OBJECT_STORE",
    "ON_DEMAND",
    "SINGLE_ANCHOR",
    "TIERING",
    "Candidates",
    "CheckpointNeeds",
    "Config",
    "build_candidates",
    "cluster_of",
    "cluster_words",
    "hourly_cost",
    "node_limits",
    "throughput",
    "within_budget",
    "worker_cost",
]

# The architectures' names, as configurations, Parquet and JSON spell them.
SINGLE_ANCHOR = arch.SINGLE_ANCHOR.name
TIERING = arch.TIERING.name
ON_DEMAND = arch.ON_DEMAND.name
OBJECT_STORE = arch.OBJECT_STORE.name
ARCHITECTURES = tuple(a.name for a in arch.REGISTRY)
# What the objectives that do not price preemption plan over.
DESIGN_ARCHITECTURES = tuple(a.name for a in arch.REGISTRY if not a.risk_only)


# Relative slack when comparing a cost with the budget: prices carry 4-6 decimals.
BUDGET_RTOL = 1e-9


@dataclass(frozen=True)
class CheckpointNeeds:
    """What a job's checkpoints need of a cluster: their size C (GB) and the number
    of versions k the remote tier holds (the planner's part of deepvm.base.config.JobSpec)."""

    workload: str
    checkpoint_gb: float
    checkpoint_versions: int = DEFAULT_CHECKPOINT_VERSIONS

    @property
    def remote_memory_needed_gb(self) -> float:
        return self.checkpoint_versions * self.checkpoint_gb


@dataclass(frozen=True)
class Config:
    """One cluster: ``n_workers`` GPU nodes of ``worker`` (an index into the
    offers' GPU types) in ``architecture``, plus ``n_remote`` CPU nodes of
    ``remote`` (an index into its CPU types) for Tiering."""

    architecture: str
    worker: int
    n_workers: int
    remote: int | None = None
    n_remote: int = 0

    @property
    def n_spot(self) -> int:
        return int(arch.architecture(self.architecture).n_spot(self.n_workers))

    @property
    def n_on_demand(self) -> int:
        return self.n_workers - self.n_spot

    def key(self) -> tuple[str, int, int]:
        """Configurations are distinct when their worker side differs; the remote
        side of a Tiering cluster is always the cheapest that works."""
        return (self.architecture, self.worker, self.n_workers)


def hourly_cost(offers: Offers, config: Config) -> float:
    i, n = config.worker, config.n_workers
    workers = arch.architecture(config.architecture).worker_cost(
        offers.gpu_spot[i], offers.gpu_ondemand[i], n, offers.object_store_usd_per_hour
    )
    remote = 0.0 if config.remote is None else config.n_remote * offers.cpu_ondemand[config.remote]
    return float(workers + remote)


def cluster_of(offers: Offers, config: Config) -> Cluster:
    """A configuration as the named cluster every answer carries: the one place its
    fields are filled (the spot nodes' zone only where some node is spot)."""
    i = config.worker
    return Cluster(
        region=offers.gpu_region_of(i),
        zone=offers.gpu_spot_zone[i] if config.n_spot and offers.gpu_spot_zone else None,
        architecture=config.architecture,
        worker_type=offers.gpu_types[i],
        n_workers=config.n_workers,
        n_spot=config.n_spot,
        n_on_demand=config.n_on_demand,
        remote_type=None if config.remote is None else offers.cpu_types[config.remote],
        n_remote=config.n_remote,
        hourly_cost=round(hourly_cost(offers, config), 10),
        throughput_flops=throughput(offers, config),
        cloud=offers.gpu_cloud_of(i),
    )


def cluster_words(offers: Offers, config: Config) -> str:
    """A configuration for messages, in deepvm.model.cluster.Cluster's words, e.g.
    ``tiering: 17 x g4dn.xlarge spot + 1 x c5.xlarge`` (its region where the
    offers span several)."""
    cluster = cluster_of(offers, config)
    return cluster.words(architecture=True, region=len(offers.regions) > 1)


def throughput(offers: Offers, config: Config) -> float:
    """F_i * s_i(n) with the offers' (selected) speedup model."""
    i = config.worker
    return float(offers.gpu_flops[i] * offers.speedups(i, config.n_workers))


def within_budget(cost: float, budget: float) -> bool:
    return cost <= budget * (1 + BUDGET_RTOL) + 1e-12


@dataclass(frozen=True)
class Candidates:
    """The worker side of every configuration the quotas and node cap allow."""

    architecture: np.ndarray  # int8: index into ARCHITECTURES
    worker: np.ndarray  # int32
    n: np.ndarray  # int32
    speedup: FloatArray  # s_i(n) with the offers' models

    def __len__(self) -> int:
        return len(self.n)

    def arch_mask(self, *architectures: str) -> np.ndarray:
        codes = [arch.code(a) for a in architectures]
        return np.isin(self.architecture, codes)

    def cost(self, offers: Offers) -> FloatArray:
        """Hourly cost of the worker side at the offers' current prices."""
        return worker_cost(offers, self.architecture, self.worker, self.n)


def worker_cost(
    offers: Offers, architecture: np.ndarray, worker: np.ndarray, n: np.ndarray
) -> FloatArray:
    """Hourly cost of worker sides (arrays of architecture codes, GPU types, counts;
    one code broadcasts to all), filled per architecture from its node roles."""
    codes = np.broadcast_to(architecture, n.shape)
    cost = np.full(n.shape, np.nan)
    for code, a in enumerate(arch.REGISTRY):
        at = np.flatnonzero(codes == code)
        if at.size:
            i = worker[at]
            cost[at] = a.worker_cost(
                offers.gpu_spot[i], offers.gpu_ondemand[i], n[at], offers.object_store_usd_per_hour
            )
    return cost


def node_limits(offers: Offers, max_nodes: int = DEFAULT_MAX_NODES) -> dict[str, IntArray]:
    """Largest n per GPU type and architecture that the quotas and the cap allow."""
    spot_nodes = offers.most_nodes("spot")
    od_nodes = offers.most_nodes("on_demand")
    has_spot = np.isfinite(offers.gpu_spot)
    return {a.name: a.max_workers(spot_nodes, od_nodes, has_spot, max_nodes) for a in arch.REGISTRY}


def build_candidates(
    offers: Offers,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    budget_cap: float | None = None,
    architectures: tuple[str, ...] = DESIGN_ARCHITECTURES,
) -> Candidates:
    """Every (architecture, i, n) within quotas and ``max_nodes``; with
    ``budget_cap``, only those whose worker side alone costs at most that much.
    Built without a loop over instance types (catalogs of thousands of types)."""
    limits = node_limits(offers, max_nodes)
    table = offers.speedup_table(max_nodes)
    parts = []
    for code, a in enumerate(arch.REGISTRY):
        if a.name not in architectures:
            continue
        low = a.min_workers
        counts = np.maximum(limits[a.name] - low + 1, 0)
        worker = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        starts = np.cumsum(counts) - counts
        n = (np.arange(int(counts.sum())) - np.repeat(starts, counts) + low).astype(np.int32)
        codes = np.full(len(n), code, dtype=np.int8)
        if budget_cap is not None:
            # one architecture per part: its code broadcasts
            keep = worker_cost(offers, codes[:1], worker, n) <= budget_cap * (1 + BUDGET_RTOL)
            codes, worker, n = codes[keep], worker[keep], n[keep]
        parts.append((codes, worker, n))
    if not parts:
        empty = np.zeros(0, dtype=np.int32)
        return Candidates(empty.astype(np.int8), empty, empty, np.zeros(0))
    codes = np.concatenate([p[0] for p in parts])
    worker = np.concatenate([p[1] for p in parts])
    n = np.concatenate([p[2] for p in parts])
    return Candidates(codes, worker, n, table[worker, n])
