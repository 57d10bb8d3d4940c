"""Feasible fleet plans without a solver (docs/ARCHITECTURE.md, "For the fleet").
``greedy_plan``: candidates in order of value per share of the limits they take
(each class's DENSEST densest), each where it fits. ``rounded_plan``: from a point
of the LP relaxation (zeros: none), each class takes, slot by slot, its most
valuable candidate that still fits the shared limits (in the order of its share
of the point). Before any solve the program takes the better of the two; then
rounds from the relaxation. Each ends in a local search that moves each pick to
a better one that fits in what is left plus what it frees, until none gains.

The greedy plan is made whole whatever the time (it is the plan there always is:
0.5 s of CPU at 1,000 distinct jobs, its local search 0.1 s of that for 7 % more
value); ``rounded_plan``, given a deadline, stops where it passes with the plan
made so far. Each of its steps keeps the plan feasible, so a stopped one is a
smaller plan, never a broken one."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepvm.planner._highs import Deadline
from deepvm.planner.fleet._arrays import TOLERANCE, ProgramArrays, best_per_class
from deepvm.planner.offers import FloatArray

__all__ = [
    "CHECK_EVERY",
    "DENSEST",
    "PASSES",
    "Rounding",
    "fits_each",
    "greedy_plan",
    "rounded_plan",
]

PASSES = 10  # local-search passes at most; each gains or stops
# Before any solve, each class's candidates of most value per share of the limits
# that the greedy plan tries (the local search then tries every one).
DENSEST = 8
# Picks between two looks at the deadline's clock (a pick costs tens of microseconds).
CHECK_EVERY = 32


def fits_each(
    data: FloatArray, indices: np.ndarray, indptr: np.ndarray, left: FloatArray
) -> np.ndarray:
    """Per column of a csc block (limits x columns, as its arrays; ``indptr`` from 0):
    whether it fits in ``left``."""
    slack = left + TOLERANCE * np.maximum(np.abs(left), 1.0)
    bad = data > slack[indices]
    width = len(indptr) - 1
    columns = np.repeat(np.arange(width), np.diff(indptr))
    return np.bincount(columns[bad], minlength=width) == 0


@dataclass(frozen=True)
class Rounding:
    """The program's arrays as rounding reads them: by class."""

    program: ProgramArrays

    @functools.cached_property
    def _by_class(self) -> tuple[Any, np.ndarray, np.ndarray]:
        """The limits' columns grouped by class, sliced once for every class (5,000
        jobs: a slice per class took 0.5 s): the csc, its columns, and where each
        class starts."""
        p = self.program
        order = np.argsort(p.owner, kind="stable")
        starts = np.searchsorted(p.owner[order], np.arange(len(p.count) + 1))
        return p.resources[:, order].tocsc(), order, starts

    def use(self, k: int) -> FloatArray:
        resources = self.program.resources
        out = np.zeros(resources.shape[0])
        lo, hi = resources.indptr[k], resources.indptr[k + 1]
        out[resources.indices[lo:hi]] = resources.data[lo:hi]
        return out

    def best_fit(self, c: int, room: FloatArray) -> int | None:
        """The class's most valuable column (of positive weight) that fits ``room``."""
        grouped, order, starts = self._by_class
        lo, hi = starts[c], starts[c + 1]
        cols = order[lo:hi]
        first, last = grouped.indptr[lo], grouped.indptr[hi]
        ok = fits_each(
            grouped.data[first:last], grouped.indices[first:last],
            grouped.indptr[lo : hi + 1] - first, room,
        )  # fmt: skip
        weight = self.program.weight
        ok &= weight[cols] > 0
        if not ok.any():
            return None
        choice = cols[ok]
        return int(choice[np.argmax(weight[choice])])


