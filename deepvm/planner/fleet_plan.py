"""Fleet planning: one exact plan for all of a team's registered jobs, which share
the account's quotas (per region, quota group and market) and, optionally, a team
budget (docs/ARCHITECTURE.md, "For the fleet").

("Fleet" is always the team's jobs; one job's instance types are its offers,
:class:`deepvm.planner.offers.Offers`.)

Each job's candidates come from its own planner, less the dominated ones
(``deepvm.planner.fleet_options``). The rest is a multiple-choice knapsack with
several shared resources, solved by HiGHS (``deepvm.planner.highs``):

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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from deepvm.config import DEFAULT_TIME_LIMIT_S, JobSpec, Objective, Policy
from deepvm.errors import DeepvmError, SolverError
from deepvm.planner import architectures as arch
from deepvm.planner import highs
from deepvm.planner.api import Inputs, job_planner, job_spec
from deepvm.planner.candidates import Config, cluster_words
from deepvm.planner.constraints import QuotaKey, quota_words, violations
from deepvm.planner.constraints import usage as cluster_usage
from deepvm.planner.fleet_options import (
    JobOptions,
    PlannerRows,
    job_options,
    planner_rows,
    undominated,
)
from deepvm.planner.fleet_types import FleetPlan, JobPlan, QuotaUse, RegisteredJob
from deepvm.planner.highs import OPTIMAL
from deepvm.planner.offers import FloatArray, Offers
from deepvm.planner.policies import Planner, infeasible_budget_error

# Values this close (relative) to the solo optimum count as reaching it.
VALUE_RTOL = 1e-7
# The second solve keeps the first one's value to this (relative) tolerance.
LEXICOGRAPHIC_RTOL = 1e-9
SOLVER = "HiGHS fleet"


def _prune_across(shared: list[_JobState], inputs: Inputs, team_budget: float | None) -> None:
    """Exact reductions that need the whole fleet. A quota that the jobs' largest
    candidates together cannot fill never binds, so it is no dimension of
    dominance. Without a team budget, cost only breaks ties between plans within
    LEXICOGRAPHIC_RTOL of the best value: a candidate is dropped where another of
    its job is worth more than that tolerance more and uses no more of any binding
    quota, whatever the two cost."""
    most: dict[QuotaKey, float] = {}
    for w in shared:
        assert w.options is not None
        for col, key in enumerate(w.options.keys):
            most[key] = most.get(key, 0.0) + float(w.options.usage[:, col].max(initial=0.0))
    binding = {key for key, vcpus in most.items() if vcpus > _limit(inputs, key) + 1e-9}
    total_priority = sum(w.job.priority for w in shared)
    delta = 2 * LEXICOGRAPHIC_RTOL * max(total_priority, 1.0)
    pruned: dict[tuple[int, float], JobOptions] = {}  # jobs that share options share this
    for w in shared:
        o = w.options
        assert o is not None
        shape = (id(o), w.job.priority)
        if shape not in pruned:
            usage = o.usage[:, [c for c, q in enumerate(o.keys) if q in binding]]
            weight = w.job.priority * _value(w, o.score)
            rows = undominated(np.column_stack([-weight, o.cost, usage]))
            if team_budget is None:
                strict = undominated(np.column_stack([-weight[rows], usage[rows]]), margin=delta)
                rows = rows[strict]
            pruned[shape] = o.take(rows)
        w.options = pruned[shape]


# --- the fleet ------------------------------------------------------------------


@dataclass
class _JobState:
    """Working state of one job while the fleet is planned."""

    job: RegisteredJob
    planner: Planner | None = None
    solo: Config | None = None
    solo_score: float = math.nan
    options: JobOptions | None = None
    note: str | None = None


def plan_fleet(
    jobs: Sequence[RegisteredJob],
    inputs: Inputs,
    *,
    team_budget: float | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> FleetPlan:
    """One plan for every job (see the module docstring). A job with no feasible
    cluster alone is unplanned, with a note saying why; a non-optimal solve (time
    limit) gives a plan with that status and no job planned."""
    if team_budget is not None and not (team_budget >= 0 and math.isfinite(team_budget)):
        from deepvm.errors import ParameterError

        raise ParameterError("team_budget", team_budget, "must be a number of USD per hour >= 0")
    work = [_JobState(j) for j in jobs]
    _solo_plans(work, inputs)
    shared = [w for w in work if w.job.shared and w.options is not None and len(w.options)]
    _prune_across(shared, inputs, team_budget)
    start = time.perf_counter()
    status, chosen, objective, variables, constraints = _solve(
        shared, inputs, team_budget, time_limit_s
    )
    solve_s = time.perf_counter() - start
    picks: dict[str, Config | None] = {}
    if status == OPTIMAL:
        for w in work:
            if not w.job.shared:
                picks[w.job.name] = w.solo
        picks.update(chosen)
        _check(work, picks, inputs, team_budget)
    plans = [_job_plan(w, picks, status, solve_s) for w in work]
    usage = _usage(work, picks)
    _explain(plans, work, picks, usage, team_budget, inputs)
    snapshot = inputs.catalog.snapshot
    return FleetPlan(
        status,
        objective if status == OPTIMAL else math.nan,
        team_budget,
        plans,
        [
            QuotaUse(*key, usage[key][0], _limit(inputs, key), usage[key][1])
            for key in sorted(usage)
        ],
        snapshot,
        solve_s,
        variables,
        constraints,
    )


def _solo_plans(work: list[_JobState], inputs: Inputs) -> None:
    """Each job alone: its planner, solo optimum and candidates. Jobs with the same
    spec share one planner (its budget cap the largest of their budgets)."""
    offers_by_workload: dict[str, Offers] = {}
    planners: dict[JobSpec, Planner] = {}
    rows: dict[JobSpec, PlannerRows] = {}
    caps: dict[JobSpec, float] = {}
    options: dict[tuple[JobSpec, float], JobOptions] = {}
    for w in work:
        caps[w.job.spec] = max(caps.get(w.job.spec, 0.0), w.job.budget)
    for w in work:
        spec = job_spec(w.job.spec, {})
        try:
            if spec.workload not in offers_by_workload:
                offers_by_workload[spec.workload] = inputs.offers(spec.workload)
            if spec not in planners:
                planners[spec] = job_planner(
                    spec, offers_by_workload[spec.workload], caps[spec], None
                )[0]
            planner = planners[spec]
            w.planner = planner
            found = planner.optimise(Policy.DEEPVM, w.job.budget, 1)
            if not found:
                w.note = str(
                    infeasible_budget_error(
                        planner.offers, planner.job, w.job.budget, spec.max_nodes
                    )
                )
                continue
            w.solo = found[0][0]
            w.solo_score = _score(planner, w.solo)
            if spec not in rows:
                rows[spec] = planner_rows(planner)
            # Jobs of one spec and budget have the same candidates: built once.
            if (spec, w.job.budget) not in options:
                options[spec, w.job.budget] = job_options(planner, w.job.budget, rows[spec])
            w.options = options[spec, w.job.budget]
        except DeepvmError as exc:  # an unknown workload, say: this job only
            w.note = str(exc)


def _score(planner: Planner, config: Config) -> float:
    """The planner's score (higher is better) of one cluster."""
    c = planner.candidates
    scores, _ = planner.policy_scores(Policy.DEEPVM)
    k = int(
        np.flatnonzero(
            (c.architecture == arch.code(config.architecture))
            & (c.worker == config.worker)
            & (c.n == config.n_workers)
        )[0]
    )
    if planner.objective != Objective.COST:
        return float(scores[k])
    from deepvm.planner.candidates import hourly_cost

    return float(scores[k] / planner.least_cost[k] * hourly_cost(planner.offers, config))


