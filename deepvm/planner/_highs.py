"""Running HiGHS (the MIP/LP solver the fleet program uses) through its own
Python binding, ``highspy``: arrays in, values out, and the solver's outcome as
one of the planner's statuses. A solve's time is a :class:`Deadline`, enforced
by HiGHS's limit and by an interrupt callback (HiGHS's own limit alone lets some
heuristics run past it); :class:`GrowingLP` is the relaxation the fleet program
adds columns and cuts to as it goes, re-solved from its last basis."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepvm.base.config import DEFAULT_TIME_LIMIT_S

__all__ = [
    "ERROR",
    "INFEASIBLE",
    "LIMIT_NO_INCUMBENT",
    "LIMIT_WITH_INCUMBENT",
    "OPTIMAL",
    "Deadline",
    "FloatArray",
    "GrowingLP",
    "Solution",
    "quiet_stdout",
    "root_cuts",
    "solve",
]

FloatArray = np.ndarray

# The planner's statuses for a solve.
OPTIMAL = "optimal"
INFEASIBLE = "infeasible"
LIMIT_WITH_INCUMBENT = "limit_with_incumbent"  # stopped by the time limit, with a plan
LIMIT_NO_INCUMBENT = "limit_no_incumbent"  # stopped by the time limit, no plan found
ERROR = "error"


class Deadline:
    """When a solve must stop, on ``clock`` (seconds; tests give a stand-in that
    counts solver work instead, so no test depends on the machine's speed)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.perf_counter) -> None:
        self.seconds = float(seconds)
        self.clock = clock
        self.ends = clock() + self.seconds

    def left(self) -> float:
        return max(self.ends - self.clock(), 0.0)

    def passed(self) -> bool:
        return self.clock() >= self.ends

    def share(self, fraction: float) -> Deadline:
        """A deadline for one step: ``fraction`` of the time left, on the same clock."""
        part = Deadline(0.0, self.clock)
        part.seconds = fraction * self.left()
        part.ends = min(part.ends + part.seconds, self.ends)
        return part

    @contextlib.contextmanager
    def watching(self, h: Any) -> Iterator[None]:
        """While ``h`` (a highspy.Highs) runs: stopped once the deadline has passed,
        by HiGHS's own time limit and by its interrupt callbacks asking this clock."""
        h.setOptionValue("time_limit", float(max(self.left(), 0.0)))

        def stop(event: Any) -> None:
            if self.passed():
                event.interrupt()

        h.cbSimplexInterrupt.subscribe(stop)
        h.cbMipInterrupt.subscribe(stop)
        try:
            yield
        finally:
            h.cbSimplexInterrupt.unsubscribe(stop)
            h.cbMipInterrupt.unsubscribe(stop)


@dataclass(frozen=True)
class Solution:
    status: str
    values: FloatArray  # per column; empty unless a solution exists
    objective: float
    row_duals: FloatArray  # LP only: per row (HiGHS: >= 0 for a binding <= row when maximising)
    seconds: float
    # MIP only: the best bound proven on the objective of any x better than the
    # cutoff (HiGHS's dual bound, in the objective's own sense); nan where none
    bound: float = math.nan


# HiGHS's presolve rules left out where ``solve`` is asked for no probing: probing
# and enumeration, bits 15 and 16 of its ``presolve_rule_off``.
PRESOLVE_RULES_OFF = (1 << 15) | (1 << 16)
# HiGHS's heuristics that solve a sub-MIP, left out where ``solve`` is asked for no
# sub-MIPs: RINS, RENS and the root reduced-cost heuristic.
SUB_MIP_HEURISTICS = (
    "mip_heuristic_run_rins",
    "mip_heuristic_run_rens",
    "mip_heuristic_run_root_reduced_cost",
)


def solve(
    objective: FloatArray,
    rows: Any,  # scipy.sparse matrix, rows x columns
    upper: FloatArray,  # every row is `rows @ x <= upper`
    *,
    maximise: bool,
    integer: bool,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    feasibility_tolerance: float = 1e-6,
    start: FloatArray | None = None,
    presolve: bool = False,
    column_upper: FloatArray | None = None,
    deadline: Deadline | None = None,
    cutoff: float | None = None,
    probing: bool = True,
    sub_mips: bool = True,
    relative_gap: float = 0.0,
) -> Solution:
    """Solve max (or min) objective @ x subject to rows @ x <= upper, 0 <= x <=
    column_upper (default 1), x integer when ``integer``, to a proven optimum (zero
    gap, or ``relative_gap``). ``start``: a feasible x the MIP search begins from
    (an upper bound on the search's work, never its answer unless it is optimal).
    ``deadline``: when to stop (default: ``time_limit_s`` from now). ``cutoff``:
    only plans better than this objective are sought (a known plan's value,
    without the plan): none found is ``infeasible``. ``probing``: False leaves
    presolve's probing and enumeration out (PRESOLVE_RULES_OFF). ``sub_mips``:
    False leaves out the heuristics that search a sub-MIP for plans
    (SUB_MIP_HEURISTICS); the proof of the optimum is unchanged."""
    import highspy
    import scipy.sparse as sp

    n = len(objective)
    if n == 0:  # nothing to choose: HiGHS calls an empty model an error
        return Solution(OPTIMAL, np.zeros(0), 0.0, np.zeros(rows.shape[0]), 0.0)
    csc = sp.csc_matrix(rows)
    h = _quiet_highs()
    h.setOptionValue("mip_rel_gap", float(relative_gap))
    if cutoff is not None:
        h.setOptionValue("objective_bound", _objective_bound(cutoff, maximise))
    h.setOptionValue("mip_abs_gap", 1e-12)
    h.setOptionValue("mip_feasibility_tolerance", feasibility_tolerance)
    h.setOptionValue("primal_feasibility_tolerance", feasibility_tolerance)
    if integer and not presolve:
        h.setOptionValue("presolve", "off")
    elif integer and not probing:
        h.setOptionValue("presolve_rule_off", PRESOLVE_RULES_OFF)
    if integer and not sub_mips:
        for option in SUB_MIP_HEURISTICS:
            h.setOptionValue(option, False)
    lp = _lp(objective, csc, upper, column_upper, maximise=maximise, integer=integer)
    began = time.perf_counter()
    h.passModel(lp)
    if integer and start is not None:
        given = highspy.HighsSolution()
        given.col_value = list(np.asarray(start, dtype=float))
        given.value_valid = True
        h.setSolution(given)
    with quiet_stdout(), (deadline or Deadline(time_limit_s)).watching(h):
        h.run()
    seconds = time.perf_counter() - began
    model = h.getModelStatus()
    statuses = highspy.HighsModelStatus
    info = h.getInfo()
    has_plan = info.primal_solution_status == 2  # HiGHS: a feasible solution exists
    if model == statuses.kOptimal:
        status = OPTIMAL
    elif model == statuses.kInfeasible:
        status = INFEASIBLE
    elif model in (statuses.kTimeLimit, statuses.kInterrupt, statuses.kSolutionLimit):
        status = LIMIT_WITH_INCUMBENT if has_plan else LIMIT_NO_INCUMBENT
    else:
        status = ERROR
    # a stopped search still proves its bound (kept where the root's LP was solved)
    bound = float(info.mip_dual_bound) if integer else math.nan
    bound = bound if math.isfinite(bound) else math.nan
    if not has_plan:
        return Solution(status, np.zeros(0), math.nan, np.zeros(0), seconds, bound)
    solution = h.getSolution()
    duals = np.asarray(solution.row_dual, dtype=float) if not integer else np.zeros(0)
    return Solution(
        status,
        np.asarray(solution.col_value, dtype=float),
        float(info.objective_function_value),
        duals,
        seconds,
        bound,
    )


def _objective_bound(cutoff: float, maximise: bool) -> float:
    """HiGHS's ``objective_bound`` for "only plans better than ``cutoff``": HiGHS
    minimises internally and reads the option on that objective, the negation of a
    maximisation's (HiGHS 1.x: a maximisation's own value there cut nothing off)."""
    return -float(cutoff) if maximise else float(cutoff)


def _quiet_highs() -> Any:
    """A highspy.Highs that prints nothing (its banner goes to file descriptor 1)."""
    import highspy

    with quiet_stdout():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


def _lp(
    objective: FloatArray,
    csc: Any,  # scipy.sparse csc, rows x columns
    upper: FloatArray,
    column_upper: FloatArray | None,
    *,
    maximise: bool,
    integer: bool,
) -> Any:
    """``objective @ x`` over ``csc @ x <= upper``, 0 <= x <= column_upper (default 1
    where integer, else no bound), as a highspy.HighsLp."""
    import highspy

    n = len(objective)
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = csc.shape[0]
    lp.col_cost_ = np.asarray(objective, dtype=float)
    lp.col_lower_ = np.zeros(n)
    if column_upper is not None:
        lp.col_upper_ = np.asarray(column_upper, dtype=float)
    else:
        lp.col_upper_ = np.ones(n) if integer else np.full(n, math.inf)
    lp.row_lower_ = np.full(csc.shape[0], -math.inf)
    lp.row_upper_ = np.asarray(upper, dtype=float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = csc.indptr
    lp.a_matrix_.index_ = csc.indices
    lp.a_matrix_.value_ = csc.data
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = csc.shape[0]
    lp.sense_ = highspy.ObjSense.kMaximize if maximise else highspy.ObjSense.kMinimize
    if integer:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    return lp


def root_cuts(
    objective: FloatArray,
    rows: Any,  # scipy.sparse matrix, rows x columns
    upper: FloatArray,  # every row is `rows @ x <= upper`
    column_upper: FloatArray,
    *,
    deadline: Deadline,
) -> tuple[Any, FloatArray]:
    """The cuts HiGHS's root finds for ``max objective @ x`` (x integer, within the
    rows and 0 <= x <= column_upper): the rows of its LP after its cut rounds,
    ``cuts @ x <= rhs`` (csr, cuts x columns), valid for every such x. Without a
    cutoff: given the best plan's value as one (``_objective_bound``), HiGHS's
    root handed over fewer cuts, and the fleet's face kept more columns (the
    saved three-cloud 100-job program: 2,236 instead of 468). Without presolve
    (so that they are over these columns) and without symmetry handling (which
    keeps one of each set of symmetric plans, and the caller tells such plans
    apart by another objective); HiGHS is stopped once it has handed them over.
    None found (the root proved it all, or the deadline passed first): no rows."""
    import scipy.sparse as sp

    n = len(objective)
    csc = sp.csc_matrix(rows)
    h = _quiet_highs()
    h.setOptionValue("presolve", "off")
    h.setOptionValue("mip_detect_symmetry", False)
    for option in SUB_MIP_HEURISTICS:
        h.setOptionValue(option, False)
    # Only its cuts are wanted: none of its effort goes to finding plans (measured,
    # benchmarks/fleet.py --replay: three clouds, 1,000 jobs, 5.4 -> 4.9 s).
    h.setOptionValue("mip_heuristic_effort", 0.0)
    h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
    h.passModel(_lp(objective, csc, upper, column_upper, maximise=True, integer=True))
    found: list[tuple[Any, FloatArray]] = []

    def take(event: Any) -> None:
        out = event.data_out
        if found or out.cutpool_num_col != n:
            return
        lower = np.asarray(out.cutpool_lower, dtype=float)
        rhs = np.asarray(out.cutpool_upper, dtype=float)
        matrix = sp.csr_matrix(
            (np.array(out.cutpool_value, dtype=float), np.array(out.cutpool_index),
             np.array(out.cutpool_start)), shape=(out.cutpool_num_cut, n),
        )  # fmt: skip
        # HiGHS keeps its cuts as `cut @ x <= rhs`; any other form is left out.
        keep = np.isneginf(lower) & np.isfinite(rhs)
        found.append((matrix[keep], rhs[keep]))

    def handed_over(event: Any) -> None:
        if found:
            event.interrupt()

    h.cbMipGetCutPool.subscribe(take)
    h.cbMipInterrupt.subscribe(handed_over)
    with quiet_stdout(), deadline.watching(h):
        h.run()
    if not found:
        return sp.csr_matrix((0, n)), np.zeros(0)
    return found[0]


class GrowingLP:
    """An LP relaxation ``max c @ x, rows @ x <= upper, 0 <= x (<= its bound)`` that grows: columns
    (column generation) and rows (cuts) are added to the model HiGHS holds, and
    each solve starts from the last one's basis."""

    def __init__(self, upper: FloatArray) -> None:
        import highspy

        self.h = _quiet_highs()
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        n = len(upper)
        self.h.addRows(n, np.full(n, -math.inf), np.asarray(upper, dtype=float), 0,
                       np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32),
                       np.zeros(0))  # fmt: skip
        self.columns = 0
        self.rows = n

    def add_columns(
        self, objective: FloatArray, matrix: Any, upper: FloatArray | None = None
    ) -> None:
        """Columns of ``matrix`` (scipy.sparse, every row of the model so far), each
        within 0 and ``upper`` (default: no bound)."""
        import scipy.sparse as sp

        csc = sp.csc_matrix(matrix)
        k = csc.shape[1]
        if not k:
            return
        bounds = np.full(k, math.inf) if upper is None else np.asarray(upper, dtype=float)
        self.h.addCols(k, np.asarray(objective, dtype=float), np.zeros(k), bounds,
                       csc.nnz, csc.indptr[:-1].astype(np.int32), csc.indices.astype(np.int32),
                       csc.data.astype(float))  # fmt: skip
        self.columns += k

    def add_rows(self, upper: FloatArray, matrix: Any) -> None:
        """Rows of ``matrix`` (scipy.sparse, every column of the model so far)."""
        import scipy.sparse as sp

        csr = sp.csr_matrix(matrix)
        n = csr.shape[0]
        if not n:
            return
        self.h.addRows(n, np.full(n, -math.inf), np.asarray(upper, dtype=float), csr.nnz,
                       csr.indptr[:-1].astype(np.int32), csr.indices.astype(np.int32),
                       csr.data.astype(float))  # fmt: skip
        self.rows += n

    def solve(self, deadline: Deadline) -> tuple[str, FloatArray, FloatArray, float]:
        """Status, x, the rows' duals (>= 0) and the objective."""
        import highspy

        with quiet_stdout(), deadline.watching(self.h):
            self.h.run()
        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return LIMIT_NO_INCUMBENT, np.zeros(0), np.zeros(0), math.nan
        solution = self.h.getSolution()
        x = np.asarray(solution.col_value, dtype=float)
        duals = np.maximum(np.asarray(solution.row_dual, dtype=float), 0.0)
        return OPTIMAL, x, duals, float(self.h.getInfo().objective_function_value)


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """HiGHS prints a banner on file descriptor 1 from C++; keep it out of --json."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # pytest capture, notebooks
        yield
        return
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)
