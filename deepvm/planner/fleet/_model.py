"""The fleet program as a user reads and changes it: stated in cvxpy
(docs/ARCHITECTURE.md, "For the fleet"). Each constraint is an object that
compiles itself into cvxpy over the columns a solve ranges over (as cvxportfolio's
constraints do); the integer program and the cost stage's relaxation are cvxpy
problems solved by HiGHS. The relaxation that grows by columns and cuts as it
goes talks to HiGHS directly (deepvm.planner._highs.GrowingLP).

An integer program is compiled by cvxpy to HiGHS's standard form and handed to
``deepvm.planner._highs.solve``, which starts HiGHS from a known plan and stops it
at the deadline by its interrupt callback (cvxpy's own HiGHS call offers
neither)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from deepvm.planner import _highs as highs
from deepvm.planner._highs import Deadline
from deepvm.planner.offers import FloatArray


class Constraint:
    """A family of rows of the fleet program, ``matrix @ x <= upper`` over the
    columns a solve ranges over; it compiles itself into cvxpy."""

    def rows(self, columns: np.ndarray) -> tuple[Any, FloatArray]:
        """Its rows over ``columns``: a sparse matrix and their upper bounds. Rows
        that cannot bind there are left out."""
        raise NotImplementedError

    def cvxpy(self, x: Any, columns: np.ndarray) -> list[Any]:
        """Its rows as cvxpy constraints on ``x``, the columns' variable."""
        matrix, upper = self.rows(columns)
        return [matrix @ x <= upper] if matrix.shape[0] else []


@dataclass(frozen=True)
class PerClass(Constraint):
    """At most ``count[c]`` clusters for class c (one per job of the class)."""

    owner: np.ndarray
    count: FloatArray

    def rows(self, columns: np.ndarray) -> tuple[Any, FloatArray]:
        present, local = np.unique(self.owner[columns], return_inverse=True)
        upper = self.count[present]
        matrix = sp.csr_matrix(
            (np.ones(len(columns)), (local, np.arange(len(columns)))),
            shape=(len(present), len(columns)),
        )
        # A class whose columns' own bounds already keep it is no row.
        binding = np.asarray(matrix @ self.count[self.owner[columns]]).ravel() > upper
        return matrix[binding], upper[binding]


@dataclass(frozen=True)
class SharedLimits(Constraint):
    """The shared resources: every limited quota key (in its unit) and the team
    budget, ``usage @ x <= capacity``."""

    usage: Any  # csc: limits x columns
    capacity: FloatArray
    upper: FloatArray  # each column's own bound (its class's count)

    def rows(self, columns: np.ndarray) -> tuple[Any, FloatArray]:
        matrix = self.usage[:, columns].tocsr()
        # A limit that every column together keeps cannot bind.
        binding = np.asarray(matrix @ self.upper[columns]).ravel() > self.capacity
        return matrix[binding], self.capacity[binding]


@dataclass(frozen=True)
class Cuts(Constraint):
    """Valid inequalities found on the way (mixed-integer rounding cuts)."""

    matrix: Any  # csr: cuts x columns
    rhs: FloatArray

    def rows(self, columns: np.ndarray) -> tuple[Any, FloatArray]:
        return self.matrix[:, columns], self.rhs


@dataclass(frozen=True)
class ValueFloor(Constraint):
    """The plan's value at least ``floor`` (the cost stage keeps the best value),
    as -value <= -floor, scaled so that HiGHS's feasibility tolerance (1e-6) is a
    tenth of ``slack``, the tie tolerance on the value."""

    weight: FloatArray
    floor: float
    slack: float

    def rows(self, columns: np.ndarray) -> tuple[Any, FloatArray]:
        scale = 1e-5 / self.slack
        return sp.csr_matrix(-scale * self.weight[columns]), np.array([-scale * self.floor])


# Value ladders go to HiGHS as sums of their columns up to this many non-zeros (the
# saved programs' ladders: 0.2-23 thousand at 10-100 jobs), else chained
# (ValueLadders.stated).
NESTED_NONZEROS = 30_000


