"""The fleet program's LP relaxation (docs/ARCHITECTURE.md, "For the fleet"): by
column generation (a few columns per class, the rest priced in one vectorised pass
per round) with mixed-integer rounding cuts on the quota rows (one cluster takes a
large share of a quota, so the plain relaxation is weak). Its bound z and reduced
costs r bound any plan holding column k by z + r_k (``Relaxation.competitive``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from deepvm.planner import _highs as highs
from deepvm.planner._highs import OPTIMAL, Deadline
from deepvm.planner.fleet._arrays import ProgramArrays, best_per_class
from deepvm.planner.offers import FloatArray

# Column generation: per class and round, the columns of largest reduced cost added.
COLUMNS_PER_ROUND = 8
# Cutting rounds at most, and the least relative fall of the bound that keeps them going.
CUT_ROUNDS = 30
CUT_PROGRESS = 1e-5


@dataclass(frozen=True)
class Relaxation:
    """The LP relaxation's outcome: its bound, the columns it generated, its x over
    every column, and each column's reduced cost (<= 0 at its optimum)."""

    bound: float
    generated: np.ndarray
    x_all: FloatArray
    reduced: FloatArray
    cuts: Any  # csr: the MIR cuts found, cuts x columns (valid for every plan)
    cut_rhs: FloatArray

    def competitive(self, value: float) -> np.ndarray:
        """The columns that can be in a plan worth at least ``value`` (z + r_k >= value,
        with a margin against float noise in the duals)."""
        margin = 1e-6 * max(1.0, abs(value))
        return np.flatnonzero(self.bound + self.reduced >= value - margin)


@dataclass(frozen=True)
class Stopped:
    """The deadline passed before the relaxation's optimum: its last LP point over
    every column (zeros where no LP was solved), to round a plan from, and no bound."""

    x_all: FloatArray


@dataclass(frozen=True)
class _Mir:
    """A mixed-integer rounding cut of resource row ``row`` scaled by ``delta``:
    sum_k F(a_k / delta) x_k <= floor(b / delta), F(d) = floor(d) + max(0, frac(d) -
    f) / (1 - f), f = frac(b / delta); valid for every x integer >= 0 with a x <= b."""

    row: int
    delta: float
    f: float
    rhs: float

    def coefficients(self, a: FloatArray) -> FloatArray:
        d = a / self.delta
        whole = np.floor(d + 1e-12)
        return whole + np.maximum(0.0, d - whole - self.f) / (1.0 - self.f)


