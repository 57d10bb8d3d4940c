"""The fleet program (deepvm.planner.fleet._program) against brute force, apart from
jobs and clusters: small random programs of classes of alike jobs, shared limits
of coarse and fine grain, near-ties in value, a team budget or none. The plan must
be the most valuable, then the cheapest of those, and feasible."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepvm.planner.fleet import _program as fleet_program

DATA = Path(__file__).parent / "data"


def solve(weight, cost, owner, usage, capacity, team_budget, time_limit_s, count=None):
    """The program with the team budget as one more row of cost, as the fleet's
    shared limits build it (deepvm.planner.fleet._check.TeamBudget.columns)."""
    if team_budget is not None:
        usage = sp.vstack([sp.csr_matrix(usage), sp.csr_matrix(cost)]).tocsr()
        capacity = np.append(capacity, team_budget)
    return fleet_program.solve(weight, cost, owner, usage, capacity, time_limit_s, count=count)


def brute_force(weight, cost, owner, usage, capacity, team_budget, count):
    """(value, cost) of the best plan: every multiset of each class's columns."""
    dense = np.asarray(usage.todense()) if sp.issparse(usage) else np.asarray(usage)
    per_class = []
    for c in range(int(owner.max()) + 1):
        columns = np.flatnonzero(owner == c)
        per_class.append([
            combo for m in range(int(count[c]) + 1)
            for combo in itertools.combinations_with_replacement(columns, m)
        ])  # fmt: skip
    best = (-1.0, 0.0)
    for choice in itertools.product(*per_class):
        plan = [k for combo in choice for k in combo]
        used = dense[:, plan].sum(axis=1)
        spent = float(cost[plan].sum())
        # within float noise, as the program's own check (0.1 + 0.1 + 0.1 > 0.3)
        over = team_budget is not None and spent > team_budget + 1e-9
        if (used > capacity + 1e-9).any() or over:
            continue
        value = float(weight[plan].sum())
        if value > best[0] + 1e-9 or (abs(value - best[0]) <= 1e-9 and spent < best[1] - 1e-12):
            best = (value, spent)
    return best


def assert_best(result, weight, cost, owner, usage, capacity, team_budget, count):
    want_value, want_cost = brute_force(weight, cost, owner, usage, capacity, team_budget, count)
    plan = result.picked
    assert result.status == "optimal"
    assert float(weight[plan].sum()) == pytest.approx(want_value, rel=1e-9, abs=1e-9)
    assert float(cost[plan].sum()) == pytest.approx(want_cost, rel=1e-9, abs=1e-9)
    dense = np.asarray(usage.todense()) if sp.issparse(usage) else np.asarray(usage)
    assert (dense[:, plan].sum(axis=1) <= capacity + 1e-9).all()
    assert (np.bincount(owner[plan], minlength=len(count)) <= count).all()
    assert result.bound >= want_value - 1e-6


@st.composite
def programs(draw):
    classes = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(1, 3), min_size=classes, max_size=classes))
    owner = np.repeat(np.arange(classes), sizes)
    n, keys = len(owner), draw(st.integers(1, 3))
    grain = draw(st.lists(st.sampled_from([1.0, 4.0, 12.0]), min_size=keys, max_size=keys))
    units = draw(st.lists(st.integers(0, 4), min_size=keys * n, max_size=keys * n))
    usage = np.array(units, dtype=float).reshape(keys, n) * np.array(grain)[:, None]
    capacity = np.array(draw(st.lists(st.integers(2, 30), min_size=keys, max_size=keys)), float)
    # Values on a coarse grid make exact ties; on a fine one, near-ties.
    digits = draw(st.sampled_from([1, 6]))
    weight = np.round(draw(st.lists(st.floats(0.1, 2.0), min_size=n, max_size=n)), digits)
    cost = np.round(np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=n, max_size=n))), 2)
    count = np.array(draw(st.lists(st.integers(1, 2), min_size=classes, max_size=classes)), float)
    budget = draw(st.one_of(st.none(), st.floats(0.3, 2.0).map(lambda b: round(b, 2))))
    return np.asarray(weight), cost, owner, sp.csr_matrix(usage), capacity, budget, count


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_the_program_finds_the_best_then_the_cheapest_plan(case):
    weight, cost, owner, usage, capacity, budget, count = case
    result = solve(weight, cost, owner, usage, capacity, budget, 60, count=count)
    assert_best(result, weight, cost, owner, usage, capacity, budget, count)


def test_a_first_search_stopped_within_its_gap_is_proven_after(monkeypatch):
    """The first search stops within FIRST_SEARCH_GAP of the best over its columns:
    its plan is then no proof, and the value's proof runs even where every column
    that can beat it is among the first search's (two columns a class: the
    relaxation generates them all). Here the gap is wide (any plan stops it) and the
    neighbourhoods are left out, so that the proof alone makes the plan the best;
    the best value is HiGHS's over every column (scipy's milp), apart from ours."""
    monkeypatch.setattr(fleet_program, "FIRST_SEARCH_GAP", 1.0)
    monkeypatch.setattr(fleet_program.neighbourhoods, "improve", lambda _a, plan, _c, _d: plan)
    first_values: list[float] = []
    real = fleet_program._Program.solve

    def spy(self, columns, **kwargs):  # type: ignore[no-untyped-def]
        out = real(self, columns, **kwargs)
        if kwargs.get("relative_gap") == 1.0 and out[1] is not None:  # the first search
            first_values.append(self.arrays.value(out[1]))
        return out

    monkeypatch.setattr(fleet_program._Program, "solve", spy)
    # else the proof had nothing to do here (3 of these 8, HiGHS 1.16)
    assert proven_past_the_first_search(first_values) >= 1


