"""The fleet's program, apart from jobs and clusters (docs/ARCHITECTURE.md, "For
the fleet"): arrays in, picks out. Columns are candidate clusters, each owned by
one job; rows are "at most one per job", every limited shared resource (quota
keys, in their units) and, optionally, the team budget:

    maximise   sum_k weight_k x_k
    subject to sum_{k of job j} x_k <= 1
               sum_k usage[q, k] x_k <= capacity[q]      (every limited key q)
               sum_k cost_k x_k <= team budget           (if there is one)

then, keeping that value (LEXICOGRAPHIC_RTOL relative), the least total cost.
A value solve that reaches its time limit returns its best plan so far, with
status ``limit_with_incumbent`` and the relaxation's bound on how much better a
plan could be (``bound``); a cost solve that does, the cheaper of its best plan
and the one it started from (the value is proven; the tie-break is not). There
is always a plan: where the relaxation itself does not finish in time (a slow or
busy machine), a greedy plan (each job's most valuable candidate that fits) with
the bound of each job's best alone; where the search stops before it holds a
plan, the plan rounded from the relaxation it started from.
The LP relaxation's duals drop, before each solve, the columns that cannot be in
a plan worth as much as one already known (``_competitive``); each solve starts
from a known plan. Solved by HiGHS (``deepvm.planner.highs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepvm.planner import highs
from deepvm.planner.highs import LIMIT_WITH_INCUMBENT, OPTIMAL
from deepvm.planner.offers import FloatArray

# The second solve keeps the first one's value to this (relative) tolerance.
LEXICOGRAPHIC_RTOL = 1e-9
# Where the first, restricted solve aims between a known plan's value and the
# relaxation's bound (0: the bound, 1: the known plan). Measured on
# benchmarks/fleet.py --heavy: see _Program's use in solve.
RESTRICTED_FRACTION = 0.3


@dataclass(frozen=True)
class ProgramResult:
    status: str
    picked: np.ndarray  # the chosen columns (empty unless optimal)
    objective: float
    variables: int  # binaries in the program after filtering
    rows: int
    bound: float = math.nan  # the relaxation's bound on the value of any plan


def solve(
    weight: FloatArray,
    cost: FloatArray,
    owner: np.ndarray,
    usage: Any,  # scipy.sparse, keys x columns
    capacity: FloatArray,  # per key; inf: no limit
    team_budget: float | None,
    time_limit_s: float,
) -> ProgramResult:
    """The plan of most total weight, and of least cost among those (see the module
    docstring); a status other than optimal picks nothing."""
    import scipy.sparse as sp

    size = len(weight)
    if size == 0:
        return ProgramResult(OPTIMAL, np.zeros(0, dtype=np.int64), 0.0, 0, 0)
    jobs = int(owner.max()) + 1
    limited = np.flatnonzero(np.isfinite(capacity))
    resources = usage[limited]
    bounds = capacity[limited]
    if team_budget is not None:
        resources = sp.vstack([resources, sp.csr_matrix(cost)]).tocsr()
        bounds = np.append(bounds, team_budget)
    one_each = sp.csr_matrix((np.ones(size), (owner, np.arange(size))), shape=(jobs, size))
    status, bound, reduced, greedy = _relaxation(
        weight, owner, one_each, resources, bounds, time_limit_s
    )
    if status != OPTIMAL:  # the relaxation did not finish (a slow or busy machine)
        return _fallback(weight, owner, resources, bounds, size)
    known = float(weight[greedy].sum())
    program = _Program(weight, cost, one_each, resources, bounds, time_limit_s)
    # First over the columns that can be in a plan worth `target`, between the
    # known plan and the bound: an optimum there worth at least `target` is the
    # optimum of all (every column left out is in plans worth less); else it
    # starts the solve over every column that can beat it. Worth it only where it
    # leaves out most of the columns, else that second solve repeats most of the work.
    target = bound - RESTRICTED_FRACTION * (bound - known)
    restricted = _competitive(bound, reduced, target)
    if len(restricted) > 0.5 * len(_competitive(bound, reduced, known)):
        target, restricted = known, _competitive(bound, reduced, known)
    status, first = program.solve(restricted, maximise=True, start=greedy)
    if status == OPTIMAL and first is not None and float(weight[first].sum()) < target:
        known = float(weight[first].sum())
        status, first = program.solve(
            _competitive(bound, reduced, known), maximise=True, start=first
        )
    kept = _competitive(bound, reduced, known)
    if first is None:  # stopped before the search held a plan: the one it started from
        value = float(weight[greedy].sum())
        rows = program.rows
        return ProgramResult(LIMIT_WITH_INCUMBENT, np.sort(greedy), value, len(kept), rows, bound)
    if status == LIMIT_WITH_INCUMBENT:  # not proven best: said so, with the bound
        value = float(weight[first].sum())
        return ProgramResult(status, np.sort(first), value, len(kept), program.rows, bound)
    best = float(weight[first].sum())
    floor = best - LEXICOGRAPHIC_RTOL * max(abs(best), 1.0)
    # The second solve ranges over plans worth at least `floor`: fewer columns compete.
    near = _competitive(bound, reduced, floor)
    start = _cheaper(weight, cost, owner, resources, bounds, first, near)
    status, second = program.solve(near, maximise=False, floor=floor, start=start)
    if second is None or (
        status == LIMIT_WITH_INCUMBENT and cost[second].sum() > cost[start].sum()
    ):
        second = start  # the value is proven; only the tie-break is not
    return ProgramResult(
        OPTIMAL, np.sort(second), float(weight[second].sum()), len(kept), program.rows, bound
    )


@dataclass(frozen=True)
class _Program:
    """The fleet's binary program over a subset of the candidates (its columns)."""

    weight: FloatArray
    cost: FloatArray
    one_each: Any  # jobs x candidates: at most one each
    resources: Any  # shared limits x candidates: quotas, then the team budget
    capacity: FloatArray
    time_limit_s: float

    @property
    def rows(self) -> int:
        return int(self.one_each.shape[0] + self.resources.shape[0])

    def solve(
        self,
        columns: np.ndarray,
        *,
        maximise: bool,
        floor: float | None = None,
        start: np.ndarray | None = None,
    ) -> tuple[str, np.ndarray | None]:
        """Maximise value, or (with ``floor`` on value) minimise cost, over ``columns``;
        the status and the chosen candidates. ``start``: candidates of a plan known
        to be feasible, where the search begins. HiGHS runs at its default tolerance
        (1e-6; tighter is several times slower here); an answer that, rounded to 0/1,
        breaks a row by more than float noise is solved again at 1e-9."""
        import scipy.sparse as sp

        w, c = self.weight[columns], self.cost[columns]
        jobs, shared = self.one_each[:, columns], self.resources[:, columns]
        # The cost solve gets only rows that can bind: a job with one column left
        # is held by the column's own 0/1 bound, and a limit that every column
        # together keeps cannot bind. Measured (benchmarks/fleet.py --heavy): 1,000
        # jobs' cost solve 6.6 s with them, 1.6 s without; the value solve is
        # faster with them (100 jobs: 0.10 s against 0.45 s), so it keeps them.
        open_jobs, tight = np.arange(jobs.shape[0]), np.arange(shared.shape[0])
        if floor is not None:
            open_jobs = np.flatnonzero(jobs.getnnz(axis=1) > 1)
            tight = np.flatnonzero(np.asarray(shared.sum(axis=1)).ravel() > self.capacity)
        blocks = [jobs[open_jobs], shared[tight]]
        upper = [np.ones(len(open_jobs)), self.capacity[tight]]
        if floor is not None:  # value >= floor, as -value <= -floor
            blocks.append(sp.csr_matrix(-w))
            upper.append(np.array([-floor]))
        matrix = sp.vstack(blocks).tocsr()
        bounds = np.concatenate(upper)
        initial = None
        if start is not None:
            initial = np.isin(columns, start).astype(float)
        for tolerance in (1e-6, 1e-9):
            out = highs.solve(
                w if maximise else c,
                matrix,
                bounds,
                maximise=maximise,
                integer=True,
                time_limit_s=self.time_limit_s,
                feasibility_tolerance=tolerance,
                start=initial,
                presolve=False,
            )
            if out.status not in (OPTIMAL, LIMIT_WITH_INCUMBENT) or not len(out.values):
                return out.status, None
            pick = np.round(out.values) > 0.5
            used = shared @ pick.astype(float)
            holds = (jobs @ pick.astype(float) <= 1).all() and (
                used <= self.capacity + 1e-9 * np.maximum(np.abs(self.capacity), 1.0)
            ).all()
            if floor is not None:
                holds = holds and float(w[pick].sum()) >= floor - 1e-12 * max(abs(floor), 1.0)
            if holds:
                return out.status, columns[pick]
        return out.status, None


