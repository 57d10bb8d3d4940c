"""The fleet plan improved by neighbourhoods (deepvm.planner.fleet._neighbourhoods):
the exchange of a few jobs that no single move finds, and on random programs a
plan within every limit, never worth less than the one it was given."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from deepvm.planner._highs import Deadline
from deepvm.planner.fleet import _neighbourhoods as neighbourhoods
from deepvm.planner.fleet._arrays import ProgramArrays
from deepvm.planner.fleet._rounding import Rounding, rounded_plan

# Three jobs (classes 0, 1, 2) and two quota keys. Job 0 can leave key 0 for key 1 at a
# small loss; the room it frees lets jobs 1 and 2 take their faster clusters.
#            a-fast a-slow b-slow b-fast c-slow c-fast
WEIGHT = np.array([1.0, 0.9, 1.0, 1.2, 1.0, 1.2])
OWNER = np.array([0, 0, 1, 1, 2, 2])
USAGE = sp.csc_matrix(np.array([
    [16.0, 0.0, 12.0, 20.0, 12.0, 20.0],  # key 0: 40
    [0.0, 12.0, 0.0, 0.0, 0.0, 0.0],  # key 1: 12
]))  # fmt: skip
CAPACITY = np.array([40.0, 12.0])
PROGRAM = ProgramArrays(WEIGHT, OWNER, np.ones(3), USAGE, CAPACITY)


def every_column(_value: float) -> np.ndarray:
    return np.arange(len(WEIGHT))


def test_an_exchange_of_three_jobs_that_no_single_move_finds():
    """The plan (each job on its first cluster) fills key 0; each job's better
    cluster alone does not fit, and job 0's other one is worth less: the local search
    of the plan without a solver keeps it. Planning the jobs on key 0 again finds the
    exchange: job 0 to key 1, jobs 1 and 2 to their faster clusters."""
    plan = np.array([0, 2, 4])
    state = Rounding(PROGRAM)
    assert sorted(rounded_plan(state, np.bincount(plan, minlength=6).astype(float))) == [0, 2, 4]
    better = neighbourhoods.improve(PROGRAM, plan, every_column, Deadline(60))
    assert sorted(better.tolist()) == [1, 3, 5]
    assert WEIGHT[better].sum() == pytest.approx(3.3)
    assert PROGRAM.holds(better)


# Two jobs in one region, its GPU key and its vCPU key (capacity 8 each). Each job is on
# the key the other's faster cluster needs; a third cluster of job A's takes a little
# of both keys, which links them (ProgramArrays.key_groups).
#                      a-gpu a-cpu a-both b-cpu b-gpu
REGION_WEIGHT = np.array([1.0, 1.2, 0.5, 1.0, 1.2])
REGION_OWNER = np.array([0, 0, 0, 1, 1])
REGION_USAGE = sp.csc_matrix(np.array([
    [8.0, 0.0, 1.0, 0.0, 8.0],  # GPU key: 8
    [0.0, 8.0, 1.0, 8.0, 0.0],  # vCPU key: 8
]))  # fmt: skip
REGION = ProgramArrays(REGION_WEIGHT, REGION_OWNER, np.ones(2), REGION_USAGE, np.array([8.0, 8.0]))


def test_an_exchange_across_a_region_s_keys_that_no_key_alone_finds():
    """The plan (A on the GPU key, B on the vCPU key) fills both keys. Each key's own
    neighbourhood frees one job, whose faster cluster needs the other key: no gain.
    The region's (both keys, linked by A's third cluster) frees both: they swap."""
    plan = np.array([0, 3])
    assert [group.tolist() for group in REGION.key_groups] == [[0, 1]]
    every = np.arange(len(REGION_WEIGHT))
    for key in (0, 1):
        assert neighbourhoods._replan(REGION, plan, np.array([key]), every, Deadline(60)) is None
    better = neighbourhoods.improve(REGION, plan, lambda _v: every, Deadline(60))
    assert sorted(better.tolist()) == [1, 4]
    assert REGION.holds(better) and REGION_WEIGHT[better].sum() == pytest.approx(2.4)


def test_a_region_s_exchange_after_a_key_s_own_gained():
    """Both programs above side by side (keys 0-1, then the region's 2-3): key 0's
    own neighbourhood finds the three-job exchange; the region's keys gain nothing
    alone, and its group's neighbourhood, tried once the keys gain no more, swaps
    its two jobs."""
    usage = sp.block_diag([USAGE, REGION_USAGE]).tocsc()
    both = ProgramArrays(
        np.concatenate([WEIGHT, REGION_WEIGHT]), np.concatenate([OWNER, REGION_OWNER + 3]),
        np.ones(5), usage, np.concatenate([CAPACITY, [8.0, 8.0]]),
    )  # fmt: skip
    assert [group.tolist() for group in both.key_groups] == [[0], [1], [2, 3]]
    plan = np.array([0, 2, 4, 6 + 0, 6 + 3])
    every = np.arange(len(both.weight))
    better = neighbourhoods.improve(both, plan, lambda _v: every, Deadline(60))
    assert sorted(better.tolist()) == [1, 3, 5, 6 + 1, 6 + 4]
    assert both.holds(better) and both.value(better) == pytest.approx(3.3 + 2.4)


def test_a_pass_over_groups_stops_after_group_stall_that_gain_nothing(monkeypatch):
    """Regions whose one job has its best cluster already, each over both its keys
    and so nearly full: after GROUP_STALL of them gain nothing, no more are tried."""
    regions = neighbourhoods.GROUP_STALL + 3
    usage = sp.block_diag([sp.csc_matrix([[8.0], [8.0]])] * regions).tocsc()
    program = ProgramArrays(
        np.ones(regions), np.arange(regions), np.ones(regions), usage, np.full(2 * regions, 8.0)
    )
    assert len(program.key_groups) == regions
    tried: list[list[int]] = []
    real = neighbourhoods._replan

    def spy(program, plan, keys, columns, deadline):  # type: ignore[no-untyped-def]
        tried.append(keys.tolist())
        return real(program, plan, keys, columns, deadline)

    monkeypatch.setattr(neighbourhoods, "_replan", spy)
    every = np.arange(regions)
    same = neighbourhoods.improve(program, every, lambda _v: every, Deadline(60))
    assert sorted(same.tolist()) == every.tolist()
    assert sum(len(keys) > 1 for keys in tried) == neighbourhoods.GROUP_STALL
    assert sum(len(keys) == 1 for keys in tried) == min(2 * regions, neighbourhoods.STALL)


def test_key_groups_leave_out_a_key_every_column_uses():
    """A team budget's row (every cluster costs something) would link every key: it is
    in no group, and the quotas keep their own groups."""
    budget = np.ones(len(REGION_WEIGHT))
    lone = np.array([0.0, 0.0, 0.0, 0.0, 4.0])  # a key of B's GPU cluster alone
    usage = sp.csc_matrix(np.vstack([REGION_USAGE.toarray(), budget, lone]))
    program = ProgramArrays(
        REGION_WEIGHT, REGION_OWNER, np.ones(2), usage, np.array([8, 8, 2, 4.0])
    )
    assert [group.tolist() for group in program.key_groups] == [[0, 1, 3]]
    separate = sp.csc_matrix(np.vstack([REGION_USAGE.toarray()[:1], budget, lone]))
    program = ProgramArrays(
        REGION_WEIGHT, REGION_OWNER, np.ones(2), separate, np.array([8, 2, 4.0])
    )
    assert [group.tolist() for group in program.key_groups] == [[0, 2]]
    alone = ProgramArrays(
        REGION_WEIGHT, REGION_OWNER, np.ones(2), sp.csc_matrix(budget), np.ones(1)
    )
    assert alone.key_groups == []


def test_no_time_left_keeps_the_plan():
    plan = np.array([0, 2, 4])
    gone = Deadline(0.0, lambda: 0.0)
    same = neighbourhoods.improve(PROGRAM, plan, every_column, gone)
    assert same.tolist() == plan.tolist()


def test_only_columns_that_can_beat_the_plan_are_searched():
    """``competitive`` says which columns can be in a plan worth a value: here none
    but the plan's own, so the plan stays."""
    plan = np.array([0, 2, 4])
    kept = neighbourhoods.improve(PROGRAM, plan, lambda _v: plan, Deadline(60))
    assert sorted(kept.tolist()) == [0, 2, 4]


def test_random_programs_keep_every_limit_and_never_lose_value():
    """From the plan without a solver, on random programs: within every limit, worth
    no less, and (so that the check covers plans it changed) better on some."""
    rng = np.random.default_rng(11)
    gained = 0
    for _ in range(30):
        classes, keys = int(rng.integers(2, 7)), int(rng.integers(1, 4))
        owner = np.sort(rng.integers(0, classes, size=int(rng.integers(classes, 4 * classes))))
        owner[:classes] = np.arange(classes)  # every class has a column
        owner = np.sort(owner)
        count = rng.integers(1, 4, size=classes).astype(float)
        weight = rng.uniform(0.2, 2.0, len(owner))
        usage = rng.integers(0, 9, size=(keys, len(owner))).astype(float)
        usage[rng.random(usage.shape) < 0.4] = 0.0
        resources = sp.csc_matrix(usage)
        capacity = rng.integers(4, 20, size=keys).astype(float)
        program = ProgramArrays(weight, owner, count, resources, capacity)
        plan = rounded_plan(Rounding(program), np.zeros(len(owner)))
        every = np.arange(len(owner))
        better = neighbourhoods.improve(program, plan, lambda _v, every=every: every, Deadline(60))
        assert program.holds(better)
        assert weight[better].sum() >= weight[plan].sum() - 1e-12
        gained += bool(weight[better].sum() > weight[plan].sum() + 1e-9)
    assert gained >= 3