def _value(w: _JobState, score: FloatArray | float) -> FloatArray:
    """Score over the solo optimum's: 1 = as good as alone (cost: solo cost / cost)."""
    s = np.asarray(score, dtype=float)
    if w.planner is not None and w.planner.objective == Objective.COST:
        return w.solo_score / s
    return s / w.solo_score


def _solve(
    shared: list[_JobState], inputs: Inputs, team_budget: float | None, time_limit_s: float
) -> tuple[str, dict[str, Config | None], float, int, int]:
    """The knapsack (module docstring) over the shared jobs' candidates: status,
    each job's cluster (None: unplanned), objective value, binaries, constraints."""
    if not shared:
        return OPTIMAL, {}, 0.0, 0, 0
    import scipy.sparse as sp

    keys: dict[QuotaKey, int] = {}
    starts: list[int] = []
    job_rows, key_rows, key_cols, key_vals, weights, costs = [], [], [], [], [], []
    offset = 0
    for j, w in enumerate(shared):
        assert w.options is not None
        o = w.options
        rows = np.arange(offset, offset + len(o))
        starts.append(offset)
        job_rows.append(np.full(len(o), j))
        weights.append(w.job.priority * _value(w, o.score))
        costs.append(o.cost)
        local = [keys.setdefault(key, len(keys)) for key in o.keys]
        r, col = np.nonzero(o.usage)
        key_rows.append(np.array(local, dtype=np.int64)[col] if len(local) else col)
        key_cols.append(rows[r])
        key_vals.append(o.usage[r, col])
        offset += len(o)
    size = offset
    owner = np.concatenate(job_rows)
    weight = np.concatenate(weights)
    cost = np.concatenate(costs)
    quota = np.array([_limit(inputs, key) for key in keys])
    usage = sp.csr_matrix(
        (np.concatenate(key_vals), (np.concatenate(key_rows), np.concatenate(key_cols))),
        shape=(len(keys), size),
    )
    limited = np.flatnonzero(np.isfinite(quota))
    # The shared resources as rows: each limited quota key, then the team budget.
    resources = usage[limited]
    capacity = quota[limited]
    if team_budget is not None:
        resources = sp.vstack([resources, sp.csr_matrix(cost)]).tocsr()
        capacity = np.append(capacity, team_budget)
    one_each = sp.csr_matrix((np.ones(size), (owner, np.arange(size))), shape=(len(shared), size))
    status, bound, reduced, greedy = _relaxation(
        weight, owner, one_each, resources, capacity, time_limit_s
    )
    if status != OPTIMAL:
        return status, {}, math.nan, size, 0
    kept = _competitive(bound, reduced, float(weight[greedy].sum()))
    program = _Program(weight, cost, one_each, resources, capacity, time_limit_s)
    status, first = program.solve(kept, maximise=True, start=greedy)
    if first is None:
        return status, {}, math.nan, len(kept), program.rows
    best = float(weight[first].sum())
    floor = best - LEXICOGRAPHIC_RTOL * max(abs(best), 1.0)
    # The second solve ranges over plans worth at least `floor`: fewer candidates compete.
    near = _competitive(bound, reduced, floor)
    status, second = program.solve(near, maximise=False, floor=floor, start=first)
    if second is None:
        return status, {}, math.nan, len(kept), program.rows
    picked = np.zeros(size, dtype=bool)
    picked[second] = True
    chosen: dict[str, Config | None] = {}
    for j, job in enumerate(shared):
        assert job.options is not None
        rows = np.flatnonzero(picked & (owner == j))
        chosen[job.job.name] = job.options.configs[int(rows[0]) - starts[j]] if rows.size else None
    return OPTIMAL, chosen, float(weight[picked].sum()), len(kept), program.rows