def rounded_plan(state: Rounding, x: FloatArray, deadline: Deadline | None = None) -> np.ndarray:
    """A feasible plan near ``x`` (the relaxation's point over every column; zeros:
    none), as columns, one per job that takes it; where ``deadline`` passes first,
    the plan made so far (module docstring)."""
    p = state.program
    taken = np.floor(np.maximum(x, 0.0) + 1e-9).astype(np.int64)
    plan = [int(k) for k in np.repeat(np.arange(len(x)), taken)]
    used = np.asarray(p.resources @ taken.astype(float)).ravel()
    left = p.capacity - used
    slots = p.count - np.bincount(p.owner[plan], minlength=len(p.count))
    share = np.bincount(p.owner, weights=np.maximum(x, 0.0) * p.weight,
                        minlength=len(p.count))  # fmt: skip
    best = np.zeros(len(p.count))
    np.maximum.at(best, p.owner, p.weight)
    for c in np.lexsort((-best, -share)):
        if _stopped(deadline):
            break  # the local search stops at once too
        for _ in range(round(slots[c])):
            k = state.best_fit(int(c), left)
            if k is None:
                break
            left = left - state.use(k)
            plan.append(k)
    return _improve(state, plan, left, deadline)


def greedy_plan(state: Rounding) -> np.ndarray:
    """The plan before any solve (module docstring), whatever the time. Why by value
    per share of the limits, not each class's most valuable first: a job's most
    valuable cluster is often a large one, and at 1,000 jobs over three clouds those
    filled the quotas and the jobs after them took the small clusters left, or none
    (the saved 1,000-job programs, benchmarks/fleet.py: 23-29 % of the optimum's
    value, against 80-83 % this way)."""
    p = state.program
    resources, capacity = p.resources, p.capacity
    open_ = capacity > 0
    per_unit = np.divide(1.0, capacity, out=np.zeros(len(capacity)), where=open_)
    share = np.asarray(resources.T @ per_unit).ravel()
    # Where a limit is 0 (no quota there), a column using it can never fit.
    blocked = np.asarray(resources.T @ (~open_).astype(float)).ravel() > 0
    density = np.divide(p.weight, share, out=np.full(len(share), np.inf), where=share > 0)
    usable = (p.weight > 0) & ~blocked
    tried = best_per_class(density, p.owner, np.flatnonzero(usable), DENSEST)
    tried = tried[np.lexsort((p.owner[tried], -density[tried]))]  # densest first
    left = capacity.astype(float).copy()
    slack = TOLERANCE * np.maximum(np.abs(capacity), 1.0)
    slots = np.asarray(p.count, dtype=float).copy()
    plan: list[int] = []
    indptr, indices, data = resources.indptr, resources.indices, resources.data
    for k in tried:
        c = p.owner[k]
        rows, use = indices[indptr[k] : indptr[k + 1]], data[indptr[k] : indptr[k + 1]]
        while slots[c] >= 1 and (use <= left[rows] + slack[rows]).all():
            left[rows] -= use
            slots[c] -= 1
            plan.append(int(k))
    return _improve(state, plan, left, None)


def _stopped(deadline: Deadline | None) -> bool:
    return deadline is not None and deadline.passed()


def _improve(
    state: Rounding, plan: list[int], left: FloatArray, deadline: Deadline | None
) -> np.ndarray:
    """Local search (module docstring): a better start lets the relaxation's bound
    leave out more columns. Each move keeps the plan feasible, so it stops at once
    where ``deadline`` passes."""
    owner, weight = state.program.owner, state.program.weight
    plan = sorted(plan, key=lambda k: (int(owner[k]), k))
    for _ in range(PASSES):
        gained = False
        for i, mine in enumerate(plan):
            if i % CHECK_EVERY == 0 and _stopped(deadline):
                return np.array(sorted(plan), dtype=np.int64)
            room = left + state.use(mine)
            k = state.best_fit(int(owner[mine]), room)
            if k is not None and weight[k] > weight[mine] + 1e-12:
                left = room - state.use(k)
                plan[i] = k
                gained = True
        if not gained:
            break
    return np.array(sorted(plan), dtype=np.int64)
