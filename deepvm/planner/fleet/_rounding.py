"""A feasible fleet plan without a solver (docs/ARCHITECTURE.md, "For the fleet"):
the plan the fleet program has before any solve, and the one it rounds from the
LP relaxation. Each class of identical jobs takes, slot by slot, its most
valuable candidate that still fits the shared limits (in the order of its share
of the relaxation), then a local search moves each pick to a better one that fits
in what is left plus what it frees, until none gains."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepvm.planner.offers import FloatArray

__all__ = [
    "PASSES",
    "TOLERANCE",
    "RoundingState",
    "fits_each",
    "rounded_plan",
    "used_by",
    "within_limits",
]

TOLERANCE = 1e-9  # relative: a limit this close to full still holds
PASSES = 10  # local-search passes at most; each gains or stops


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


def used_by(resources: Any, plan: np.ndarray) -> FloatArray:
    """What ``plan`` (columns, one per job) takes of each limit (``resources``:
    limits x columns)."""
    return np.asarray(resources[:, plan].sum(axis=1)).ravel()


def within_limits(
    owner: np.ndarray, count: FloatArray, resources: Any, capacity: FloatArray, plan: np.ndarray
) -> bool:
    """Whether ``plan`` (columns, one per job) keeps every class within its count and
    every limit (``resources``: limits x columns) within its capacity, to TOLERANCE."""
    per_class = np.bincount(owner[plan], minlength=len(count))
    used = used_by(resources, plan)
    room = capacity + TOLERANCE * np.maximum(np.abs(capacity), 1.0)
    return bool((per_class <= count + TOLERANCE).all() and (used <= room).all())


@dataclass(frozen=True)
class RoundingState:
    """The program's arrays, as rounding reads them."""

    weight: FloatArray
    owner: np.ndarray  # each column's class
    count: FloatArray  # jobs per class
    resources: Any  # csc: limits x columns
    capacity: FloatArray

    @functools.cached_property
    def _by_class(self) -> tuple[Any, np.ndarray, np.ndarray]:
        """The limits' columns grouped by class, sliced once for every class (5,000
        jobs: a slice per class took 0.5 s): the csc, its columns, and where each
        class starts."""
        order = np.argsort(self.owner, kind="stable")
        starts = np.searchsorted(self.owner[order], np.arange(len(self.count) + 1))
        return self.resources[:, order].tocsc(), order, starts

    def use(self, k: int) -> FloatArray:
        out = np.zeros(self.resources.shape[0])
        lo, hi = self.resources.indptr[k], self.resources.indptr[k + 1]
        out[self.resources.indices[lo:hi]] = self.resources.data[lo:hi]
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
        ok &= self.weight[cols] > 0
        if not ok.any():
            return None
        choice = cols[ok]
        return int(choice[np.argmax(self.weight[choice])])


def rounded_plan(state: RoundingState, x: FloatArray) -> np.ndarray:
    """A feasible plan near ``x`` (the relaxation's point over every column; zeros:
    none), as columns, one per job that takes it."""
    taken = np.floor(np.maximum(x, 0.0) + 1e-9).astype(np.int64)
    plan = [int(k) for k in np.repeat(np.arange(len(x)), taken)]
    used = np.asarray(state.resources @ taken.astype(float)).ravel()
    left = state.capacity - used
    slots = state.count - np.bincount(state.owner[plan], minlength=len(state.count))
    share = np.bincount(state.owner, weights=np.maximum(x, 0.0) * state.weight,
                        minlength=len(state.count))  # fmt: skip
    best = np.zeros(len(state.count))
    np.maximum.at(best, state.owner, state.weight)
    for c in np.lexsort((-best, -share)):
        for _ in range(round(slots[c])):
            k = state.best_fit(int(c), left)
            if k is None:
                break
            left = left - state.use(k)
            plan.append(k)
    return _improve(state, plan, left)


def _improve(state: RoundingState, plan: list[int], left: FloatArray) -> np.ndarray:
    """Local search (module docstring): a better start lets the relaxation's bound
    leave out more columns."""
    plan = sorted(plan, key=lambda k: (int(state.owner[k]), k))
    for _ in range(PASSES):
        gained = False
        for i, mine in enumerate(plan):
            room = left + state.use(mine)
            k = state.best_fit(int(state.owner[mine]), room)
            if k is not None and state.weight[k] > state.weight[mine] + 1e-12:
                left = room - state.use(k)
                plan[i] = k
                gained = True
        if not gained:
            break
    return np.array(sorted(plan), dtype=np.int64)
