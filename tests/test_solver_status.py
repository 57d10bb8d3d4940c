"""Every solver outcome maps to a planner status; values only from verified optima."""

import json
from types import SimpleNamespace

import pytest
from helpers import cpu_row, gpu_row, job, make_fleet
from milp_oracle import (
    ERROR,
    INFEASIBLE,
    LIMIT_NO_INCUMBENT,
    LIMIT_WITH_INCUMBENT,
    OPTIMAL,
    MilpPlanner,
    solve_status,
)

from deepvm.base.errors import SolverError
from deepvm.cli import main


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
    planner = MilpPlanner(fleet, job(), budget_cap=10, time_limit_s=0.0)
    with pytest.raises(SolverError, match="time limit"):
        planner.optimise("deepvm", 10, 1)
    outcome = planner.milp.solve(planner._scores[False], 10)
    assert outcome.status in (LIMIT_NO_INCUMBENT, LIMIT_WITH_INCUMBENT)
    assert outcome.config is None
    assert main(["fleet", "--time-limit", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--time-limit" in err


def test_time_limit_on_a_single_job_command_is_accepted_and_says_it_does_nothing(capsys):
    """No solver runs for one job: the flag is hidden, kept for scripts, and warns."""
    assert main(["recommend", "--budget", "3", "--json", "--time-limit", "5"]) == 0
    captured = capsys.readouterr()
    assert "--time-limit has no effect" in captured.err
    assert json.loads(captured.out)["recommendations"]
    assert main(["recommend", "--help"]) == 0
    assert "--time-limit" not in capsys.readouterr().out


def test_highs_statuses_of_the_fleet_program():
    """deepvm.planner._highs: an optimum, an infeasible program, and a time limit."""
    import numpy as np
    import scipy.sparse as sp

    from deepvm.planner import _highs as highs

    rows = sp.csr_matrix(np.array([[1.0, 1.0, 1.0], [2.0, 3.0, 4.0]]))
    best = highs.solve(
        np.array([3.0, 2.0, 5.0]), rows, np.array([1.0, 3.0]), maximise=True, integer=True
    )
    assert best.status == highs.OPTIMAL and np.round(best.values).tolist() == [1, 0, 0]
    lp = highs.solve(
        np.array([3.0, 2.0, 5.0]), rows, np.array([1.0, 3.0]), maximise=True, integer=False
    )
    assert lp.status == highs.OPTIMAL and lp.objective >= best.objective
    assert lp.row_duals.shape == (2,) and (lp.row_duals >= -1e-9).all()
    none = highs.solve(
        np.ones(3), sp.csr_matrix(-np.ones((1, 3))), np.array([-5.0]), maximise=True, integer=True
    )
    assert none.status == highs.INFEASIBLE and none.values.size == 0
    limited = highs.solve(
        np.array([3.0, 2.0, 5.0]), rows, np.array([1.0, 3.0]), maximise=True, integer=True,
        time_limit_s=0.0,
    )  # fmt: skip
    assert limited.status in (highs.LIMIT_NO_INCUMBENT, highs.LIMIT_WITH_INCUMBENT)


@pytest.mark.parametrize("maximise", [True, False])
def test_a_cutoff_keeps_only_plans_better_than_it_either_way(maximise):
    """``cutoff``: only plans better than it are sought, none is ``infeasible``. HiGHS
    reads its option on the objective it minimises, a maximisation's negation: a
    maximisation's own cutoff, passed as it was, cut nothing off (the fleet's
    neighbourhoods searched without theirs)."""
    import numpy as np
    import scipy.sparse as sp

    from deepvm.planner import _highs as highs

    rows = sp.csr_matrix(np.array([[1.0, 1.0, 1.0], [2.0, 3.0, 4.0]]))
    sign = 1.0 if maximise else -1.0  # the same plans; the best is worth 3 either way
    value = sign * np.array([3.0, 2.0, 5.0])

    def solve(cutoff: float):  # type: ignore[no-untyped-def]
        return highs.solve(value, rows, np.array([1.0, 3.0]), maximise=maximise,
                           integer=True, cutoff=sign * cutoff)  # fmt: skip

    below, above = solve(2.5), solve(3.5)
    assert below.status == highs.OPTIMAL and below.objective == pytest.approx(sign * 3.0)
    assert np.round(below.values).tolist() == [1, 0, 0]
    assert above.status == highs.INFEASIBLE and above.values.size == 0


def test_the_searches_without_probing_or_sub_mips_find_the_same_optimum():
    """``probing=False`` (the fleet's value search) leaves two presolve rules out and
    ``sub_mips=False`` (its cost stage) HiGHS's sub-MIP heuristics, never the answer:
    random small knapsacks with general-integer columns, solved every way, reach
    the same optimum, and the options are the ones HiGHS is given."""
    import highspy
    import numpy as np
    import scipy.sparse as sp

    from deepvm.planner import _highs as highs

    given: list[tuple[str, object]] = []
    real = highspy.Highs.setOptionValue

    def spy(self, name, value):  # type: ignore[no-untyped-def]
        given.append((name, value))
        return real(self, name, value)

    rng = np.random.default_rng(5)
    ways = [(True, True), (False, True), (True, False)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(highspy.Highs, "setOptionValue", spy)
        for _ in range(20):
            n = int(rng.integers(4, 12))
            rows = sp.csr_matrix(rng.integers(0, 6, size=(3, n)).astype(float))
            upper, value = rng.integers(4, 15, size=3).astype(float), rng.uniform(0.1, 2.0, n)
            bounds = rng.integers(1, 4, size=n).astype(float)
            answers = []
            for probing, sub_mips in ways:
                given.clear()
                answers.append(
                    highs.solve(
                        value,
                        rows,
                        upper,
                        maximise=True,
                        integer=True,
                        presolve=True,
                        column_upper=bounds,
                        probing=probing,
                        sub_mips=sub_mips,
                    )
                )
                assert (("presolve_rule_off", highs.PRESOLVE_RULES_OFF) in given) is not probing
                off = {name for name, v in given if v is False}
                assert off.issuperset(highs.SUB_MIP_HEURISTICS) is not sub_mips
            assert [a.status for a in answers] == [highs.OPTIMAL] * len(ways)
            for answer in answers[1:]:
                assert answer.objective == pytest.approx(answers[0].objective, rel=1e-9)
                assert (rows @ np.round(answer.values) <= upper + 1e-9).all()


def test_a_deadline_stops_highs_by_its_interrupt_callback():
    """The time limit is also enforced by HiGHS's interrupt callbacks asking the
    deadline's clock (HiGHS's own limit alone lets some heuristics run past it):
    with a real limit of a day, a clock that passes it after a few calls stops the
    MIP and the LP; one that never does lets them finish."""
    import numpy as np
    import scipy.sparse as sp

    from deepvm.planner import _highs as highs

    rng = np.random.default_rng(3)
    n = 40  # a knapsack of several rows: a few callbacks' work, solved in well under 1 s
    rows = sp.csr_matrix(rng.integers(1, 60, size=(4, n)).astype(float))
    value, upper = rng.uniform(1, 2, n), np.full(4, 300.0)

    def ticking(after: int):
        calls = [0]

        def clock() -> float:
            calls[0] += 1
            return 0.0 if calls[0] <= after else 1e12

        return clock, calls

    clock, calls = ticking(3)
    stopped = highs.solve(value, rows, upper, maximise=True, integer=True,
                          deadline=highs.Deadline(86400, clock))  # fmt: skip
    assert stopped.status in (highs.LIMIT_WITH_INCUMBENT, highs.LIMIT_NO_INCUMBENT)
    assert calls[0] > 3  # the callback asked the clock
    lp = highs.GrowingLP(upper)
    lp.add_columns(value, rows)
    clock, _ = ticking(1)
    assert lp.solve(highs.Deadline(86400, clock))[0] == highs.LIMIT_NO_INCUMBENT
    never = highs.Deadline(86400, lambda: 0.0)
    assert lp.solve(never)[0] == highs.OPTIMAL
    done = highs.solve(value, rows, upper, maximise=True, integer=True, deadline=never)
    assert done.status == highs.OPTIMAL
