"""A fleet solve that stops at its time limit still gives a plan, checked like any
other and labelled as not proven best, with the bound on how much better one
could be: whether the deadline passed in the relaxation, in the value search, in
the face's root cuts (deepvm.planner.fleet._face), or in the cost stage, or HiGHS
stopped without a plan of its own (issue 35: on a busy machine the 5 s limit ran
out in the relaxation and the fleet gave no plan at all).

Time is a stand-in clock (``highs.Deadline``'s clock) that jumps past the limit
when a given stage starts: real HiGHS runs, stopped by its interrupt callback, so
these tests do not depend on how fast the machine is."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import scipy.sparse as sp

from deepvm.base.config import JobSpec
from deepvm.base.errors import ParameterError
from deepvm.cli import main
from deepvm.planner import Inputs
from deepvm.planner import _highs as highs
from deepvm.planner.fleet import _model as fleet_model
from deepvm.planner.fleet import _program as fleet_program
from deepvm.planner.fleet.plan import plan_fleet
from deepvm.planner.fleet.types import FleetPlan, RegisteredJob
from tests.helpers import stopped_just_under


def hard_jobs(count: int = 30) -> list[RegisteredJob]:
    """Jobs of every objective on the three shipped clouds, more than the quotas hold."""
    rng = random.Random(7)
    jobs = []
    for k in range(count):
        objective = rng.choice(("throughput", "paper", "goodput", "cost"))
        spec = JobSpec(
            workload=rng.choice(("resnet50", "gpt2", "bert-base", "vit-b16")),
            objective=objective,
            work_flops=rng.choice([5e17, 2e18, 8e18]) if objective == "cost" else None,
        )
        budget = float(rng.choice([2, 3, 4, 6, 8, 10]))
        jobs.append(RegisteredJob(f"job{k}", budget, spec, priority=rng.choice([1.0, 2.0, 3.0])))
    return jobs


class StageClock:
    """Stands in for the clock: still until ``expire`` is called, then past any limit."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def expire(self) -> None:
        self.now = 1e12


def stop_in(monkeypatch, stage: str) -> StageClock:
    """The deadline passes as ``stage`` starts: the relaxation, the value search, the
    face's root cuts or the cost stage (real HiGHS, interrupted), or the value
    search's HiGHS answers as it does when stopped before it holds a plan
    (``no-plan``)."""
    clock = StageClock()

    class OnStageClock(highs.Deadline):
        def __init__(self, seconds: float) -> None:
            super().__init__(seconds, clock)

    monkeypatch.setattr(fleet_program, "Deadline", OnStageClock)
    real_lp, real_mip = highs.GrowingLP.solve, fleet_model.solve_integer

    def lp(self, deadline):
        if stage == "relaxation":
            clock.expire()
        return real_lp(self, deadline)

    def mip(objective, maximise, *args, **options):
        if (stage == "value" and maximise) or (stage == "cost" and not maximise):
            clock.expire()
        if stage == "no-plan" and maximise:
            clock.expire()
            return fleet_model.Outcome(highs.LIMIT_NO_INCUMBENT, np.zeros(0), 0.0)
        return real_mip(objective, maximise, *args, **options)

    real_cuts = highs.root_cuts

    def root_cuts(*args, **kwargs):  # type: ignore[no-untyped-def]
        if stage == "face":
            clock.expire()
        return real_cuts(*args, **kwargs)

    monkeypatch.setattr(highs.GrowingLP, "solve", lp)
    monkeypatch.setattr(fleet_model, "solve_integer", mip)
    monkeypatch.setattr(highs, "root_cuts", root_cuts)
    return clock


