"""The five policies (docs/ARCHITECTURE.md, "Policies"), one job's recommendation
and budget sweeps."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from deepvm.base.config import DEFAULT_MAX_NODES, POLICIES, Objective, Policy
from deepvm.base.errors import (
    InfeasibleError,
    InputError,
    InternalError,
    ParameterError,
)
from deepvm.planner._constraints import Budget, Violation, admitted_by_constraints, violations
from deepvm.planner._enumeration import (
    best_per_budget,
    remote_sides,
    remote_upper_bounds,
    top_candidates,
)
from deepvm.planner._explain import binding as explain_binding
from deepvm.planner._explain import cheaper, faster
from deepvm.planner._goodput import (
    CheckpointCosts,
    config_risk,
    object_store_usd_per_hour,
    risk,
)
from deepvm.planner._highs import OPTIMAL
from deepvm.planner._objectives import (
    RISK_OBJECTIVES,
    candidate_scores,
    check_objective,
    config_objective,
)
from deepvm.planner.architectures import REGISTRY
from deepvm.planner.candidates import (
    ARCHITECTURES,
    DESIGN_ARCHITECTURES,
    ON_DEMAND,
    SINGLE_ANCHOR,
    TIERING,
    Candidates,
    CheckpointNeeds,
    Config,
    build_candidates,
    cluster_of,
    cluster_words,
    hourly_cost,
    node_limits,
    throughput,
    within_budget,
)
from deepvm.planner.offers import FloatArray, Offers
from deepvm.planner.recommendation import Recommendation

__all__ = [
    "BASELINE_SOLVER",
    "OPTIMISED_POLICIES",
    "SOLVER_NAME",
    "Planner",
    "cheapest_cluster",
    "check_policies",
    "infeasible_budget_error",
]

OPTIMISED_POLICIES = (Policy.DEEPVM, Policy.DEEPVM_NOSCALE, Policy.ON_DEMAND)
# The solver names recommendations carry: every candidate evaluated exactly
# (deepvm.planner._enumeration), or a baseline policy's rule.
SOLVER_NAME = "numpy/exact"
BASELINE_SOLVER = "rule"


def check_policies(policies: Sequence[str]) -> tuple[str, ...]:
    chosen = POLICIES if "all" in policies else tuple(policies)
    unknown = [p for p in chosen if p not in POLICIES]
    if unknown:
        raise InputError(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICIES)}, all")
    return chosen


def _architectures(policy: str, objective: str) -> tuple[str, ...]:
    if policy == Policy.ON_DEMAND:
        return (ON_DEMAND,)
    if objective == Objective.PAPER:  # the paper's score is defined over its two architectures
        return (SINGLE_ANCHOR, TIERING)
    if objective in RISK_OBJECTIVES:
        return ARCHITECTURES
    return DESIGN_ARCHITECTURES


class Planner:
    """One job's candidates and scores, from which every policy, budget and sweep
    is answered exactly (deepvm.planner._enumeration)."""

    def __init__(
        self,
        offers: Offers,
        job: CheckpointNeeds,
        *,
        objective: str = "throughput",
        budget_cap: float | None = None,
        max_nodes: int = DEFAULT_MAX_NODES,
        work_flops: float | None = None,
        deadline_h: float | None = None,
        checkpoint_costs: CheckpointCosts | None = None,
    ) -> None:
        self.objective = check_objective(objective)
        if self.objective == Objective.COST and work_flops is None:
            raise ParameterError(
                "work_flops",
                ParameterError.MISSING,
                "is needed by objective cost: the total training FLOPs (or {epochs} with "
                "{dataset_size})",
                others=("epochs", "dataset_size"),
            )
        self.costs = checkpoint_costs or CheckpointCosts()
        self.work_flops, self.deadline_h = work_flops, deadline_h
        offers = replace(
            offers, object_store_usd_per_hour=object_store_usd_per_hour(job, self.costs)
        )
        self.offers, self.job = offers, job
        self.max_nodes = max_nodes
        self._anchor_limit = node_limits(offers, max_nodes)[SINGLE_ANCHOR]
        self.candidates: Candidates = build_candidates(
            offers,
            max_nodes=max_nodes,
            budget_cap=budget_cap,
            architectures=(
                ARCHITECTURES if self.objective in RISK_OBJECTIVES else DESIGN_ARCHITECTURES
            ),
        )
        c = self.candidates
        self.remotes = remote_sides(offers, job, max_nodes, remote_upper_bounds(offers, budget_cap))
        # Per candidate, the least hourly cost of a whole cluster built on it.
        self.least_cost: FloatArray = np.nan_to_num(c.cost(offers), nan=np.inf)
        self.least_cost += self.remotes.cost_of(c.worker, c.n, c.arch_mask(TIERING))
        self._checked: dict[Config, tuple[list[Violation], float]] = {}
        self._described: dict[tuple[str, int, Config, str, float], Recommendation] = {}
        # Per planning model (linear scaling or not): the score and which candidates
        # the objective admits (the cost objective's deadline).
        self._scores: dict[bool, FloatArray] = {}
        self._admitted: dict[bool, np.ndarray] = {}
        # Limits that prune worker sides beyond what the candidates are built to keep
        # (deepvm.planner._constraints: a constraint's ``admits``).
        kept = admitted_by_constraints(offers, job, self.candidates)
        for linear in (False, True):
            scores, admitted = self._plan_scores(linear)
            self._scores[linear], self._admitted[linear] = scores, admitted & kept

    def _plan_scores(self, linear: bool) -> tuple[FloatArray, np.ndarray]:
        c = self.candidates
        flops = candidate_scores(self.offers, c, self.objective, linear_scaling=linear)
        admitted = np.ones(len(c), dtype=bool)
        if self.objective not in RISK_OBJECTIVES:
            return flops, admitted
        work_s = None
        if self.work_flops is not None:
            work_s = self.work_flops / np.maximum(flops, 1e-300)
        r = risk(self.offers, c.architecture, c.worker, c.n, self.job, self.costs, work_s)
        goodput = flops * r.efficiency
        if self.objective == Objective.GOODPUT:
            return goodput, admitted
        assert self.work_flops is not None
        with np.errstate(divide="ignore", invalid="ignore"):
            makespan_h = self.work_flops / goodput / 3600.0
            total = makespan_h * self.least_cost  # the cheapest remote side: exact
        if self.deadline_h is not None:
            admitted = makespan_h <= self.deadline_h * (1 + 1e-9)
        return np.where(np.isfinite(total), -total, -np.inf), admitted

    def _allowed(self, policy: str) -> np.ndarray:
        """Which candidates the policy may pick (its architectures, the deadline)."""
        archs = _architectures(policy, self.objective)
        return self.candidates.arch_mask(*archs) & self._admitted[policy == Policy.DEEPVM_NOSCALE]

    def policy_scores(self, policy: str) -> tuple[FloatArray, np.ndarray]:
        """Per candidate, the policy's score (higher is better) and whether it may pick it."""
        return self._scores[policy == Policy.DEEPVM_NOSCALE], self._allowed(policy)

    # -- one policy, one budget ---------------------------------------------

    def optimise(self, policy: str, budget: float, top: int = 1) -> list[tuple[Config, float]]:
        """Top-``top`` distinct configurations of an optimised policy, with seconds
        each. Raises InternalError (a bug) when an answer fails the independent check."""
        allowed = self._allowed(policy)
        scores = self._scores[policy == Policy.DEEPVM_NOSCALE]
        start = time.perf_counter()
        picked = top_candidates(scores, self.least_cost, allowed, budget, top)
        configs = [self._verified(self.config(k), budget) for k in picked]
        seconds = (time.perf_counter() - start) / max(len(configs), 1)
        return [(config, seconds) for config in configs]

    def config(self, k: int) -> Config:
        """Candidate ``k`` as a cluster, Tiering with its cheapest remote side."""
        c = self.candidates
        arch = REGISTRY[int(c.architecture[k])].name
        worker, n = int(c.worker[k]), int(c.n[k])
        if arch != TIERING:
            return Config(arch, worker, n)
        return Config(arch, worker, n, *self.remotes.side(worker, n))

    def violations(self, config: Config, budget: float) -> list[Violation]:
        """The constraints ``config`` breaks for this job at ``budget``."""
        return violations(self.offers, self.job, config, budget)

    def _verified(self, config: Config, budget: float) -> Config:
        """The answer checked against the model, written independently (a failure is a
        bug). A sweep answers many budgets with few clusters: the constraints are
        checked once per cluster, the budget for each answer."""
        if config not in self._checked:
            broken = violations(self.offers, self.job, config, math.inf)
            self._checked[config] = (broken, hourly_cost(self.offers, config))
        broken, cost = self._checked[config]
        if not within_budget(cost, budget):
            broken = [*broken, Violation("budget", Budget())]
        if broken:
            raise InternalError(
                f"planner answer {cluster_words(self.offers, config)} failed verification: "
                + ", ".join(map(str, broken))
            )
        return config

    def baseline(self, policy: str, budget: float) -> Config | None:
        """cost_first / performance_first: Single Anchor on one GPU type with as
        many nodes as the budget and quotas allow ("Policies")."""
        return self.baselines(policy, [budget])[0]

    def baselines(self, policy: str, budgets: Sequence[float]) -> list[Config | None]:
        """``baseline`` at every budget at once: per type the most nodes each budget
        affords, then per budget the type that ranks first (cost_first: most nodes,
        then the faster type, then cheaper; performance_first: the fastest type,
        then most nodes, then cheaper)."""
        f = self.offers
        limit = self._anchor_limit
        i = np.flatnonzero((limit >= 2) & np.isfinite(f.gpu_spot))
        if not i.size:
            return [None] * len(budgets)
        spot, od, flops = f.gpu_spot[i], f.gpu_ondemand[i], f.gpu_flops[i]
        b = np.asarray(budgets, dtype=float)[None, :]
        affordable = np.floor((b - od[:, None]) / spot[:, None] + 1e-9) + 1
        n = np.minimum(limit[i][:, None], affordable)  # types x budgets
        cost = od[:, None] + (n - 1) * spot[:, None]
        flops_b = np.broadcast_to(flops[:, None], n.shape)
        keys = (n, flops_b, -cost) if policy == Policy.COST_FIRST else (flops_b, n, -cost)
        # Lexicographic argmax per budget: keep the rows that tie on each key in turn.
        tied = n >= 2
        for key in keys:
            best = np.max(np.where(tied, key, -np.inf), axis=0, initial=-np.inf)
            tied &= key == best[None, :]
        first = np.argmax(tied, axis=0)  # the first type among exact ties
        return [
            Config(SINGLE_ANCHOR, int(i[row]), int(n[row, col])) if tied[row, col] else None
            for col, row in enumerate(first)
        ]

    def recommend(
        self, budget: float, policies: Sequence[str], top: int, *, explain: bool = False
    ) -> list[Recommendation]:
        """The ranked clusters of each policy; ``explain``: with what binds each and,
        for an optimised policy's first, the next cheaper and faster cluster (for
        which the planner must allow budgets up to FASTER_BUDGET_STEPS[-1] x this one)."""
        out: list[Recommendation] = []
        for policy in policies:
            if policy in OPTIMISED_POLICIES:
                for rank, (config, solve_s) in enumerate(self.optimise(policy, budget, top), 1):
                    rec = self.describe(policy, rank, config, SOLVER_NAME, solve_s)
                    if explain:  # the lower ranks are the alternatives to the first
                        rec = replace(rec, binding=explain_binding(self, config, budget))
                    if explain and rank == 1:
                        rec = replace(
                            rec,
                            cheaper=cheaper(self, policy, config),
                            faster=faster(self, policy, config, budget),
                        )
                    out.append(rec)
            else:
                picked = self.baseline(policy, budget)
                if picked is not None:
                    rec = self.describe(policy, 1, picked, BASELINE_SOLVER, 0.0)
                    if explain:
                        rec = replace(rec, binding=explain_binding(self, picked, budget))
                    out.append(rec)
        return out

    def describe(
        self, policy: str, rank: int, config: Config, solver: str, solve_s: float
    ) -> Recommendation:
        """One cluster with everything known of it (a fleet's alike jobs share one
        planner and ask of the same clusters: each answered once)."""
        key = (policy, rank, config, solver, solve_s)
        if key not in self._described:
            self._described[key] = self._describe(policy, rank, config, solver, solve_s)
        return self._described[key]

    def _describe(
        self, policy: str, rank: int, config: Config, solver: str, solve_s: float
    ) -> Recommendation:
        f = self.offers
        i = config.worker
        model = f.gpu_models[i]
        flops = throughput(f, config)
        cost = hourly_cost(f, config)
        work_s = None if self.work_flops is None else self.work_flops / flops
        r = config_risk(f, config, self.job, self.costs, work_s)
        efficiency = float(r.efficiency[0])
        makespan_h = total_cost = math.nan
        if self.work_flops is not None:
            makespan_h = self.work_flops / (flops * efficiency) / 3600.0
            total_cost = makespan_h * cost
        if self.objective == Objective.GOODPUT:
            value = flops * efficiency
        elif self.objective == Objective.COST:
            value = total_cost
        else:
            value = config_objective(f, config, self.objective)
        interval = float(r.interval_s[0])
        return Recommendation(
            **cluster_of(f, config).as_dict(),
            policy=policy,
            rank=rank,
            objective_value=value,
            preemptions_per_h=float(r.rate_per_s[0]) * 3600.0,
            checkpoint_interval_s=interval if math.isfinite(interval) else math.nan,
            efficiency=efficiency,
            goodput_flops=flops * efficiency,
            expected_makespan_h=makespan_h,
            expected_total_cost=total_cost,
            overhead_model=model.describe(),
            overhead_source=model.source,
            flops_source=f.gpu_flops_source[i],
            status=OPTIMAL,
            solver=solver,
            solve_s=solve_s,
            **f.inputs_of(i, spot=config.n_spot > 0),
        )

    # -- sweeps ---------------------------------------------------------------

    def sweep(
        self, policies: Sequence[str], budgets: Sequence[float]
    ) -> dict[tuple[str, float], Config | None]:
        """The best configuration of every policy at every budget (None where
        nothing fits): one pass over the candidates sorted by cost per policy."""
        distinct = sorted(set(budgets))
        result: dict[tuple[str, float], Config | None] = {}
        for policy in policies:
            if policy not in OPTIMISED_POLICIES:
                picks = self.baselines(policy, distinct)
                result.update({(policy, b): c for b, c in zip(distinct, picks, strict=True)})
                continue
            allowed = self._allowed(policy)
            scores = self._scores[policy == Policy.DEEPVM_NOSCALE]
            best = best_per_budget(scores, self.least_cost, allowed, distinct)
            configs = {k: self.config(k) for k in set(best) if k is not None}
            for b, k in zip(distinct, best, strict=True):
                result[policy, b] = None if k is None else self._verified(configs[k], b)
        return result


def cheapest_cluster(
    offers: Offers, job: CheckpointNeeds, max_nodes: int = DEFAULT_MAX_NODES
) -> Config | None:
    """The cheapest feasible cluster of any architecture: what the budget must at
    least be (each candidate's least cost, Tiering with its cheapest remote side)."""
    planner = Planner(offers, job, max_nodes=max_nodes)
    if len(planner.candidates) == 0 or not np.isfinite(planner.least_cost).any():
        return None
    return planner.config(int(np.argmin(planner.least_cost)))


def infeasible_budget_error(
    offers: Offers, job: CheckpointNeeds, budget: float, max_nodes: int = DEFAULT_MAX_NODES
) -> InfeasibleError:
    cheapest = cheapest_cluster(offers, job, max_nodes)
    if cheapest is None:
        return InfeasibleError(
            "no cluster is feasible at any budget: check quotas and the checkpoint size"
        )
    cost = hourly_cost(offers, cheapest)
    return InfeasibleError(
        f"budget ${budget:g}/h is below the cheapest feasible cluster: "
        f"{cluster_words(offers, cheapest)} "
        f"at ${cost:.4f}/h; raise {{budget}} to at least {math.ceil(cost * 100) / 100:.2f}",
        names=("budget",),
    )