@dataclass(frozen=True)
class _Program:
    """The fleet's binary program over a subset of the candidates (its columns)."""

    weight: FloatArray
    cost: FloatArray
    one_each: Any  # jobs x candidates: at most one each
    resources: Any  # shared limits x candidates: quotas, then the team budget
    capacity: FloatArray
    time_limit_s: float

    @property
    def rows(self) -> int:
        return int(self.one_each.shape[0] + self.resources.shape[0])

    def solve(
        self,
        columns: np.ndarray,
        *,
        maximise: bool,
        floor: float | None = None,
        start: np.ndarray | None = None,
    ) -> tuple[str, np.ndarray | None]:
        """Maximise value, or (with ``floor`` on value) minimise cost, over ``columns``;
        the status and the chosen candidates. ``start``: candidates of a plan known
        to be feasible, where the search begins. HiGHS runs at its default tolerance
        (1e-6; tighter is several times slower here); an answer that, rounded to 0/1,
        breaks a row by more than float noise is solved again at 1e-9."""
        import scipy.sparse as sp

        w, c = self.weight[columns], self.cost[columns]
        jobs, shared = self.one_each[:, columns], self.resources[:, columns]
        blocks = [jobs, shared]
        upper = [np.ones(jobs.shape[0]), self.capacity]
        if floor is not None:  # value >= floor, as -value <= -floor
            blocks.append(sp.csr_matrix(-w))
            upper.append(np.array([-floor]))
        matrix = sp.vstack(blocks).tocsr()
        bounds = np.concatenate(upper)
        initial = None
        if start is not None:
            initial = np.isin(columns, start).astype(float)
        for tolerance in (1e-6, 1e-9):
            out = highs.solve(
                w if maximise else c,
                matrix,
                bounds,
                maximise=maximise,
                integer=True,
                time_limit_s=self.time_limit_s,
                feasibility_tolerance=tolerance,
                start=initial,
            )
            if out.status != OPTIMAL:
                return out.status, None
            pick = np.round(out.values) > 0.5
            used = shared @ pick.astype(float)
            holds = (jobs @ pick.astype(float) <= 1).all() and (
                used <= self.capacity + 1e-9 * np.maximum(np.abs(self.capacity), 1.0)
            ).all()
            if floor is not None:
                holds = holds and float(w[pick].sum()) >= floor - 1e-12 * max(abs(floor), 1.0)
            if holds:
                return OPTIMAL, columns[pick]
        return OPTIMAL, None