def cost_stage_outcomes(monkeypatch) -> list[str]:
    """Each program solve's ``cost_status`` (the tie-break proven, stopped, or not
    run), in order, as the fleet's plans are made."""
    outcomes: list[str] = []
    real = fleet_program.solve

    def program(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real(*args, **kwargs)
        outcomes.append(result.cost_status)
        return result

    monkeypatch.setattr(fleet_program, "solve", program)
    return outcomes


@pytest.fixture(scope="module")
def optimum():
    """The jobs, the inputs, and their plan unhindered (the optimum)."""
    jobs, inputs = hard_jobs(), Inputs.load()
    return jobs, inputs, plan_fleet(jobs, inputs)


def check_plan(plan, jobs, inputs) -> None:
    planned = [j for j in plan.jobs if j.planned]
    assert len(planned) >= len(jobs) // 2  # a plan, not nothing
    value = sum(j.priority * j.value for j in plan.jobs)
    assert abs(value - plan.objective_value) < 1e-6 * value
    for use in plan.usage:  # within every quota (the separate check passed too)
        assert use.quota is None or use.used <= use.quota + 1e-9


@pytest.mark.parametrize("stage", ["relaxation", "value", "face", "no-plan"])
def test_a_time_limited_solve_gives_a_checked_plan_and_its_bound(monkeypatch, optimum, stage):
    jobs, inputs, best = optimum
    assert (best.status, best.tie_break_status) == ("optimal", "optimal")
    clock = stop_in(monkeypatch, stage)
    outcomes = cost_stage_outcomes(monkeypatch)
    plan = plan_fleet(jobs, inputs, time_limit_s=5)
    assert clock.now > 0  # the deadline did pass, in that stage
    assert plan.status == "limit_with_incumbent"
    assert outcomes == [""]  # the value is not proven: the cost stage did not run
    assert plan.tie_break_status == "not_run"
    assert plan.objective_value <= best.objective_value + 1e-9 <= plan.objective_bound + 1e-6
    check_plan(plan, jobs, inputs)


def test_a_deadline_in_the_cost_stage_keeps_the_proven_value(monkeypatch, optimum):
    """The value is proven before the cost stage starts: the plan is optimal in value,
    its tie-break (the least cost among equals) not proven, and the program says so
    (``cost_status``, which benchmarks/fleet.py reports)."""
    jobs, inputs, best = optimum
    clock = stop_in(monkeypatch, "cost")
    outcomes = cost_stage_outcomes(monkeypatch)
    plan = plan_fleet(jobs, inputs, time_limit_s=5)
    assert clock.now > 0
    assert plan.status == "optimal"
    assert outcomes == [highs.LIMIT_WITH_INCUMBENT]
    assert plan.tie_break_status == "limit_with_incumbent"  # and the plan says so
    assert plan.objective_value == pytest.approx(best.objective_value, rel=1e-9)
    cost = sum(j.cluster.hourly_cost for j in plan.jobs if j.planned)
    least = sum(j.cluster.hourly_cost for j in best.jobs if j.planned)
    assert cost >= least - 1e-6
    check_plan(plan, jobs, inputs)


def test_the_fleet_table_keeps_whether_the_tie_break_is_proven(monkeypatch, optimum, tmp_path):
    """The store's fleet table carries tie_break_status beside status: a plan whose
    cost stage was stopped reads back as optimal in value, its tie-break not proven."""
    from deepvm.records.results import write_fleet
    from deepvm.store import Store

    jobs, inputs, best = optimum
    stop_in(monkeypatch, "cost")
    plan = plan_fleet(jobs, inputs, time_limit_s=5)
    store = Store.open(str(tmp_path / "store"))
    write_fleet(best, store, run_kind="nightly", snapshot_date="2026-12-01")
    write_fleet(plan, store, run_kind="nightly", snapshot_date="2026-12-02")
    rows = Store.open(str(tmp_path / "store")).read("fleet")
    by_date = rows.groupby(rows["snapshot_date"].astype(str))
    assert set(by_date.get_group("2026-12-01")["tie_break_status"]) == {"optimal"}
    night = by_date.get_group("2026-12-02")
    assert set(night["status"]) == {"optimal"}
    assert set(night["tie_break_status"]) == {"limit_with_incumbent"}


def hard_jobs_file(path) -> str:
    """hard_jobs() as a --jobs file."""
    lines = []
    for job in hard_jobs():
        lines.append(
            f'[[job]]\nname = "{job.name}"\nworkload = "{job.spec.workload}"\n'
            f"budget = {job.budget}\npriority = {job.priority}\n"
            f'objective = "{job.spec.objective}"\n'
            + (f"work_flops = {job.spec.work_flops}\n" if job.spec.work_flops else "")
        )
    (path / "jobs.toml").write_text("\n".join(lines))
    return str(path / "jobs.toml")


def test_the_cli_prints_the_plan_and_warns(tmp_path, capsys, monkeypatch):
    stop_in(monkeypatch, "relaxation")
    argv = ["fleet", "--json", "--jobs", hard_jobs_file(tmp_path), "--time-limit", "5"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["status"] == "limit_with_incumbent"
    assert out["tie_break_status"] == "not_run"
    assert out["objective_value"] <= out["objective_bound"]
    assert "stopped at its time limit" in captured.err and "raise --time-limit" in captured.err


def test_the_cli_says_when_only_the_tie_break_is_unproven(tmp_path, capsys, monkeypatch):
    """Stopped in the cost stage: the value is proven (status optimal), and the
    output says the cheapest of that value is not (it said nothing before)."""
    stop_in(monkeypatch, "cost")
    argv = ["fleet", "--json", "--jobs", hard_jobs_file(tmp_path), "--time-limit", "5"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert (out["status"], out["tie_break_status"]) == ("optimal", "limit_with_incumbent")
    assert "proving the plan's value" in captured.err
    assert "may cost less" in captured.err and "raise --time-limit" in captured.err


def test_the_cli_tells_a_plan_just_under_its_bound_from_the_bound(capsys, monkeypatch):
    """300 jobs over three clouds stopped 0.0015 % under the bound, and the warning
    read "value 344.3 ... no plan is worth more than 344.3". The two numbers are
    told apart now, and the gap is said."""
    stopped_just_under(monkeypatch)
    assert main(["fleet", "--time-limit", "5"]) == 0
    err = capsys.readouterr().err
    assert "(value 344.26) fits" in err
    assert "no plan is worth more than 344.27 (0.0015 % more)" in err


def test_the_nightly_takes_the_fleet_time_limit_and_says_what_it_left_unproven(
    tmp_path, capsys, monkeypatch
):
    """A team whose fleet needs more than 30 s (300 jobs, or jobs that all differ)
    could raise the limit for `deepvm fleet` only: the nightly planned at 30 s,
    unproven every night, and said nothing of it on its output."""
    from deepvm.store import Store

    limits = stopped_just_under(monkeypatch)
    store = str(tmp_path / "store")
    argv = ["nightly", "--store", store, "--date", "2026-12-01", "--time-limit", "240", "-q"]
    assert main(argv) == 0
    assert limits == [240.0]
    err = capsys.readouterr().err
    assert "warning: the fleet solve stopped at its time limit" in err
    assert "no plan is worth more than 344.27 (0.0015 % more); raise --time-limit" in err
    night = Store.open(store).read("fleet")
    assert set(night["status"]) == {"limit_with_incumbent"}
    assert main(["nightly", "--store", store, "--date", "2026-12-02", "-q"]) == 0
    assert limits == [240.0, 30.0]  # the default, as `deepvm fleet`'s


STOPPED = "the fleet solve stopped at its time limit after 30.0 s"


@pytest.mark.parametrize(
    ("status", "tie_break", "bound", "words"),
    [
        ("optimal", "optimal", 344.26, None),
        ("limit_no_incumbent", "not_run", math.nan, None),
        ("limit_with_incumbent", "not_run", math.nan,
         f"{STOPPED}: the plan (value 344.3) fits every quota and budget; raise S to prove "
         "the best"),
        ("limit_with_incumbent", "not_run", 344.264924 * 1.25,
         f"{STOPPED}: the plan (value 344.3) fits every quota and budget, and no plan is "
         "worth more than 430.3 (25 % more); raise S to prove the best"),
        ("optimal", "limit_with_incumbent", 344.26,
         f"{STOPPED}, after proving the plan's value (344.3) the best: a plan of that value "
         "may cost less; raise S to prove the cheapest"),
    ],
)  # fmt: skip
def test_what_the_limit_left_unproven_in_words(status, tie_break, bound, words):
    plan = FleetPlan(status, 344.264924, None, [], [], "test", 30.04, 0, 0, bound, tie_break)
    assert plan.unproven_words("S") == words


@pytest.mark.parametrize("seconds", [0.0, -1.0, math.nan, math.inf])
def test_a_fleet_time_limit_that_is_not_a_number_of_seconds_is_refused_by_name(seconds):
    """0 would stop before any plan, and inf or nan sets no deadline: the CLI's type
    refuses them, and the library names the parameter."""
    with pytest.raises(ParameterError, match="time_limit_s"):
        plan_fleet(hard_jobs(), Inputs.load(), time_limit_s=seconds)


def random_program(seed: int = 0, classes: int = 30, capacity: tuple = (100, 90, 110, 95)) -> tuple:
    """``classes`` classes of 20 clusters each over 4 quotas of ``capacity`` (the
    default: about a third of the 30 classes fit)."""
    rng = np.random.default_rng(seed)
    per = 20
    usage = sp.csr_matrix(rng.integers(1, 9, size=(4, classes * per)).astype(float) * 4)
    weight = np.round(rng.uniform(0.5, 1.0, classes * per), 3)
    cost = rng.uniform(0.1, 1.0, classes * per)
    owner = np.repeat(np.arange(classes), per)
    return weight, cost, owner, usage, np.array(capacity, dtype=float)


def arrays_of(weight, owner, usage, capacity):  # type: ignore[no-untyped-def]
    """A random program's arrays, one job per class, as the program's steps read them."""
    from deepvm.planner.fleet._arrays import ProgramArrays

    return ProgramArrays(weight, owner, np.ones(owner.max() + 1), usage.tocsc(), capacity)


def test_a_stopped_proof_bounds_the_plan_by_what_it_proved(monkeypatch):
    """The value's proof over the face (every plan better than the known one is over
    its columns) proves a bound as it goes: stopped after its root, the bound the
    program reports is that one, between the optimum and the relaxation's (which
    it reported before). The stop is counted in HiGHS's interrupt polls, not in
    seconds."""
    from deepvm.planner.fleet import _relaxation

    args = (*random_program(), 60)
    best = fleet_program.solve(*args)
    assert best.status == "optimal"

    relaxed: list[float] = []
    real_relax = _relaxation.relax

    def relax(*a, **k):  # type: ignore[no-untyped-def]
        lp = real_relax(*a, **k)
        relaxed.append(lp.bound)
        return lp

    searches: list[str] = []
    real_mip = fleet_model.solve_integer

    def mip(objective, maximise, *a, **k):  # type: ignore[no-untyped-def]
        if maximise:
            searches.append("value")
        if len(searches) == 2 and maximise:  # the proof: stopped after 20 polls
            polls = iter(range(1, 10**9))
            k["deadline"] = highs.Deadline(20, lambda: next(polls))
        return real_mip(objective, maximise, *a, **k)

    monkeypatch.setattr(_relaxation, "relax", relax)
    monkeypatch.setattr(fleet_model, "solve_integer", mip)
    stopped = fleet_program.solve(*args)
    assert searches == ["value", "value"]  # the first search, then the stopped proof
    assert stopped.status == "limit_with_incumbent"
    assert stopped.objective <= best.objective + 1e-9
    assert best.objective - 1e-6 <= stopped.bound < relaxed[0] - 1e-3


def stopped_at_lp(monkeypatch, solve: int) -> highs.Deadline:
    """A deadline that passes as the relaxation's ``solve``-th LP starts."""
    clock = StageClock()
    real = highs.GrowingLP.solve
    solves = iter(range(1, 10**9))

    def lp(self, deadline):  # type: ignore[no-untyped-def]
        if next(solves) == solve:
            clock.expire()
        return real(self, deadline)

    monkeypatch.setattr(highs.GrowingLP, "solve", lp)
    return highs.Deadline(5, clock)


def test_the_plan_before_any_solve_packs_clusters_by_value_per_share_of_a_quota(monkeypatch):
    """Stopped before the relaxation's first LP, the plan is the one made without a
    solver. Each job's most valuable cluster takes the whole quota here; four
    smaller ones fit. Before, that plan took the large one for the first job and
    nothing for the others (1.0; at 1,000 jobs over three clouds, 23-29 % of the
    optimum)."""
    weight = np.array([1.0, 0.8] * 4)
    owner = np.repeat(np.arange(4), 2)
    usage = sp.csr_matrix(np.array([[4.0, 1.0] * 4]))
    deadline = stopped_at_lp(monkeypatch, 1)
    stopped = fleet_program.solve(weight, np.ones(8), owner, usage, np.array([4.0]), deadline)
    assert stopped.status == "limit_with_incumbent"
    assert sorted(stopped.picked) == [1, 3, 5, 7]  # the four small clusters
    assert stopped.objective == pytest.approx(3.2)


def test_a_deadline_within_the_relaxation_rounds_a_plan_from_its_last_lp(monkeypatch):
    """Stopped at the relaxation's second LP, the plan is rounded from the first LP's
    point (a restricted program's optimum) where that is better than the plan made
    without a solver; before, that point was dropped."""
    from deepvm.planner.fleet._rounding import Rounding, greedy_plan

    weight, cost, owner, usage, capacity = random_program()
    best = fleet_program.solve(weight, cost, owner, usage, capacity, 60)
    arrays = arrays_of(weight, owner, usage, capacity)
    without_solver = arrays.value(greedy_plan(Rounding(arrays)))
    stopped = fleet_program.solve(
        weight, cost, owner, usage, capacity, stopped_at_lp(monkeypatch, 2)
    )
    assert stopped.status == "limit_with_incumbent"
    assert arrays.holds(stopped.picked)
    assert without_solver + 0.5 < stopped.objective <= best.objective + 1e-9


def counting_deadline(reads: int) -> highs.Deadline:
    """A deadline that passes at the ``reads``-th look at its clock."""
    looks = iter(range(10**9))
    return highs.Deadline(reads, lambda: next(looks))


def large_program() -> tuple:
    """300 classes over 4 quotas that hold a fraction of them."""
    return random_program(seed=3, classes=300, capacity=(900, 900, 900, 900))


def test_a_deadline_past_within_the_plan_before_any_solve_starts_no_relaxation(monkeypatch):
    """The greedy plan is made whole whatever the time (it is the plan there always
    is), but the second plan made without a solver and the relaxation look at the
    deadline: passed within that second plan, the solve returns the greedy plan
    without starting the relaxation (which, stopped at once, rounded the second
    plan again). Before, both plans were finished and the relaxation begun
    whatever the deadline said (the saved 1,000 distinct jobs' program at a 0.3 s
    limit: 1.3 s of CPU before, 0.9 s now). The stop is counted in looks at the
    clock, not seconds."""
    from deepvm.planner.fleet import _relaxation
    from deepvm.planner.fleet._rounding import Rounding, greedy_plan

    weight, cost, owner, usage, capacity = large_program()
    arrays = arrays_of(weight, owner, usage, capacity)
    relaxed: list[int] = []
    real_relax = _relaxation.relax
    monkeypatch.setattr(
        _relaxation, "relax", lambda *a, **k: relaxed.append(1) or real_relax(*a, **k)
    )
    fleet_program.solve(weight, cost, owner, usage, capacity, counting_deadline(10**6))
    assert relaxed == [1]
    relaxed.clear()
    # Its clock read when made, then once per class in the second plan: passed there.
    stopped = fleet_program.solve(weight, cost, owner, usage, capacity, counting_deadline(3))
    assert relaxed == []
    assert stopped.status == "limit_with_incumbent"
    assert arrays.holds(stopped.picked)
    assert stopped.objective >= arrays.value(greedy_plan(Rounding(arrays))) > 0


@pytest.mark.parametrize("reads", [1, 2, 5, 9, 17, 40, 80])
def test_a_plan_rounded_before_the_deadline_holds_wherever_it_stops(reads):
    """Every step of the rounded plan keeps it feasible, so stopped at any point it
    is a smaller plan, never one that breaks a quota or takes a job twice."""
    from deepvm.planner.fleet._rounding import Rounding, rounded_plan

    weight, _cost, owner, usage, capacity = large_program()
    arrays = arrays_of(weight, owner, usage, capacity)
    whole = rounded_plan(Rounding(arrays), np.zeros(len(weight)))
    stopped = rounded_plan(Rounding(arrays), np.zeros(len(weight)), counting_deadline(reads))
    assert len(stopped) <= len(whole)
    assert arrays.holds(stopped)
    assert np.bincount(owner[stopped], minlength=300).max(initial=0) <= 1
