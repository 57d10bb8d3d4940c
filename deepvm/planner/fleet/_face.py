"""The columns that can be in a plan at least as good as the one in hand, narrowed
by HiGHS's root cuts before the value's proof and the cost stage
(docs/ARCHITECTURE.md, "For the fleet").

The proof of the best value and the cost stage seek plans worth at least
``floor`` (the value of the plan in hand, less the tie tolerance). Our
relaxation's bound z and reduced costs r leave out the columns k with z + r_k <
floor, but z (with our MIR cuts) is still well above the best value (three clouds,
100 jobs: 153.49 against 153.27), so most columns stay, and the cost stage's own
relaxation is weak (there: 6,768 columns, its LP 2.7 % under the least cost,
5.5-8.5 s to prove it over HiGHS seeds). HiGHS's root (``highs.root_cuts``, without
a cutoff) finds cuts that bring the value's bound to within a few thousandths of
the best value. With them as rows the same reduced-cost argument leaves a few
of the columns (HiGHS's default seed: 6,819 -> 1,067 -> 468 in two rounds;
1,000 jobs: 57,504 -> 4,897 -> 4,529; a third round where the bound is still
wide, below), and the cuts, valid for every plan, are rows of the proof and the
cost stage too.

Valid because HiGHS runs without presolve (its cuts are over these columns), without
symmetry handling (which would keep one of a set of plans equal in value but not in
cost) and without a cutoff (its cuts hold for every plan, not only for those above
one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from deepvm.planner import _highs as highs
from deepvm.planner._highs import OPTIMAL, Deadline
from deepvm.planner.fleet import _relaxation
from deepvm.planner.fleet._arrays import ProgramArrays
from deepvm.planner.fleet._model import PerClass, SharedLimits
from deepvm.planner.offers import FloatArray

# Rounds of (HiGHS's root cuts, then the reduced-cost filter); each round starts
# from the columns the last one kept, with every cut found so far. After ROUNDS,
# another (up to MAX_ROUNDS) while the bound with the cuts is still more than WIDE
# (relative) above the floor: such a face keeps two to three times the columns,
# and the proof and the cost stage over it are the slowest; the round pays there
# and nowhere else (measured in docs/ARCHITECTURE.md, "For the fleet", step 5).
ROUNDS = 2
MAX_ROUNDS = 3
WIDE = 5e-5


@dataclass(frozen=True)
class Face:
    """``columns``: those that can be in a plan worth at least the floor; ``cuts @ x
    <= rhs`` (csr over every column of the program, zero outside ``columns``): valid
    for every plan over ``columns`` worth at least the floor."""

    columns: np.ndarray
    cuts: Any
    rhs: FloatArray
    floor: float = -np.inf  # the least value of the plans it holds
    bound: float = np.inf  # on every plan over ``columns`` (its last round's)

    @property
    def gap(self) -> float:
        """How far the bound lies above the floor (relative; inf where no round bounded it)."""
        if not np.isfinite(self.bound):
            return np.inf
        return (self.bound - self.floor) / max(abs(self.floor), 1.0)


def unnarrowed(columns: np.ndarray, plan: np.ndarray) -> Face:
    """``columns`` (and the plan's) as they are, without cuts."""
    columns = np.union1d(columns, plan).astype(np.int64)
    return Face(columns, sp.csr_matrix((0, 0)), np.zeros(0))


def narrowed(
    program: ProgramArrays,
    known: tuple[Any, FloatArray],  # cuts already known (csr over every column), their rhs
    columns: np.ndarray,  # a superset of the columns of every plan worth the floor
    plan: np.ndarray,  # a plan worth at least the floor: its columns are kept
    floor: float,
    deadline: Deadline,
    *,
    while_wide: bool = True,
) -> Face:
    """The columns of ``columns`` that can be in a plan worth at least ``floor``, and
    the cuts that show it (module docstring). Where the deadline passes first, the
    columns as given and the cuts found so far. ``while_wide``: rounds past ROUNDS
    while the bound is more than WIDE above the floor (False: ROUNDS at most)."""
    weight, owner, count = program.weight, program.owner, program.count
    size = len(weight)
    columns = np.union1d(columns, plan).astype(np.int64)
    found = sp.csr_matrix((0, size))
    found_rhs = np.zeros(0)
    margin = 1e-6 * max(1.0, abs(floor))  # float noise in the duals, as the relaxation's
    bound = np.inf
    for done in range(MAX_ROUNDS if while_wide else ROUNDS):
        if deadline.passed():
            break
        cut_sets = [known, (found, found_rhs)]
        matrix, upper = _rows(program, cut_sets, columns)
        bounds = count[owner[columns]]
        new, new_rhs = highs.root_cuts(weight[columns], matrix, upper, bounds, deadline=deadline)
        if not new.shape[0]:
            break
        # The plan is worth the floor, so every valid cut holds for it: one that does
        # not (a HiGHS whose cut pool means something else) is no cut, and we stop.
        taken = np.bincount(np.searchsorted(columns, plan), minlength=len(columns))
        if (new @ taken > new_rhs + 1e-6 * np.maximum(1.0, np.abs(new_rhs))).any():
            break
        spread = sp.csr_matrix(  # over every column of the program
            (new.data, columns[new.indices], new.indptr), shape=(new.shape[0], size)
        )
        found, found_rhs = sp.vstack([found, spread]).tocsr(), np.concatenate([found_rhs, new_rhs])
        matrix, upper = sp.vstack([matrix, new]).tocsr(), np.concatenate([upper, new_rhs])
        duals = _duals(program, columns, matrix, upper, bounds, plan, deadline)
        if duals is None:
            break
        # Any y >= 0 bounds every plan: w x = r x + y A x <= y b + sum_k max(r_k, 0) u_k
        # + sum_k min(r_k, 0) x_k (r = w - A'y, u: each column's bound); a plan that
        # holds column k once is worth at most that bound + min(r_k, 0).
        y = np.maximum(duals, 0.0)
        reduced = weight[columns] - matrix.T @ y
        bound = float(upper @ y + np.maximum(reduced, 0.0) @ bounds)
        keep = bound + np.minimum(reduced, 0.0) >= floor - margin
        if keep.all():
            break
        columns = np.union1d(columns[keep], plan).astype(np.int64)
        if done + 1 >= ROUNDS and bound - floor <= WIDE * max(1.0, abs(floor)):
            break
    return Face(columns, found, found_rhs, floor, bound)


def _duals(
    program: ProgramArrays,
    columns: np.ndarray,
    matrix: Any,  # csr, the rows x ``columns``
    upper: FloatArray,
    bounds: FloatArray,  # per column: its class's count (the rows leave out a class it keeps)
    plan: np.ndarray,
    deadline: Deadline,
) -> FloatArray | None:
    """The rows' duals of the LP max w x over ``matrix`` x <= ``upper``, 0 <= x <=
    ``bounds``, by column generation as the relaxation's (a few columns per class,
    the rest priced in one pass per round; 1,000 jobs: 57,504 columns, where HiGHS's
    simplex over all of them took 0.7 s a round). None where the deadline passes
    first."""
    weight = program.weight[columns]
    owner = program.owner[columns]
    csc = matrix.tocsc()
    lp = highs.GrowingLP(upper)
    in_model = np.zeros(len(columns), dtype=bool)
    adding = _relaxation.first_columns(weight, owner, np.searchsorted(columns, plan))
    duals = np.zeros(len(upper))  # no columns: y = 0 (valid, if weak)
    while len(adding):
        lp.add_columns(weight[adding], csc[:, adding], bounds[adding])
        in_model[adding] = True
        status, _x, duals, _z = lp.solve(deadline)
        if status != OPTIMAL:
            return None
        adding = _relaxation.entering(weight - csc.T @ duals, owner, in_model)
    return duals


def _rows(
    program: ProgramArrays,
    cut_sets: list[tuple[Any, FloatArray]],  # (csr over every column, rhs)
    columns: np.ndarray,
) -> tuple[Any, FloatArray]:
    """The program's rows over ``columns``: per class, the shared limits and every
    cut; each ``<= upper``."""
    p = program
    parts = [PerClass(p.owner, p.count).rows(columns),
             SharedLimits(p.resources, p.capacity, p.count[p.owner]).rows(columns)]  # fmt: skip
    parts += [(cuts[:, columns], rhs) for cuts, rhs in cut_sets if cuts.shape[0]]
    matrix = sp.vstack([m for m, _ in parts]).tocsr()
    return matrix, np.concatenate([u for _, u in parts])
