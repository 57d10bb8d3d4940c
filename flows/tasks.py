"""The flows' tasks: one library call each (docs/ARCHITECTURE.md, "Layers": flows
are thin). Tasks take the flow's opened store, a live handle, so their results
are not cached by input."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from deepvm.base.config import DEFAULT_TIME_LIMIT_S
from deepvm.nightly import stages as pipeline
from deepvm.nightly.prices import PriceRefresh, refresh_prices
from deepvm.planner.fleet.types import FleetPlan, RegisteredJob
from deepvm.records.results import WHAT_IF
from deepvm.store import Store

__all__ = [
    "compute_flopp_task",
    "plan_fleet_task",
    "plan_job_task",
    "refit_task",
    "refresh_prices_task",
]


@task(name="refresh-prices", cache_policy=NO_CACHE)
def refresh_prices_task(
    store: Store,
    source: str,
    snapshot_date: str | None,
    regions: list[str] | None = None,
    timeout_s: float = pipeline.DEFAULT_PRICE_TIMEOUT_S,
    skypilot_csv: str | None = None,
) -> PriceRefresh:
    # The library retries the source with backoff and falls back to the last snapshot.
    return refresh_prices(
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
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> FleetPlan:
    return pipeline.plan_fleet_stage(
        store, jobs, snapshot_date, team_budget=team_budget, workloads=workloads,
        run_kind=WHAT_IF,  # on demand: a what-if beside the night's plan
        time_limit_s=time_limit_s,
    )  # fmt: skip
