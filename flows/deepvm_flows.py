"""deepvm as Prefect flows. Every task calls one function of the library
(``deepvm.nightly.stages`` and friends); what happens here is orchestration only:
logging, artifacts and typed parameters for the UI's form. The nightly is
``deepvm.nightly.stages.nightly`` itself, each of its stages run as a task.

Run without a server: ``python -m flows.deepvm_flows nightly`` (or ``deepvm nightly``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, cast

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed
from pydantic import BeforeValidator, Field

from deepvm.base.config import (
    DEFAULT_MIN_GAIN,
    MAX_CHECKPOINT_GB,
    MAX_DEADLINE_H,
    MAX_HOURLY_COST,
    MAX_WORK_FLOPS,
    JobSpec,
    Objective,
)
from deepvm.base.errors import DeepvmError, InputError, ParameterError, SourceUnavailableError
from deepvm.nightly import stages as pipeline
from deepvm.performance.workloads import WorkloadName, parse_work, training_work
from deepvm.planner.fleet.types import FleetPlan, RegisteredJob
from deepvm.records.results import WHAT_IF
from deepvm.render.report import change_report_markdown, fleet_markdown, recommendations_markdown
from deepvm.store import Store, store_uri
from flows.forms import (
    DEFAULT_WORKLOAD_CHOICE,
    EVERY_POLICY,
    MAX_RANK,
    ONE_TYPE,
    DateText,
    InstanceTypeName,
    MinGain,
    NightlySource,
    PolicyName,
    PriceSource,
    RegionName,
    SkyPilotCsv,
    SpotAdvisorUrl,
    StoreUri,
    TeamBudget,
    WorkloadsPath,
    as_text,
    flow_name,
    old_names,
    pflop,
)

__all__ = [
    "RefusedRun",
    "adopt",
    "benchmark",
    "benchmark_fleet",
    "compute_flopp_task",
    "finish",
    "fit_overhead",
    "fleet",
    "nightly",
    "plan_fleet_task",
    "plan_job_task",
    "recommend",
    "refit_task",
    "refresh_prices",
    "refresh_prices_task",
]


def _store(store: str | None) -> Store:
    """The flow's store, opened once (the form's URI, else $DEEPVM_STORE, else
    ./deepvm-store on the worker)."""
    return Store.open(store_uri(store))


_T = TypeVar("_T")


def _as_task(name: str, stage: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """pipeline.nightly's stage runner: each stage a task of its own in the UI."""
    return cast(_T, task(name=name, cache_policy=NO_CACHE)(stage)(*args, **kwargs))


def _artifact_key(*parts: str) -> str:
    import re

    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")


class RefusedRun(InputError, ValueError):  # ValueError: what API callers caught before
    """A request the library refused (bad input, nothing feasible), in one line
    that names the form's fields."""


_F = TypeVar("_F", bound=Callable[..., Any])


