"""One job's candidates for the fleet plan (docs/ARCHITECTURE.md, "For the
fleet"): every cluster within the job's budget that the ``deepvm`` policy may
pick, Tiering with every remote type that can host it, less the clusters another
one dominates (no worse objective, no dearer, no more vCPUs in any quota).
Pruning only the dominated keeps the fleet plan exact: a dominated cluster can be
swapped for its dominator in any plan without breaking a constraint or losing
value."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import scipy.sparse as sp

from deepvm.base.config import Objective, Policy
from deepvm.catalog.quotas import QuotaKey
from deepvm.planner import architectures as arch
from deepvm.planner._constraints import remote_nodes_needed, usage_matrix
from deepvm.planner._enumeration import budget_limit, remote_upper_bounds
from deepvm.planner.candidates import TIERING, Config
from deepvm.planner.fleet.types import RegisteredJob
from deepvm.planner.offers import REMOTE_MEMORY_FRACTION, FloatArray

if TYPE_CHECKING:
    from deepvm.planner._policies import Planner

__all__ = [
    "ConfigRows",
    "JobOptions",
    "JobState",
    "PlannerRows",
    "job_options",
    "planner_rows",
    "undominated",
]


class ConfigRows(Sequence[Config]):
    """Clusters as arrays, each one's Config built when asked for: the distinct mix
    of 1,000 jobs has 1.2 million options, few of them ever looked at one by one
    (building every Config took 4.9 s of its plan)."""

    def __init__(
        self,
        architecture: np.ndarray,  # codes: positions in deepvm.planner.architectures.REGISTRY
        worker: np.ndarray,
        n_workers: np.ndarray,
        remote: np.ndarray,  # -1: none
        n_remote: np.ndarray,
    ) -> None:
        self.columns = tuple(
            np.asarray(c, dtype=np.int64)
            for c in (architecture, worker, n_workers, remote, n_remote)
        )

    def __len__(self) -> int:
        return len(self.columns[0])

    @overload
    def __getitem__(self, k: int) -> Config: ...

    @overload
    def __getitem__(self, k: slice) -> list[Config]: ...

    def __getitem__(self, k: int | slice) -> Config | list[Config]:
        if isinstance(k, slice):
            return [self[i] for i in range(len(self))[k]]
        a, worker, n, remote, m = (int(c[k]) for c in self.columns)
        name = arch.REGISTRY[a].name
        return Config(name, worker, n) if remote < 0 else Config(name, worker, n, remote, m)

    def take(self, rows: np.ndarray) -> ConfigRows:
        return ConfigRows(*(c[rows] for c in self.columns))

    def plus(self, config: Config) -> ConfigRows:
        """These and ``config`` last."""
        remote = -1 if config.remote is None else config.remote
        row = (arch.code(config.architecture), config.worker, config.n_workers, remote,
               config.n_remote)  # fmt: skip
        out = ConfigRows(*(np.append(c, v) for c, v in zip(self.columns, row, strict=True)))
        if out[-1] != config:  # a name the registry spells otherwise, say
            raise AssertionError(f"{config} does not round-trip through ConfigRows")
        return out


@dataclass(frozen=True)
class JobOptions:
    """One job's undominated clusters within its budget: per row its cluster,
    score (higher is better), hourly cost and vCPUs per quota key. ``usage`` is
    sparse: a cluster lies in one region, so it uses a few of the keys of every
    region (1,000 jobs of the distinct mix: 1.2 million rows, 2.5 % of 98 keys
    non-zero; dense, 938 MB of the plan's peak memory)."""

    configs: ConfigRows
    score: FloatArray
    cost: FloatArray
    usage: Any  # scipy.sparse csr, rows x len(keys)
    keys: list[QuotaKey]
    considered: int  # rows before pruning

    def __len__(self) -> int:
        return len(self.configs)

    def take(self, rows: np.ndarray) -> JobOptions:
        return JobOptions(
            self.configs.take(rows),
            self.score[rows],
            self.cost[rows],
            self.usage[rows],
            self.keys,
            self.considered,
        )


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

    @functools.cached_property
    def frontier(self) -> np.ndarray:
        """The rows (ascending) no other row dominates on score, cost and quota use.
        A row's dominator costs no more than it, so within any budget the undominated
        rows are these less the ones over it: one comparison for every budget of a
        spec (benchmarks/fleet.py: jobs of one spec with several budgets)."""
        return undominated(np.column_stack([-self.score, self.cost, self.usage]))


def planner_rows(planner: Planner) -> PlannerRows:
    """Every cluster the planner's ``deepvm`` policy may pick within its budget cap."""
    offers, c = planner.offers, planner.candidates
    scores, allowed = planner.policy_scores(Policy.DEEPVM)
    live = np.flatnonzero(allowed & np.isfinite(scores) & np.isfinite(planner.least_cost))
    worker_cost = np.nan_to_num(c.cost(offers), nan=np.inf)
    tier = c.architecture[live] == arch.code(TIERING)
    plain = live[~tier]
    cand, remote, count, cost = (
        [plain],
        [np.full(len(plain), -1)],
        [np.zeros(len(plain))],
        [worker_cost[plain]],
    )
    tiered = live[tier]
    if tiered.size and len(offers.cpu_types):
        k, j, m, total = _remote_options(planner, tiered, worker_cost, math.inf)
        cand.append(k)
        remote.append(j)
        count.append(m)
        cost.append(total)
    k_all = np.concatenate(cand).astype(np.int64)
    j_all = np.concatenate(remote).astype(np.int64)
    m_all = np.concatenate(count).astype(np.int64)
    cost_all = np.concatenate(cost)
    if planner.objective == Objective.COST:  # minus expected total cost: makespan x hourly cost
        makespan = -scores[k_all] / planner.least_cost[k_all]
        score_all = -makespan * cost_all
    else:
        score_all = scores[k_all]
    usage, keys = usage_matrix(
        offers, c.architecture[k_all], c.worker[k_all], c.n[k_all], j_all, m_all
    )
    return PlannerRows(k_all, j_all, m_all, cost_all, score_all, usage, keys)


def job_options(
    planner: Planner, budget: float, every: PlannerRows | None = None, *, prune: bool = True
) -> JobOptions:
    """Every cluster the ``deepvm`` policy may pick within ``budget``, Tiering with
    each remote type that can host it, less the dominated ones. ``every``: the
    planner's rows (planner_rows), when jobs of one spec share them."""
    every = every if every is not None else planner_rows(planner)
    limit = float(budget_limit(budget))
    within = np.flatnonzero(every.cost <= limit)
    # A running job's candidates are valued net of moving (planner.fleet.running): a cluster
    # dominated on its score may be worth more than its dominator after the move.
    kept = every.frontier[every.cost[every.frontier] <= limit] if prune else within
    c = planner.candidates
    k = every.candidate[kept]
    configs = ConfigRows(
        c.architecture[k], c.worker[k], c.n[k], every.remote[kept], every.count[kept]
    )
    return JobOptions(
        configs,
        every.score[kept],
        every.cost[kept],
        sp.csr_matrix(every.usage[kept]),
        every.keys,
        len(within),
    )


def _remote_options(
    planner: Planner, tiered: np.ndarray, worker_cost: FloatArray, limit: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, FloatArray]:
    """Per Tiering candidate, every remote type of its region that can host it
    within the budget (its least node count), less those another type of the same
    quota group beats on both cost and vCPUs."""
    offers, c, job = planner.offers, planner.candidates, planner.job
    i, n = c.worker[tiered], c.n[tiered].astype(float)
    upper = remote_upper_bounds(offers, limit)
    cpu_nsat = offers.saturation(offers.cpu_gbps).astype(float)
    gpu_nsat0 = offers.saturation(offers.gpu_gbps).astype(float)
    gpu_nsat = gpu_nsat0[i]
    usable = REMOTE_MEMORY_FRACTION * offers.cpu_memory_gb
    m = remote_nodes_needed(
        n[:, None], gpu_nsat[:, None], cpu_nsat[None, :], usable[None, :],
        job.remote_memory_needed_gb,
    )  # fmt: skip
    regions = {r: k for k, r in enumerate(sorted({*offers.gpu_region, *offers.cpu_region}))}
    gpu_region = np.array([regions.get(offers.gpu_region_of(w), -1) for w in range(len(gpu_nsat0))])
    cpu_region = np.array([regions.get(offers.cpu_region_of(j), -1) for j in range(len(usable))])
    total = worker_cost[tiered][:, None] + m * offers.cpu_ondemand[None, :]
    ok = (gpu_region[i][:, None] == cpu_region[None, :]) & (m <= upper[None, :]) & (total <= limit)
    # Whether another remote type of the same quota group and region is no dearer and
    # needs no more vCPUs (and is better in one, or comes first) depends on the row
    # only through (n, N_sat(b_i)): decided once per distinct pair.
    pairs, row_pair = np.unique(np.column_stack([n, gpu_nsat]), axis=0, return_inverse=True)
    mk = remote_nodes_needed(
        pairs[:, :1], pairs[:, 1:], cpu_nsat[None, :], usable[None, :],
        job.remote_memory_needed_gb,
    )  # fmt: skip
    cost_k, vcpus_k = mk * offers.cpu_ondemand[None, :], mk * offers.cpu_vcpus[None, :]
    # Rivals count against the same quotas (keys), all in vCPUs for CPU types.
    ids: dict[tuple[object, ...], int] = {}  # an id per distinct set of keys (no hash clash)
    groups = np.array(
        [
            ids.setdefault(tuple(u.key for u in offers.cpu_quota_uses(j)), len(ids))
            for j in range(len(usable))
        ]
    )
    order = np.arange(len(usable))
    rivals = (groups[:, None] == groups[None, :]) & (cpu_region[:, None] == cpu_region[None, :])
    rivals &= order[:, None] != order[None, :]  # [other, j]
    no_worse = (mk <= upper[None, :])[:, :, None] & (cost_k[:, :, None] <= cost_k[:, None, :])
    no_worse &= vcpus_k[:, :, None] <= vcpus_k[:, None, :]
    better = (cost_k[:, :, None] < cost_k[:, None, :]) | (vcpus_k[:, :, None] < vcpus_k[:, None, :])
    better |= (order[:, None] < order[None, :])[None, :, :]
    beaten = (no_worse & better & rivals[None, :, :]).any(axis=1)[row_pair.ravel()]
    rows, cols = np.nonzero(ok & ~beaten)
    return tiered[rows], cols, m[rows, cols].astype(np.int64), total[rows, cols]


def undominated(
    points: FloatArray, chunk: int = 256, margin: float = 0.0, *, cost_breaks_ties: bool = False
) -> np.ndarray:
    """Indices (ascending) of the rows no other row dominates, every column to be
    minimised; of identical rows the first is kept. With ``margin``, a row dominates
    only where it is better by more than ``margin`` in column 0 and no worse in the
    others. ``cost_breaks_ties``: column 1 is a cost that counts only between rows
    within ``margin`` in column 0: a row also dominates where it is better by more
    than ``margin`` in column 0 and no worse in columns 2 on, whatever it costs
    (one pass for what a pass without the margin and then one with it, leaving the
    cost out, would keep: the fleet's pruning, deepvm.planner.fleet.plan).

    In a column whose values are all >= 0 (quota use), a row can only be dominated
    by one that is zero wherever it is zero. Such columns fall into groups that no
    row spans (a cluster's quota keys all lie in its region), and rows are compared
    only with the rows of their own group (and those using none), on that group's
    columns: a fraction of one comparison of every pair on every column
    (benchmarks/fleet.py)."""
    if cost_breaks_ties and not margin > 0:
        raise ValueError("cost_breaks_ties needs a margin > 0: without one cost never counts")
    if len(points) == 0:
        return np.zeros(0, dtype=np.int64)
    sparse = np.flatnonzero((points >= 0).all(axis=0) & (points == 0).any(axis=0))
    # Column 0 carries the margin (and column 1 the cost that breaks ties): always compared.
    sparse = sparse[sparse > (1 if cost_breaks_ties else 0)]
    if sparse.size == 0:
        return _pareto(points, chunk, margin, cost_breaks_ties)
    dense = np.setdiff1d(np.arange(points.shape[1]), sparse)
    support = points[:, sparse] > 0
    part = _column_groups(support)
    # Each row's group: that of its non-zero columns (all one group); -1 for none.
    row_part = np.where(support.any(axis=1), part[support.argmax(axis=1)], -1)
    empty = np.flatnonzero(row_part < 0)
    kept = (
        [empty[_pareto(points[np.ix_(empty, dense)], chunk, margin, cost_breaks_ties)]]
        if empty.size
        else []
    )
    for g in np.unique(row_part[row_part >= 0]):
        rows = np.flatnonzero((row_part == g) | (row_part < 0))  # ascending: ties keep the first
        columns = np.concatenate([dense, sparse[part == g]])
        survivors = rows[_pareto(points[np.ix_(rows, columns)], chunk, margin, cost_breaks_ties)]
        kept.append(survivors[row_part[survivors] == g])
    return np.sort(np.concatenate(kept))


def _column_groups(support: np.ndarray) -> np.ndarray:
    """Per column, a label shared by the columns that some row joins (connected
    components of the columns, a row linking its non-zero ones): a union-find over
    the few distinct (first column, column) pairs."""
    rows, cols = np.nonzero(support)
    first = support.argmax(axis=1)
    parent = list(range(support.shape[1]))

    def root(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    width = support.shape[1]
    for pair in np.unique(first[rows] * width + cols):
        parent[root(int(pair) // width)] = root(int(pair) % width)
    return np.array([root(c) for c in range(support.shape[1])], dtype=np.int64)


@functools.lru_cache(maxsize=64)
def _earlier(size: int) -> np.ndarray:
    """earlier[a, b]: a comes before b (read only: shared between calls)."""
    out = np.triu(np.ones((size, size), dtype=bool), k=1)
    out.flags.writeable = False
    return out


def _pareto(
    points: FloatArray, chunk: int, margin: float, cost_breaks_ties: bool = False
) -> np.ndarray:
    """undominated's comparison of every pair: rows are taken best first, so a
    dominator always comes before what it dominates, and each block is checked
    against the kept rows and itself."""
    if len(points) == 0:
        return np.zeros(0, dtype=np.int64)
    rest = points[:, 2:].sum(axis=1) if points.shape[1] > 2 else np.zeros(len(points))
    second = points[:, 1] if points.shape[1] > 1 else np.zeros(len(points))
    order = np.lexsort((np.arange(len(points)), rest, second, points[:, 0]))
    ranked = points[order]
    kept: list[np.ndarray] = []
    frontier = np.zeros((0, points.shape[1]))
    earlier_all = _earlier(min(chunk, len(points)))  # a before b

    def beats(a: FloatArray, b: FloatArray) -> np.ndarray:
        """beats[i, k]: row a[i] dominates row b[k]."""
        out = a[:, None, 0] <= b[None, :, 0] - margin
        if cost_breaks_ties:  # or no worse in column 0 and no dearer
            out |= (a[:, None, 0] <= b[None, :, 0]) & (a[:, None, 1] <= b[None, :, 1])
        for col in range(2 if cost_breaks_ties else 1, a.shape[1]):  # no 3-d temporary
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


@dataclass
class JobState:
    """Working state of one job while the fleet is planned."""

    job: RegisteredJob
    planner: Planner | None = None
    solo: Config | None = None
    solo_score: float = math.nan
    options: JobOptions | None = None
    note: str | None = None
    # A running job (deepvm.planner.fleet.running): its cluster tonight, each
    # candidate's value net of moving to it, and the program's weights.
    current: Config | None = None
    net_values: dict[Config, float] | None = None
    net_weights: dict[Config, float] | None = None

    def weights(self, value: FloatArray) -> FloatArray:
        """The program's weight of each candidate: priority x its value (``value``,
        the job's objective over its solo optimum), or net of moving (running)."""
        assert self.options is not None
        if self.net_weights is None:
            return self.job.priority * value
        return self.job.priority * np.array([self.net_weights[c] for c in self.options.configs])