def _fallback(
    weight: FloatArray, owner: np.ndarray, resources: Any, capacity: FloatArray, size: int
) -> ProgramResult:
    """Where the relaxation did not finish: a plan found without it (each job's most
    valuable candidate that still fits, then a local search), with the bound every
    plan has (each job's best alone), so a slow machine still gets a plan, checked
    like any other, and its gap."""
    plan = _greedy_plan(weight, owner, resources, capacity, np.zeros(size))
    best = np.full(int(owner.max()) + 1, 0.0)
    np.maximum.at(best, owner, np.maximum(weight, 0.0))
    value = float(weight[plan].sum())
    return ProgramResult(LIMIT_WITH_INCUMBENT, plan, value, size, 0, float(best.sum()))


def _cheaper(
    weight: FloatArray,
    cost: FloatArray,
    owner: np.ndarray,
    resources: Any,
    capacity: FloatArray,
    plan: np.ndarray,
    columns: np.ndarray,
) -> np.ndarray:
    """The plan with, job by job, its pick replaced by the cheapest of its columns
    worth no less that still fits: the same value at a cost no higher, where the
    second solve begins (its time depends much on where it starts)."""
    dense = resources[:, columns].toarray()
    at = {int(k): i for i, k in enumerate(columns)}
    left = capacity - (dense[:, [at[int(k)] for k in plan]].sum(axis=1) if len(plan) else 0.0)
    out = []
    for k in (int(k) for k in plan):
        mine = at[k]
        same = np.flatnonzero((owner[columns] == owner[k]) & (weight[columns] >= weight[k]))
        room = left + dense[:, mine]
        fits = same[(dense[:, same] <= room[:, None] + 1e-9).all(axis=0)]
        best = int(fits[np.argmin(cost[columns[fits]])]) if fits.size else mine
        if cost[columns[best]] >= cost[k]:
            best = mine
        left = room - dense[:, best]
        out.append(int(columns[best]))
    return np.array(sorted(out), dtype=np.int64)


