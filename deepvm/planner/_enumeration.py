"""The single-job planner's exact method: every candidate evaluated at once with
numpy (docs/ARCHITECTURE.md, "Planning").

A candidate is a worker side (architecture, GPU type i, n). Once it is fixed,
Tiering's remote constraints involve only the remote type j and count m, so the
cheapest remote side has a closed form per j,

    m_j = max(1, ceil(n / N_sat(b_j)), ceil(n / N_sat(b_i)), ceil(kC / (0.8 M_j)))

(deepvm.planner._constraints.remote_nodes_needed, the one copy of this formula),
feasible where m_j is within its quota; the cheapest j wins. Every candidate
thus has one least hourly cost, and the best cluster within a budget is the best
score among the candidates whose least cost fits, ties (scores within
SCORE_RTOL of the best) going to the cheaper: exact for the model by
construction, as exhaustive enumeration of every (i, n, j, m) would give.

A sweep answers every budget at once: with the candidates sorted by cost, the
best score within budget b is a running maximum up to b's position, and the
cheapest candidate tied with it is the first position where that running
maximum reaches the tie threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from deepvm.planner._constraints import remote_nodes_needed
from deepvm.planner.candidates import BUDGET_RTOL, CheckpointNeeds
from deepvm.planner.offers import REMOTE_MEMORY_FRACTION, FloatArray, IntArray, Offers

__all__ = [
    "NO_REMOTE_CAP",
    "SCORE_RTOL",
    "RemoteSides",
    "best_per_budget",
    "budget_limit",
    "remote_sides",
    "remote_upper_bounds",
    "top_candidates",
    "undominated_remotes",
]

# Scores this close (relative) count as equal; the cheaper cluster wins.
SCORE_RTOL = 1e-7
# Bound on a remote type's node count when neither quota nor budget bounds it.
NO_REMOTE_CAP = 4096


@dataclass(frozen=True)
class RemoteSides:
    """The cheapest remote side of a Tiering cluster of n workers of GPU type i.

    It depends on i only through N_sat(b_i), which takes few distinct values, so
    it is tabled per (saturation class, n): ``cost`` (inf: none feasible),
    ``remote`` (the CPU type, -1: none) and ``count`` (its nodes); ``klass``
    maps each GPU type to its row."""

    cost: FloatArray
    remote: IntArray
    count: IntArray
    klass: IntArray

    def cost_of(self, worker: np.ndarray, n: np.ndarray, tiering: np.ndarray) -> FloatArray:
        """Per candidate: its remote side's cost, 0 where it is not Tiering."""
        return np.where(tiering, self.cost[self.klass[worker], n], 0.0)

    def side(self, worker: int, n: int) -> tuple[int, int]:
        row = self.klass[worker]
        return int(self.remote[row, n]), int(self.count[row, n])


def remote_upper_bounds(offers: Offers, budget_cap: float | None) -> FloatArray:
    """The most nodes of each CPU type that its quota (and the budget cap) allow."""
    if not len(offers.cpu_types):
        return np.zeros(0)
    upper = np.array([offers.cpu_max_nodes(j) for j in range(len(offers.cpu_types))], dtype=float)
    if budget_cap is not None:
        upper = np.minimum(upper, np.floor(budget_cap / offers.cpu_ondemand + 1e-9))
    return np.minimum(upper, NO_REMOTE_CAP)


def undominated_remotes(
    nsat: FloatArray, usable_gb: FloatArray, upper: FloatArray, price: FloatArray
) -> list[int]:
    """Remote types not beaten by another that serves at least as many workers,
    holds at least as much, may run at least as many nodes and costs no more: only
    these can give a Tiering candidate its cheapest remote side."""
    better = np.stack([nsat, usable_gb, upper, -price], axis=1)
    keep = []
    for j in range(len(price)):
        at_least = np.all(better >= better[j], axis=1)
        strictly = np.any(better > better[j], axis=1)
        earlier_equal = at_least & ~strictly & (np.arange(len(price)) < j)
        if not np.any(at_least & strictly) and not earlier_equal.any():
            keep.append(j)
    return keep