def _refusals_fail_in_one_line(fn: _F) -> _F:
    """A refused run ends Failed with its one line as the state's message, and no
    traceback in the run's log (there is nothing to debug; Prefect logged one, and a
    failing task a second). Python callers still get the exception."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (RefusedRun, DeepvmError) as exc:
            refused = exc if isinstance(exc, RefusedRun) else RefusedRun(exc.render(flow_name))
            get_run_logger().error("%s", refused)
            return Failed(message=str(refused), data=refused)

    return cast(_F, run)


# --- tasks: one library call each --------------------------------------------------


# Tasks take the flow's opened store (a live handle, so their results are not
# cached by input).


@task(name="refresh-prices", cache_policy=NO_CACHE)
def refresh_prices_task(
    store: Store,
    source: str,
    snapshot_date: str | None,
    regions: list[str] | None = None,
    timeout_s: float = pipeline.DEFAULT_PRICE_TIMEOUT_S,
    skypilot_csv: str | None = None,
) -> pipeline.PriceRefresh:
    # The library retries the source with backoff and falls back to the last snapshot.
    return pipeline.refresh_prices(
        store,
        source,
        snapshot_date=snapshot_date,
        regions=regions,
        timeout_s=timeout_s,
        skypilot_csv=skypilot_csv,
    )


@task(name="compute-flopp", cache_policy=NO_CACHE)
def compute_flopp_task(
    store: Store,
    workloads: list[str],
    snapshot_date: str | None,
    region: str | None = None,
) -> list[str]:
    return [str(p) for p in pipeline.compute_flopp(store, workloads, snapshot_date, region)]


@task(name="refit-overhead", cache_policy=NO_CACHE)
def refit_task(store: Store) -> int | None:
    fits = pipeline.refit_if_new(store)
    return None if fits is None else len(fits)


@task(name="plan-job", cache_policy=NO_CACHE)
def plan_job_task(store: Store, job: RegisteredJob) -> pipeline.PlanOutcome:
    # on demand: a what-if beside the night's record, never in its place
    return pipeline.replan(store, [job], run_kind=WHAT_IF)[0]


@task(name="plan-fleet", cache_policy=NO_CACHE)
def plan_fleet_task(
    store: Store,
    jobs: list[RegisteredJob],
    snapshot_date: str | None,
    team_budget: float | None = None,
    workloads: str | None = None,
) -> FleetPlan:
    return pipeline.plan_fleet_stage(
        store, jobs, snapshot_date, team_budget=team_budget, workloads=workloads,
        run_kind=WHAT_IF,  # on demand: a what-if beside the night's plan
    )  # fmt: skip


# --- flows -------------------------------------------------------------------------


@flow(name="refresh-prices", log_prints=True)
@_refusals_fail_in_one_line
def refresh_prices(
    source: PriceSource = "snapshot",
    store: StoreUri = None,
    snapshot_date: DateText = None,
    regions: Annotated[
        list[RegionName] | None,
        Field(min_length=1, description="regions to fetch (aws, azure)"),
        ONE_TYPE,
    ] = None,
    price_timeout_s: Annotated[
        float, Field(gt=0, le=3600, description="one deadline for the whole fetch, seconds")
    ] = pipeline.DEFAULT_PRICE_TIMEOUT_S,
    skypilot_csv: SkyPilotCsv = None,
    spot_advisor_url: SpotAdvisorUrl = None,
) -> dict[str, object]:
    """Fetch current prices into the store (stale fallback if the source fails), or
    with source spot-advisor AWS's Spot Instance Advisor feed (a failure keeps the
    store's newest).

    Args:
        source: snapshot, aws, gcp, azure, skypilot (give skypilot_csv), or a catalog file path.
        store: store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker.
        snapshot_date: the snapshot's date, YYYY-MM-DD (default: today, UTC).
        regions: regions to fetch (aws, azure).
        price_timeout_s: one deadline in seconds for the whole fetch, retries included.
        skypilot_csv: for source skypilot, the SkyPilot vms.csv (a path on the worker or a URL).
        spot_advisor_url: for source spot-advisor, the feed (default: AWS's public URL).
    """
    if source == "spot-advisor":
        advisor = pipeline.refresh_spot_advisor(
            _store(store), spot_advisor_url, snapshot_date=snapshot_date, timeout_s=price_timeout_s
        )
        if advisor.failed:
            raise SourceUnavailableError(
                f"the Spot Instance Advisor feed failed ({advisor.error}); "
                f"planning keeps {advisor.kept or 'the shipped'} feed"
            )
        get_run_logger().info("%d Spot Instance Advisor rows", advisor.rows)
        return {"rows": advisor.rows, "source": advisor.source}
    result = refresh_prices_task(
        _store(store), source, snapshot_date, regions, price_timeout_s, skypilot_csv
    )
    logger = get_run_logger()
    if result.stale:
        logger.warning(
            "prices are STALE: %s failed (%s); using %s",
            result.source,
            result.error,
            result.fallback_from,
        )
    else:
        logger.info("%d prices from %s", result.rows, result.source)
    return {"stale": result.stale, "rows": result.rows, "source": result.source}


@flow(name="recommend", log_prints=True)
@_refusals_fail_in_one_line
def recommend(
    budget: Annotated[
        float,
        Field(
            gt=0,
            le=MAX_HOURLY_COST,
            allow_inf_nan=False,
            description="USD per hour for the whole cluster",
        ),
    ] = 3.0,
    workload: Annotated[
        WorkloadName, Field(description="the sample workload to plan for")
    ] = DEFAULT_WORKLOAD_CHOICE,
    checkpoint_gb: Annotated[
        float | None,
        Field(
            ge=0,
            le=MAX_CHECKPOINT_GB,
            allow_inf_nan=False,
            description="checkpoint size, GB (default: the model's)",
        ),
        ONE_TYPE,
    ] = None,
    objective: Annotated[
        Objective,
        Field(description="throughput, paper, goodput, or cost (cost needs the work)"),
    ] = Objective.THROUGHPUT,
    policies: Annotated[
        list[PolicyName], Field(min_length=1, description="policies to show side by side")
    ] = [EVERY_POLICY],  # noqa: B006 - Prefect renders the default in the form
    top: Annotated[int, Field(ge=1, le=20, description="clusters per optimised policy")] = 3,
    work: Annotated[
        str | None,
        Field(
            max_length=40,
            description="training work, read as text: 2e18 (FLOPs), 2000 PFLOP or 2 EFLOP",
        ),
        ONE_TYPE,
    ] = None,
    work_pflop: Annotated[
        str | None,
        Field(
            max_length=40,
            description="or: the work in PFLOP, read as text (2000, or with a unit: 2 EFLOP); "
            "prefer `work`",
        ),
        BeforeValidator(as_text),  # an API caller's number, read as the form's text
        ONE_TYPE,
    ] = None,
    epochs: Annotated[
        float | None,
        Field(
            gt=0,
            allow_inf_nan=False,
            description="or: epochs (with dataset_size)",
        ),
        ONE_TYPE,
    ] = None,
    dataset_size: Annotated[
        float | None,
        Field(
            gt=0,
            allow_inf_nan=False,
            description="samples per epoch (with epochs)",
        ),
        ONE_TYPE,
    ] = None,
    deadline_h: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_DEADLINE_H,
            allow_inf_nan=False,
            description="objective cost: bound on the expected makespan, hours",
        ),
        ONE_TYPE,
    ] = None,
    scenario: Annotated[
        str | None, Field(max_length=120, description="job name in the store"), ONE_TYPE
    ] = None,
    store: StoreUri = None,
    work_flops: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_WORK_FLOPS,
            allow_inf_nan=False,
            description="training FLOPs, for API callers (in the form, use work)",
        ),
        ONE_TYPE,
    ] = None,
    total_work: Annotated[
        float | None, Field(description="old name of work_flops: still read"), ONE_TYPE
    ] = None,
    deadline_hours: Annotated[
        float | None, Field(description="old name of deadline_h: still read"), ONE_TYPE
    ] = None,
) -> list[dict[str, object]]:
    """One job, planned on the store's newest prices (or the shipped snapshot).

    Args:
        budget: USD per hour for the whole cluster.
        workload: the sample workload to plan for.
        checkpoint_gb: checkpoint size in GB (default: the model's weights + Adam state).
        objective: throughput, paper, goodput, or cost (cost needs the work).
        policies: policies to show side by side (all: the five).
        top: clusters per optimised policy.
        work: training work as text: 2e18 (FLOPs), 2000 PFLOP or 2 EFLOP (echoed in
            the artifact, so a mistyped number shows).
        work_pflop: or the work in PFLOP (1 PFLOP = 1e15 FLOP); prefer `work`.
        epochs: or the work as epochs (with dataset_size).
        dataset_size: samples per epoch (with epochs).
        deadline_h: objective cost: bound on the expected makespan, hours.
        scenario: the job's name in the store.
        store: store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker.
        work_flops: training FLOPs, for API callers (in the form, use work).
        total_work: the old name of work_flops, still read.
        deadline_hours: the old name of deadline_h, still read.
    """
    opened = _store(store)
    work_flops, deadline_h = old_names(
        work_flops=(work_flops, total_work), deadline_h=(deadline_h, deadline_hours)
    )
    given = [n for n, v in (("work", work), ("work_pflop", work_pflop),
                            ("work_flops", work_flops)) if v is not None]  # fmt: skip
    if len(given) > 1:
        raise ParameterError(
            given[0], ParameterError.MISSING, f"and {given[1]} both give the work: give one"
        )
    if work is not None:
        work_flops = parse_work(work)
    elif work_pflop is not None:
        work_flops = pflop(work_pflop)
    flops = training_work(
        str(workload), work_flops=work_flops, epochs=epochs, dataset_size=dataset_size
    )
    spec = JobSpec(
        workload=str(workload),
        checkpoint_gb=checkpoint_gb,
        objective=objective,
        policies=tuple(str(p) for p in policies),
        top=top,
        work_flops=flops,
        deadline_h=deadline_h,
    )
    job = RegisteredJob(scenario or f"ui-{workload}-{objective}-b{budget:g}", budget, spec)
    if not opened.has("prices"):  # a fresh store: start from the snapshot
        refresh_prices_task(opened, "snapshot", None)
    outcome = plan_job_task(opened, job)
    if outcome.error:
        raise RefusedRun(outcome.error)
    assert outcome.recommendations is not None
    create_markdown_artifact(
        key=_artifact_key("recommendations", job.name),
        markdown=recommendations_markdown(
            f"{job.name}: ${budget:g}/h, {workload}", outcome.recommendations
        ),
        description=f"deepvm recommendations for {job.name}",
    )
    get_run_logger().info("planned %s: %d recommendations", job.name, len(outcome.recommendations))
    return outcome.recommendations.to_dict("records")


@flow(name="benchmark", log_prints=True)
@_refusals_fail_in_one_line
def benchmark(
    workloads: Annotated[
        list[WorkloadName], Field(min_length=1, description="sample workloads to measure")
    ] = [DEFAULT_WORKLOAD_CHOICE],  # noqa: B006
    instance_type: Annotated[
        InstanceTypeName | None,
        Field(description="record as this type (default: cloud metadata)"),
        ONE_TYPE,
    ] = None,
    store: StoreUri = None,
) -> list[dict[str, object]]:
    """Measure the machine this flow runs on (its work pool's worker).

    Args:
        workloads: sample workloads to measure.
        instance_type: record as this instance type (default: cloud metadata).
        store: store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker.
    """
    from deepvm.bench.run import benchmark_frame, identify, run_benchmarks
    from deepvm.records.results import write_benchmarks

    opened = _store(store).ensure_writable()  # before minutes of measuring
    hardware = identify(instance_type)
    names = [str(w) for w in workloads]
    results = task(name="run-benchmarks")(run_benchmarks)(names, progress=False)
    frame = benchmark_frame(results, hardware)
    write_benchmarks(frame, opened)
    return frame.to_dict("records")


@flow(name="benchmark-fleet", log_prints=True)
@_refusals_fail_in_one_line
def benchmark_fleet(
    instance_types: Annotated[
        list[InstanceTypeName],
        Field(
            min_length=1,
            description="instance types to measure: each on its work queue, named after it",
        ),
    ],
    workloads: Annotated[
        list[WorkloadName], Field(min_length=1, description="sample workloads to measure")
    ] = [DEFAULT_WORKLOAD_CHOICE],  # noqa: B006
    store: StoreUri = None,
    deployment: Annotated[
        str, Field(description="the benchmark deployment to run, flow/deployment")
    ] = "benchmark/benchmark",
    timeout_s: Annotated[
        float, Field(gt=0, le=86400, description="how long to wait for every benchmark, s")
    ] = 3600.0,
) -> dict[str, object]:
    """Measure each instance type on a machine of that type: run the benchmark
    deployment once per type on the work queue named after it (where the workers of
    machines of that type listen), wait for them all, then refit the overhead models
    and recompute FLOPP.

    Args:
        instance_types: instance types to measure; each on its work queue, named after it.
        workloads: sample workloads to measure.
        store: store URI shared by every worker; default $DEEPVM_STORE.
        deployment: the benchmark deployment to run, flow/deployment.
        timeout_s: how long to wait for every benchmark, seconds.
    """
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment

    logger = get_run_logger()
    opened = _store(store).ensure_writable()
    parameters: dict[str, Any] = {"workloads": [str(w) for w in workloads], "store": opened.uri}
    runs = {
        itype: cast(
            FlowRun,
            run_deployment(deployment, parameters=parameters, work_queue_name=itype, timeout=0),
        ).id
        for itype in instance_types
    }
    logger.info("benchmarks queued: %s", ", ".join(runs))
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    with get_client(sync_client=True) as client:
        while len(states) < len(runs) and time.monotonic() < deadline:
            for itype, run_id in runs.items():
                state = client.read_flow_run(run_id).state
                if state is not None and state.is_final():
                    states[itype] = state.type.value
            time.sleep(1)
    missing = [t for t in runs if t not in states]
    failed = {t: s for t, s in states.items() if s != "COMPLETED"}
    refitted = refit_task(opened)
    catalog_workloads = [str(w) for w in workloads]
    flopp_files = (
        compute_flopp_task(opened, catalog_workloads, None) if opened.has("prices") else []
    )
    if missing:
        logger.error("no result within %.0f s from: %s", timeout_s, ", ".join(missing))
    for itype, ended in failed.items():
        logger.error("benchmark on %s ended %s", itype, ended)
    if missing or failed:
        raise RuntimeError(
            f"benchmarks not completed: {', '.join([*missing, *failed])} (is a worker "
            "listening on each type's queue?)"
        )
    return {"measured": list(runs), "refitted": refitted, "flopp_files": len(flopp_files)}


@flow(name="fit-overhead", log_prints=True)
@_refusals_fail_in_one_line
def fit_overhead(store: StoreUri = None) -> int | None:
    return refit_task(_store(store))


@flow(name="nightly", log_prints=True)
@_refusals_fail_in_one_line
def nightly(
    store: StoreUri = None,
    scenarios_path: Annotated[
        str | None, Field(description="registered jobs (TOML); default: the shipped file"), ONE_TYPE
    ] = None,
    price_source: NightlySource = None,
    price_regions: Annotated[
        list[RegionName] | None,
        Field(min_length=1, description="regions to fetch; every region is planned"),
        ONE_TYPE,
    ] = None,
    snapshot_date: DateText = None,
    price_timeout_s: Annotated[
        float, Field(gt=0, le=3600, description="one deadline for the whole fetch, seconds")
    ] = pipeline.DEFAULT_PRICE_TIMEOUT_S,
    team_budget: TeamBudget = None,
    workloads_path: WorkloadsPath = None,
    skypilot_csv: SkyPilotCsv = None,
    spot_advisor_url: SpotAdvisorUrl = None,
    min_gain: MinGain = DEFAULT_MIN_GAIN,
) -> dict[str, object]:
    """Prices -> FLOPP -> refit when there are newer scaling runs -> re-plan every
    registered job -> one fleet plan for all of them under the shared quotas ->
    change report (artifact): ``deepvm.nightly.stages.nightly``, each stage a task. Every
    table's rows are committed together when all stages succeeded: a failed night
    changes nothing. Then every month that ended before the night's date is
    compacted into one file per table.

    Args:
        store: store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker.
        scenarios_path: registered jobs (TOML); default: the shipped file.
        price_source: snapshot, aws, gcp, azure, skypilot (give skypilot_csv), or a catalog
            file path; a source that prices some clouds only keeps the others' newest rows
            (default: the date's own refresh, if the refresh-prices flow made one, else
            the shipped snapshot).
        price_regions: regions to fetch; every region is planned.
        snapshot_date: the night's date, YYYY-MM-DD (default: today, UTC).
        price_timeout_s: one deadline in seconds for the whole fetch, retries included.
        team_budget: the most all jobs' clusters may cost together, USD/h (default: none).
        workloads_path: your own workloads (CSV or TOML), which the jobs may name.
        skypilot_csv: for price_source skypilot, the SkyPilot vms.csv (a path or a URL).
        spot_advisor_url: also fetch AWS's Spot Instance Advisor feed before planning.
        min_gain: a running job moves only when the move saves more than this share.
    """
    from deepvm.catalog.sources import get_source
    from deepvm.performance.workloads import load_workloads
    from deepvm.records.jobs import load_scenarios

    logger = get_run_logger()
    date = snapshot_date or pipeline.today()
    registry = load_workloads(workloads_path) if workloads_path else None
    jobs = load_scenarios(scenarios_path, registry)  # validate before touching the store
    get_source(price_source or "snapshot", regions=price_regions, skypilot_csv=skypilot_csv)
    report = pipeline.nightly(
        _store(store),
        jobs,
        source=price_source,
        snapshot_date=date,
        regions=price_regions,
        skypilot_csv=skypilot_csv,
        timeout_s=price_timeout_s,
        team_budget=team_budget,
        workloads=workloads_path,
        spot_advisor_url=spot_advisor_url,
        min_gain=min_gain,
        run=_as_task,
    )
    prices, plans, changes = report.prices, report.plans, report.changes
    logger.info("%s", prices.words())
    if prices.failed:
        logger.warning(
            "price source %s UNREACHABLE (%s); re-planned on %s's snapshot (stale)",
            prices.source,
            prices.error,
            prices.fallback_from,
        )
    if report.advisor is not None and report.advisor.failed:
        logger.warning("Spot Instance Advisor feed failed (%s)", report.advisor.error)
    if report.compact_error:
        logger.warning(
            "night published; compacting finished months failed: %s", report.compact_error
        )
    compacted = (
        {table: months for table, months in report.compacted.months.items() if months}
        if report.compacted is not None
        else {}
    )
    for p in plans:
        if p.error:
            logger.error("job %s not planned: %s", p.scenario, p.error)
    create_markdown_artifact(
        key="deepvm-nightly-changes",
        markdown=change_report_markdown(changes, prices=prices)
        + ("\n\n" + fleet_markdown(report.fleet) if report.fleet is not None else ""),
        description=f"deepvm nightly {date}",
    )
    logger.info(
        "nightly %s: %d jobs planned, %d changed",
        date,
        sum(p.error is None for p in plans),
        int(changes["changed"].sum()),
    )
    fleet_plan = report.fleet
    assert fleet_plan is not None
    return {
        "snapshot_date": date,
        "stale_prices": prices.stale,
        "price_error": prices.error,
        "refitted": report.refitted,
        "planned": [p.scenario for p in plans if p.error is None],
        "failed": {p.scenario: p.error for p in plans if p.error},
        "changed": changes[changes["changed"]]["scenario"].tolist(),
        # each running job's one decision tonight (stay, move or stop)
        "decisions": {
            str(r["scenario"]): str(r["decision"])
            for r in changes.to_dict("records")
            if isinstance(r.get("decision"), str)
        },
        "fleet_status": fleet_plan.status,
        "unplanned": [j.scenario for j in fleet_plan.jobs if not j.planned],
        "compacted": compacted,
    }


@flow(name="fleet", log_prints=True)
@_refusals_fail_in_one_line
def fleet(
    scenarios_path: Annotated[
        str | None, Field(description="registered jobs (TOML); default: the shipped file"), ONE_TYPE
    ] = None,
    team_budget: TeamBudget = None,
    store: StoreUri = None,
    snapshot_date: DateText = None,
    workloads_path: WorkloadsPath = None,
) -> dict[str, object]:
    """One plan for every registered job under the account's shared quotas (and a
    team budget), on the store's newest prices; written to the store's ``fleet``
    table as a what-if (``run_kind`` what-if, beside the nightly's plan, never in
    its place) and published as an artifact.

    Args:
        scenarios_path: registered jobs (TOML); default: the shipped file.
        team_budget: the most all jobs' clusters may cost together, USD/h (default: none).
        store: store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker.
        snapshot_date: plan on the prices of this date or before, YYYY-MM-DD (default: today).
        workloads_path: your own workloads (CSV or TOML), which the jobs may name.
    """
    from deepvm.performance.workloads import load_workloads
    from deepvm.records.jobs import load_scenarios

    opened = _store(store)
    date = snapshot_date or pipeline.today()
    registry = load_workloads(workloads_path) if workloads_path else None
    jobs = load_scenarios(scenarios_path, registry)
    if not opened.has("prices"):  # a fresh store: start from the snapshot
        refresh_prices_task(opened, "snapshot", date)
    plan = cast(FleetPlan, plan_fleet_task(opened, jobs, date, team_budget, workloads_path))
    create_markdown_artifact(
        key="deepvm-fleet",
        markdown=fleet_markdown(plan),
        description=f"deepvm fleet plan {date}",
    )
    get_run_logger().info(
        "fleet %s: %s, %d of %d jobs planned, $%.4f/h",
        date,
        plan.status,
        sum(j.planned for j in plan.jobs),
        len(plan.jobs),
        plan.hourly_cost,
    )
    return plan.as_dict()


@flow(name="adopt", log_prints=True)
@_refusals_fail_in_one_line
def adopt(
    job: Annotated[str, Field(description="the registered job's name", min_length=1)],
    rank: Annotated[
        int | None,
        Field(
            description="deepvm's recommendation of this rank, not the fleet's",
            ge=1,
            le=MAX_RANK,
        ),
        ONE_TYPE,
    ] = None,
    work_done: Annotated[
        str | None,
        Field(description="training FLOPs done so far, e.g. 2e18 (text, read whole)"),
        ONE_TYPE,
    ] = None,
    store: StoreUri = None,
    snapshot_date: DateText = None,
    started: Annotated[
        str | None,
        Field(
            max_length=40,
            description="when it started, ISO 8601 (e.g. 2026-12-01T08:00Z): the work done "
            "is estimated at the cluster's goodput since then",
        ),
        ONE_TYPE,
    ] = None,
) -> dict[str, object]:
    """Record which cluster a registered job now runs on (the store's ``running``
    table), as ``deepvm adopt``: its cluster in the newest fleet plan, or deepvm's
    recommendation of ``rank``; the nightly then weighs moving it.

    Args:
        job: the registered job's name.
        rank: deepvm's recommendation of this rank, not the fleet's.
        work_done: training FLOPs done so far, e.g. 2e18.
        store: store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker.
        snapshot_date: adopt the plan of this night or before, YYYY-MM-DD.
        started: when it started (ISO 8601); the work done is estimated from it.
    """
    from deepvm.records.running import adopt as adopt_job
    from deepvm.records.running import started_time

    done = parse_work(work_done) if work_done else None
    when = started_time(started) if started else None
    adopted = adopt_job(
        _store(store), job, rank=rank, work_done_flops=done, date=snapshot_date, started_at=when
    )
    words = adopted.cluster.words(architecture=True, region=True)
    get_run_logger().info("%s runs %s (the %s plan of %s)", job, words, adopted.source,
                          adopted.plan_date)  # fmt: skip
    return {"scenario": job, "plan_date": adopted.plan_date, "source": adopted.source,
            **adopted.cluster.as_dict(), "work_done_flops": adopted.work_done_flops}  # fmt: skip


@flow(name="finish", log_prints=True)
@_refusals_fail_in_one_line
def finish(
    job: Annotated[str, Field(description="the registered job's name", min_length=1)],
    store: StoreUri = None,
) -> dict[str, object]:
    """Record that a running job has ended, as ``deepvm finish``: the nightly stops
    weighing its moves.

    Args:
        job: the registered job's name.
        store: store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker.
    """
    from deepvm.records.running import finish as finish_job

    ended = finish_job(_store(store), job)
    get_run_logger().info("%s no longer runs (it ran %s)", job,
                          ended.cluster.words(architecture=True, region=True))  # fmt: skip
    return {"scenario": job, "finished": True, **ended.cluster.as_dict()}


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "nightly"
    flows: dict[str, Any] = {
        "nightly": nightly,
        "refresh-prices": refresh_prices,
        "recommend": recommend,
        "fit-overhead": fit_overhead,
        "benchmark": benchmark,
        "fleet": fleet,
        "benchmark-fleet": benchmark_fleet,
        "adopt": adopt,
        "finish": finish,
    }
    print(flows[name](store=os.environ.get("DEEPVM_STORE")))
