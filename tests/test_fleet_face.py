"""The columns that can be in a plan of the best value (deepvm.planner.fleet._face)
against every plan of small random programs: each plan worth the floor keeps to
the cuts and uses only the columns kept, and the narrowing leaves columns out."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from deepvm.planner._highs import Deadline
from deepvm.planner.fleet import _face
from deepvm.planner.fleet import _program as fleet_program
from deepvm.planner.fleet._arrays import ProgramArrays


def every_plan(owner: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Every plan as how many times it takes each column (plans x columns)."""
    per_class = []
    for c in range(len(count)):
        columns = np.flatnonzero(owner == c)
        options = []
        for m in range(int(count[c]) + 1):
            for combo in itertools.combinations_with_replacement(columns, m):
                taken = np.zeros(len(owner))
                np.add.at(taken, list(combo), 1.0)
                options.append(taken)
        per_class.append(options)
    return np.array([sum(choice) for choice in itertools.product(*per_class)])


def feasible_plans(owner, count, resources, capacity):  # type: ignore[no-untyped-def]
    """Every plan within the limits (plans x columns)."""
    plans = every_plan(owner, count)
    used = (resources @ plans.T).T
    return plans[(used <= capacity + 1e-9).all(axis=1)]


def random_program(rng: np.random.Generator):
    """Classes of alike jobs on coarse quotas (a cluster takes a large share of a
    key), as the three clouds' GPU quotas: a weak relaxation. Each cluster has a twin
    of the same value in another region (key), as a type priced alike in two
    regions: many plans of the best value, over different columns."""
    classes, keys = int(rng.integers(3, 5)), int(rng.integers(2, 4))
    owner = np.repeat(np.arange(classes), rng.integers(1, 3, size=classes))
    weight = np.round(rng.uniform(0.5, 3.0, len(owner)), 3)
    amount = rng.choice([4.0, 8.0, 12.0, 16.0], size=len(owner))
    key = rng.integers(0, keys, size=len(owner))
    twin_key = (key + rng.integers(1, keys, size=len(owner))) % keys
    owner, weight = np.repeat(owner, 2), np.repeat(weight, 2)
    usage = np.zeros((keys, len(owner)))
    usage[np.stack([key, twin_key], axis=1).ravel(), np.arange(len(owner))] = np.repeat(amount, 2)
    count = rng.integers(1, 3, size=classes).astype(float)
    capacity = rng.integers(12, 40, size=keys).astype(float)
    return weight, owner, count, sp.csc_matrix(usage), capacity


def test_every_plan_of_the_best_value_keeps_to_the_face():
    rng = np.random.default_rng(5)
    narrowed = ties = 0
    for _ in range(80):
        weight, owner, count, resources, capacity = random_program(rng)
        feasible = feasible_plans(owner, count, resources, capacity)
        values = feasible @ weight
        best = float(values.max())
        floor = fleet_program._floor(best)
        plan = np.repeat(np.arange(len(owner)), feasible[values.argmax()].astype(np.int64))
        every = np.arange(len(owner))
        no_cuts = (sp.csr_matrix((0, len(owner))), np.zeros(0))
        program = ProgramArrays(weight, owner, count, resources, capacity)
        face = _face.narrowed(program, no_cuts, every, plan, floor, Deadline(60))
        worth = feasible[values >= floor]
        ties += len(worth) > 1
        # Every plan worth the floor: only columns kept, and within every cut.
        outside = np.setdiff1d(every, face.columns)
        assert not worth[:, outside].any()
        cut_rows = (face.cuts @ worth.T).T
        assert (cut_rows <= face.rhs + 1e-6).all()
        narrowed += len(face.columns) < len(every)
    # The check covers a face that leaves columns out, and plans of the best value
    # other than the one given.
    assert narrowed >= 10 and ties >= 10


def test_cuts_the_plan_breaks_are_no_cuts(monkeypatch):
    """The plan is worth the floor, so HiGHS's cuts must hold for it; were they to
    mean something else (another HiGHS), one that the plan breaks is not taken and
    nothing is narrowed by it: the program still finds the best plan."""
    from deepvm.planner import _highs as highs

    rng = np.random.default_rng(5)
    weight, owner, count, resources, capacity = random_program(rng)
    feasible = feasible_plans(owner, count, resources, capacity)
    values = feasible @ weight
    plan = np.repeat(np.arange(len(owner)), feasible[values.argmax()].astype(np.int64))

    def wrong(objective, rows, upper, column_upper, **kwargs):  # type: ignore[no-untyped-def]
        # "no cluster at all": every plan of some value breaks it
        return sp.csr_matrix(np.ones((1, len(objective)))), np.array([0.0])

    monkeypatch.setattr(highs, "root_cuts", wrong)
    no_cuts = (sp.csr_matrix((0, len(owner))), np.zeros(0))
    every = np.arange(len(owner))
    floor = fleet_program._floor(float(values.max()))
    program = ProgramArrays(weight, owner, count, resources, capacity)
    face = _face.narrowed(program, no_cuts, every, plan, floor, Deadline(60))
    assert face.cuts.shape[0] == 0 and face.columns.tolist() == every.tolist()
    result = fleet_program.solve(weight, np.ones(len(owner)), owner, resources, capacity, 60,
                                 count=count)  # fmt: skip
    assert result.objective == pytest.approx(float(values.max()), rel=1e-9)


def test_the_faces_lp_by_columns_is_the_lp_over_every_column():
    """The face's LP (its duals by column generation, _face._duals) bounds plans as
    the LP over every column does: on random programs and subsets of their columns,
    some of them a class's only column (whose bound, not a row, keeps it), y b +
    sum max(r, 0) u equals HiGHS's optimum of the whole LP."""
    from deepvm.planner import _highs as highs

    rng = np.random.default_rng(7)
    single = 0
    for _ in range(40):
        weight, owner, count, resources, capacity = random_program(rng)
        program = ProgramArrays(weight, owner, count, resources, capacity)
        columns = np.sort(rng.choice(len(owner), size=int(rng.integers(2, len(owner) + 1)),
                                     replace=False))  # fmt: skip
        plan = columns[:1]
        matrix, upper = _face._rows(program, [], columns)
        bounds = count[owner[columns]]
        whole = highs.solve(weight[columns], matrix, upper, maximise=True, integer=False,
                            column_upper=bounds, deadline=Deadline(60))  # fmt: skip
        y = _face._duals(program, columns, matrix, upper, bounds, plan, Deadline(60))
        assert y is not None
        reduced = weight[columns] - matrix.T @ y
        bound = float(upper @ y + np.maximum(reduced, 0.0) @ bounds)
        assert bound == pytest.approx(whole.objective, rel=1e-9, abs=1e-9)
        single += int((np.bincount(owner[columns]) == 1).any())
    assert single >= 10