def proven_past_the_first_search(first_values: list[float]) -> int:
    """Eight programs of two columns a class (the relaxation generates them all),
    each solved and checked optimal against HiGHS over every column (scipy's milp):
    how many had a first search worth less than the best (``first_values``, which
    the caller's spy fills: the first search's value first)."""
    classes, per = 20, 2
    owner = np.repeat(np.arange(classes), per)
    count = np.full(classes, 2.0)
    capacity = np.array([100.0, 90.0, 110.0])
    short = 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        usage = sp.csr_matrix(rng.integers(1, 9, size=(3, classes * per)).astype(float) * 4)
        weight = np.round(rng.uniform(0.5, 1.0, classes * per), 2)
        cost = rng.uniform(0.1, 1.0, classes * per)
        first_values.clear()
        result = fleet_program.solve(weight, cost, owner, usage, capacity, 60, count=count)
        best, _ = lexicographic_milp(weight, cost, owner, usage, capacity, None, count)
        assert result.status == "optimal"
        assert result.objective == pytest.approx(best, rel=1e-9)
        short += bool(first_values) and first_values[0] < best - 1e-9
    return short


def test_a_class_of_alike_jobs_plans_as_its_jobs_one_by_one():
    """Three alike jobs as one class (one integer column per cluster, up to 3) plan
    the same value and cost as the three jobs given one by one."""
    rng = np.random.default_rng(11)
    n, keys = 12, 3
    usage = rng.integers(0, 4, size=(keys, n)).astype(float) * 8
    weight, cost = rng.uniform(0.5, 1.0, n), rng.uniform(0.1, 1.0, n)
    capacity = np.array([40.0, 32.0, 48.0])
    one = solve(weight, cost, np.zeros(n, dtype=np.int64), sp.csr_matrix(usage),
                              capacity, None, 60, count=np.array([3.0]))  # fmt: skip
    copies = solve(
        np.tile(weight, 3), np.tile(cost, 3), np.repeat(np.arange(3), n),
        sp.csr_matrix(np.tile(usage, 3)), capacity, None, 60,
    )  # fmt: skip
    assert one.status == copies.status == "optimal"
    assert one.objective == pytest.approx(copies.objective, rel=1e-12)
    assert cost[one.picked].sum() == pytest.approx(np.tile(cost, 3)[copies.picked].sum())
    assert len(one.picked) == len(copies.picked) <= 3


def test_the_cost_stage_finds_the_cheapest_plan_of_the_best_value():
    """A case the property test found (tests/data/fleet_program_presolve_case.npz,
    two jobs of a brute-force fleet): the cost stage returned a plan $0.0025/h
    dearer than the cheapest of the same value, once because HiGHS 1.16's presolve
    called it optimal with the cuts among its rows, once because the cost stage's
    filter had its reduced costs' sign the wrong way round."""
    case = np.load(DATA / "fleet_program_presolve_case.npz")
    args = (case["weight"], case["cost"], case["owner"], sp.csr_matrix(case["usage"]),
            case["capacity"], float(case["team_budget"]))  # fmt: skip
    result = solve(*args, 60, count=case["count"])
    assert_best(result, *args, case["count"])
    assert float(case["cost"][result.picked].sum()) == pytest.approx(0.4875)


def three_searches_program():  # type: ignore[no-untyped-def]
    """A program on which all three searches run (more columns per class than the
    relaxation generates, so the value's proof follows the first search): solve's
    arguments."""
    rng = np.random.default_rng(0)
    classes, per = 8, 24
    usage = sp.csr_matrix(rng.integers(1, 9, size=(3, classes * per)).astype(float) * 4)
    weight = np.round(rng.uniform(0.5, 1.0, classes * per), 2)
    cost = rng.uniform(0.1, 1.0, classes * per)
    return (weight, cost, np.repeat(np.arange(classes), per), usage,
            np.array([40.0, 36.0, 44.0]), None, 60, np.full(classes, 2.0))  # fmt: skip


def solve_three_searches():  # type: ignore[no-untyped-def]
    """three_searches_program, solved."""
    return solve(*three_searches_program())


def test_only_the_first_search_runs_highs_sub_mip_heuristics(monkeypatch):
    """The first value search finds the plan the others start from, with HiGHS's
    sub-MIP heuristics; the value's proof and the cost stage go without them (their
    sub-MIPs took most of their time). The cost stage's gap is COST_STAGE_GAP
    (finer is float noise), the first search's FIRST_SEARCH_GAP (a plan to start
    from), the value's proof zero; none runs presolve's probing. All
    three searches run here (more columns per class than the relaxation generates)."""
    from deepvm.planner.fleet import _model as fleet_model

    asked: list[tuple[bool, bool, float]] = []
    probed: list[bool] = []
    real = fleet_model.solve_integer

    def spy(objective, maximise, *args, **kwargs):  # type: ignore[no-untyped-def]
        asked.append((maximise, kwargs.get("sub_mips", True), kwargs.get("relative_gap", 0.0)))
        probed.append(kwargs.get("probing", True))
        return real(objective, maximise, *args, **kwargs)

    monkeypatch.setattr(fleet_model, "solve_integer", spy)
    result = solve_three_searches()
    assert result.status == result.cost_status == "optimal"  # the tie-break proven too
    assert probed == [False, False, False]  # presolve's probing: in none of them
    assert asked == [
        (True, True, fleet_program.FIRST_SEARCH_GAP),  # the first value search, with them
        (True, False, 0.0),  # the value's proof, from its plan
        (False, False, fleet_program.COST_STAGE_GAP),  # the cost stage
    ]