def _competitive(bound: float, reduced: FloatArray, value: float) -> np.ndarray:
    """The candidates that can be in a plan worth at least ``value`` (see _relaxation);
    a margin keeps float noise in the duals from dropping one."""
    margin = 1e-6 * max(1.0, abs(value))
    return np.flatnonzero(bound + reduced >= value - margin)


def _relaxation(
    weight: FloatArray,
    owner: np.ndarray,
    one_each: Any,
    resources: Any,
    capacity: FloatArray,
    time_limit_s: float,
) -> tuple[str, float, FloatArray, np.ndarray]:
    """The LP relaxation, for filtering candidates by duality: with its value z and
    duals y, any plan holding candidate k is worth at most z + r_k (r = weight - A'y
    <= 0), so a candidate with z + r_k below a feasible plan's value cannot be in an
    optimal plan. Returns the status, z, r and the candidates of a feasible plan
    rounded from the relaxation (_greedy_plan)."""
    import scipy.sparse as sp

    a = sp.vstack([one_each, resources]).tocsr()
    b = np.concatenate([np.ones(one_each.shape[0]), capacity])
    out = highs.solve(weight, a, b, maximise=True, integer=False, time_limit_s=time_limit_s)
    if out.status != OPTIMAL or len(out.row_duals) != len(b):
        return out.status, math.nan, np.zeros(0), np.zeros(0, dtype=np.int64)
    duals = np.maximum(out.row_duals, 0.0)
    reduced = weight - a.T @ duals
    bound = float(b @ duals)  # the dual bound: at least the relaxation's value
    incumbent = _greedy_plan(weight, owner, resources, capacity, out.values)
    return OPTIMAL, bound, reduced, incumbent


def _greedy_plan(
    weight: FloatArray, owner: np.ndarray, resources: Any, capacity: FloatArray, lp: FloatArray
) -> np.ndarray:
    """The candidates of a feasible plan rounded from the relaxation: each job, in the
    order of its share of the relaxation, takes its candidate with the largest LP
    weight if that still fits; then jobs left without one take their most valuable
    candidate that fits. (The relaxation has at most one fractional job per shared
    resource, so this is close to the optimum, which makes the filter sharp.)"""
    dense = resources.toarray() if resources.shape[0] else np.zeros((0, len(weight)))
    left = capacity.astype(float).copy()
    share = np.bincount(owner, weights=lp * weight)
    columns = [np.flatnonzero(owner == j) for j in range(len(share))]
    picked: list[int] = []
    open_jobs = []
    for j in np.argsort(-share, kind="stable"):
        cols = columns[j]
        k = cols[np.argmax(lp[cols])]
        if lp[k] > 1e-6 and (dense[:, k] <= left + 1e-9).all():
            left -= dense[:, k]
            picked.append(int(k))
        else:
            open_jobs.append(j)
    for j in open_jobs:
        cols = columns[j]
        fits = cols[(dense[:, cols] <= left[:, None] + 1e-9).all(axis=0)]
        if fits.size:
            k = fits[np.argmax(weight[fits])]
            left -= dense[:, k]
            picked.append(int(k))
    return np.array(sorted(picked), dtype=np.int64)


def _limit(inputs: Inputs, key: QuotaKey) -> float:
    region, group, market = key
    return inputs.quotas.limit(group, market, region)


