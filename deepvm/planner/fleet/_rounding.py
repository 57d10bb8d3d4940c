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

from deepvm.planner.fleet._arrays import TOLERANCE, ProgramArrays
from deepvm.planner.offers import FloatArray

__all__ = ["PASSES", "Rounding", "fits_each", "rounded_plan"]

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


def rounded_plan(state: Rounding, x: FloatArray) -> np.ndarray:
    """A feasible plan near ``x`` (the relaxation's point over every column; zeros:
    none), as columns, one per job that takes it."""
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
        for _ in range(round(slots[c])):
            k = state.best_fit(int(c), left)
            if k is None:
                break
            left = left - state.use(k)
            plan.append(k)
    return _improve(state, plan, left)


def _improve(state: Rounding, plan: list[int], left: FloatArray) -> np.ndarray:
    """Local search (module docstring): a better start lets the relaxation's bound
    leave out more columns."""
    owner, weight = state.program.owner, state.program.weight
    plan = sorted(plan, key=lambda k: (int(owner[k]), k))
    for _ in range(PASSES):
        gained = False
        for i, mine in enumerate(plan):
            room = left + state.use(mine)
            k = state.best_fit(int(owner[mine]), room)
            if k is not None and weight[k] > weight[mine] + 1e-12:
                left = room - state.use(k)
                plan[i] = k
                gained = True
        if not gained:
            break
    return np.array(sorted(plan), dtype=np.int64)
