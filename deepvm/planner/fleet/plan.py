"""Fleet planning: one exact plan for all of a team's registered jobs, which share
the account's quotas (per region, quota group and market) and, optionally, a team
budget (docs/ARCHITECTURE.md, "For the fleet").

("Fleet" is always the team's jobs; one job's instance types are its offers,
:class:`deepvm.planner.offers.Offers`.)

Each job's candidates come from its own planner, less the dominated ones
(``deepvm.planner.fleet._options``). The rest is a multiple-choice knapsack with
several shared resources (``deepvm.planner.fleet._program``: arrays in, picks out),
checked and explained apart from it (``deepvm.planner.fleet._check``):

    maximise   sum_j priority_j value_jk x_jk
    subject to sum_k x_jk <= 1                        (a job may stay unplanned)
               sum_jk vcpus_jk[q] x_jk <= quota[q]     (every region, group, market)
               sum_jk cost_jk x_jk <= team budget      (if there is one)

``value_jk`` is the job's objective for cluster k over its solo optimum (the best it
gets alone under its own budget and the full quotas; for objective ``cost``, solo
expected cost over expected cost). A second solve keeps that optimum (to 1e-9
relative) and minimises the total hourly cost. Every plan is checked against the
quotas and budgets, by code written apart from the program, before it is returned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from deepvm.base.config import DEFAULT_MIN_GAIN, DEFAULT_TIME_LIMIT_S, JobSpec, Objective, Policy
from deepvm.base.errors import DeepvmError, ParameterError
from deepvm.catalog.quotas import QuotaKey
from deepvm.planner import architectures as arch
from deepvm.planner._highs import LIMIT_WITH_INCUMBENT, OPTIMAL
from deepvm.planner._policies import Planner, infeasible_budget_error
from deepvm.planner.api import job_planner, job_spec
from deepvm.planner.candidates import Config, hourly_cost
from deepvm.planner.fleet import _check as fleet_check
from deepvm.planner.fleet import _program as fleet_program
from deepvm.planner.fleet import _ties as fleet_ties
from deepvm.planner.fleet import running as fleet_running
from deepvm.planner.fleet._options import (
    JobOptions,
    JobState,
    PlannerRows,
    job_options,
    planner_rows,
    undominated,
)
from deepvm.planner.fleet._program import LEXICOGRAPHIC_RTOL
from deepvm.planner.fleet.types import (
    TIE_BREAK_NOT_RUN,
    FleetPlan,
    JobPlan,
    QuotaUse,
    RegisteredJob,
)
from deepvm.planner.inputs import Inputs
from deepvm.planner.offers import FloatArray, Offers

__all__ = ["SOLVER", "Progress", "plan_fleet"]

SOLVER = "HiGHS fleet"
# Told what the planning is doing as it goes: a line such as "each job alone: 412 of
# 1,000 jobs" (the step, a colon, how far), once per job and once per later step; the
# caller decides which to show (the CLI: none in the first second, then a line a
# step and one every few seconds).
Progress = Callable[[str], None]


def _prune_across(shared: list[JobState], inputs: Inputs, team_budget: float | None) -> None:
    """Exact reductions that need the whole fleet. A quota that the jobs' largest
    candidates together cannot fill never binds, so it is no dimension of
    dominance. Without a team budget, cost only breaks ties between plans within
    LEXICOGRAPHIC_RTOL of the best value: a candidate is dropped where another of
    its job is worth more than that tolerance more and uses no more of any binding
    quota, whatever the two cost."""
    # Alike jobs share their options: each one's largest use per key, once, and how
    # many jobs hold it (not the options themselves: each is freed once pruned).
    largest_of: dict[int, tuple[list[QuotaKey], FloatArray, int]] = {}
    for w in shared:
        assert w.options is not None
        keys, largest_use, n = largest_of.get(id(w.options)) or (
            w.options.keys,
            np.asarray(w.options.usage.max(axis=0).todense()).ravel(),  # usage >= 0
            0,
        )
        largest_of[id(w.options)] = (keys, largest_use, n + 1)
    most: dict[QuotaKey, float] = {}
    for keys, largest_use, n in largest_of.values():
        for key, largest in zip(keys, largest_use, strict=True):
            most[key] = most.get(key, 0.0) + n * float(largest)
    binding = {
        key for key, vcpus in most.items() if vcpus > fleet_check.quota_limit(inputs, key) + 1e-9
    }
    total_priority = sum(w.job.priority for w in shared)
    delta = 2 * LEXICOGRAPHIC_RTOL * max(total_priority, 1.0)
    # Jobs that share options share their pruning, in value (weight over priority):
    # the margin in value of the lowest priority among them is the widest, so it holds
    # for each of them (it drops no more than each one's own would).
    lowest: dict[int, float] = {}
    for w in shared:
        if w.net_weights is None:
            lowest[id(w.options)] = min(lowest.get(id(w.options), math.inf), w.job.priority)
    pruned: dict[int, JobOptions] = {}
    for w in shared:
        o = w.options
        assert o is not None
        # A running job's candidates are its own (valued net of moving): not shared.
        own = w.net_weights is not None
        shared_by = id(w) if own else id(o)
        if shared_by not in pruned:
            usage = o.usage[:, [c for c, q in enumerate(o.keys) if q in binding]].toarray()
            value = w.weights(_value(w, o.score)) if own else _value(w, o.score)
            points = np.column_stack([-value, o.cost, usage])
            if team_budget is None:  # worth more by the margin whatever it costs, or no dearer
                margin = delta if own else delta / lowest[id(o)]
                rows = undominated(points, margin=margin, cost_breaks_ties=True)
            else:  # cost is a row: dominance on it too, without a margin
                rows = undominated(points)
            pruned[shared_by] = o.take(rows)
        w.options = pruned[shared_by]


# --- the fleet ------------------------------------------------------------------


def plan_fleet(
    jobs: Sequence[RegisteredJob],
    inputs: Inputs,
    *,
    team_budget: float | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    min_gain: float = DEFAULT_MIN_GAIN,
    progress: Progress | None = None,
) -> FleetPlan:
    """One plan for every job (see the module docstring). A job with no feasible
    cluster alone is unplanned, with a note saying why; a non-optimal solve (time
    limit) without a plan gives that status and no job planned; one that stopped
    with a plan (``limit_with_incumbent``) gives that plan, checked as any other,
    not proven best (``objective_bound`` says how much better one could be).
    ``progress``: told each step as it starts and each job planned alone
    (``Progress``)."""
    if team_budget is not None and not (team_budget >= 0 and math.isfinite(team_budget)):
        raise ParameterError("team_budget", team_budget, "must be a number of USD per hour >= 0")
    if not (time_limit_s > 0 and math.isfinite(time_limit_s)):  # 0 would stop before any plan
        raise ParameterError("time_limit_s", time_limit_s, "must be a finite number of seconds > 0")
    say = progress if progress is not None else _silent
    work = [JobState(j) for j in jobs]
    _solo_plans(work, inputs, say)
    for w in work:  # a running job's candidates, valued net of moving off its cluster
        if w.job.running is not None:
            fleet_running.adjust(
                w, lambda c, w=w: _score(w.planner, c), lambda s, w=w: _value(w, s), min_gain
            )
    shared = [w for w in work if w.job.shared and w.options is not None and len(w.options)]
    say(f"the candidates across the fleet: pruning those of {len(shared):,} jobs")
    _prune_across(shared, inputs, team_budget)
    columns = sum(len(w.options) for w in shared if w.options is not None)
    say(
        f"the fleet program: {columns:,} candidate clusters of {len(shared):,} jobs, "
        f"time limit {time_limit_s:g} s"
    )
    start = time.perf_counter()
    solved = _solve(shared, inputs, team_budget, time_limit_s)
    status, chosen = solved.status, solved.chosen
    has_plan = status in (OPTIMAL, LIMIT_WITH_INCUMBENT)
    solve_s = time.perf_counter() - start
    picks: dict[str, Config | None] = {}
    if has_plan:
        for w in work:
            if not w.job.shared:
                picks[w.job.name] = w.solo
        picks.update(chosen)
        fleet_check.check(work, picks, inputs, team_budget)
    plans = [_job_plan(w, picks, has_plan, status, solve_s, min_gain) for w in work]
    usage = fleet_check.usage(work, picks)
    fleet_check.explain(plans, work, picks, team_budget, inputs)
    snapshot = inputs.catalog.snapshot
    labels = fleet_check.labels(work, picks)
    return FleetPlan(
        status,
        solved.value if has_plan else math.nan,
        team_budget,
        plans,
        [
            QuotaUse(
                *key,
                usage[key][0],
                fleet_check.quota_limit(inputs, key),
                usage[key][1],
                inputs.quotas.unit(key[1]),
                labels.get(key, ""),
            )
            for key in sorted(usage)
        ],
        snapshot,
        solve_s,
        solved.variables,
        solved.rows,
        solved.bound,
        solved.tie_break,  # not_run where the program has no plan (no cost stage)
    )


def _silent(_message: str) -> None:
    pass


def _solo_plans(work: list[JobState], inputs: Inputs, say: Progress = _silent) -> None:
    """Each job alone: its planner, solo optimum and candidates. Jobs with the same
    spec share one planner (its budget cap the largest of their budgets). ``say``:
    told after each job."""
    offers_by_workload: dict[str, Offers] = {}
    planners: dict[JobSpec, Planner] = {}
    rows: dict[JobSpec, PlannerRows] = {}
    caps: dict[JobSpec, float] = {}
    options: dict[tuple[JobSpec, float], JobOptions] = {}
    solos: dict[tuple[JobSpec, float], tuple[Config, float] | str] = {}  # or why none
    last: dict[JobSpec, int] = {}  # each spec's last job: its rows go after it
    specs: dict[JobSpec, JobSpec] = {}  # each distinct spec, made once (5,000 jobs: 0.4 s)
    for i, w in enumerate(work):
        caps[w.job.spec] = max(caps.get(w.job.spec, 0.0), w.job.budget)
        if w.job.spec not in specs:
            specs[w.job.spec] = job_spec(w.job.spec, {})
        last[specs[w.job.spec]] = i
    for i, w in enumerate(work):
        spec = specs[w.job.spec]
        try:
            if spec.workload not in offers_by_workload:
                offers_by_workload[spec.workload] = inputs.offers(spec.workload)
            if spec not in planners:
                planners[spec] = job_planner(
                    spec, offers_by_workload[spec.workload], caps[spec], None
                )[0]
            planner = planners[spec]
            w.planner = planner
            if (spec, w.job.budget) not in solos:  # alike jobs: one solo plan
                found = planner.optimise(Policy.DEEPVM, w.job.budget, 1)
                solos[spec, w.job.budget] = (
                    (found[0][0], _score(planner, found[0][0]))
                    if found
                    else str(
                        infeasible_budget_error(
                            planner.offers, planner.job, w.job.budget, spec.max_nodes
                        )
                    )
                )
            solo = solos[spec, w.job.budget]
            if isinstance(solo, str):
                w.note = solo
                continue
            w.solo, w.solo_score = solo
            if spec not in rows:
                rows[spec] = planner_rows(planner)
            # Jobs of one spec and budget have the same candidates: built once.
            if (spec, w.job.budget) not in options:
                options[spec, w.job.budget] = job_options(planner, w.job.budget, rows[spec])
            w.options = options[spec, w.job.budget]
        except DeepvmError as exc:  # an unknown workload, say: this job only
            w.note = str(exc)
        finally:
            if last[spec] == i:  # every cluster of a spec, dense by quota key: ~5 MB
                rows.pop(spec, None)
            say(f"each job alone: {i + 1:,} of {len(work):,} jobs")


def _score(planner: Planner, config: Config) -> float:
    """The planner's score (higher is better) of one cluster."""
    c = planner.candidates
    scores, _ = planner.policy_scores(Policy.DEEPVM)
    found = np.flatnonzero(
        (c.architecture == arch.code(config.architecture))
        & (c.worker == config.worker)
        & (c.n == config.n_workers)
    )
    if not found.size:  # no candidate (a running cluster past the budget cap): in full
        value = planner.describe(Policy.DEEPVM, 1, config, SOLVER, 0.0).objective_value
        return -value if planner.objective == Objective.COST else value
    k = int(found[0])
    if planner.objective != Objective.COST:
        return float(scores[k])

    return float(scores[k] / planner.least_cost[k] * hourly_cost(planner.offers, config))


