"""Planning on demand as Prefect flows: one job's recommendation, the fleet, and a
job adopted or finished."""

from __future__ import annotations

from typing import Annotated, cast

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from pydantic import BeforeValidator, Field

from deepvm.base.config import (
    DEFAULT_TIME_LIMIT_S,
    MAX_CHECKPOINT_GB,
    MAX_DEADLINE_H,
    MAX_HOURLY_COST,
    MAX_WORK_FLOPS,
    JobSpec,
    Objective,
)
from deepvm.base.errors import ParameterError
from deepvm.nightly.prices import today
from deepvm.performance.workloads import WorkloadName, parse_work, training_work
from deepvm.planner.fleet.types import FleetPlan, RegisteredJob
from deepvm.render.report import fleet_markdown, recommendations_markdown
from flows.forms import (
    DEFAULT_WORKLOAD_CHOICE,
    EVERY_POLICY,
    MAX_RANK,
    ONE_TYPE,
    DateText,
    FleetTimeLimit,
    PolicyName,
    StoreUri,
    TeamBudget,
    WorkloadsPath,
    as_text,
    old_names,
    pflop,
)
from flows.runs import RefusedRun, artifact_key, refusals_fail_in_one_line, store_of
from flows.tasks import (
    plan_fleet_task,
    plan_job_task,
    refresh_prices_task,
)

__all__ = ["adopt", "finish", "fleet", "recommend"]


@flow(name="recommend", log_prints=True)
@refusals_fail_in_one_line
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
    opened = store_of(store)
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
        key=artifact_key("recommendations", job.name),
        markdown=recommendations_markdown(
            f"{job.name}: ${budget:g}/h, {workload}", outcome.recommendations
        ),
        description=f"deepvm recommendations for {job.name}",
    )
    get_run_logger().info("planned %s: %d recommendations", job.name, len(outcome.recommendations))
    return outcome.recommendations.to_dict("records")


@flow(name="fleet", log_prints=True)
@refusals_fail_in_one_line
def fleet(
    scenarios_path: Annotated[
        str | None, Field(description="registered jobs (TOML); default: the shipped file"), ONE_TYPE
    ] = None,
    team_budget: TeamBudget = None,
    store: StoreUri = None,
    snapshot_date: DateText = None,
    workloads_path: WorkloadsPath = None,
    fleet_time_limit_s: FleetTimeLimit = DEFAULT_TIME_LIMIT_S,
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
        fleet_time_limit_s: the solve's time limit, seconds; past it, the best plan so
            far (the log says what is not proven).
    """
    from deepvm.performance.workloads import load_workloads
    from deepvm.records.jobs import load_jobs

    opened = store_of(store)
    date = snapshot_date or today()
    registry = load_workloads(workloads_path) if workloads_path else None
    jobs = load_jobs(scenarios_path, registry)
    if not opened.has("prices"):  # a fresh store: start from the snapshot
        refresh_prices_task(opened, "snapshot", date)
    plan = cast(
        FleetPlan,
        plan_fleet_task(opened, jobs, date, team_budget, workloads_path, fleet_time_limit_s),
    )
    create_markdown_artifact(
        key="deepvm-fleet",
        markdown=fleet_markdown(plan),
        description=f"deepvm fleet plan {date}",
    )
    unproven = plan.unproven_words("fleet_time_limit_s")
    if unproven is not None:
        get_run_logger().warning("%s", unproven)
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
@refusals_fail_in_one_line
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
        store_of(store), job, rank=rank, work_done_flops=done, date=snapshot_date, started_at=when
    )
    words = adopted.cluster.words(architecture=True, region=True)
    get_run_logger().info("%s runs %s (the %s plan of %s)", job, words, adopted.source,
                          adopted.plan_date)  # fmt: skip
    return {"scenario": job, "plan_date": adopted.plan_date, "source": adopted.source,
            **adopted.cluster.as_dict(), "work_done_flops": adopted.work_done_flops}  # fmt: skip


@flow(name="finish", log_prints=True)
@refusals_fail_in_one_line
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

    ended = finish_job(store_of(store), job)
    get_run_logger().info("%s no longer runs (it ran %s)", job,
                          ended.cluster.words(architecture=True, region=True))  # fmt: skip
    return {"scenario": job, "finished": True, **ended.cluster.as_dict()}