@dataclass(frozen=True)
class ValueLadders:
    """Per class, for some of its values among ``columns`` (each but the least, at
    most ``per_class`` of them, evenly spread), how many of its jobs take a column
    worth at least that: an integer variable each, equal to those columns' sum.
    They add no limit; they give HiGHS a branch that splits a class's columns by
    value ("a job of class c on a cluster worth at least v, or not"), where a branch
    on one column moves the LP to its twin or its neighbour in value. Under a team
    budget that binds, the LP spreads a job over a dearer and a cheaper cluster, and
    such splits close the gap that branching on columns does not."""

    weight: FloatArray
    owner: np.ndarray
    count: FloatArray
    per_class: int

    def rows(self, columns: np.ndarray) -> tuple[Any, FloatArray]:
        """Each ladder's columns (a 0/1 row over ``columns``) and its bound (the
        class's count)."""
        owner, weight = self.owner[columns], self.weight[columns]
        order = np.lexsort((-weight, owner))  # by class, most valuable first
        by_class, ranked = owner[order], weight[order]
        first = np.searchsorted(by_class, by_class, side="left")
        # A step down in value within a class: the columns before it are a ladder.
        down = np.diff(ranked, prepend=np.inf) < 0
        steps = np.flatnonzero((np.arange(len(order)) > first) & down)
        group = by_class[steps]
        rank = np.arange(len(steps)) - np.searchsorted(group, group, side="left")
        total = np.bincount(group, minlength=len(self.count))[group]
        k = self.per_class  # evenly spread: the ranks where floor(rank k / total) moves
        spread = np.floor((rank + 1) * k / total) > np.floor(rank * k / total)
        steps = steps[(total <= k) | spread]
        lengths = steps - first[steps]
        members = np.concatenate([order[first[i] : i] for i in steps]) if len(steps) else steps
        matrix = sp.csr_matrix(
            (np.ones(len(members)), members, np.concatenate([[0], np.cumsum(lengths)])),
            shape=(len(steps), len(columns)),
        )
        return matrix, self.count[by_class[steps]]

    def stated(self, columns: np.ndarray) -> tuple[Any, Any, FloatArray]:
        """The ladders as HiGHS gets them, ``links @ x == steps @ y`` (y: the
        ladders), and their bounds: as sums of their columns (``rows``, steps the
        identity), whose rows HiGHS's cuts use best (saved 20- and 30-job programs
        under $25/h, seeds 1-3: 1 of 3 proven against none, 3.7 s against 8.8 s),
        up to NESTED_NONZEROS; past it ``chained``, each column in one row: as
        sums, the ladders of 14,000 columns (110,000 non-zeros) kept HiGHS in its
        root's cut separation for 118 s, some 90 s past its deadline (its
        separators do not ask the interrupt callback)."""
        matrix, upper = self.rows(columns)
        if matrix.nnz <= NESTED_NONZEROS:
            return matrix, sp.identity(len(upper), format="csr"), upper
        return self.chained(columns)

    def chained(self, columns: np.ndarray) -> tuple[Any, Any, FloatArray]:
        """The ladders as rows of ``links @ x == steps @ y``, each the one before it
        in its class plus the columns between their two values: each column in one
        row, not in every ladder above it."""
        matrix, upper = self.rows(columns)
        heads = matrix.indices[matrix.indptr[:-1]]  # a column of each (none is empty)
        group = self.owner[columns[heads]]
        # the ladder before it in its class: the previous row, where the class is the same
        after = np.flatnonzero(np.diff(group) == 0) + 1
        size = matrix.shape[0]
        previous = sp.csr_matrix((np.ones(len(after)), (after, after - 1)), shape=(size, size))
        links = (matrix - previous @ matrix).tocsr()
        links.eliminate_zeros()
        return links, (sp.identity(size, format="csr") - previous).tocsr(), upper


@dataclass(frozen=True)
class Outcome:
    status: str
    values: FloatArray  # per column; empty unless a solution exists
    compile_s: float  # cvxpy's share: stating and compiling the problem
    # the best bound proven on the objective of any plan better than the cutoff, in
    # the objective's own sense (an upper bound when maximising); nan where none
    bound: float = math.nan