def test_the_first_search_starts_highs_from_the_known_plan_the_others_cut_off(monkeypatch):
    """The first value search gives HiGHS the known plan as its MIP start (its sub-MIP
    heuristics search around it), without a cutoff; the value's proof and the cost
    stage get the plan in hand as a cutoff and no start (HiGHS 1.16, given both,
    once called a start optimal that was not). The start is a plan: whole jobs, each
    column within its class's count, every limit kept."""
    from deepvm.planner.fleet import _model as fleet_model

    asked: list[tuple[bool, bool, bool]] = []
    starts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    real = fleet_model.solve_integer

    def spy(objective, maximise, constraints, columns, upper, **kwargs):  # type: ignore[no-untyped-def]
        start, cutoff = kwargs.get("start"), kwargs.get("cutoff")
        asked.append((maximise, start is not None, cutoff is not None))
        if start is not None:
            starts.append((np.asarray(start), np.asarray(columns), np.asarray(upper)))
        return real(objective, maximise, constraints, columns, upper, **kwargs)

    monkeypatch.setattr(fleet_model, "solve_integer", spy)
    result = solve_three_searches()
    assert result.status == result.cost_status == "optimal"
    assert asked == [(True, True, False), (True, False, True), (False, False, True)]
    ((start, columns, upper),) = starts
    assert start.sum() >= 1 and (start == np.round(start)).all()
    assert (start >= 0).all() and (start <= upper).all()
    _weight, _cost, _owner, usage, capacity, *_ = three_searches_program()
    assert (usage[:, columns] @ start <= capacity).all()


def test_a_first_search_that_returns_its_start_unimproved_proves_nothing(monkeypatch):
    """HiGHS, given a MIP start, may call it optimal where it is not (1.16 did, with
    presolve, in the cost stage): a first search that returns its start unimproved
    gives no bound, so the value's proof still runs where every column is the first
    search's (two columns a class: the relaxation generates them all). Here HiGHS's
    first search is replaced by one that returns its start as optimal, bound and
    all, and the neighbourhoods are left out: the proof alone makes the plan the
    best; the best value is HiGHS's over every column (scipy's milp)."""
    import dataclasses

    from deepvm.planner.fleet import _model as fleet_model

    monkeypatch.setattr(fleet_program.neighbourhoods, "improve", lambda _a, plan, _c, _d: plan)
    real = fleet_model.solve_integer
    handed: list[float] = []  # the value of each first search's start

    def start_called_optimal(objective, maximise, constraints, columns, upper, **kwargs):  # type: ignore[no-untyped-def]
        out = real(objective, maximise, constraints, columns, upper, **kwargs)
        start = kwargs.get("start")
        if kwargs.get("relative_gap") == fleet_program.FIRST_SEARCH_GAP and start is not None:
            value = float(objective[columns] @ start)
            handed.append(value)
            return dataclasses.replace(out, status="optimal", values=np.asarray(start), bound=value)
        return out

    monkeypatch.setattr(fleet_model, "solve_integer", start_called_optimal)
    assert proven_past_the_first_search(handed) >= 1  # else no start was short of the best