def _competitive(bound: float, reduced: FloatArray, value: float) -> np.ndarray:
    """The candidates that can be in a plan worth at least ``value`` (see _relaxation);
    a margin keeps float noise in the duals from dropping one."""
    margin = 1e-6 * max(1.0, abs(value))
    return np.flatnonzero(bound + reduced >= value - margin)


def _relaxation(
    weight: FloatArray,
    owner: np.ndarray,
    one_each: Any,
    resources: Any,
    capacity: FloatArray,
    time_limit_s: float,
) -> tuple[str, float, FloatArray, np.ndarray]:
    """The LP relaxation, for filtering candidates by duality: with its value z and
    duals y, any plan holding candidate k is worth at most z + r_k (r = weight - A'y
    <= 0), so a candidate with z + r_k below a feasible plan's value cannot be in an
    optimal plan. Returns the status, z, r and the candidates of a feasible plan
    rounded from the relaxation (_greedy_plan)."""
    import scipy.sparse as sp

    a = sp.vstack([one_each, resources]).tocsr()
    b = np.concatenate([np.ones(one_each.shape[0]), capacity])
    out = highs.solve(weight, a, b, maximise=True, integer=False, time_limit_s=time_limit_s)
    if out.status != OPTIMAL or len(out.row_duals) != len(b):
        return out.status, math.nan, np.zeros(0), np.zeros(0, dtype=np.int64)
    duals = np.maximum(out.row_duals, 0.0)
    reduced = weight - a.T @ duals
    bound = float(b @ duals)  # the dual bound: at least the relaxation's value
    incumbent = _greedy_plan(weight, owner, resources, capacity, out.values)
    return OPTIMAL, bound, reduced, incumbent


def _greedy_plan(
    weight: FloatArray, owner: np.ndarray, resources: Any, capacity: FloatArray, lp: FloatArray
) -> np.ndarray:
    """The candidates of a feasible plan rounded from the relaxation: each job, in the
    order of its share of the relaxation, takes its candidate with the largest LP
    weight if that still fits; then jobs left without one take their most valuable
    candidate that fits. (The relaxation has at most one fractional job per shared
    resource, so this is close to the optimum, which makes the filter sharp.)"""
    dense = resources.toarray() if resources.shape[0] else np.zeros((0, len(weight)))
    left = capacity.astype(float).copy()
    share = np.bincount(owner, weights=lp * weight)
    columns = [np.flatnonzero(owner == j) for j in range(len(share))]
    picked: list[int] = []
    open_jobs = []
    for j in np.argsort(-share, kind="stable"):
        cols = columns[j]
        k = cols[np.argmax(lp[cols])]
        if lp[k] > 1e-6 and (dense[:, k] <= left + 1e-9).all():
            left -= dense[:, k]
            picked.append(int(k))
        else:
            open_jobs.append(j)
    for j in open_jobs:
        cols = columns[j]
        fits = cols[(dense[:, cols] <= left[:, None] + 1e-9).all(axis=0)]
        if fits.size:
            k = fits[np.argmax(weight[fits])]
            left -= dense[:, k]
            picked.append(int(k))
    return _improve(weight, owner, dense, left, columns, picked)


def _improve(
    weight: FloatArray,
    owner: np.ndarray,
    dense: FloatArray,
    left: FloatArray,
    columns: list[np.ndarray],
    picked: list[int],
) -> np.ndarray:
    """Local search on a feasible plan: each job in turn moves to its most valuable
    candidate that fits in what is left plus what its own pick frees, until no move
    gains. A better starting plan lets _competitive drop more columns: on the
    heavy benchmark the rounded plan alone left half of them in the program."""
    current = {int(owner[k]): k for k in picked}
    for _ in range(10):  # passes; each gains or stops
        gained = False
        for j, cols in enumerate(columns):
            mine = current.get(j)
            room = left + (dense[:, mine] if mine is not None else 0.0)
            fits = cols[(dense[:, cols] <= room[:, None] + 1e-9).all(axis=0)]
            if not fits.size:
                continue
            k = int(fits[np.argmax(weight[fits])])
            if weight[k] > (weight[mine] if mine is not None else 0.0) + 1e-12:
                left = room - dense[:, k]
                current[j] = k
                gained = True
        if not gained:
            break
    return np.array(sorted(current.values()), dtype=np.int64)