def _check(
    work: list[_JobState],
    picks: dict[str, Config | None],
    inputs: Inputs,
    team_budget: float | None,
) -> None:
    """The plan against every job's own model and budget, the shared quotas and the
    team budget; a failure is a bug, raised as SolverError."""
    broken: list[str] = []
    used: dict[QuotaKey, float] = {}
    total = 0.0
    for w in work:
        config = picks.get(w.job.name)
        if config is None:
            continue
        assert w.planner is not None
        offers, job = w.planner.offers, w.planner.job
        for why in violations(offers, job, config, w.job.budget):
            broken.append(f"{w.job.name}: {cluster_words(offers, config)}: {why}")
        if w.job.shared:
            from deepvm.planner.candidates import hourly_cost

            total += hourly_cost(offers, config)
            for key, vcpus in cluster_usage(offers, config).items():
                used[key] = used.get(key, 0.0) + vcpus
    for key, vcpus in used.items():
        if vcpus > _limit(inputs, key) + 1e-6:
            broken.append(f"quota {'/'.join(key)}: {vcpus:g} vCPUs > {_limit(inputs, key):g}")
    if team_budget is not None and total > team_budget * (1 + 1e-9) + 1e-9:
        broken.append(f"team budget: ${total:.4f}/h > ${team_budget:g}/h")
    if broken:
        raise SolverError("fleet plan failed verification: " + "; ".join(broken))


def _job_plan(
    w: _JobState, picks: dict[str, Config | None], status: str, solve_s: float
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
    if status != OPTIMAL and note is None:
        note = f"the fleet solve ended {status}: no plan"
    job = w.job
    sizes = {"candidates": count, "considered": considered}
    if config is None or planner is None:
        return JobPlan(
            job.name, job.priority, job.shared, False, 0.0, None, solo, None, note, **sizes
        )
    solver = SOLVER if job.shared else "numpy/exact"
    cluster = planner.describe(Policy.DEEPVM, 1, config, solver, solve_s)
    value = float(_value(w, _score(planner, config)))
    return JobPlan(
        job.name, job.priority, job.shared, True, value, cluster, solo, None, note, **sizes
    )


def _usage(
    work: list[_JobState], picks: dict[str, Config | None]
) -> dict[QuotaKey, tuple[float, float]]:
    """Per quota key the shared jobs touch: (fleet vCPUs, solo plans' vCPUs)."""
    out: dict[QuotaKey, list[float]] = {}
    for w in work:
        if not w.job.shared or w.planner is None:
            continue
        offers = w.planner.offers
        for slot, config in ((0, picks.get(w.job.name)), (1, w.solo)):
            if config is None:
                continue
            for key, vcpus in cluster_usage(offers, config).items():
                out.setdefault(key, [0.0, 0.0])[slot] += vcpus
    return {key: (v[0], v[1]) for key, v in out.items()}


def _explain(
    plans: list[JobPlan],
    work: list[_JobState],
    picks: dict[str, Config | None],
    usage: dict[QuotaKey, tuple[float, float]],
    team_budget: float | None,
    inputs: Inputs,
) -> None:
    """``binding`` per job short of its solo optimum: the shared limits its solo
    cluster would break if it replaced the job's planned cluster in this plan."""
    total = sum(
        p.cluster.hourly_cost for p in plans if p.planned and p.cluster is not None and p.shared
    )
    for k, (plan, w) in enumerate(zip(plans, work, strict=True)):
        if not plan.shared or w.solo is None or w.planner is None:
            continue
        if plan.planned and plan.value >= 1 - VALUE_RTOL:
            continue
        offers = w.planner.offers
        planned = picks.get(w.job.name)
        mine = cluster_usage(offers, planned) if planned is not None else {}
        solo = cluster_usage(offers, w.solo)
        reasons = []
        for key in sorted(solo):
            after = usage.get(key, (0.0, 0.0))[0] - mine.get(key, 0.0) + solo[key]
            if after > _limit(inputs, key) + 1e-6:
                reasons.append(quota_words(key, _limit(inputs, key)))
        if team_budget is not None:
            mine_cost = plan.cluster.hourly_cost if plan.cluster is not None else 0.0
            solo_cost = plan.solo.hourly_cost if plan.solo is not None else 0.0
            if total - mine_cost + solo_cost > team_budget * (1 + 1e-9) + 1e-9:
                reasons.append("team budget")
        plans[k] = replace(plan, binding="; ".join(reasons) or None)