def _value(w: JobState, score: FloatArray | float) -> FloatArray:
    """Score over the solo optimum's: 1 = as good as alone (cost: solo cost / cost)."""
    s = np.asarray(score, dtype=float)
    if w.planner is not None and w.planner.objective == Objective.COST:
        return w.solo_score / s
    return s / w.solo_score


def _solve(
    shared: list[JobState], inputs: Inputs, team_budget: float | None, time_limit_s: float
) -> _Solved:
    """The knapsack (module docstring) over the shared jobs' candidates. Jobs with
    the same candidates, weights and costs are one class (one integer column per
    cluster, up to the class's size), so a team of many alike jobs costs as much as
    one of its kinds."""
    if not shared:
        return _Solved(OPTIMAL, {}, 0.0, 0, 0, 0.0, OPTIMAL)
    import scipy.sparse as sp

    order = sorted(range(len(shared)), key=lambda j: shared[j].job.name)
    classes: dict[object, list[int]] = {}
    for j in order:  # jobs in name order within their class
        w = shared[j]
        alike = (id(w.options), w.job.priority, w.solo_score) if w.net_weights is None else j
        classes.setdefault(alike, []).append(j)
    members = list(classes.values())
    # The program's rows, one per key of each shared limit (the quotas, the team
    # budget): each limit says what each candidate takes of it and its bound.
    limits = fleet_check.shared_limits(inputs, team_budget)
    keys: dict[fleet_check.LimitKey, int] = {}
    bounds: list[float] = []
    key_rows, key_cols, key_vals, weights, costs, owners = [], [], [], [], [], []
    starts: list[int] = []
    offset = 0
    for c, jobs in enumerate(members):
        w = shared[jobs[0]]
        assert w.options is not None
        o = w.options
        starts.append(offset)
        owners.append(np.full(len(o), c))
        weights.append(w.weights(_value(w, o.score)))
        costs.append(o.cost)
        for limit in limits:
            limit_keys, amounts = limit.columns(o)
            local = []
            for key in limit_keys:
                if key not in keys:
                    keys[key] = len(keys)
                    bounds.append(limit.bound(key))
                local.append(keys[key])
            entries = sp.coo_matrix(amounts)  # the non-zero ones
            key_rows.append(np.array(local, dtype=np.int64)[entries.col])
            key_cols.append(offset + entries.row)
            key_vals.append(entries.data)
        offset += len(o)
    owner = np.concatenate(owners)
    weight = np.concatenate(weights)
    cost = np.concatenate(costs)
    usage = sp.csr_matrix(
        (np.concatenate(key_vals), (np.concatenate(key_rows), np.concatenate(key_cols))),
        shape=(len(keys), offset),
    )
    capacity = np.array(bounds)
    count = np.array([len(jobs) for jobs in members], dtype=float)
    result = fleet_program.solve(weight, cost, owner, usage, capacity, time_limit_s, count=count)

    # Each class's picks to its jobs (in name order, the clusters in tie-break
    # order), then, among equal clusters, the documented one (deepvm.planner.fleet._ties).
    def key_of(k: int) -> tuple[object, ...]:
        c = int(owner[k])
        w = shared[members[c][0]]  # alike jobs share their planner and options
        assert w.options is not None and w.planner is not None
        return fleet_ties.canonical_key(w.planner.offers, w.options.configs[k - starts[c]])

    picks: dict[int, int] = {}  # job -> its column of the program
    by_class: dict[int, list[int]] = {}
    for k in result.picked:
        by_class.setdefault(int(owner[k]), []).append(int(k))
    for c, ks in by_class.items():
        ks.sort(key=key_of)
        picks.update(zip(members[c], ks, strict=False))
    picks = fleet_ties.prefer_canonical(picks, owner, weight, cost, usage, capacity, order, key_of)
    chosen: dict[str, Config | None] = {w.job.name: None for w in shared}
    for j, k in picks.items():
        w = shared[j]
        assert w.options is not None
        chosen[w.job.name] = w.options.configs[k - starts[int(owner[k])]]
    value = float(weight[list(picks.values())].sum())
    tie_break = result.cost_status or TIE_BREAK_NOT_RUN
    return _Solved(
        result.status, chosen, value, result.variables, result.rows, result.bound, tie_break
    )