def test_a_stopped_first_search_leaves_the_heuristics_to_the_proof(monkeypatch):
    """Where the first search was stopped (its plan weaker), the value's proof keeps
    HiGHS's sub-MIP heuristics: they still find better plans (the distinct mix)."""
    import dataclasses

    from deepvm.planner._highs import LIMIT_WITH_INCUMBENT
    from deepvm.planner.fleet import _model as fleet_model

    asked: list[tuple[bool, bool]] = []
    real = fleet_model.solve_integer

    def first_stopped(objective, maximise, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(objective, maximise, *args, **kwargs)
        asked.append((maximise, kwargs.get("sub_mips", True)))
        if len(asked) == 1:  # the first search, as if its share of time ran out
            out = dataclasses.replace(out, status=LIMIT_WITH_INCUMBENT)
        return out

    monkeypatch.setattr(fleet_model, "solve_integer", first_stopped)
    result = solve_three_searches()
    assert result.status == "optimal"
    assert asked[:2] == [(True, True), (True, True)]  # the proof with them
    assert asked[2:] == [(False, False)]  # the cost stage without


def test_the_cost_stage_relaxation_keeps_each_column_to_its_class_count():
    """The cost stage's LP relaxation bounds each column by its class's count, as the
    integer program does: its constraint objects leave out the rows those bounds
    already keep (a class of one column), so without the bounds the relaxation took
    the cheap column twice and its least cost (2) was far under any plan's (11)."""
    from deepvm.planner._highs import Deadline
    from deepvm.planner.fleet import _model

    weight, cost, owner, count = np.ones(2), np.array([1.0, 10.0]), np.array([0, 1]), np.ones(2)
    floor = 2.0  # both jobs planned: the only plan takes both columns
    constraints = [
        _model.PerClass(owner, count),
        _model.SharedLimits(sp.csc_matrix((0, 2)), np.zeros(0), count[owner]),
        _model.ValueFloor(weight, floor, 1e-9),
    ]
    assert not _model.PerClass(owner, count).rows(np.arange(2))[0].shape[0]  # left out
    relaxed = _model.least_cost_relaxation(
        cost, constraints, np.arange(2), count[owner], Deadline(60)
    )
    assert relaxed is not None
    least, added = relaxed
    assert least == pytest.approx(11.0, rel=1e-6)
    assert (least + np.maximum(added, 0.0) <= 11.0 + 1e-6).all()  # both stay in the plan


def test_the_face_narrows_after_a_proven_first_search_else_before_the_cost_stage(monkeypatch):
    """The face (deepvm.planner.fleet._face) narrows the columns from a plan the
    first search proved best of its columns, and its cuts are rows of the value's
    proof and of the cost stage; where that search was stopped (its plan too far
    under the bound to narrow anything), it narrows from the proven best, before the
    cost stage."""
    import dataclasses

    from deepvm.planner._highs import LIMIT_WITH_INCUMBENT
    from deepvm.planner.fleet import _face
    from deepvm.planner.fleet import _model as fleet_model

    steps: list[tuple[str, int]] = []  # (step, rows of cuts it was given)
    real_solve, real_narrowed = fleet_model.solve_integer, _face.narrowed

    def cut_rows(constraints):  # type: ignore[no-untyped-def]
        return sum(c.rhs.size for c in constraints if isinstance(c, fleet_model.Cuts))

    def solve_spy(objective, maximise, constraints, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = real_solve(objective, maximise, constraints, *args, **kwargs)
        steps.append(("value" if maximise else "cost", cut_rows(constraints)))
        if stopped and len(steps) == 1:  # the first search, as if its time ran out
            out = dataclasses.replace(out, status=LIMIT_WITH_INCUMBENT)
        return out

    def narrowed_spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        face = real_narrowed(*args, **kwargs)
        steps.append(("face", face.rhs.size))
        return face

    monkeypatch.setattr(fleet_model, "solve_integer", solve_spy)
    monkeypatch.setattr(_face, "narrowed", narrowed_spy)
    for stopped in (False, True):
        steps.clear()
        result = solve_three_searches()
        assert result.status == result.cost_status == "optimal"
        names = [name for name, _ in steps]
        if stopped:
            assert names == ["value", "value", "face", "cost"]
            (_, ours), (_, found), (_, cost) = steps[1], steps[2], steps[3]
            assert found > 0 and cost == ours + found  # the face's cuts: the cost stage's
        else:
            assert names == ["value", "face", "value", "cost"]
            (_, ours), (_, found), (_, proof), (_, cost) = steps
            assert found > 0 and proof == cost == ours + found  # and the proof's


def test_the_greedy_plan_keeps_every_limit_and_leaves_no_room_it_could_use():
    """The plan before any solve (deepvm.planner.fleet._rounding.greedy_plan), on
    random programs with keys of no capacity: within every limit and class count,
    and where a class has a job left, none of its clusters fits in what is left
    (each class here has no more clusters than the greedy plan tries)."""
    from deepvm.planner.fleet._arrays import ProgramArrays
    from deepvm.planner.fleet._rounding import DENSEST, Rounding, greedy_plan

    rng = np.random.default_rng(5)
    planned = 0
    for _ in range(40):
        classes, keys = int(rng.integers(2, 7)), int(rng.integers(1, 5))
        owner = np.sort(np.concatenate(
            [np.arange(classes), rng.integers(0, classes, size=int(rng.integers(0, 3 * classes)))]
        ))  # fmt: skip
        if np.bincount(owner).max() > DENSEST:
            continue
        count = rng.integers(1, 4, size=classes).astype(float)
        weight = rng.uniform(0.2, 2.0, len(owner))
        usage = rng.integers(0, 9, size=(keys, len(owner))).astype(float)
        usage[rng.random(usage.shape) < 0.4] = 0.0
        capacity = rng.integers(0, 20, size=keys).astype(float)  # some 0: no quota
        program = ProgramArrays(weight, owner, count, sp.csc_matrix(usage), capacity)
        plan = greedy_plan(Rounding(program))
        assert program.holds(plan)
        left = capacity - usage[:, plan].sum(axis=1)
        taken = np.bincount(owner[plan], minlength=classes)
        for k in np.flatnonzero(taken[owner] < count[owner]):
            assert not (usage[:, k] <= left + 1e-9).all(), (k, plan)
        planned += len(plan)
    assert planned > 20  # the checks covered plans, not empty ones


def regional_program(seed: int, budget_always: bool = False):  # type: ignore[no-untyped-def]
    """A program shaped as the three clouds' (tens to hundreds of columns): each
    column lies in one region and uses one to three of its keys (a GPU quota, a
    vCPU quota, an instance family's) in coarse grains against capacities of a few
    clusters; two in five columns are worth as much as another region's twin, and
    values lie on a grid of 0.1, 0.01 or 1e-6 by seed (ties in value, told apart by
    cost); priorities 1-3; classes of one to three alike jobs; every other seed (or
    ``budget_always``) a team budget (a row of cost)."""
    rng = np.random.default_rng(seed)
    regions, keys_per = int(rng.integers(2, 5)), int(rng.integers(1, 4))
    classes, per = int(rng.integers(6, 25)), int(rng.integers(4, 16))
    owner = np.repeat(np.arange(classes), per)
    n = len(owner)
    region = rng.integers(0, regions, n)
    grain = rng.choice([8.0, 24.0, 48.0, 96.0], size=n) * rng.integers(1, 5, n)
    rows, cols, vals = [], [], []
    for k in range(n):
        for key in rng.choice(keys_per, size=int(rng.integers(1, keys_per + 1)), replace=False):
            rows.append(region[k] * keys_per + key)
            cols.append(k)
            vals.append(grain[k] * rng.choice([1.0, 1.0, 2.0]))
    usage = sp.csr_matrix((vals, (rows, cols)), shape=(regions * keys_per, n))
    capacity = rng.choice([96.0, 192.0, 350.0, 500.0], size=regions * keys_per)
    value = np.round(rng.uniform(0.2, 1.0, n), (1, 2, 6)[seed % 3])
    twin = rng.random(n) < 0.4
    value[twin] = np.roll(value, 1)[twin]
    weight = value * rng.choice([1.0, 2.0, 3.0], classes)[owner]
    cost = np.round(rng.uniform(0.5, 20.0, n), int(rng.choice([1, 3])))
    count = rng.integers(1, 4, classes).astype(float)
    share = rng.uniform(0.2, 0.6)
    budget = None if seed % 2 and not budget_always else float(share * cost.max() * count.sum())
    return weight, cost, owner, usage, capacity, budget, count


def lexicographic_milp(weight, cost, owner, usage, capacity, budget, count):  # type: ignore[no-untyped-def]
    """(value, cost) of the best plan by scipy's milp over every column, apart from
    the program's steps (no column generation, cuts, face or neighbourhoods): the
    most value, then the least cost of plans within the tie tolerance of it."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    rows = [sp.csr_matrix((np.ones(len(owner)), (owner, np.arange(len(owner))))), usage]
    upper = [count, capacity]
    if budget is not None:
        rows.append(sp.csr_matrix(cost))
        upper.append([budget])
    shared = LinearConstraint(sp.vstack(rows).tocsr(), -np.inf, np.concatenate(upper))
    whole, bounds = np.ones(len(owner)), Bounds(0, count[owner])
    exact = {"mip_rel_gap": 0.0}
    best = -milp(-weight, integrality=whole, bounds=bounds, constraints=shared, options=exact).fun
    floor = best - fleet_program.LEXICOGRAPHIC_RTOL * max(abs(best), 1.0)
    at_best = LinearConstraint(weight[None, :], floor, np.inf)
    least = milp(cost, integrality=whole, bounds=bounds, constraints=[shared, at_best],
                 options=exact).fun  # fmt: skip
    return best, least


def test_regional_programs_of_hundreds_of_columns_match_milp_over_every_column(monkeypatch):
    """The program's whole path (column generation and cuts, the first search, the
    neighbourhoods, the face, the value's proof, the cost stage) on programs too
    large for brute force, shaped as the clouds' (regional_program): the value and
    then the cost of scipy's milp over every column. The face narrows on some of
    them, so the path is walked, not skipped."""
    from deepvm.planner.fleet import _face

    narrowed = []
    real = _face.narrowed

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        face = real(*args, **kwargs)
        narrowed.append(len(face.columns) < len(np.union1d(args[2], args[3])))
        return face

    monkeypatch.setattr(_face, "narrowed", spy)
    for seed in range(12):
        weight, cost, owner, usage, capacity, budget, count = regional_program(seed)
        result = solve(weight, cost, owner, usage, capacity, budget, 60, count=count)
        best, least = lexicographic_milp(weight, cost, owner, usage, capacity, budget, count)
        assert result.status == result.cost_status == "optimal", seed
        assert float(weight[result.picked].sum()) == pytest.approx(best, rel=1e-9), seed
        assert float(cost[result.picked].sum()) <= least + 1e-7 * max(1.0, least), seed
        assert float(cost[result.picked].sum()) == pytest.approx(least, rel=1e-6), seed
        used = np.asarray(usage[:, result.picked].sum(axis=1)).ravel()
        assert (used <= capacity + 1e-9).all(), seed
        assert budget is None or float(cost[result.picked].sum()) <= budget + 1e-9, seed
    assert sum(narrowed) >= 3, narrowed  # the face left columns out on several


def test_a_binding_team_budget_is_a_knapsack_solved_exactly_first(monkeypatch):
    """Where the team budget binds, the program less its other limits is solved by
    dynamic programming (deepvm.planner.fleet._knapsack) before any integer program:
    its plan, where it keeps the quotas too, is the answer (value, then the least
    cost); where it breaks one, the integer program goes on from there. Both ends
    are reached here, and every plan is milp's over every column."""
    from deepvm.planner.fleet import _knapsack

    ends: list[str] = []
    real = _knapsack.solve

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(*args, **kwargs)
        ends.append("none" if out is None else "kept" if args[0].holds(out.plan) else "broke")
        return out

    monkeypatch.setattr(_knapsack, "solve", spy)
    for seed in range(12):
        weight, cost, owner, usage, capacity, _, count = regional_program(seed, True)
        # Half of them with room in every quota: the budget binds alone.
        capacity = capacity * (50.0 if seed % 2 else 1.0)
        order = np.lexsort((cost, -weight, owner))  # each job on its most valuable
        most = order[np.searchsorted(owner[order], np.arange(len(count)))]
        budget = 0.5 * float(cost[most] @ count)  # binds
        result = solve(weight, cost, owner, usage, capacity, budget, 60, count=count)
        best, least = lexicographic_milp(weight, cost, owner, usage, capacity, budget, count)
        assert result.status == result.cost_status == "optimal", seed
        assert float(weight[result.picked].sum()) == pytest.approx(best, rel=1e-9), seed
        assert float(cost[result.picked].sum()) == pytest.approx(least, rel=1e-6), seed
        assert float(cost[result.picked].sum()) <= budget + 1e-9, seed
        used = np.asarray(usage[:, result.picked].sum(axis=1)).ravel()
        assert (used <= capacity + 1e-9).all(), seed
    assert ends.count("kept") >= 3 and ends.count("broke") >= 1, ends


def test_value_ladders_count_each_class_s_jobs_above_each_of_its_values():
    """A ladder per step down in value within a class (its columns above the step),
    bounded by the class's count; past ``per_class`` steps, that many, spread."""
    from deepvm.planner.fleet._model import ValueLadders

    weight = np.array([3.0, 1.0, 3.0, 2.0, 5.0, 4.0, 0.5])
    owner = np.array([0, 0, 0, 0, 1, 1, 1])
    count = np.array([2.0, 1.0])
    columns = np.array([0, 1, 2, 3, 4, 5, 6])
    matrix, upper = ValueLadders(weight, owner, count, per_class=16).rows(columns)
    ladders = {frozenset(columns[row.indices]) for row in matrix}
    # class 0 (3, 3, 2, 1): above 2, above 1; class 1 (5, 4, 0.5): above 4, above 0.5
    assert ladders == {frozenset({0, 2}), frozenset({0, 2, 3}), frozenset({4}), frozenset({4, 5})}
    assert sorted(upper) == [1.0, 1.0, 2.0, 2.0]
    # Over a subset of the columns, the ladders are over that subset's positions.
    matrix, _ = ValueLadders(weight, owner, count, per_class=16).rows(np.array([1, 3, 5]))
    assert {frozenset(row.indices) for row in matrix} == {frozenset({1})}  # class 0: 2 > 1
    # At most per_class per class.
    matrix, upper = ValueLadders(weight, owner, count, per_class=1).rows(columns)
    classes = [set(owner[columns[row.indices]]) for row in matrix]
    assert sorted(map(sorted, classes)) == [[0], [1]]


def test_under_a_binding_budget_the_value_searches_branch_on_value_ladders(monkeypatch):
    """Where a team budget binds (and the quotas too, so the integer programs run),
    every search gets value ladders to branch on (fleet_model.ValueLadders), the
    cost stage too, no neighbourhoods run and the face takes no rounds past
    _face.ROUNDS; without a budget, no search gets ladders, the neighbourhoods run
    and the face narrows while it is wide. The plans are milp's."""
    from deepvm.planner.fleet import _face
    from deepvm.planner.fleet import _model as fleet_model

    asked: list[tuple[bool, bool]] = []
    real = fleet_model.solve_integer

    def spy(objective, maximise, *args, **kwargs):  # type: ignore[no-untyped-def]
        asked.append((maximise, kwargs.get("ladders") is not None))
        return real(objective, maximise, *args, **kwargs)

    monkeypatch.setattr(fleet_model, "solve_integer", spy)
    improved: list[int] = []
    real_improve = fleet_program.neighbourhoods.improve

    def improve(*args, **kwargs):  # type: ignore[no-untyped-def]
        improved.append(1)
        return real_improve(*args, **kwargs)

    monkeypatch.setattr(fleet_program.neighbourhoods, "improve", improve)
    while_wide: list[bool] = []  # per face, whether it may narrow past _face.ROUNDS
    real_narrowed = _face.narrowed

    def narrowed(*args, **kwargs):  # type: ignore[no-untyped-def]
        while_wide.append(kwargs["while_wide"])
        return real_narrowed(*args, **kwargs)

    monkeypatch.setattr(_face, "narrowed", narrowed)
    laddered = neighboured = 0
    faces = {True: 0, False: 0}
    for seed in (0, 2, 4, 6):
        weight, cost, owner, usage, capacity, _, count = regional_program(seed, True)
        order = np.lexsort((cost, -weight, owner))
        most = order[np.searchsorted(owner[order], np.arange(len(count)))]
        for budget in (0.5 * float(cost[most] @ count), None):
            asked.clear()
            improved.clear()
            while_wide.clear()
            result = solve(weight, cost, owner, usage, capacity, budget, 60, count=count)
            assert while_wide == [budget is None] * len(while_wide), seed
            faces[budget is None] += len(while_wide)
            best, least = lexicographic_milp(weight, cost, owner, usage, capacity, budget, count)
            assert result.status == result.cost_status == "optimal", seed
            assert float(weight[result.picked].sum()) == pytest.approx(best, rel=1e-9), seed
            assert float(cost[result.picked].sum()) == pytest.approx(least, rel=1e-6), seed
            if budget is None:
                assert not any(ladders for _, ladders in asked), seed
                assert improved == [1] or not asked, seed  # the neighbourhoods ran
                neighboured += len(improved)
            else:
                assert all(ladders for _, ladders in asked), (seed, asked)
                assert improved == [], seed  # no neighbourhoods under the budget
                laddered += any(ladders for _, ladders in asked)
    assert laddered >= 2  # the integer programs ran under a budget, with ladders
    assert neighboured >= 2  # and without one, after the neighbourhoods
    assert faces[True] >= 2 and faces[False] >= 2  # faces narrowed under both


def test_a_neighbourhood_that_frees_every_job_is_left_to_the_proof(monkeypatch):
    """A key every column uses (a team budget's row) would free every job: that
    neighbourhood is the program again, without the face's cuts (a saved 20-job
    program under $25/h: 3-11 s of the plan's time); it is skipped, and the other
    keys' are not."""
    from deepvm.planner import _highs as highs
    from deepvm.planner._highs import Deadline
    from deepvm.planner.fleet import _neighbourhoods
    from deepvm.planner.fleet._arrays import ProgramArrays

    weight = np.array([1.0, 0.6, 1.0, 0.6])
    owner = np.array([0, 0, 1, 1])
    cost = np.array([3.0, 1.0, 3.0, 1.0])
    quota = np.array([8.0, 8.0, 0.0, 0.0])  # key 0: a quota on the first class's clusters
    resources = sp.csc_matrix(np.vstack([quota, cost]))
    program = ProgramArrays(weight, owner, np.ones(2), resources, np.array([8.0, 4.0]))
    plan = np.array([1, 2])  # worth 1.6, costs 4: the budget (key 1) and the quota full
    calls: list[int] = []
    real = highs.solve

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(highs, "solve", spy)
    columns = np.arange(4)
    assert _neighbourhoods._replan(program, plan, np.array([1]), columns, Deadline(60)) is None
    assert calls == []  # the budget's neighbourhood: no integer program
    _neighbourhoods._replan(program, plan, np.array([0]), columns, Deadline(60))
    assert calls == [1]  # the quota's, on the first class alone


def test_value_ladders_chained_are_their_sums_one_row_per_column():
    """As HiGHS gets them (``chained``), each ladder is the one before it in its class
    plus the columns between: every column in one row, and the ladders' values the
    same as their sums (``rows``) at any x."""
    from deepvm.planner.fleet._model import ValueLadders

    rng = np.random.default_rng(3)
    owner = np.repeat(np.arange(5), 40)
    weight = np.round(rng.uniform(0.1, 1.0, len(owner)), 1)  # ties within a class
    ladders = ValueLadders(weight, owner, np.full(5, 2.0), per_class=6)
    columns = np.sort(rng.choice(len(owner), 150, replace=False))
    sums, upper = ladders.rows(columns)
    links, steps, chained_upper = ladders.chained(columns)
    assert (np.asarray((links != 0).sum(axis=0)).ravel() <= 1).all()  # each column once
    assert np.array_equal(upper, chained_upper)
    for _ in range(5):
        x = rng.integers(0, 3, len(columns)).astype(float)
        y = sums @ x
        assert np.allclose(steps @ y, links @ x)  # the chained rows hold at the sums


def test_value_ladders_go_to_highs_as_sums_unless_too_many_non_zeros(monkeypatch):
    """Up to NESTED_NONZEROS, HiGHS gets each ladder as the sum of its columns (its
    cuts use those best); past it, chained (each column in one row), whose sums
    kept HiGHS's root past its deadline on 14,000 columns."""
    from deepvm.planner.fleet import _model
    from deepvm.planner.fleet._model import ValueLadders

    owner = np.repeat(np.arange(3), 30)
    weight = np.tile(np.linspace(1.0, 0.1, 30), 3)
    ladders = ValueLadders(weight, owner, np.ones(3), per_class=8)
    columns = np.arange(len(owner))
    sums, upper = ladders.rows(columns)
    links, steps, bounds = ladders.stated(columns)
    assert (links != sums).nnz == 0 and (steps != sp.identity(len(upper))).nnz == 0
    monkeypatch.setattr(_model, "NESTED_NONZEROS", sums.nnz - 1)
    links, steps, bounds = ladders.stated(columns)
    chained = ladders.chained(columns)
    assert (links != chained[0]).nnz == 0 and (steps != chained[1]).nnz == 0
    assert links.nnz < sums.nnz and np.array_equal(bounds, upper)


def test_an_integer_program_with_value_ladders_keeps_its_optimum_and_its_columns():
    """With ladders (and a start, their values then its sums), the integer program
    answers over its columns alone, with the optimum it has without them."""
    from deepvm.planner._highs import Deadline
    from deepvm.planner.fleet import _model
    from deepvm.planner.fleet._model import ValueLadders

    weight, cost, owner, usage, capacity, _, count = regional_program(2, True)
    columns = np.arange(len(owner))
    limits = sp.vstack([usage, sp.csr_matrix(cost)]).tocsc()  # the quotas and a budget
    room = np.append(capacity, 0.3 * cost.max() * count.sum())
    rows = [_model.PerClass(owner, count), _model.SharedLimits(limits, room, count[owner])]
    answers = []
    for ladders in (None, ValueLadders(weight, owner, count, per_class=4)):
        out = _model.solve_integer(
            weight, True, rows, columns, count[owner], start=np.zeros(len(columns)),
            deadline=Deadline(60), feasibility_tolerance=1e-9, presolve=True, ladders=ladders,
        )  # fmt: skip
        assert out.status == "optimal" and len(out.values) == len(columns)
        answers.append(float(weight @ np.round(out.values)))
    assert answers[0] == pytest.approx(answers[1], rel=1e-9)


def test_a_face_still_wide_after_its_rounds_gets_one_more(monkeypatch):
    """After _face.ROUNDS rounds of root cuts and narrowing, the face takes another
    (up to _face.MAX_ROUNDS) where the bound with its cuts is still more than
    _face.WIDE above the floor: on these regional programs, a third round where the
    threshold allows it and none where it does not (a threshold no bound reaches).
    The plans are milp's either way."""
    from deepvm.planner import _highs as highs
    from deepvm.planner.fleet import _face

    rounds: list[int] = []  # columns HiGHS's root was given, per round
    real = highs.root_cuts

    def root_cuts(objective, *args, **kwargs):  # type: ignore[no-untyped-def]
        rounds.append(len(objective))
        return real(objective, *args, **kwargs)

    monkeypatch.setattr(highs, "root_cuts", root_cuts)
    wide_enough = _face.WIDE
    for seed in (9, 13, 19):  # regional programs whose face is still wide after two
        weight, cost, owner, usage, capacity, budget, count = regional_program(seed)
        assert budget is None
        best, least = lexicographic_milp(weight, cost, owner, usage, capacity, None, count)
        for wide, taken in ((wide_enough, _face.ROUNDS + 1), (1e9, _face.ROUNDS)):
            monkeypatch.setattr(_face, "WIDE", wide)
            rounds.clear()
            result = solve(weight, cost, owner, usage, capacity, None, 60, count=count)
            assert len(rounds) == taken, (seed, wide, rounds)
            assert rounds == sorted(rounds, reverse=True)  # each round over fewer columns
            assert result.status == result.cost_status == "optimal", seed
            assert float(weight[result.picked].sum()) == pytest.approx(best, rel=1e-9), seed
            assert float(cost[result.picked].sum()) == pytest.approx(least, rel=1e-6), seed
    assert _face.ROUNDS < _face.MAX_ROUNDS


def test_the_proof_searches_with_sub_mips_where_the_face_is_still_far(monkeypatch):
    """The face records its floor and the bound its last round proved (a bound on
    every plan, so at least the optimum); the value's proof runs with HiGHS's sub-MIP
    heuristics where that bound is more than fleet_program.FAR (relative) above the
    floor (the plan in hand is likely short of the best), else without them: on
    these regional programs (two far, one not, by the shipped threshold), as the
    threshold says, and every proof with it at 0 and none with it out of reach. The
    plans are milp's either way."""
    from deepvm.planner.fleet import _face

    faces: list[_face.Face] = []
    real_narrowed = _face.narrowed

    def narrowed(*args, **kwargs):  # type: ignore[no-untyped-def]
        faces.append(real_narrowed(*args, **kwargs))
        return faces[-1]

    monkeypatch.setattr(_face, "narrowed", narrowed)
    proofs: list[bool] = []  # per value proof, whether it ran with sub-MIPs
    real_solve = fleet_program._Program.solve

    def spy(self, columns, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs["maximise"] and not kwargs.get("warm"):
            proofs.append(kwargs["heuristics"])
        return real_solve(self, columns, **kwargs)

    monkeypatch.setattr(fleet_program._Program, "solve", spy)
    shipped = fleet_program.FAR
    far_by_default = []
    for seed in (13, 19, 21):  # programs whose proof runs (the first search's plan falls short)
        weight, cost, owner, usage, capacity, budget, count = regional_program(seed)
        assert budget is None
        best, least = lexicographic_milp(weight, cost, owner, usage, capacity, None, count)
        for far in (shipped, 0.0, 1e9):
            monkeypatch.setattr(fleet_program, "FAR", far)
            faces.clear()
            proofs.clear()
            result = solve(weight, cost, owner, usage, capacity, None, 60, count=count)
            assert result.status == result.cost_status == "optimal", seed
            assert float(weight[result.picked].sum()) == pytest.approx(best, rel=1e-9), seed
            assert float(cost[result.picked].sum()) == pytest.approx(least, rel=1e-6), seed
            assert len(faces) == 1 and len(proofs) == 1, seed
            face = faces[0]
            assert face.floor <= best <= face.bound + 1e-9 * best, seed
            gap = face.gap
            assert gap > 1e-6, seed  # above its floor: a threshold of 0 calls it far
            assert proofs == [gap > far], (seed, far, gap)
            if far == shipped:
                far_by_default.append(proofs[0])
    assert sorted(far_by_default) == [False, True, True]  # the shipped threshold tells them apart