def remote_sides(
    offers: Offers, job: CheckpointNeeds, max_nodes: int, upper: FloatArray
) -> RemoteSides:
    """The cheapest feasible remote side, in the workers' region, for every GPU type
    and n <= ``max_nodes``, in closed form over each region's undominated remote
    types (see the module docstring)."""
    gpu_nsat = offers.saturation(offers.gpu_gbps).astype(float)
    gpu_region = np.array(offers.gpu_region or [""] * len(offers.gpu_types), dtype=object)
    cpu_region = np.array(offers.cpu_region or [""] * len(offers.cpu_types), dtype=object)
    # One table row per (region, N_sat(b_i)) class of GPU types.
    classes = sorted(set(zip(gpu_region, gpu_nsat, strict=True)))
    row = {c: r for r, c in enumerate(classes)}
    klass = np.array([row[c] for c in zip(gpu_region, gpu_nsat, strict=True)], dtype=np.int64)
    shape = (len(classes), max_nodes + 1)
    best = np.full(shape, np.inf)
    best_j = np.full(shape, -1, dtype=np.int64)
    best_m = np.zeros(shape, dtype=np.int64)
    n = np.arange(max_nodes + 1, dtype=float)[None, :]
    cpu_nsat = offers.saturation(offers.cpu_gbps).astype(float)
    usable = REMOTE_MEMORY_FRACTION * offers.cpu_memory_gb
    need = job.remote_memory_needed_gb
    with np.errstate(divide="ignore", invalid="ignore"):
        for region in sorted(set(gpu_region)):
            local = np.flatnonzero(cpu_region == region)
            if not local.size:  # no CPU types here (Azure's regions): no remote side
                continue
            rows = np.array([r for r, (c_region, _) in enumerate(classes) if c_region == region])
            worker_nsat = np.array([classes[r][1] for r in rows])[:, None]
            for j in local[
                undominated_remotes(
                    cpu_nsat[local], usable[local], upper[local], offers.cpu_ondemand[local]
                )
            ]:
                m = remote_nodes_needed(n, worker_nsat, cpu_nsat[j], usable[j], need)
                here = np.where(m <= upper[j], m * offers.cpu_ondemand[j], np.inf)
                better = here < best[rows]
                best[rows] = np.where(better, here, best[rows])
                best_j[rows] = np.where(better, j, best_j[rows])
                best_m[rows] = np.where(better, m, best_m[rows]).astype(np.int64)
    return RemoteSides(best, best_j, best_m, klass)


def _tie_threshold(best: FloatArray | float) -> FloatArray:
    best = np.asarray(best, dtype=float)
    return best - SCORE_RTOL * np.maximum(np.abs(best), 1e-300)


def budget_limit(budget: float | FloatArray) -> FloatArray:
    """Costs up to this fit the budget (prices carry 4-6 decimals)."""
    return np.asarray(budget, dtype=float) * (1 + BUDGET_RTOL) + 1e-12


def top_candidates(
    scores: FloatArray, costs: FloatArray, allowed: np.ndarray, budget: float, top: int
) -> list[int]:
    """The ``top`` best candidates within ``budget``, best first: the highest
    score, and among scores within SCORE_RTOL of it the cheapest; then the same
    again without it."""
    live = allowed & (costs <= budget_limit(budget))
    s = np.where(live, scores, -np.inf)  # NaN and the excluded never win
    picked: list[int] = []
    while len(picked) < top and np.isfinite(best := float(np.nanmax(s, initial=-np.inf))):
        tied = np.flatnonzero(s >= _tie_threshold(best))
        cheapest = int(tied[np.argmin(costs[tied])])
        picked.append(cheapest)
        s[cheapest] = -np.inf  # taken: not considered again
    return picked


def best_per_budget(
    scores: FloatArray, costs: FloatArray, allowed: np.ndarray, budgets: Sequence[float]
) -> list[int | None]:
    """The best candidate at every budget (None where nothing fits), all at once:
    the same answer as ``top_candidates(..., top=1)`` per budget."""
    live = np.flatnonzero(allowed & np.isfinite(scores) & np.isfinite(costs))
    if live.size == 0:
        return [None] * len(budgets)
    order = live[np.lexsort((live, costs[live]))]  # by cost, then index
    sorted_costs = costs[order]
    running_best = np.maximum.accumulate(scores[order])
    fits = np.searchsorted(sorted_costs, budget_limit(np.asarray(budgets)), side="right")
    # running_best is non-decreasing: the first position reaching the tie threshold
    # of the best score within a budget is the cheapest candidate tied with it.
    best = running_best[np.maximum(fits - 1, 0)]
    first = np.searchsorted(running_best, _tie_threshold(best))
    return [None if count == 0 else int(order[k]) for count, k in zip(fits, first, strict=True)]