@dataclass(frozen=True)
class _Solved:
    """The fleet program's outcome, by job: the status, each job's cluster (None:
    unplanned), the value, the program's size, the best bound known on the value,
    and whether the tie-break (the least cost among plans of that value) is proven
    (FleetPlan.tie_break_status)."""

    status: str
    chosen: dict[str, Config | None]
    value: float
    variables: int
    rows: int
    bound: float
    tie_break: str


def _job_plan(
    w: JobState,
    picks: dict[str, Config | None],
    has_plan: bool,
    status: str,
    solve_s: float,
    min_gain: float,
) -> JobPlan:
    planner = w.planner
    solo = (
        planner.describe(Policy.DEEPVM, 1, w.solo, "numpy/exact", 0.0)
        if planner is not None and w.solo is not None
        else None
    )
    count = len(w.options) if w.options is not None else 0
    considered = w.options.considered if w.options is not None else 0
    config = picks.get(w.job.name)
    note = w.note
    if not has_plan and note is None:
        note = f"the fleet solve ended {status}: no plan"
    job = w.job
    cluster = None
    if config is not None and planner is not None:
        solver = SOLVER if job.shared else "numpy/exact"
        cluster = planner.describe(Policy.DEEPVM, 1, config, solver, solve_s)
    # A running job's one answer tonight; its reason is the job's note.
    running = fleet_running.decision(w, config, cluster, min_gain) if has_plan else None
    if running is not None:
        note = running.reason

    def plan(planned: bool, value: float) -> JobPlan:
        return JobPlan(
            job.name, job.priority, job.shared, planned, value, cluster, solo, None, note,
            candidates=count, considered=considered, workload=job.spec.workload,
            objective=str(job.spec.objective), deadline_h=job.spec.deadline_h,
            work_flops=job.spec.work_flops, running=running,
        )  # fmt: skip

    if config is None or planner is None:
        return plan(False, 0.0)
    if w.net_values is not None and config in w.net_values:  # running: net of the move
        return plan(True, w.net_values[config])
    return plan(True, float(_value(w, _score(planner, config))))
