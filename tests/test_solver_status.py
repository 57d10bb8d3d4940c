"""Every solver outcome maps to a planner status; values only from verified optima."""

from types import SimpleNamespace

import pytest
from helpers import cpu_row, gpu_row, job, make_fleet

from deepvm.cli import main
from deepvm.errors import SolverError
from deepvm.planner.milp import (
    ERROR,
    INFEASIBLE,
    LIMIT_NO_INCUMBENT,
    LIMIT_WITH_INCUMBENT,
    OPTIMAL,
    solve_status,
)
from deepvm.planner.policies import Planner


def fake(status, primal_solution_status=0):
    info = SimpleNamespace(primal_solution_status=primal_solution_status)
    return SimpleNamespace(status=status, solver_stats=SimpleNamespace(extra_stats=info))


@pytest.mark.parametrize(
    ("cvxpy_status", "primal", "ours"),
    [
        ("optimal", 2, OPTIMAL),
        ("infeasible", 0, INFEASIBLE),
        ("infeasible_or_unbounded", 0, INFEASIBLE),
        ("user_limit", 2, LIMIT_WITH_INCUMBENT),  # time limit, a feasible incumbent
        ("user_limit", 0, LIMIT_NO_INCUMBENT),  # cvxpy calls this "solution present" too
        ("optimal_inaccurate", 2, ERROR),
        ("solver_error", 0, ERROR),
        ("something new", 0, ERROR),
    ],
)
def test_status_map(cvxpy_status, primal, ours):
    assert solve_status(fake(cvxpy_status, primal)) == ours


def test_time_limit_gives_no_values_and_a_clear_error(capsys):
    fleet = make_fleet([gpu_row("g", 1.0, 0.3), cpu_row("c", 0.2)])
    planner = Planner(fleet, job(), budget_cap=10, time_limit_s=0.0, solver="milp")
    with pytest.raises(SolverError, match="time limit"):
        planner.optimise("deepvm", 10, 1)
    assert planner.milp is not None
    outcome = planner.milp.solve(planner._scores[False], 10)
    assert outcome.status in (LIMIT_NO_INCUMBENT, LIMIT_WITH_INCUMBENT)
    assert outcome.config is None
    assert main(["recommend", "--budget", "3", "--time-limit", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--time-limit" in err
