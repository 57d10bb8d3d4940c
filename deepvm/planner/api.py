"""The planner's public entry points: :func:`recommend` and :func:`sweep`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from deepvm.base.config import (
    DEFAULT_CHECKPOINT_VERSIONS,
    DEFAULT_RESTART_S,
    JOB_OPTIONS,
    MAX_HOURLY_COST,
    MAX_SWEEP_BUDGETS,
    JobSpec,
    Objective,
    Policy,
)
from deepvm.base.errors import InfeasibleError, InputError, ParameterError
from deepvm.model.cluster import CLUSTER_FIELDS
from deepvm.performance.flopp import (
    MeasurementUse,
    measurement_use,
)
from deepvm.performance.workloads import WORKLOADS, Workload
from deepvm.planner._explain import FASTER_BUDGET_STEPS
from deepvm.planner._goodput import CheckpointCosts
from deepvm.planner._policies import (
    Planner,
    check_policies,
    infeasible_budget_error,
)
from deepvm.planner.candidates import (
    CheckpointNeeds,
    Config,
    cluster_of,
    cluster_words,
    hourly_cost,
    throughput,
)
from deepvm.planner.inputs import Inputs
from deepvm.planner.offers import Offers
from deepvm.planner.recommendation import Recommendation

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COMPARE_COLUMNS",
    "SWEEP_COLUMNS",
    "ClusterRisk",
    "RecommendResult",
    "SweepResult",
    "checkpoint_needs",
    "cluster_risk",
    "compare",
    "job_planner",
    "job_spec",
    "recommend",
    "sweep",
]


def checkpoint_needs(
    workload: str, checkpoint_gb: float | None, versions: int, spec: Workload | None = None
) -> CheckpointNeeds:
    if checkpoint_gb is None:
        spec = spec or WORKLOADS.get(workload)
        checkpoint_gb = spec.checkpoint_gb if spec is not None else 1.0
    if not math.isfinite(checkpoint_gb) or checkpoint_gb < 0:
        raise ParameterError("checkpoint_gb", checkpoint_gb, "must be a number >= 0")
    if versions < 1:
        raise ParameterError("checkpoint_versions", versions, "must be >= 1")
    return CheckpointNeeds(workload, float(checkpoint_gb), versions)


def _check_budget(budget: float, name: str = "budget", *, allow_zero: bool = False) -> float:
    if (
        not math.isfinite(budget)
        or budget < 0
        or (budget == 0 and not allow_zero)
        or budget > MAX_HOURLY_COST
    ):
        raise ParameterError(
            name, budget, f"must be a positive number of USD per hour, at most {MAX_HOURLY_COST:g}"
        )
    return float(budget)


@dataclass(frozen=True)
class RecommendResult:
    budget: float
    objective: str
    workload: str
    checkpoint_gb: float
    prices_snapshot: str
    recommendations: list[Recommendation]
    work_flops: float | None = None
    deadline_h: float | None = None
    measurements: MeasurementUse = field(default_factory=MeasurementUse)
    # GPU types not planned because their accelerators cannot hold the workload.
    left_out: tuple[dict[str, str], ...] = ()


def job_spec(spec: JobSpec | None, options: Mapping[str, Any]) -> JobSpec:
    """``spec`` (default: JobSpec()) with ``options`` (JobSpec field names) replaced."""
    unknown = sorted(set(options) - set(JOB_OPTIONS))
    if unknown:
        raise TypeError(f"unknown job option(s) {', '.join(unknown)}; known: {JOB_OPTIONS}")
    if "policies" in options and isinstance(options["policies"], list):
        options = {**options, "policies": tuple(options["policies"])}
    return replace(spec or JobSpec(), **options)


def job_planner(
    spec: JobSpec, offers: Offers, budget_cap: float, checkpoint_costs: CheckpointCosts | None
) -> tuple[Planner, CheckpointNeeds]:
    """The planner of the job ``spec`` on ``offers`` for budgets up to ``budget_cap``
    (recommend, sweep and the fleet plan build it the same way)."""
    if spec.clouds or spec.regions:
        offers = offers.within(clouds=spec.clouds, regions=spec.regions)
    job = checkpoint_needs(
        spec.workload, spec.checkpoint_gb, spec.checkpoint_versions, offers.workload_spec
    )
    costs = replace(checkpoint_costs or CheckpointCosts(), restart_s=spec.restart_s)
    planner = Planner(
        offers,
        job,
        objective=spec.objective,
        budget_cap=budget_cap,
        max_nodes=spec.max_nodes,
        work_flops=spec.work_flops,
        deadline_h=spec.deadline_h,
        checkpoint_costs=costs,
    )
    return planner, job


def recommend(
    budget: float,
    spec: JobSpec | None = None,
    *,
    inputs: Inputs | None = None,
    checkpoint_costs: CheckpointCosts | None = None,
    explain: bool = True,
    **options: Any,
) -> RecommendResult:
    """The best clusters for ``budget`` USD/h, ranked, per policy, for the job
    ``spec`` (or JobSpec's defaults), with ``options`` (JobSpec fields, e.g.
    ``workload="gpt2", top=2``) replacing its fields.

    ``work_flops`` (total training FLOPs) adds expected makespan and total cost
    to every recommendation; objective ``cost`` needs it, and may take a
    ``deadline_h`` on the expected makespan. ``checkpoint_costs`` sets the
    checkpoint stall and restart rates (its restart from ``restart_s``).
    ``explain``: each recommendation says what binds it and, for the optimised
    policies, the next cheaper and faster cluster (deepvm.planner._explain).

    Raises InfeasibleError (naming the cheapest feasible cluster, or the fastest
    makespan when the deadline is what cannot be met) when the ``deepvm``
    policy, or every requested policy, finds nothing.
    """
    spec = job_spec(spec, options)
    budget = _check_budget(budget)
    chosen = check_policies(spec.policies)
    inputs = inputs or Inputs.load()
    offers = inputs.offers(spec.workload)
    # Explaining plans the next faster cluster at up to FASTER_BUDGET_STEPS[-1] x budget.
    cap = budget * FASTER_BUDGET_STEPS[-1] if explain else budget
    planner, job = job_planner(spec, offers, cap, checkpoint_costs)
    recs = planner.recommend(budget, chosen, spec.top, explain=explain)
    if not recs or (Policy.DEEPVM in chosen and not any(r.policy == Policy.DEEPVM for r in recs)):
        if spec.deadline_h is not None:
            fastest = _fastest(planner, budget)
            if fastest is not None:
                raise InfeasibleError(
                    f"no cluster within ${budget:g}/h finishes the work by the "
                    f"{spec.deadline_h:g} h deadline: the fastest, "
                    f"{cluster_words(planner.offers, fastest[0])}, takes {fastest[1]:.4g} h "
                    "expected; raise {deadline_h} to at least "
                    f"{math.ceil(fastest[1] * 100) / 100:.2f} or raise {{budget}}",
                    names=("deadline_h", "budget"),
                )
        raise infeasible_budget_error(offers, job, budget, spec.max_nodes)
    return RecommendResult(
        budget,
        spec.objective,
        spec.workload,
        job.checkpoint_gb,
        offers.snapshot,
        recs,
        spec.work_flops,
        spec.deadline_h,
        measurement_use(inputs.catalog, spec.workload, inputs.measured),
        offers.left_out,
    )


def _fastest(planner: Planner, budget: float) -> tuple[Config, float] | None:
    """The cluster with the shortest expected makespan within the budget: the most
    expected goodput, over the same candidates."""
    fastest = Planner(
        planner.offers,
        planner.job,
        objective=Objective.GOODPUT,
        budget_cap=budget,
        max_nodes=planner.max_nodes,
        work_flops=planner.work_flops,
        checkpoint_costs=planner.costs,
    )
    found = fastest.optimise(Policy.DEEPVM, budget, 1)
    if not found:
        return None
    config = found[0][0]
    return config, fastest.describe(Policy.DEEPVM, 1, config, "", 0.0).expected_makespan_h


@dataclass(frozen=True)
class SweepResult:
    budgets: list[float]
    objective: str
    workload: str
    rows: list[dict[str, Any]]  # one per (budget, policy) with a cluster, SWEEP_COLUMNS
    prices_snapshot: str = ""  # the catalog and the date its prices refer to

    @property
    def results(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame with the SWEEP_COLUMNS."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=SWEEP_COLUMNS)


# A row per (budget, policy): the cluster's fields as Cluster names them, so every
# output of a sweep (the table, --out CSV and Parquet) carries all of them.
SWEEP_COLUMNS = ["budget", "policy", *CLUSTER_FIELDS, "normalized"]


def sweep(
    budgets: Sequence[float],
    spec: JobSpec | None = None,
    *,
    inputs: Inputs | None = None,
    checkpoint_costs: CheckpointCosts | None = None,
    **options: Any,
) -> SweepResult:
    """Every policy at every budget (the paper's simulation) for the job ``spec``
    (``options`` as recommend's; without a spec or ``policies``, all policies).
    ``normalized`` is throughput over the ``deepvm`` policy's throughput at the
    largest budget. A budget at which a policy finds no cluster (0, say) has no
    row for it."""
    if spec is None and "policies" not in options:
        options = {**options, "policies": ("all",)}
    spec = job_spec(spec, options)
    if len(budgets) > MAX_SWEEP_BUDGETS:
        raise ParameterError(
            "budgets", f"{len(budgets):,} budgets", f"is too many: at most {MAX_SWEEP_BUDGETS:,}"
        )
    budgets = sorted({_check_budget(b, "budgets", allow_zero=True) for b in budgets})
    if not budgets or max(budgets) <= 0:
        raise ParameterError(
            "budgets", budgets, "must hold budgets >= 0 (USD/h), at least one of them > 0"
        )
    chosen = check_policies(spec.policies)
    inputs = inputs or Inputs.load()
    offers = inputs.offers(spec.workload)
    planner, _ = job_planner(spec, offers, max(budgets), checkpoint_costs)
    rows: list[dict[str, Any]] = []
    for (policy, budget), config in planner.sweep(chosen, budgets).items():
        if config is not None:
            cluster = cluster_of(planner.offers, config).as_dict()
            rows.append({"budget": budget, "policy": policy, **cluster})
    top = max(budgets)
    reference = [
        float(r["throughput_flops"])
        for r in rows
        if r["policy"] == Policy.DEEPVM and r["budget"] == top
    ]
    if reference:
        ref = float(reference[0])
    else:  # deepvm not swept: solve it at the top budget for the reference
        found = planner.optimise(Policy.DEEPVM, top, 1)
        ref = (
            planner.describe(Policy.DEEPVM, 1, found[0][0], "", 0.0).throughput_flops
            if found
            else float("nan")
        )
    for row in rows:
        row["normalized"] = row["throughput_flops"] / ref
    rows.sort(key=lambda r: (r["policy"], r["budget"]))
    return SweepResult(budgets, spec.objective, spec.workload, rows, offers.snapshot)


COMPARE_COLUMNS = [
    "label",
    "policy",
    "rank",
    *CLUSTER_FIELDS,
    "efficiency",
    "expected_makespan_h",
    "expected_total_cost",
]


def compare(
    budget: float,
    work_flops: float,
    spec: JobSpec | None = None,
    *,
    inputs: Inputs | None = None,
    checkpoint_costs: CheckpointCosts | None = None,
    **options: Any,
) -> tuple[RecommendResult, pd.DataFrame]:
    """A fixed training job (``work_flops``) on deepvm's top-``top`` clusters next
    to the cost-first and performance-first rules (the DeepVM paper's AWS
    comparison): expected makespan and hourly price of each. ``spec`` and
    ``options`` as recommend's; the policies are these three."""
    policies = (Policy.DEEPVM, Policy.COST_FIRST, Policy.PERFORMANCE_FIRST)
    spec = job_spec(spec, {**options, "work_flops": work_flops, "policies": policies})
    result = recommend(budget, spec, inputs=inputs, checkpoint_costs=checkpoint_costs)
    rows = []
    for r in result.recommendations:
        label = f"deepvm #{r.rank}" if r.policy == Policy.DEEPVM else r.policy
        rows.append({"label": label, **{k: getattr(r, k) for k in COMPARE_COLUMNS[1:]}})
    import pandas as pd

    return result, pd.DataFrame(rows, columns=COMPARE_COLUMNS)


@dataclass(frozen=True)
class ClusterRisk:
    """One named cluster of the catalog under the preemption model: what
    `deepvm simulate preemption` simulates."""

    rate_per_s: float  # the cluster's preemptions per second
    stall_s: float  # one checkpoint's stall
    restart_s: float  # one restart's cost
    hourly_cost: float
    throughput_flops: float
    described: str


def cluster_risk(
    inputs: Inputs,
    workload: str,
    instance_type: str,
    architecture: str,
    n_workers: int,
    *,
    remote_type: str | None = None,
    n_remote: int = 1,
    checkpoint_gb: float | None = None,
    checkpoint_versions: int = DEFAULT_CHECKPOINT_VERSIONS,
    restart_s: float = DEFAULT_RESTART_S,
) -> ClusterRisk:
    """The preemption rate, checkpoint stall, restart cost, price and throughput of
    ``n_workers`` x ``instance_type`` in ``architecture`` (Tiering: with
    ``n_remote`` x ``remote_type`` in the workers' region). Raises ParameterError
    for a type the catalog lacks, or in several regions, and InputError for a
    cluster that breaks the model's constraints."""
    from deepvm.planner._constraints import violations
    from deepvm.planner._goodput import config_risk, object_store_usd_per_hour
    from deepvm.planner.candidates import TIERING, Config

    offers = inputs.offers(workload)
    places = [i for i, t in enumerate(offers.gpu_types) if t == instance_type]
    if not places:
        raise ParameterError("instance_type", instance_type, "is not a GPU type of the catalog")
    if len(places) > 1:  # the same type in several regions: prices differ
        listed = ", ".join(offers.gpu_region_of(i) for i in places)
        raise ParameterError(
            "instance_type",
            instance_type,
            f"is in several regions ({listed}); pick one with {{region}}",
            others=("region",),
        )
    i = places[0]
    remote = None
    if architecture == TIERING:
        region = offers.gpu_region_of(i)
        local = [
            j
            for j, t in enumerate(offers.cpu_types)
            if t == remote_type and offers.cpu_region_of(j) == region
        ]
        if not local:
            raise ParameterError(
                "remote_type",
                remote_type,
                f"must be a CPU type of the catalog in the workers' region ({region}) for tiering",
            )
        remote = local[0]
    job = checkpoint_needs(workload, checkpoint_gb, checkpoint_versions)
    costs = CheckpointCosts(restart_s=restart_s)
    offers = replace(offers, object_store_usd_per_hour=object_store_usd_per_hour(job, costs))
    config = Config(architecture, i, n_workers, remote, n_remote if remote is not None else 0)
    broken = violations(offers, job, config, math.inf)
    if broken:
        raise InputError(
            f"{n_workers} x {instance_type} ({architecture}) is not a feasible cluster: "
            + ", ".join(map(str, broken))
        )
    r = config_risk(offers, config, job, costs)
    return ClusterRisk(
        float(r.rate_per_s[0]),
        float(r.stall_s[0]),
        float(r.restart_s[0]),
        hourly_cost(offers, config),
        throughput(offers, config),
        f"{n_workers} x {instance_type} ({architecture}, {config.n_spot} spot)",
    )
