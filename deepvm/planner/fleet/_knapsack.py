"""The fleet program under a team budget alone, as a multiple-choice knapsack solved
exactly by dynamic programming (docs/ARCHITECTURE.md, "For the fleet").

Where the plan of each job's most valuable cluster breaks a shared limit on the
columns' cost (a team budget), the program less its other limits is a
relaxation: each job takes at most one cluster of its class, and the clusters'
cost together stays within the budget. Its optimum, the most value and then the
least cost, is found over (cost, value) states, one job at a time, keeping only
the states no other is as cheap and as valuable as (the Pareto frontier, which
answers "the least cost of a value at least v" for every v). Where that plan keeps
every other limit too, it is the program's optimum, value and tie-break; else its
value bounds the program's.

Why: a team budget's row has real-valued coefficients (USD/h), so the cuts that
close the quotas' gap (whole vCPUs and GPUs) do little, and HiGHS's search over a
few hundred columns of 9-27 jobs ran for 5-57 s (three clouds, budgets $10-60/h;
three of 24 such fleets stopped at the 30 s limit unproven), where the states
number a few hundred to a few thousand (0.2-0.9 s).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deepvm.planner._highs import Deadline
from deepvm.planner.fleet._arrays import ProgramArrays, best_per_class
from deepvm.planner.offers import FloatArray

__all__ = ["MAX_STATES", "Knapsack", "budget_row", "solve"]

# Past this many states after a job (or this many kept over all jobs, for the
# way back to the plan), the dynamic program gives way to the integer program.
MAX_STATES = 50_000
MAX_KEPT = 5_000_000


def budget_row(arrays: ProgramArrays, cost: FloatArray) -> int | None:
    """The shared limit on cost (its row), where the plan of each job's most
    valuable cluster breaks it; else None."""
    owner, count = arrays.owner, arrays.count
    most = best_per_class(arrays.weight, owner, np.arange(len(owner)), 1)
    plan = np.repeat(most, count[owner[most]].astype(np.int64))
    for q in np.flatnonzero(arrays.used_by(plan) > arrays.capacity):
        if arrays.every_column_uses(int(q)):
            row = arrays.by_key[int(q)]
            full = np.zeros(len(cost))
            full[row.indices] = row.data
            if np.array_equal(full, cost):
                return int(q)
    return None


@dataclass(frozen=True)
class Knapsack:
    """The relaxation's optimum: ``plan`` (columns, one per job that takes it), its
    ``value``, and ``columns``, how many clusters the states were built from."""

    plan: np.ndarray
    value: float
    columns: int


def solve(
    arrays: ProgramArrays,
    cost: FloatArray,
    budget: float,
    floor: float,  # a value some plan within the budget reaches (a known plan's)
    tie_rtol: float,  # values within this (relative) of the best tie: the cheapest wins
    deadline: Deadline,
) -> Knapsack | None:
    """The plan of most value within ``budget`` (each class's count kept, no other
    limit), and of least cost among those within ``tie_rtol`` of it; None where the
    states outgrow MAX_STATES or MAX_KEPT, or the deadline passes first."""
    weight, owner, count = arrays.weight, arrays.owner, arrays.count
    options = _frontier_per_class(weight, cost, owner, len(count))
    slots = np.repeat(np.arange(len(count)), count.astype(np.int64))
    best = np.array([weight[o].max(initial=0.0) for o in options])
    # What the jobs after each one can add at most: states that cannot reach the
    # floor even so are dropped (a margin for sums taken in another order).
    after = np.concatenate([np.cumsum(best[slots][::-1])[::-1][1:], [0.0]])
    reach = floor - 1e-9 * max(1.0, abs(floor))
    room = budget + 1e-9 * max(1.0, abs(budget))
    spent, value = np.zeros(1), np.zeros(1)
    steps: list[tuple[np.ndarray, np.ndarray]] = []  # per job: each state's parent, pick
    kept = 0
    for i, c in enumerate(slots):
        if deadline.passed():
            return None
        picks = np.concatenate([[-1], options[c]])  # -1: this job unplanned
        c_add = np.concatenate([[0.0], cost[options[c]]])
        w_add = np.concatenate([[0.0], weight[options[c]]])
        new_spent = (spent[:, None] + c_add[None, :]).ravel()
        new_value = (value[:, None] + w_add[None, :]).ravel()
        ok = np.flatnonzero((new_spent <= room) & (new_value + after[i] >= reach))
        order = ok[np.lexsort((-new_value[ok], new_spent[ok]))]  # cheapest, then most valuable
        ranked = new_value[order]
        frontier = np.ones(len(order), dtype=bool)  # worth more than every cheaper state
        frontier[1:] = ranked[1:] > np.maximum.accumulate(ranked)[:-1]
        order = order[frontier]
        kept += len(order)
        if len(order) > MAX_STATES or kept > MAX_KEPT:
            return None
        spent, value = new_spent[order], new_value[order]
        steps.append((order // len(picks), picks[order % len(picks)]))
    if not len(value):
        return None
    most = float(value.max())
    tie = most - tie_rtol * max(1.0, abs(most))
    state = int(np.flatnonzero(value >= tie)[0])  # by cost ascending: the cheapest
    plan = []
    for parent, pick in reversed(steps):
        if pick[state] >= 0:
            plan.append(int(pick[state]))
        state = int(parent[state])
    return Knapsack(np.sort(np.array(plan, dtype=np.int64)), most, sum(map(len, options)))


def _frontier_per_class(
    weight: FloatArray, cost: FloatArray, owner: np.ndarray, classes: int
) -> list[np.ndarray]:
    """Per class, its columns of value > 0 no other of the class is as cheap and as
    valuable as (of equal ones, the first): the only ones the relaxation's optimum
    needs. (Two columns: a sort, not _options.undominated, which sits a layer of
    imports above this module.)"""
    order = np.lexsort((np.arange(len(weight)), -weight, cost, owner))
    bounds = np.searchsorted(owner[order], np.arange(classes + 1))
    out = []
    for c in range(classes):
        columns = order[bounds[c] : bounds[c + 1]]
        w = weight[columns]
        keep = np.ones(len(columns), dtype=bool)  # worth more than every cheaper one
        keep[1:] = w[1:] > np.maximum.accumulate(w)[:-1]
        out.append(columns[keep & (w > 0)])
    return out
