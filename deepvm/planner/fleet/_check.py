"""The fleet plan checked and explained, by code apart from the program
(docs/ARCHITECTURE.md, "For the fleet"): every job's cluster against its own
model and budget, and the limits shared jobs draw on together, each an object
(``SharedLimit``: the quotas, the team budget), so the check and the explanation
treat them alike (``check``: a failure is a bug); each quota's use (``usage``);
and, for a job short of its solo optimum, the shared limits its solo cluster
would break in this plan (``explain``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from deepvm.base.errors import InternalError
from deepvm.catalog.quotas import UNIT_WORDS, QuotaKey
from deepvm.planner._constraints import quota_of, violations
from deepvm.planner._constraints import usage as cluster_usage
from deepvm.planner.candidates import Config, cluster_words, hourly_cost
from deepvm.planner.fleet._options import JobOptions, JobState
from deepvm.planner.fleet.types import JobPlan
from deepvm.planner.inputs import Inputs
from deepvm.planner.offers import Offers

__all__ = [
    "VALUE_RTOL",
    "LimitKey",
    "QuotaLimits",
    "SharedLimit",
    "TeamBudget",
    "check",
    "explain",
    "labels",
    "quota_limit",
    "shared_limits",
    "usage",
]

# Values this close (relative) to the solo optimum count as reaching it.
VALUE_RTOL = 1e-7


def quota_limit(inputs: Inputs, key: QuotaKey) -> float:
    region, group, market = key
    return inputs.quotas.limit(group, market, region)


LimitKey = tuple[str, str, str]  # a quota key, or TeamBudget.KEY


class SharedLimit(Protocol):
    """A limit the shared jobs draw on together: what a cluster takes of it, per key
    (each in its own unit), each key's bound, and its words."""

    def use(self, offers: Offers, config: Config) -> dict[LimitKey, float]: ...

    def columns(self, options: JobOptions) -> tuple[list[LimitKey], Any]:
        """What each of a job's candidate clusters takes of each key: the keys, and
        a matrix of candidates x keys (an array or scipy.sparse; the fleet
        program's rows)."""
        ...

    def bound(self, key: LimitKey) -> float: ...

    def over(self, amount: float, bound: float) -> bool: ...

    def words(self, offers: Offers, config: Config, key: LimitKey) -> str: ...

    def broken(self, key: LimitKey, amount: float) -> str: ...


@dataclass(frozen=True)
class QuotaLimits:
    """Every quota key, in its unit (vCPUs, or GPUs of a model)."""

    inputs: Inputs

    def use(self, offers: Offers, config: Config) -> dict[LimitKey, float]:
        return dict(cluster_usage(offers, config))

    def columns(self, options: JobOptions) -> tuple[list[LimitKey], Any]:
        return list(options.keys), options.usage

    def bound(self, key: LimitKey) -> float:
        return quota_limit(self.inputs, key)

    def over(self, amount: float, bound: float) -> bool:
        return amount > bound + 1e-6

    def words(self, offers: Offers, config: Config, key: LimitKey) -> str:
        quota = quota_of(offers, config, key)
        assert quota is not None  # the key is one of the cluster's
        return quota.words(self.bound(key))

    def broken(self, key: LimitKey, amount: float) -> str:
        unit = UNIT_WORDS[self.inputs.quotas.unit(key[1])]
        return f"quota {'/'.join(key)}: {amount:g} {unit} > {self.bound(key):g}"


@dataclass(frozen=True)
class TeamBudget:
    """The shared jobs' hourly cost together, within the team budget."""

    usd_per_hour: float
    KEY: ClassVar[LimitKey] = ("", "team budget", "")

    def use(self, offers: Offers, config: Config) -> dict[LimitKey, float]:
        return {self.KEY: hourly_cost(offers, config)}

    def columns(self, options: JobOptions) -> tuple[list[LimitKey], Any]:
        return [self.KEY], options.cost[:, None]

    def bound(self, key: LimitKey) -> float:
        return self.usd_per_hour

    def over(self, amount: float, bound: float) -> bool:
        return amount > bound * (1 + 1e-9) + 1e-9

    def words(self, offers: Offers, config: Config, key: LimitKey) -> str:
        return "team budget"

    def broken(self, key: LimitKey, amount: float) -> str:
        return f"team budget: ${amount:.4f}/h > ${self.usd_per_hour:g}/h"


def shared_limits(inputs: Inputs, team_budget: float | None) -> list[SharedLimit]:
    """The limits shared jobs draw on together: the quotas, and the team budget
    where there is one."""
    limits: list[SharedLimit] = [QuotaLimits(inputs)]
    if team_budget is not None:
        limits.append(TeamBudget(team_budget))
    return limits


def _fleet_use(
    limits: list[SharedLimit], work: list[JobState], picks: dict[str, Config | None]
) -> list[dict[LimitKey, float]]:
    """Per shared limit, what the shared jobs' planned clusters take of each key."""
    used: list[dict[LimitKey, float]] = [{} for _ in limits]
    for w in work:
        config = picks.get(w.job.name)
        if config is None or not w.job.shared or w.planner is None:
            continue
        for limit, mine in zip(limits, used, strict=True):
            for key, amount in limit.use(w.planner.offers, config).items():
                mine[key] = mine.get(key, 0.0) + amount
    return used


def check(
    work: list[JobState],
    picks: dict[str, Config | None],
    inputs: Inputs,
    team_budget: float | None,
) -> None:
    """The plan against every job's own model and budget, and the shared limits
    (the quotas, the team budget); a failure is a bug, raised as InternalError."""
    broken: list[str] = []
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
    limits = shared_limits(inputs, team_budget)
    for limit, used in zip(limits, _fleet_use(limits, work, picks), strict=True):
        broken += [
            limit.broken(key, amount)
            for key, amount in used.items()
            if limit.over(amount, limit.bound(key))
        ]
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
    team_budget: float | None,
    inputs: Inputs,
) -> None:
    """``binding`` per job short of its solo optimum: the shared limits its solo
    cluster would break if it replaced the job's planned cluster in this plan."""
    limits = shared_limits(inputs, team_budget)
    fleet = _fleet_use(limits, work, picks)
    for k, (plan, w) in enumerate(zip(plans, work, strict=True)):
        if not plan.shared or w.solo is None or w.planner is None:
            continue
        if plan.planned and plan.value >= 1 - VALUE_RTOL:
            continue
        offers = w.planner.offers
        planned = picks.get(w.job.name)
        reasons = []
        for limit, used in zip(limits, fleet, strict=True):
            mine = limit.use(offers, planned) if planned is not None else {}
            solo = limit.use(offers, w.solo)
            for key in sorted(solo):
                after = used.get(key, 0.0) - mine.get(key, 0.0) + solo[key]
                if limit.over(after, limit.bound(key)):
                    reasons.append(limit.words(offers, w.solo, key))
        plans[k] = replace(plan, binding="; ".join(reasons) or None)
