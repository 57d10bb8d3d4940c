"""Defaults and environment names, defined once: the CLI's help, the flows'
forms and the library all read them from here. Light (no third-party imports),
so that ``deepvm --help`` stays fast."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import StrEnum

from deepvm.base.errors import ParameterError

__all__ = [
    "ALL_POLICIES",
    "BENCH_TARGET_TIMED_S",
    "DEFAULT_BENCH_WARMUP",
    "DEFAULT_CHECKPOINT_STALL_S",
    "DEFAULT_CHECKPOINT_VERSIONS",
    "DEFAULT_HOME",
    "DEFAULT_MAX_NODES",
    "DEFAULT_MIN_GAIN",
    "DEFAULT_OBJECTIVE",
    "DEFAULT_PRICE_BACKOFF_S",
    "DEFAULT_PRICE_RETRIES",
    "DEFAULT_PRICE_TIMEOUT_S",
    "DEFAULT_RESTART_S",
    "DEFAULT_RETAIN_HOURS",
    "DEFAULT_SIMULATED_WORKERS",
    "DEFAULT_STORE",
    "DEFAULT_TIME_LIMIT_S",
    "DEFAULT_TOP",
    "DEFAULT_WORKLOAD",
    "ENV_HOME",
    "ENV_STORE",
    "JOB_OPTIONS",
    "MAX_CHECKPOINT_GB",
    "MAX_DEADLINE_H",
    "MAX_HOURLY_COST",
    "MAX_NAME_LENGTH",
    "MAX_NODES_CAP",
    "MAX_PEAK_FLOPS",
    "MAX_RESTART_S",
    "MAX_SWEEP_BUDGETS",
    "MAX_WORK_FLOPS",
    "MIN_PEAK_FLOPS",
    "OBJECTIVES",
    "POLICIES",
    "SPOT_ADVISOR_URL",
    "JobSpec",
    "Objective",
    "Policy",
]

# Where deepvm keeps what it launched (deepvm launch's manifests): $DEEPVM_HOME, else ~/.deepvm.
ENV_HOME = "DEEPVM_HOME"
DEFAULT_HOME = "~/.deepvm"
# The store: --store, else $DEEPVM_STORE, else this folder.
ENV_STORE = "DEEPVM_STORE"
DEFAULT_STORE = "deepvm-store"
# `deepvm store compact`: files removed, and rows of commits that never completed,
# are kept this long (Delta's own vacuum default); no writer may run longer.
DEFAULT_RETAIN_HOURS = 168.0


class Objective(StrEnum):
    """What the planner maximises (docs/ARCHITECTURE.md, "Objectives"). Members
    equal their names as strings, which is how JSON, Parquet and forms spell them."""

    THROUGHPUT = "throughput"
    PAPER = "paper"
    GOODPUT = "goodput"
    COST = "cost"


class Policy(StrEnum):
    """How a cluster is chosen (docs/ARCHITECTURE.md, "Policies")."""

    DEEPVM = "deepvm"
    DEEPVM_NOSCALE = "deepvm_noscale"
    COST_FIRST = "cost_first"
    PERFORMANCE_FIRST = "performance_first"
    ON_DEMAND = "on_demand"


ALL_POLICIES = "all"  # what a request may say for every policy

# The job.
DEFAULT_WORKLOAD = "resnet50"
DEFAULT_OBJECTIVE = Objective.THROUGHPUT
DEFAULT_TOP = 3
DEFAULT_MAX_NODES = 256
DEFAULT_CHECKPOINT_VERSIONS = 2
# Seconds to re-acquire a preempted node before the checkpoint is reloaded.
DEFAULT_RESTART_S = 300.0
# A running job moves only when the move saves more than this share of the remaining
# time (or cost): spot prices and the planner's estimates move by a few percent night
# to night, and a smaller gain is within that noise (deepvm.planner.fleet.migration).
DEFAULT_MIN_GAIN = 0.05

# The solver: seconds per solve.
DEFAULT_TIME_LIMIT_S = 30.0

# Price sources: one deadline for a whole fetch, its retries included.
DEFAULT_PRICE_TIMEOUT_S = 60.0
# AWS's public Spot Instance Advisor feed (deepvm.catalog.spot_advisor).
SPOT_ADVISOR_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
DEFAULT_PRICE_RETRIES = 3
DEFAULT_PRICE_BACKOFF_S = 2.0

# Benchmarks: untimed steps first; with --steps unset, as many timed steps as fit
# in BENCH_TARGET_TIMED_S seconds, within the bounds.
DEFAULT_BENCH_WARMUP = 2
BENCH_TARGET_TIMED_S = 25.0
BENCH_MIN_STEPS, BENCH_MAX_STEPS = 5, 50

# `deepvm simulate preemption` without a configuration.
DEFAULT_SIMULATED_WORKERS = 8
DEFAULT_CHECKPOINT_STALL_S = 60.0

# Caps on one request (past them it is a mistake that would run for hours).
MAX_SWEEP_BUDGETS = 100_000
# Upper bounds of a job's numbers: past them a value is a typo (1e308), and
# sums and products in the planner overflow. 1e30 FLOPs is 50,000 times the
# largest published training runs (about 2e25).
MAX_WORK_FLOPS = 1e30
MAX_CHECKPOINT_GB = 100_000.0  # 100 TB
MAX_DEADLINE_H = 1e6  # over a century
MAX_RESTART_S = 86_400.0  # a day
MAX_HOURLY_COST = 1e6  # USD/h
MAX_NODES_CAP = 100_000  # nodes in one cluster (--max-nodes, saturation tables)
# Plausible peak FLOP/s of one node: below 1 GFLOP/s or above 100 PFLOP/s (about
# 50 eight-GPU B200 nodes) is a unit mistake (TFLOP/s given as FLOP/s, say).
MIN_PEAK_FLOPS = 1e9
MAX_PEAK_FLOPS = 1e17
# Names that become store file names (jobs, instance types) are at most this long.
MAX_NAME_LENGTH = 120

# Vocabularies every front end validates against.
OBJECTIVES: tuple[Objective, ...] = tuple(Objective)
POLICIES: tuple[Policy, ...] = tuple(Policy)


@dataclass(frozen=True)
class JobSpec:
    """One training job to plan, as the CLI, the scenarios file and the flows each
    build it once; the planner takes it whole. A new job option is a field here
    (with its check) and its use in the planner; the scenarios file takes every
    field by these names, as do the flows and the JSON (the file's old names
    ``total_work`` and ``deadline_hours`` are still read)."""

    workload: str = DEFAULT_WORKLOAD
    checkpoint_gb: float | None = None  # None: the workload's weights + Adam state
    checkpoint_versions: int = DEFAULT_CHECKPOINT_VERSIONS
    # Names are accepted ("cost", ["deepvm", "all"]) and become members.
    objective: Objective | str = DEFAULT_OBJECTIVE
    policies: tuple[Policy | str, ...] = (Policy.DEEPVM,)
    top: int = DEFAULT_TOP
    work_flops: float | None = None  # total training FLOPs (objective cost needs it)
    deadline_h: float | None = None  # objective cost: bound on the expected makespan
    restart_s: float = DEFAULT_RESTART_S
    max_nodes: int = DEFAULT_MAX_NODES
    # Where the job may run (data locality, credits): clouds (the catalog's
    # provider) and regions; empty: anywhere in the catalog.
    clouds: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.workload, str) or not self.workload.strip():
            raise ParameterError("workload", self.workload, "must be a workload name")
        _number(self, "checkpoint_gb", low=0.0, high=MAX_CHECKPOINT_GB, optional=True)
        _whole(self, "checkpoint_versions", low=1)
        if self.objective not in OBJECTIVES:
            raise ParameterError(
                "objective", self.objective, f"must be one of {', '.join(OBJECTIVES)}"
            )
        object.__setattr__(self, "objective", Objective(self.objective))
        policies = self.policies
        if isinstance(policies, str):
            policies = (policies,)
        if not isinstance(policies, tuple | list):
            known = ", ".join((*POLICIES, ALL_POLICIES))
            raise ParameterError(
                "policies", policies, f"must be a policy name or a list of them ({known})"
            )
        policies = tuple(policies)
        object.__setattr__(self, "policies", policies)
        unknown = [p for p in policies if p not in (*POLICIES, ALL_POLICIES)]
        if not policies or unknown:
            raise ParameterError(
                "policies", unknown[0] if unknown else policies,
                f"is not a policy; known: {', '.join(POLICIES)}, {ALL_POLICIES}",
            )  # fmt: skip
        # "all" is every policy; each a Policy from here on.
        chosen = POLICIES if ALL_POLICIES in policies else tuple(dict.fromkeys(policies))
        object.__setattr__(self, "policies", tuple(Policy(p) for p in chosen))
        _whole(self, "top", low=1)
        _number(self, "work_flops", low=0.0, high=MAX_WORK_FLOPS, optional=True, strict=True)
        _number(self, "deadline_h", low=0.0, high=MAX_DEADLINE_H, optional=True, strict=True)
        if self.deadline_h is not None and self.objective != Objective.COST:
            raise ParameterError("deadline_h", self.deadline_h, "applies to objective cost only")
        _number(self, "restart_s", low=0.0, high=MAX_RESTART_S)
        _whole(self, "max_nodes", low=1)
        for name in ("clouds", "regions"):
            value = getattr(self, name)
            names = (value,) if isinstance(value, str) else value
            if not isinstance(names, tuple | list) or not all(
                isinstance(v, str) and v.strip() for v in names
            ):
                raise ParameterError(name, value, 'must be a list of names, e.g. ["aws"]')
            object.__setattr__(self, name, tuple(names))


def _number(
    spec: JobSpec,
    name: str,
    *,
    low: float,
    high: float,
    optional: bool = False,
    strict: bool = False,
) -> None:
    value = getattr(spec, name)
    if value is None and optional:
        return
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    below = is_number and (value < low or (strict and value == low))
    if not is_number or not math.isfinite(value) or below or value > high:
        raise ParameterError(
            name,
            value,
            f"must be a finite number {'>' if strict else '>='} {low:g}, at most {high:g}",
        )


def _whole(spec: JobSpec, name: str, *, low: int) -> None:
    value = getattr(spec, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ParameterError(name, value, f"must be a whole number >= {low}")


JOB_OPTIONS = tuple(f.name for f in fields(JobSpec))
