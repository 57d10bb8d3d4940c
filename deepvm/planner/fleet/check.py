"""The fleet plan checked and explained, by code apart from the program
(docs/ARCHITECTURE.md, "For the fleet"): every job's cluster against its own
model and budget, the shared quotas and the team budget (``check``: a failure is
a bug); each quota's use (``usage``); and, for a job short of its solo optimum,
the shared limits its solo cluster would break in this plan (``explain``)."""

from __future__ import annotations

import math
from dataclasses import replace

from deepvm.base.errors import InternalError
from deepvm.catalog.quotas import UNIT_WORDS
from deepvm.planner.candidates import Config, cluster_words, hourly_cost
from deepvm.planner.constraints import QuotaKey, quota_of, violations
from deepvm.planner.constraints import usage as cluster_usage
from deepvm.planner.fleet.options import JobState
from deepvm.planner.fleet.types import JobPlan
from deepvm.planner.inputs import Inputs

__all__ = ["VALUE_RTOL", "check", "explain", "labels", "quota_limit", "usage"]

# Values this close (relative) to the solo optimum count as reaching it.
VALUE_RTOL = 1e-7


def quota_limit(inputs: Inputs, key: QuotaKey) -> float:
    region, group, market = key
    return inputs.quotas.limit(group, market, region)


def check(
    work: list[JobState],
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
        # A running cluster the job keeps (keep_running) may cost more than its budget.
        kept = w.job.keep_running and config == w.current
        budget = math.inf if kept else w.job.budget
        for why in violations(offers, job, config, budget):
            broken.append(f"{w.job.name}: {cluster_words(offers, config)}: {why}")
        if w.job.shared:
            total += hourly_cost(offers, config)
            for key, vcpus in cluster_usage(offers, config).items():
                used[key] = used.get(key, 0.0) + vcpus
    for key, amount in used.items():
        if amount > quota_limit(inputs, key) + 1e-6:
            unit = UNIT_WORDS[inputs.quotas.unit(key[1])]
            broken.append(
                f"quota {'/'.join(key)}: {amount:g} {unit} > {quota_limit(inputs, key):g}"
            )
    if team_budget is not None and total > team_budget * (1 + 1e-9) + 1e-9:
        broken.append(f"team budget: ${total:.4f}/h > ${team_budget:g}/h")
    if broken:
        raise InternalError("fleet plan failed verification: " + "; ".join(broken))


def usage(
    work: list[JobState], picks: dict[str, Config | None]
) -> dict[QuotaKey, tuple[float, float]]:
    """Per quota key the shared jobs touch: (the fleet's use, the solo plans' use),
    in the key's unit."""
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


def labels(work: list[JobState], picks: dict[str, Config | None]) -> dict[QuotaKey, str]:
    """How explanations name each quota key the shared jobs touch (its label:
    "G spot", or GCP's "PREEMPTIBLE_NVIDIA_A100_GPUS", which says its market)."""
    out: dict[QuotaKey, str] = {}
    for w in work:
        if not w.job.shared or w.planner is None:
            continue
        for config in (picks.get(w.job.name), w.solo):
            if config is None:
                continue
            for key in cluster_usage(w.planner.offers, config):
                quota = quota_of(w.planner.offers, config, key)
                if quota is not None:
                    out.setdefault(key, quota.label)
    return out


def explain(
    plans: list[JobPlan],
    work: list[JobState],
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
            if after > quota_limit(inputs, key) + 1e-6:
                quota = quota_of(offers, w.solo, key)
                assert quota is not None  # the key is one of the solo cluster's
                reasons.append(quota.words(quota_limit(inputs, key)))
        if team_budget is not None:
            mine_cost = plan.cluster.hourly_cost if plan.cluster is not None else 0.0
            solo_cost = plan.solo.hourly_cost if plan.solo is not None else 0.0
            if total - mine_cost + solo_cost > team_budget * (1 + 1e-9) + 1e-9:
                reasons.append("team budget")
        plans[k] = replace(plan, binding="; ".join(reasons) or None)
