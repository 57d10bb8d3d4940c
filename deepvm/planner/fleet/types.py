"""What the fleet plan takes and gives (docs/ARCHITECTURE.md, "For the fleet"):
a registered job, what the plan gives each job next to what it would get alone,
the shared quotas' use, and the plan with its explanation. Solved by
``deepvm.planner.fleet.plan``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deepvm.base.config import JobSpec
from deepvm.model.cluster import CLUSTER_FIELDS, Cluster
from deepvm.planner.recommendation import Recommendation

__all__ = [
    "DECISION_COLUMNS",
    "PRIORITY_RANGE",
    "TIE_BREAK_NOT_RUN",
    "FleetPlan",
    "JobPlan",
    "QuotaUse",
    "RegisteredJob",
    "Running",
    "RunningDecision",
    "deadline_words",
]

# Priorities weigh values of at most 1 in one objective that HiGHS solves to a
# relative precision of about 1e-9: the largest over the smallest stays within 1e6.
PRIORITY_RANGE = (1e-3, 1e3)
# FleetPlan.tie_break_status where the least cost among plans of the best value was
# not sought: the value itself is not proven (or there is no plan).
TIE_BREAK_NOT_RUN = "not_run"


@dataclass(frozen=True)
class Running:
    """What a registered job runs on now (deepvm.records.running reads it from the store;
    deepvm.planner.fleet.running weighs moving it)."""

    cluster: Cluster
    checkpoint_interval_s: float = math.nan
    efficiency: float = 1.0
    work_done_flops: float | None = None


@dataclass(frozen=True)
class RunningDecision:
    """Tonight's one answer for a job that runs (deepvm.planner.fleet.running): stay
    on its running cluster, move to the plan's, or stop (the plan leaves it
    unplanned), with the move's figures (deepvm.planner.fleet.migration) and why. The
    fleet plan, its notes, the change report, the JSON and the artifacts all show
    this one record."""

    running_cluster: str  # Cluster.words(architecture=True, region=True)
    decision: str  # "stay", "move" or "stop"
    gain: float | None  # net of the move, over the work left; None: nothing to weigh
    migration_h: float | None
    migration_usd: float | None
    break_even_h: float | None  # inf: never pays back
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "running_cluster": self.running_cluster,
            "decision": self.decision,
            "gain": self.gain,
            "migration_h": self.migration_h,
            "migration_usd": self.migration_usd,
            "break_even_h": self.break_even_h,
            "decision_reason": self.reason,
        }


# The fleet rows' and the change report's columns of a running job's decision.
DECISION_COLUMNS = (
    "running_cluster", "decision", "gain", "migration_h", "migration_usd", "break_even_h",
    "decision_reason",
)  # fmt: skip


@dataclass(frozen=True)
class RegisteredJob:
    """A job of the fleet: its name, budget (USD/h) and spec; ``priority``
    (PRIORITY_RANGE) weighs its value; ``shared`` False: it does not run at the
    same time as the others, so it is planned alone and not counted in the shared
    quotas."""

    name: str
    budget: float
    spec: JobSpec = field(default_factory=JobSpec)
    priority: float = 1.0
    shared: bool = True
    running: Running | None = None  # the cluster it runs on now, if any
    # Keep the running cluster even where it no longer fits the budget (the
    # scenarios file's keep_running).
    keep_running: bool = False

    def __post_init__(self) -> None:
        low, high = PRIORITY_RANGE
        if isinstance(self.priority, bool) or not (low <= self.priority <= high):
            from deepvm.base.errors import ParameterError

            raise ParameterError(
                "priority",
                self.priority,
                f"must be a number from {low:g} to {high:g} (priorities weigh jobs against "
                "each other; a ratio past 1e6 is below the solver's precision)",
            )
        if not (self.budget > 0 and math.isfinite(self.budget)):
            from deepvm.base.errors import ParameterError

            raise ParameterError("budget", self.budget, "must be a positive number of USD per hour")


@dataclass(frozen=True)
class JobPlan:
    """What the fleet plan gives one job, next to what it would get alone."""

    scenario: str
    priority: float
    shared: bool
    planned: bool
    value: float
    cluster: Recommendation | None
    solo: Recommendation | None
    binding: str | None = None
    note: str | None = None
    candidates: int = 0  # clusters left for the fleet program after pruning
    considered: int = 0  # clusters within the job's budget before pruning
    workload: str | None = None
    objective: str | None = None
    deadline_h: float | None = None  # objective cost: the bound on the expected makespan
    work_flops: float | None = None  # the training work, where the job gives it
    running: RunningDecision | None = None  # a job that runs: stay or move, and why

    @property
    def meets_deadline(self) -> bool | None:
        """Whether the planned cluster's expected makespan is within the deadline
        (None: no deadline, or no cluster)."""
        if self.deadline_h is None or self.cluster is None:
            return None
        return bool(self.cluster.expected_makespan_h <= self.deadline_h * (1 + 1e-9))

    def as_dict(self) -> dict[str, Any]:
        c = self.cluster
        return {
            "scenario": self.scenario,
            "planned": self.planned,
            "priority": self.priority,
            "shared": self.shared,
            "value": self.value,
            **{k: getattr(c, k) if c else None for k in CLUSTER_FIELDS},
            "solo_throughput_flops": self.solo.throughput_flops if self.solo else None,
            "solo_hourly_cost": self.solo.hourly_cost if self.solo else None,
            "binding": self.binding,
            "note": self.note,
            **(self.running.as_dict() if self.running else dict.fromkeys(DECISION_COLUMNS)),
            # What the job gets (fields after `note` are in the JSON, not the store's table).
            "workload": self.workload,
            "objective": self.objective,
            "work_flops": self.work_flops,
            "expected_makespan_h": c.expected_makespan_h if c else None,
            "expected_total_cost": c.expected_total_cost if c else None,
            "deadline_h": self.deadline_h,
            "meets_deadline": self.meets_deadline,
        }


def deadline_words(job: Mapping[str, Any]) -> str | None:
    """A fleet row's deadline check in words (``meets 12 h``, ``MISSES 12 h``, or the
    bare deadline when the job is unplanned); None without a deadline."""
    if job["deadline_h"] is None:
        return None
    if job["meets_deadline"] is None:
        return f"{job['deadline_h']:g} h"
    return f"{'meets' if job['meets_deadline'] else 'MISSES'} {job['deadline_h']:g} h"


@dataclass(frozen=True)
class QuotaUse:
    region: str
    quota_group: str
    market: str
    used: float  # what the fleet plan runs, in ``unit``
    quota: float  # inf: no limit
    solo_used: float  # what the jobs' solo plans together would ask for, in ``unit``
    unit: str = "vcpus"  # of the three amounts (deepvm.catalog.quotas.UNITS): "vcpus" or "gpus"
    label: str = ""  # how explanations name it ("G spot", "PREEMPTIBLE_CPUS")

    def as_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "quota_group": self.quota_group,
            "market": self.market,
            "used": self.used,
            "quota": self.quota if math.isfinite(self.quota) else None,
            "solo_used": self.solo_used,
            "unit": self.unit,
            # the keys before amounts were named by unit (they hold GPUs for a GPU
            # quota); kept for scripts that read them
            "vcpus": self.used,
            "solo_vcpus": self.solo_used,
            "label": self.label,
        }


@dataclass(frozen=True)
class FleetPlan:
    status: str
    objective_value: float
    team_budget: float | None
    jobs: list[JobPlan]
    usage: list[QuotaUse]
    prices_snapshot: str
    solve_s: float = 0.0
    variables: int = 0  # binaries in the program
    constraints: int = 0
    # The relaxation's bound on the value of any plan: where the solve stopped at
    # its time limit (status limit_with_incumbent), how much better one could be.
    objective_bound: float = math.nan
    # Whether the plan is proven the cheapest of its value (the tie-break): optimal;
    # limit_with_incumbent where the time limit stopped that search (the value is
    # still proven where status is optimal); TIE_BREAK_NOT_RUN where the value is not.
    tie_break_status: str = "optimal"

    @property
    def hourly_cost(self) -> float:
        return sum(j.cluster.hourly_cost for j in self.jobs if j.planned and j.cluster)

    def unproven_words(self, more_time: str) -> str | None:
        """What the time limit left unproven, in words, ending with what gives it more
        time (``more_time``: the CLI's ``--time-limit``, the flows' field): the plan's
        value, or only its tie-break; None where both are proven or there is no plan.
        The value and the bound get the decimals that tell them apart: at four digits a
        plan 0.0015 % under its bound read "value 344.3 ... no plan is worth more than
        344.3" (300 jobs, three clouds)."""
        stopped = f"the fleet solve stopped at its time limit after {self.solve_s:.1f} s"
        value, bound = self.objective_value, self.objective_bound
        if self.status == "limit_with_incumbent":  # a checked plan, not proven best
            raise_it = f"raise {more_time} to prove the best"
            if not math.isfinite(bound):
                return (
                    f"{stopped}: the plan (value {value:.4g}) fits every quota and budget; "
                    f"{raise_it}"
                )
            value_text, bound_text = _told_apart(value, bound)
            more = f" ({100 * (bound - value) / value:.2g} % more)" if value > 0 else ""
            return (
                f"{stopped}: the plan (value {value_text}) fits every quota and budget, and "
                f"no plan is worth more than {bound_text}{more}; {raise_it}"
            )
        if self.status == "optimal" and self.tie_break_status == "limit_with_incumbent":
            return (
                f"{stopped}, after proving the plan's value ({value:.4g}) the best: a plan "
                f"of that value may cost less; raise {more_time} to prove the cheapest"
            )
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "objective_value": self.objective_value,
            "objective_bound": self.objective_bound,
            "tie_break_status": self.tie_break_status,
            "team_budget": self.team_budget,
            "hourly_cost": self.hourly_cost,
            "prices_snapshot": self.prices_snapshot,
            "jobs": [j.as_dict() for j in self.jobs],
            "usage": [u.as_dict() for u in self.usage],
        }


def _told_apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest decimals (one at least, nine at most) that tell
    them apart."""
    for decimals in range(1, 10):
        a_text, b_text = f"{a:.{decimals}f}", f"{b:.{decimals}f}"
        if a_text != b_text:
            break
    return a_text, b_text