def solve_integer(
    objective: FloatArray,
    maximise: bool,
    constraints: list[Constraint],
    columns: np.ndarray,
    upper: FloatArray,
    *,
    start: FloatArray | None,
    deadline: Deadline,
    feasibility_tolerance: float,
    presolve: bool,
    cutoff: float | None = None,
    probing: bool = True,
    sub_mips: bool = True,
    relative_gap: float = 0.0,
    ladders: ValueLadders | None = None,
) -> Outcome:
    """The integer program over ``columns`` (0 <= x <= upper, integer), stated in
    cvxpy and solved by HiGHS from ``start``. ``cutoff``: only plans whose objective
    is better than this are sought (none: ``infeasible``). ``ladders``: their
    variables added, to branch on (ValueLadders)."""
    import time

    import cvxpy as cp

    began = time.perf_counter()
    n = len(columns)
    links, steps, step_upper = sp.csr_matrix((0, n)), sp.csr_matrix((0, 0)), np.zeros(0)
    if ladders is not None:
        links, steps, step_upper = ladders.stated(columns)
    # One variable: the columns, then the ladders (so that the standard form keeps
    # them in that order).
    bounds = np.concatenate([np.asarray(upper, dtype=float), step_upper])
    z = cp.Variable(n + len(step_upper), integer=True, bounds=[np.zeros(len(bounds)), bounds])
    x = z[:n]
    rows = [row for c in constraints for row in c.cvxpy(x, columns)]
    if len(step_upper):  # each ladder equal to its columns' sum, as two rows
        y = z[n:]
        rows += [links @ x - steps @ y <= 0, steps @ y - links @ x <= 0]
    goal = objective[columns] @ x
    problem = cp.Problem(cp.Maximize(goal) if maximise else cp.Minimize(goal), rows)
    data, _, _ = problem.get_problem_data(cp.HIGHS)
    compile_s = time.perf_counter() - began
    # The standard form: minimise c @ x subject to A x <= b (no equalities), x in
    # its bounds; z is the one variable, the columns first and in order.
    if data["dims"].zero or len(data["c"]) != len(bounds):
        raise AssertionError("the fleet program compiled to an unexpected standard form")
    if start is not None and ladders is not None:  # the ladders' values at the start
        start = np.concatenate([start, ladders.rows(columns)[0] @ start])
    out = highs.solve(
        np.asarray(data["c"], dtype=float),
        data["A"],
        np.asarray(data["b"], dtype=float),
        maximise=False,
        integer=True,
        start=start,
        presolve=presolve,
        feasibility_tolerance=feasibility_tolerance,
        column_upper=bounds,  # z's own bounds, as stated
        deadline=deadline,
        # cvxpy states a maximisation as the minimisation of its negation
        cutoff=None if cutoff is None else (-cutoff if maximise else cutoff),
        probing=probing,
        sub_mips=sub_mips,
        relative_gap=relative_gap,
    )
    # cvxpy states a maximisation as the minimisation of its negation
    values = out.values[:n] if len(out.values) else out.values
    return Outcome(out.status, values, compile_s, -out.bound if maximise else out.bound)


def least_cost_relaxation(
    cost: FloatArray,
    constraints: list[Constraint],
    columns: np.ndarray,
    upper: FloatArray,
    deadline: Deadline,
) -> tuple[float, FloatArray] | None:
    """The cost stage's LP relaxation over ``columns`` (0 <= x <= upper, as in the
    integer program): its least cost and each column's reduced cost (where >= 0:
    what taking it adds, at least, to the least cost); None where HiGHS did not
    finish in time."""
    import cvxpy as cp

    # With the columns' own bounds: the constraints leave out the rows those bounds
    # already keep (a class of one column, a limit no bound can reach), so without
    # them the relaxation could take a column many times over (three clouds, 1,000
    # jobs: 1,605 USD/h against 1,740 with them, HiGHS's own root LP; the plan costs
    # 1,784, so the filter this feeds kept every column either way there).
    n = len(columns)
    x = cp.Variable(n, bounds=[np.zeros(n), np.asarray(upper, dtype=float)])
    stated = [(c.rows(columns), c) for c in constraints]
    rows = [m @ x <= u for (m, u), _ in stated if m.shape[0]]
    problem = cp.Problem(cp.Minimize(cost[columns] @ x), rows)
    try:
        with highs.quiet_stdout():
            problem.solve(solver=cp.HIGHS, time_limit=max(deadline.left(), 0.0))
    except cp.error.SolverError:
        return None
    if problem.status != cp.OPTIMAL:
        return None
    reduced = np.asarray(cost[columns], dtype=float).copy()
    matrices = [m for (m, _), _ in stated if m.shape[0]]
    for matrix, row in zip(matrices, rows, strict=True):  # c + A' y, y >= 0 per row
        reduced += matrix.T @ np.maximum(np.asarray(row.dual_value, dtype=float).ravel(), 0.0)
    return float(problem.value), reduced


__all__ = [
    "Constraint",
    "Cuts",
    "Outcome",
    "PerClass",
    "SharedLimits",
    "ValueFloor",
    "ValueLadders",
    "least_cost_relaxation",
    "solve_integer",
]