def relax(program: ProgramArrays, plan: np.ndarray, deadline: Deadline) -> Relaxation | Stopped:
    """The LP relaxation with MIR cuts, by column generation; ``Stopped`` if the
    deadline passed first."""
    weight, owner, count = program.weight, program.owner, program.count
    resources, capacity = program.resources, program.capacity
    size, classes = len(weight), len(count)
    shared = resources.shape[0]
    lp = highs.GrowingLP(np.concatenate([count, capacity]))
    first = first_columns(weight, owner, plan)
    in_model = np.zeros(size, dtype=bool)
    cuts: list[_Mir] = []
    cut_rows: list[Any] = []  # each cut's coefficients over every column (csr, 1 x size)
    rows_csr = program.by_key

    def matrix(columns: np.ndarray) -> Any:
        one = sp.csr_matrix(
            (np.ones(len(columns)), (owner[columns], np.arange(len(columns)))),
            shape=(classes, len(columns)),
        )
        parts = [one, resources[:, columns]]
        parts += [row[:, columns] for row in cut_rows]
        return sp.vstack(parts).tocsc()

    def add(columns: np.ndarray) -> None:
        lp.add_columns(weight[columns], matrix(columns))
        in_model[columns] = True
        order.extend(int(k) for k in columns)

    order: list[int] = []
    cut_matrix = sp.csr_matrix((0, size))
    add(first)
    bound = math.inf
    x_all = np.zeros(size)
    reduced = np.zeros(size)
    for _ in range(CUT_ROUNDS):
        while True:  # columns until none prices out
            status, x, duals, _z = lp.solve(deadline)
            if status != OPTIMAL:
                return Stopped(x_all)
            # The restricted LP's point (each of its plans is one of the program's): a
            # better place to round from than none, should the deadline come next.
            x_all = np.zeros(size)
            x_all[np.array(order)] = x
            on_class, on_shared = duals[:classes], duals[classes : classes + shared]
            reduced = weight - on_class[owner] - resources.T @ on_shared
            if cuts:
                reduced -= cut_matrix.T @ duals[classes + shared :]
            adding = entering(reduced, owner, in_model)
            if not len(adding):
                break
            add(adding)
        # The dual bound (at least z, the same at an optimum).
        dual_bound = float(np.concatenate(
            [count, capacity, [c.rhs for c in cuts]]) @ duals)  # fmt: skip
        previous, bound = bound, min(bound, dual_bound)
        if math.isfinite(previous) and previous - bound <= CUT_PROGRESS * max(1.0, bound):
            break
        new = _mir_cuts(rows_csr, capacity, x_all)
        if not new:
            break
        for cut in new:
            row = sp.csr_matrix(
                (cut.coefficients(rows_csr[cut.row].data), rows_csr[cut.row].indices,
                 [0, rows_csr[cut.row].nnz]), shape=(1, size),
            )  # fmt: skip
            cuts.append(cut)
            cut_rows.append(row)
            lp.add_rows(np.array([cut.rhs]), row[:, np.array(order)])
        cut_matrix = sp.vstack(cut_rows).tocsr()
    return Relaxation(
        bound, np.flatnonzero(in_model), x_all, np.minimum(reduced, 0.0), cut_matrix,
        np.array([c.rhs for c in cuts]),
    )  # fmt: skip


def first_columns(weight: FloatArray, owner: np.ndarray, plan: np.ndarray) -> np.ndarray:
    """The relaxation's first columns: each class's few most valuable, and the plan's."""
    best = best_per_class(weight, owner, np.arange(len(weight)), COLUMNS_PER_ROUND)
    return np.union1d(best, plan).astype(np.int64)


def entering(reduced: FloatArray, owner: np.ndarray, in_model: np.ndarray) -> np.ndarray:
    """Per class, up to COLUMNS_PER_ROUND columns outside the model that price out."""
    out = np.flatnonzero((reduced > 1e-9 * max(1.0, float(np.abs(reduced).max(initial=0.0))))
                         & ~in_model)  # fmt: skip
    return best_per_class(reduced, owner, out, COLUMNS_PER_ROUND)


def _mir_cuts(rows: Any, capacity: FloatArray, x: FloatArray) -> list[_Mir]:
    """Per resource row, its most violated MIR cut at ``x`` (the LP's point), if any:
    the divisors tried are the row's coefficients on the columns ``x`` uses."""
    out = []
    for q in range(rows.shape[0]):
        b = float(capacity[q])
        lo, hi = rows.indptr[q], rows.indptr[q + 1]
        cols, a = rows.indices[lo:hi], rows.data[lo:hi]
        used = x[cols] > 1e-9
        if not used.any() or not math.isfinite(b) or b <= 0:
            continue
        ax, xa = a[used], x[cols[used]]
        if float(ax @ xa) < b * (1 - 1e-9):  # a row with slack is no cut's source
            continue
        best: tuple[float, _Mir] | None = None
        for delta in np.unique(ax)[-12:]:
            ratio = b / delta
            f = ratio - math.floor(ratio)
            if f < 1e-6 or f > 1 - 1e-6:
                continue
            cut = _Mir(q, float(delta), f, float(math.floor(ratio)))
            violation = float(cut.coefficients(ax) @ xa) - cut.rhs
            if violation > 1e-6 * max(1.0, cut.rhs) and (best is None or violation > best[0]):
                best = (violation, cut)
        if best is not None:
            out.append(best[1])
    return out


__all__ = ["Relaxation", "Stopped", "entering", "first_columns", "relax"]
