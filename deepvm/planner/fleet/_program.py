"""The fleet's program, apart from jobs and clusters (docs/ARCHITECTURE.md, "For
the fleet"): arrays in, picks out. Columns are candidate clusters of a class of
identical jobs (same candidates, weights and costs; ``count`` jobs each); rows
are "at most ``count`` of a class" and one per key of each shared limit
(deepvm.planner.fleet._check.SharedLimit: the quota keys in their units, the
team budget in USD/h), built by the limits themselves:

    maximise   sum_k weight_k x_k                  (x_k integer >= 0)
    subject to sum_{k of class c} x_k <= count_c
               sum_k usage[q, k] x_k <= capacity[q]      (every limited key q)

then, keeping that value (LEXICOGRAPHIC_RTOL relative), the least total cost.

How it is solved (measured in benchmarks/fleet.py; see the issue 36 note):
1. A feasible plan before any solve (the better of ``_rounding.greedy_plan``,
   candidates by value per share of the limits, and each class's best that fits,
   each improved by a local search), so there is always a plan; where the
   deadline passes within the relaxation, the plan rounded from its last LP
   point, if better.
   Where a team budget (a limit on the columns' cost) binds, the program less its
   other limits by dynamic programming (``_knapsack``): where its plan keeps them
   all, that plan is the optimum, value and tie-break, and the solve ends there.
2. The LP relaxation by column generation (``_relaxation``): a few columns per
   class, the rest priced in one vectorised pass per round, and mixed-integer
   rounding cuts on the quota rows (one cluster takes a large share of a quota,
   so the plain relaxation is weak). Its value z and reduced costs r bound any
   plan holding column k by z + r_k: columns that cannot be in a plan worth the
   best known one are left out of the integer program.
3. The integer program over the generated columns (a strong plan, quickly: to
   FIRST_SEARCH_GAP, HiGHS started from the plan in hand), that plan improved a
   few classes at a time (``_neighbourhoods``), the columns that can be in a plan
   as good narrowed by HiGHS's root cuts (``_face``), then the integer program
   over those, the cuts as rows: its optimum is the optimum of all.
4. The cost stage over the face's columns, with its cuts, its least cost proven
   to COST_STAGE_GAP.
Under a team budget that binds, every integer program branches on value ladders
too (``fleet_model.ValueLadders``, LADDERS_PER_CLASS), and no neighbourhoods run.
A deadline (``highs.Deadline``) stops any step; the best plan known is returned
with status ``limit_with_incumbent`` and the best bound known (``bound``: the
relaxation's, or a stopped proof's, which bounds every plan as good).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from deepvm.planner._highs import INFEASIBLE, LIMIT_WITH_INCUMBENT, OPTIMAL, Deadline
from deepvm.planner.fleet import _face, _knapsack, _relaxation
from deepvm.planner.fleet import _model as fleet_model
from deepvm.planner.fleet import _neighbourhoods as neighbourhoods
from deepvm.planner.fleet._arrays import ProgramArrays
from deepvm.planner.fleet._rounding import Rounding, greedy_plan, rounded_plan
from deepvm.planner.offers import FloatArray

# The second solve keeps the first one's value to this (relative) tolerance.
LEXICOGRAPHIC_RTOL = 1e-9
# The cost stage's plan is proven to cost at most this much (relative) more than the
# cheapest of the best value. Finer is float noise: the value floor (1e-9) sits under
# HiGHS's feasibility tolerance (1e-6), so its bound stays a hair under the cheapest
# plan; at 5,000 jobs (benchmarks/fleet.py) it chased a gap of 3e-8 past the time
# limit, and with this gap it proves the same plan in 5.5 s.
COST_STAGE_GAP = 1e-7
# The share of the time left that the search over the generated columns may take.
# Where it finishes (every shipped-mix size) it takes far less. Where it is stopped
# (the distinct mix), the proof after it has too many columns to finish its root at
# 1,000 jobs (332k: it found no plan and no bound), and the first search's
# sub-MIPs find the better plans: the saved 1,000-job program, 30 s, seeds 1-3,
# plans 664.09-664.47 at 0.4, 664.58-664.80 at 0.7 (bound 665.13). At 100 jobs
# the search (HiGHS's default seed) now finishes, the face narrows and the gap
# goes 2.4e-3 -> 8.7e-4; with seeds 1-3 it is stopped either way, the plans alike
# (128.105-128.123 and 128.085-128.157), the bound a little weaker (2.2-2.4e-3 ->
# 2.2-2.9e-3). A slower machine reaches the search's first good plan later (11 s
# here at 1,000 jobs), so the wider share.
FIRST_SEARCH_SHARE = 0.7
# The first search stops once its plan is within this (relative) of the best over its
# columns: the face and the proof after it start from that plan, and proving the last
# few hundred-thousandths there cost more than it gained. Measured on saved programs
# (`benchmarks/fleet.py --replay FILE --seeds`, against the search to zero gap, side
# by side): 100 jobs, seeds 1-8, mean CPU 13.6 -> 12.7 s; $1-20/h, seeds 1-5, median
# 17.0 -> 15.2 s; 1,000 jobs, seeds 1-7, mean 16.2 -> 15.6 s; at the 30 s limit, 300
# jobs found the best value in 4 of 6 seeds (1 before); 100 distinct jobs, stopped
# there, alike (seeds 0-3: plans 128.085-128.183 before, 128.091-128.159 after). At
# 1e-4, 1,000 jobs were slower on some seeds (13.8-21.3 s).
FIRST_SEARCH_GAP = 2e-5
# Under a team budget that binds, the searches branch on "how many of a class's jobs
# take a cluster worth at least v" too (fleet_model.ValueLadders), for this many
# values v per class at most, evenly spread. Saved three-cloud programs of 10-30 jobs
# under $25 and $60/h (benchmarks/fleet.py --replay, 30 s): two that stopped at the
# limit unproven (20 jobs: 53 and 57 s of CPU) were proven in 21-25 s, six others
# took 1.6-9.2 s where they took 3.4-34 s, one 3.1 s where it took 2.5 s. With
# every value a ladder, a 10-job program whose proof ran over 1,427 columns took
# 6.9 s (2.3 s without); with 8 or 3 per class, one of the two stopped ones stayed
# unproven.
LADDERS_PER_CLASS = 16
# The share of the time that the team budget's dynamic program (_knapsack) may take:
# where the quotas bind too, its plan breaks them and the integer program goes on.
KNAPSACK_SHARE = 0.2
# The share of the time left then that the neighbourhoods (_neighbourhoods) may take.
NEIGHBOURHOOD_SHARE = 0.1
# The share of the time left then that narrowing the columns (_face) may take.
FACE_SHARE = 0.3
# A face whose bound is still more than this (relative) above its plan after its
# rounds: the plan is short of the best, so the proof searches with HiGHS's sub-MIPs
# too; not under a team budget that binds, whose row leaves every face wide
# (measured in docs/ARCHITECTURE.md, "For the fleet", step 6).
FAR = 2e-4


@dataclass(frozen=True)
class ProgramResult:
    status: str
    picked: np.ndarray  # the chosen columns, a column once per job that takes it
    objective: float
    variables: int  # integer columns in the program after filtering
    rows: int
    bound: float = math.nan  # the best bound known on the value of any plan
    stages: dict[str, float] | None = None  # seconds per stage (benchmarks)
    # The cost stage's own outcome: optimal (the least cost among plans of the best
    # value, to COST_STAGE_GAP), limit_with_incumbent (stopped: the value is proven,
    # the tie-break not), or "" where it did not run (the value is not proven).
    cost_status: str = ""


def solve(
    weight: FloatArray,
    cost: FloatArray,
    owner: np.ndarray,
    usage: Any,  # scipy.sparse, keys x columns
    capacity: FloatArray,  # per key (quotas, the team budget); inf: no limit
    time_limit_s: float | Deadline,
    count: np.ndarray | None = None,  # jobs per class (owner); default one each
) -> ProgramResult:
    """The plan of most total weight, and of least cost among those (see the module
    docstring). Always a plan: a status other than optimal is the best one known."""
    import time

    deadline = time_limit_s if isinstance(time_limit_s, Deadline) else Deadline(time_limit_s)
    size = len(weight)
    if size == 0:
        return ProgramResult(OPTIMAL, np.zeros(0, dtype=np.int64), 0.0, 0, 0, 0.0)
    classes = int(owner.max()) + 1
    count = np.ones(classes) if count is None else np.asarray(count, dtype=float)
    limited = np.flatnonzero(np.isfinite(capacity))
    resources = sp.csr_matrix(usage)[limited]
    bounds = np.asarray(capacity, dtype=float)[limited]
    arrays = ProgramArrays(weight, owner, count, resources.tocsc(), bounds)
    program = _Program(arrays, cost, deadline)
    stages: dict[str, float] = {}
    began = time.perf_counter()
    # 1. A plan before any solve; its bound: each class's best alone. The greedy plan
    # is made whole whatever the time (the plan there always is); past the deadline
    # the second plan stops and no relaxation starts (the saved 1,000 distinct jobs'
    # program at a 0.3-1 s limit: 1.2-1.3 s of CPU before, building a relaxation
    # that stopped at its first LP and rounding the second plan again; 0.9 s now).
    best_alone = np.zeros(classes)
    np.maximum.at(best_alone, owner, np.maximum(weight, 0.0))
    bound = float(best_alone @ count)
    greedy = greedy_plan(program.rounding)
    valuable = rounded_plan(program.rounding, np.zeros(size), deadline)  # each class's best
    plan = arrays.better(valuable, greedy)
    stages["rounding"] = time.perf_counter() - began
    if deadline.passed():
        return program.result(LIMIT_WITH_INCUMBENT, plan, size, bound, stages)
    # 1b. Under a team budget that binds, the program less its other limits by dynamic
    # programming (_knapsack): its plan, where it keeps them all, is the optimum with
    # its tie-break; else its value is a bound.
    row = _knapsack.budget_row(arrays, cost)
    if row is not None:
        began = time.perf_counter()
        knapsack = _knapsack.solve(
            arrays, cost, float(arrays.capacity[row]), _floor(arrays.value(plan)),
            LEXICOGRAPHIC_RTOL, deadline.share(KNAPSACK_SHARE),
        )  # fmt: skip
        stages["knapsack"] = time.perf_counter() - began
        if knapsack is not None:
            if arrays.holds(knapsack.plan):
                result = program.result(OPTIMAL, knapsack.plan, knapsack.columns, bound, stages)
                return dataclasses.replace(result, cost_status=OPTIMAL)
            bound = min(bound, knapsack.value)
    # 2. The relaxation, by columns and cuts.
    began = time.perf_counter()
    # From the columns of each class's best that fits, not the greedy plan's: its
    # smaller clusters lead the relaxation to other cuts and a wider face (the saved
    # 100-job program: 6,819 -> 9,507 columns in, 538 -> 1,891 out; the whole solve
    # 9.1-16.3 s -> 16.5-27.4 s of CPU over HiGHS seeds 1-6).
    lp = _relaxation.relax(arrays, valuable, deadline)
    stages["relaxation"] = time.perf_counter() - began
    if isinstance(lp, _relaxation.Stopped):  # the deadline passed first (a busy machine)
        if lp.x_all.any():  # an LP was solved: round from its point, past the deadline
            plan = arrays.better(plan, rounded_plan(program.rounding, lp.x_all))
        return program.result(LIMIT_WITH_INCUMBENT, plan, size, bound, stages)
    bound = min(bound, lp.bound)
    plan = arrays.better(plan, rounded_plan(program.rounding, lp.x_all))
    # 3. The integer program: over the generated columns, then every one that can beat it.
    began = time.perf_counter()
    program = program.with_cuts(lp.cuts, lp.cut_rhs)  # the MIP starts from the tighter bound
    # Under a team budget that binds, the searches branch on value ladders too
    # (fleet_model.ValueLadders): the LP spreads jobs over dearer and cheaper clusters.
    if row is not None:
        ladders = fleet_model.ValueLadders(
            arrays.weight, arrays.owner, arrays.count, LADDERS_PER_CLASS
        )
        program = dataclasses.replace(program, ladders=ladders)
    # A heuristic step (its plan only sets how many columns the next one keeps), so
    # a share of the time: measured (benchmarks/fleet.py --mix distinct) it can
    # otherwise take the whole limit and leave the next step without a plan's help.
    first = dataclasses.replace(program, deadline=deadline.share(FIRST_SEARCH_SHARE))
    status, found, first_bound = first.solve(  # its columns only
        lp.generated, maximise=True, start=plan, relative_gap=FIRST_SEARCH_GAP, warm=True
    )
    stages["first search"] = time.perf_counter() - began  # within "value", as are the next steps
    if found is not None:
        plan = arrays.better(plan, found)
    # Its plan is often an exchange of a few jobs short of the best, and the proof is
    # several times slower from there: neighbourhoods first (_neighbourhoods). Not
    # under a team budget that binds: what the budget leaves each neighbourhood is a
    # knapsack row that made them slow (one of a 30-job $25/h program's took 24 s
    # alone), and the searches with ladders did without them (the saved 20- and 30-job
    # programs under $25 and $60/h, HiGHS seeds 1-2: 181.7 -> 166.9 s of CPU over
    # 15 runs, 12 faster, the same plans).
    local = time.perf_counter()
    if row is None:
        share = deadline.share(NEIGHBOURHOOD_SHARE)
        plan = neighbourhoods.improve(arrays, plan, lp.competitive, share)
    stages["neighbourhoods"] = time.perf_counter() - local

    def narrow(plan: np.ndarray) -> _face.Face:
        local = time.perf_counter()
        floor = _floor(arrays.value(plan))
        # Under a team budget that binds, no rounds past _face.ROUNDS: the budget's row
        # is real-valued, so root cuts close little of its gap (saved 20- and 30-job
        # programs under $25 and $60/h: a third round narrowed nothing).
        face = _face.narrowed(
            arrays, (lp.cuts, lp.cut_rhs), lp.competitive(floor), plan, floor,
            deadline.share(FACE_SHARE), while_wide=row is None,
        )  # fmt: skip
        stages["face"] = stages.get("face", 0.0) + time.perf_counter() - local  # within a step
        return face

    # The columns that can be in a plan at least as good (to the tie tolerance), and
    # the cuts that show it (_face): valid for every plan the proof and the cost
    # stage seek, so rows of both. Only from a plan the first search proved within
    # FIRST_SEARCH_GAP of the best of its columns: a stopped search's plan is too far
    # under the bound for HiGHS's root to leave any column out (the distinct mix, 100
    # jobs: 32,228 of 32,228 kept, 5 s spent).
    searched = status == OPTIMAL
    if searched:
        face = narrow(plan)
    else:
        face = _face.unnarrowed(lp.competitive(_floor(arrays.value(plan))), plan)
    # Unless that search proved the plan best of its columns (to the tie tolerance: it
    # stops at FIRST_SEARCH_GAP, the neighbourhoods may have closed the rest) and no
    # column outside can beat it:
    best_of_generated = searched and arrays.value(plan) >= _floor(first_bound)
    if not best_of_generated or not np.isin(face.columns, lp.generated).all():
        # Without HiGHS's sub-MIP heuristics (see solve) from a plan the first search
        # proved near the best of its columns; where that search was stopped or the
        # face is still FAR above the plan, they still find better ones (the distinct
        # mix, 1,000 jobs: the gap at the limit 5e-4 with them, 1.4e-3 without).
        far = row is None and FAR < face.gap < math.inf
        local = time.perf_counter()
        status, found, proven = program.with_face(face).solve(
            face.columns, maximise=True, start=plan, heuristics=not searched or far
        )
        stages["proof"] = time.perf_counter() - local
        if found is not None:
            plan = arrays.better(plan, found)
        # Every plan better than the known one is over the face's columns, so a
        # stopped search's bound bounds them all (the distinct mix, 100 jobs at 60 s:
        # 128.19 against the relaxation's 128.51, the best plan 128.18).
        if not math.isnan(proven):
            bound = min(bound, proven)
    stages["value"] = time.perf_counter() - began
    variables = len(face.columns)
    if status != OPTIMAL:
        return program.result(LIMIT_WITH_INCUMBENT, plan, variables, bound, stages)
    # 4. The least cost among plans of that value (to LEXICOGRAPHIC_RTOL): over the
    # face (whose floor is at most this one's), narrowed now if it was not before.
    began = time.perf_counter()
    face = face if searched else narrow(plan)
    floor = _floor(arrays.value(plan))
    narrowed = program.with_face(face)
    near = narrowed.cheap_enough(face.columns, floor, plan)
    status, cheaper, _ = narrowed.solve(
        near, maximise=False, floor=floor, start=plan, heuristics=False
    )
    if cheaper is not None and program.cost_of(cheaper) <= program.cost_of(plan):
        plan = cheaper  # else the value is proven; only the tie-break is not
    stages["cost"] = time.perf_counter() - began
    tie_break = OPTIMAL if status == OPTIMAL else LIMIT_WITH_INCUMBENT
    result = program.result(OPTIMAL, plan, variables, bound, stages)
    return dataclasses.replace(result, cost_status=tie_break)


def _floor(value: float) -> float:
    """The least value that ties with ``value`` (LEXICOGRAPHIC_RTOL)."""
    return value - LEXICOGRAPHIC_RTOL * max(abs(value), 1.0)


@dataclass(frozen=True)
class _Program:
    """The program as its integer programs read it: the arrays, each column's cost,
    the deadline, and the cuts every plan sought keeps to."""

    arrays: ProgramArrays
    cost: FloatArray
    deadline: Deadline
    cuts: Any = None  # csr, cuts x columns: valid inequalities the MIP gets as rows
    cut_rhs: FloatArray | None = None
    timing: dict[str, float] = dataclasses.field(default_factory=dict)  # seconds, by step
    ladders: fleet_model.ValueLadders | None = None  # branched on too (a budget binds)

    def with_cuts(self, cuts: Any, rhs: FloatArray) -> _Program:
        return dataclasses.replace(self, cuts=cuts, cut_rhs=rhs)

    def with_face(self, face: _face.Face) -> _Program:
        """With the face's cuts too: for the plans over its columns worth its floor."""
        if not face.cuts.shape[0]:
            return self
        assert self.cuts is not None and self.cut_rhs is not None
        cuts = sp.vstack([self.cuts, face.cuts]).tocsr()
        return self.with_cuts(cuts, np.concatenate([self.cut_rhs, face.rhs]))

    def _upper(self, columns: np.ndarray) -> FloatArray:
        """Each column's bound: its class's count."""
        return self.arrays.count[self.arrays.owner[columns]]

    def cost_of(self, plan: np.ndarray) -> float:
        return float(self.cost[plan].sum())

    @functools.cached_property
    def rounding(self) -> Rounding:
        """Built once: both roundings share its per-class blocks."""
        return Rounding(self.arrays)

    def result(
        self, status: str, plan: np.ndarray, variables: int, bound: float, stages: dict[str, float]
    ) -> ProgramResult:
        rows = len(self.arrays.count) + len(self.arrays.capacity)
        value = self.arrays.value(plan)
        # Proven optimal: the best bound is the value itself.
        bound = value if status == OPTIMAL else max(bound, value)
        return ProgramResult(
            status, np.sort(plan), value, variables, rows, bound, {**stages, **self.timing}
        )

    def constraints(self, floor: float | None = None) -> list[fleet_model.Constraint]:
        """The program's rows as constraint objects (deepvm.planner.fleet._model)."""
        a = self.arrays
        out: list[fleet_model.Constraint] = [
            fleet_model.PerClass(a.owner, a.count),
            fleet_model.SharedLimits(a.resources, a.capacity, a.count[a.owner]),
        ]
        if self.cuts is not None and self.cuts.shape[0]:
            assert self.cut_rhs is not None
            out.append(fleet_model.Cuts(self.cuts, self.cut_rhs))
        if floor is not None:
            slack = LEXICOGRAPHIC_RTOL * max(abs(floor), 1.0)
            out.append(fleet_model.ValueFloor(a.weight, floor, slack))
        return out

    def cheap_enough(self, columns: np.ndarray, floor: float, plan: np.ndarray) -> np.ndarray:
        """Of ``columns``, those that can be in a plan worth ``floor`` that costs no more
        than ``plan``: by the cost stage's own relaxation (least cost c subject to the
        value floor, with the cuts), a plan holding column k costs at least c + d_k
        (d: its reduced costs). Where the relaxation does not finish, every column."""
        import time

        columns = np.union1d(columns, plan).astype(np.int64)
        began = time.perf_counter()
        relaxed = fleet_model.least_cost_relaxation(
            self.cost, self.constraints(floor), columns, self._upper(columns), self.deadline
        )
        self.timing["cost relaxation"] = time.perf_counter() - began
        if relaxed is None:
            return columns
        least, added = relaxed
        ceiling = self.cost_of(plan)
        margin = 1e-6 * max(1.0, abs(ceiling))
        keep = least + np.maximum(added, 0.0) <= ceiling + margin
        return np.union1d(columns[keep], plan).astype(np.int64)

    # --- the integer program ----------------------------------------------------

    def solve(
        self,
        columns: np.ndarray,
        *,
        maximise: bool,
        floor: float | None = None,
        start: np.ndarray | None = None,
        heuristics: bool = True,
        relative_gap: float = 0.0,
        warm: bool = False,
    ) -> tuple[str, np.ndarray | None, float]:
        """Maximise value, or (with ``floor`` on value) minimise cost, over ``columns``
        (each taken up to its class's count); the status, the plan (a column once per
        job) and the bound HiGHS proved on the objective of any plan over ``columns``
        better than ``start`` (nan: none). ``start``: a plan known to be feasible: its
        columns are among those searched. ``heuristics``: False leaves HiGHS's sub-MIP
        heuristics out. ``relative_gap`` (maximising): HiGHS stops, optimal, once its
        plan is within this of its bound (the cost stage's is COST_STAGE_GAP). ``warm``:
        ``start`` goes to HiGHS as its MIP start, not as a cutoff (the first search;
        see below). HiGHS runs at its default tolerance (1e-6); an answer that breaks a
        row by more than float noise is solved again at 1e-9."""
        columns = np.unique(np.concatenate([columns, start if start is not None else []]))
        columns = columns.astype(np.int64)
        # The first search gets the known plan as HiGHS's MIP start: its sub-MIP
        # heuristics (RINS) search around it and reach plans near the best sooner on
        # some seeds (measured in docs/ARCHITECTURE.md, "For the fleet": 9 % over 20
        # seeds of the saved 100-job program, within noise elsewhere). The other
        # searches keep the cutoff: see the note on ``start=`` below.
        given = None
        if warm and start is not None:
            given = np.bincount(np.searchsorted(columns, start), minlength=len(columns))
        out = None
        for tolerance in (1e-6, 1e-9):
            out = fleet_model.solve_integer(
                self.arrays.weight if maximise else self.cost,
                maximise,
                self.constraints(floor),
                columns,
                self._upper(columns),
                # With HiGHS's presolve (measured, benchmarks/fleet.py, three clouds, 100
                # jobs: its restarts shrink the program to a tenth; without it the value
                # search took 2.2x the CPU) and no start: HiGHS 1.16, given both, returned
                # its start as optimal where a cheaper plan of the same value was there
                # (tests/test_fleet_program.py has the case). The known plan stays ours:
                # kept where HiGHS finds none better. The first search (``warm``) has a
                # start and no cutoff; where it returns that start, unimproved, its
                # bound is not trusted (below).
                start=None if given is None else given.astype(float),
                presolve=True,
                deadline=self.deadline,
                feasibility_tolerance=tolerance,
                # What the known plan proves instead of a start: only plans at least
                # as good as it (to the tie tolerance) are sought.
                cutoff=None if given is not None else self._cutoff(start, maximise),
                # Without presolve's probing: on these programs (general-integer
                # columns, quota rows of thousands of non-zeros) it took 5-8 s before
                # the first LP at 1,000 jobs. The value searches ran as fast or faster
                # without it (1,000 jobs proven in 21.5 s, not 28.6), and so does the
                # cost stage now that it runs without sub-MIPs (captured 1,000-job
                # cost stage, seeds 1-2: 23.6-32.7 s -> 13.2-19.9 s; 100 and 5,000
                # jobs within noise). Its first round of cuts is as long either way.
                probing=False,
                # The searches that start from a plan the first search found (the
                # value's proof, the cost stage) go without HiGHS's sub-MIP
                # heuristics: their roots spent most of their time in those sub-MIPs
                # (captured three-cloud programs, seeds 1-3: the 100-job cost stage
                # 11.1-19.1 s -> 3.1-5.6 s, $1-20/h 14.7-20.9 -> 5.5-6.3 s; the
                # 1,000-job value proof 16.5-26.0 s -> 8.5-10.0 s). The first search
                # keeps them: its plan comes from them.
                sub_mips=heuristics,
                relative_gap=relative_gap if maximise else COST_STAGE_GAP,
                # Value ladders to branch on, under a binding team budget
                # (fleet_model.ValueLadders).
                ladders=self.ladders,
            )
            if out.status == INFEASIBLE and start is not None:
                # none as good as the known plan: it is the best (where it was a cutoff;
                # a MIP start's program has the plan, so there it proves nothing)
                proven = given is None and maximise
                return OPTIMAL, start, self.arrays.value(start) if proven else math.nan
            self.timing["cvxpy"] = self.timing.get("cvxpy", 0.0) + out.compile_s
            if out.status not in (OPTIMAL, LIMIT_WITH_INCUMBENT) or not len(out.values):
                return out.status, None, out.bound
            taken = np.maximum(np.round(out.values), 0.0).astype(np.int64)
            plan = np.repeat(columns, taken)
            if self._holds(plan, floor):
                if given is not None and np.array_equal(taken, given):
                    # HiGHS called its own start optimal: proven of nothing (the case
                    # above), so no bound that would let the proof be skipped.
                    return out.status, plan, math.nan
                return out.status, plan, out.bound
        assert out is not None
        return out.status, None, out.bound

    def _cutoff(self, start: np.ndarray | None, maximise: bool) -> float | None:
        if start is None:
            return None
        known = self.arrays.value(start) if maximise else self.cost_of(start)
        slack = LEXICOGRAPHIC_RTOL * max(abs(known), 1.0)
        return known - slack if maximise else known + slack

    def _holds(self, plan: np.ndarray, floor: float | None) -> bool:
        ok = self.arrays.holds(plan)
        if floor is not None:
            ok = ok and self.arrays.value(plan) >= floor - 1e-12 * max(abs(floor), 1.0)
        return ok


__all__ = ["LEXICOGRAPHIC_RTOL", "ProgramResult", "solve"]
