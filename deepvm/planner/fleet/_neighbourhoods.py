"""A better fleet plan by re-planning a few classes at a time (docs/ARCHITECTURE.md,
"For the fleet"): between the first search and the proof, a large-neighbourhood
search. For each quota key the plan leaves nearly full, tightest first, the
classes the plan places on that key are planned again over every column that can
still beat the plan, within what the other picks leave of every shared limit; a
plan worth more replaces the one in hand. Passes go on until one gains nothing or
the step's deadline passes; a pass stops early after STALL neighbourhoods in a
row that gain nothing. Once the single keys' gain nothing more, the same over
groups of linked keys (``ProgramArrays.key_groups``: a cloud region's quotas),
each with a key nearly full: the classes on any key of the group (a pass of them
stops after GROUP_STALL in a row that gain nothing).

Why: the plan the first search finds over the generated columns is often an
exchange of two or three jobs short of the optimum (three clouds, 100 jobs: one
job moved to a slower cluster under another quota frees room for two to move to
faster ones), and the proof that follows is several times slower from that plan
than from the optimum (benchmarks/fleet.py --replay). The exchange can span a
region's keys: a job that leaves the region's vCPU key for its GPU key frees room
for another that needs the vCPUs, and neither key's own neighbourhood frees both
(the saved 100-job `--heavy` program, HiGHS seeds 3-4: no single key gained, the
region's neighbourhood found the optimum, 161.3304 -> 161.3653, and the whole
solve went 13.9 -> 10.1 s and 21.3 -> 12.6 s of CPU). They run whether or not
the single keys gained first: on seed 6 the keys took 161.3289 to 161.3300 and
the fourth region's neighbourhood then found 161.3649; where they ran only after
keys that gained nothing, the face kept 2,020 columns and the proof took 11.9 s
(over seeds 1-6 the whole solve: 69.1 -> 58.8 s of CPU, the slowest 21.6 ->
12.3 s). Each neighbourhood is a
small integer program whose rows the program's constraint objects build; it goes
to HiGHS directly, as the relaxation's does, without cvxpy's compile per solve."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from deepvm.planner import _highs as highs
from deepvm.planner._highs import LIMIT_WITH_INCUMBENT, OPTIMAL, Deadline
from deepvm.planner.fleet._arrays import ProgramArrays
from deepvm.planner.fleet._model import PerClass, SharedLimits
from deepvm.planner.offers import FloatArray

__all__ = ["FULL", "GAIN", "GROUP_STALL", "STALL", "improve"]

# A key is worth a neighbourhood where the plan leaves less than this share of it.
FULL = 0.5
# A pass stops after this many neighbourhoods in a row gain nothing: gains come
# early, on the tightest keys, and at 1,000 jobs a pass over every nearly full key
# took 3.3 s (91 small programs) for no gain. On the saved three-cloud programs
# (100 jobs and `--heavy`, HiGHS seeds 1-6; 1,000 jobs, seeds 1-3) the gains came
# by the fifteenth key, at most eleven fruitless in a row; with 16 (not 30) every
# run reached the same plan, the neighbourhoods 0.1 s faster at 100 jobs and 0.1-0.8
# s at 1,000.
STALL = 16
# A pass over groups of keys stops after this many in a row gain nothing: a region's
# neighbourhood is several keys' classes at once, the gains came in the first five
# (the saved 100-job `--heavy` program, seeds 1-6), and at 1,000 jobs, where they
# gained nothing, 30 of them took 1.2-1.5 s (8: the neighbourhoods 2.0 -> 1.8 s).
GROUP_STALL = 8
# Gains smaller than this (relative to the plan's value) are float noise, not a
# better plan: at 1,000 jobs, gains of 1e-8 on a value of 768 started pass on pass.
GAIN = 1e-9


def improve(
    program: ProgramArrays,
    plan: np.ndarray,
    competitive: Callable[[float], np.ndarray],
    deadline: Deadline,
) -> np.ndarray:
    """``plan`` (columns, one per job that takes it), improved by neighbourhoods (see
    the module docstring) until none gains or ``deadline`` passes. ``competitive``:
    the columns that can be in a plan worth at least a value (the relaxation's
    reduced costs). Always a feasible plan, worth at least ``plan``."""
    plan = np.asarray(plan, dtype=np.int64)
    plan, _ = _passes(program, plan, competitive, deadline, _keys, STALL)
    while not deadline.passed():  # the keys' own gain no more: their groups'
        plan, gained = _passes(program, plan, competitive, deadline, _key_groups, GROUP_STALL)
        if not gained:
            break
        plan, _ = _passes(program, plan, competitive, deadline, _keys, STALL)
    return plan


def _keys(program: ProgramArrays, slack: FloatArray) -> list[np.ndarray]:
    """Each key the plan leaves nearly full (under FULL), tightest first."""
    order = np.argsort(slack, kind="stable")
    return [np.array([key]) for key in order if slack[key] < FULL]


def _key_groups(program: ProgramArrays, slack: FloatArray) -> list[np.ndarray]:
    """Each group of linked keys with a key the plan leaves nearly full, the group of
    the tightest key first."""
    groups = [group for group in program.key_groups if len(group) > 1]
    tightest = [float(slack[group].min()) for group in groups]
    order = np.argsort(tightest, kind="stable")
    return [groups[i] for i in order if tightest[i] < FULL]


def _passes(
    program: ProgramArrays,
    plan: np.ndarray,
    competitive: Callable[[float], np.ndarray],
    deadline: Deadline,
    neighbourhoods: Callable[[ProgramArrays, FloatArray], list[np.ndarray]],
    stall: int,
) -> tuple[np.ndarray, bool]:
    """Passes over ``neighbourhoods`` (sets of keys, for the plan's share of each key
    left free) until one gains nothing, each stopped after ``stall`` in a row that
    gain nothing: the plan, and whether any gained."""
    capacity = program.capacity
    gained, any_gained = True, False
    while gained and not deadline.passed():
        gained = False
        columns = competitive(program.value(plan))
        used = program.used_by(plan)
        slack = np.where(capacity > 0, (capacity - used) / np.maximum(capacity, 1e-12), np.inf)
        fruitless = 0
        for keys in neighbourhoods(program, slack):
            if fruitless >= stall or deadline.passed():
                break
            better = _replan(program, plan, keys, columns, deadline)
            fruitless = 0 if better is not None else fruitless + 1
            if better is not None:
                plan, gained, any_gained = better, True, True
    return plan, any_gained


def _replan(
    program: ProgramArrays,
    plan: np.ndarray,
    keys: np.ndarray,
    columns: np.ndarray,
    deadline: Deadline,
) -> np.ndarray | None:
    """The plan with the classes on any of ``keys`` planned again (module docstring),
    or None where that gains nothing (or HiGHS finds nothing in time)."""
    weight, owner, count = program.weight, program.owner, program.count
    if any(program.every_column_uses(int(key)) for key in keys):
        # A key every column uses (a team budget's row) frees every job: the whole
        # program again, the proof's work without the face's cuts (a saved 20-job
        # program under $25/h: 3-11 s here).
        return None
    on_keys = np.asarray(program.by_key[keys][:, plan].sum(axis=0)).ravel() > 0
    classes = np.unique(owner[plan[on_keys]])
    freed = np.isin(owner[plan], classes)
    kept, current = plan[~freed], plan[freed]
    candidates = np.union1d(columns[np.isin(owner[columns], classes)], current)
    floor = float(weight[current].sum()) + GAIN * max(abs(program.value(plan)), 1.0)
    best = np.zeros(len(count))
    np.maximum.at(best, owner[candidates], weight[candidates])
    if float(best[classes] @ count[classes]) <= floor:
        return None  # each of these jobs has its best cluster already
    left = program.capacity - program.used_by(kept)
    rows = [PerClass(owner, count).rows(candidates),
            SharedLimits(program.resources, left, count[owner]).rows(candidates)]  # fmt: skip
    matrix = sp.vstack([m for m, _ in rows]).tocsr()
    if not matrix.shape[0]:
        return None  # nothing binds these classes: each has its best already
    out = highs.solve(
        weight[candidates], matrix, np.concatenate([b for _, b in rows]), maximise=True,
        integer=True, presolve=True, column_upper=count[owner[candidates]], cutoff=floor,
        deadline=deadline,
    )  # fmt: skip
    if out.status not in (OPTIMAL, LIMIT_WITH_INCUMBENT) or not len(out.values):
        return None
    new = np.repeat(candidates, np.maximum(np.round(out.values), 0.0).astype(np.int64))
    better = np.sort(np.concatenate([kept, new]))
    if float(weight[new].sum()) <= floor:
        return None
    # HiGHS answers to its feasibility tolerance (1e-6); the plan must hold to ours.
    if not program.holds(better):
        return None
    return better
