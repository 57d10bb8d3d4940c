"""Running HiGHS (the MIP/LP solver the fleet program uses) through its own
Python binding, ``highspy``: arrays in, values out, and the solver's outcome as
one of the planner's statuses. No modelling layer: the fleet program is a
0/1 matrix the planner builds itself, and handing it over directly skips
cvxpy's canonicalisation and lets a solve start from a known plan."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepvm.config import DEFAULT_TIME_LIMIT_S as DEFAULT_TIME_LIMIT_S

FloatArray = np.ndarray

# The planner's statuses for a solve.
OPTIMAL = "optimal"
INFEASIBLE = "infeasible"
LIMIT_WITH_INCUMBENT = "limit_with_incumbent"  # stopped by the time limit, with a plan
LIMIT_NO_INCUMBENT = "limit_no_incumbent"  # stopped by the time limit, no plan found
ERROR = "error"


@dataclass(frozen=True)
class Solution:
    status: str
    values: FloatArray  # per column; empty unless a solution exists
    objective: float
    row_duals: FloatArray  # LP only: per row (HiGHS: >= 0 for a binding <= row when maximising)
    seconds: float


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
) -> Solution:
    """Solve max (or min) objective @ x subject to rows @ x <= upper, 0 <= x <= 1,
    x binary when ``integer``, to a proven optimum (zero gap). ``start``: a
    feasible x the MIP search begins from (an upper bound on the search's work,
    never its answer unless it is optimal)."""
    import highspy
    import scipy.sparse as sp

    n = len(objective)
    if n == 0:  # nothing to choose: HiGHS calls an empty model an error
        return Solution(OPTIMAL, np.zeros(0), 0.0, np.zeros(rows.shape[0]), 0.0)
    csc = sp.csc_matrix(rows)
    with quiet_stdout():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(max(time_limit_s, 0.0)))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-12)
    h.setOptionValue("mip_feasibility_tolerance", feasibility_tolerance)
    h.setOptionValue("primal_feasibility_tolerance", feasibility_tolerance)
    if integer and not presolve:
        # Measured on the fleet's multiple-choice programs (benchmarks/fleet.py, three
        # fleets of 100 jobs): HiGHS's MIP presolve cost more than it saved, 9.9 s of
        # solves with it against 5.8 s without; the answers were the same.
        h.setOptionValue("presolve", "off")
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = csc.shape[0]
    lp.col_cost_ = np.asarray(objective, dtype=float)
    lp.col_lower_ = np.zeros(n)
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
    began = time.perf_counter()
    h.passModel(lp)
    if integer and start is not None:
        given = highspy.HighsSolution()
        given.col_value = list(np.asarray(start, dtype=float))
        given.value_valid = True
        h.setSolution(given)
    with quiet_stdout():
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
    if not has_plan:
        return Solution(status, np.zeros(0), math.nan, np.zeros(0), seconds)
    solution = h.getSolution()
    duals = np.asarray(solution.row_dual, dtype=float) if not integer else np.zeros(0)
    return Solution(
        status,
        np.asarray(solution.col_value, dtype=float),
        float(info.objective_function_value),
        duals,
        seconds,
    )


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
