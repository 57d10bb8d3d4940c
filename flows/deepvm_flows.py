"""deepvm as Prefect flows. Every task calls one function of the library
(``deepvm.pipeline`` and friends); what happens here is orchestration only:
retries, logging, artifacts and typed parameters for the UI's form.

Run without a server: ``python -m flows.deepvm_flows nightly`` (or ``deepvm nightly``).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, Literal, cast

import pandas as pd
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from pydantic import Field

from deepvm import pipeline
from deepvm.report import change_report_markdown, recommendations_markdown
from deepvm.scenarios import Scenario
from deepvm.store import Store, store_root

StoreUri = Annotated[
    str | None,
    Field(description="store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker"),
]
Objective = Literal["throughput", "paper", "goodput", "cost"]


def _store(store: str | None) -> str:
    return str(store_root(store))


def _artifact_key(*parts: str) -> str:
    import re

    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")


# --- tasks: one library call each --------------------------------------------------


@task(name="refresh-prices")
def refresh_prices_task(
    store: str, source: str, snapshot_date: str | None, regions: list[str] | None = None
) -> pipeline.PriceRefresh:
    # The library retries the source with backoff and falls back to the last snapshot.
    return pipeline.refresh_prices(store, source, snapshot_date=snapshot_date, regions=regions)


@task(name="compute-flopp")
def compute_flopp_task(
    store: str, workloads: list[str], snapshot_date: str | None, region: str | None = None
) -> list[str]:
    return [str(p) for p in pipeline.compute_flopp(store, workloads, snapshot_date, region)]


@task(name="refit-overhead")
def refit_task(store: str) -> int | None:
    fits = pipeline.refit_if_new(store)
    return None if fits is None else len(fits)


@task(name="replan")
def replan_task(
    store: str, scenarios_path: str | None, snapshot_date: str | None, region: str | None = None
) -> list[pipeline.PlanOutcome]:
    from deepvm.scenarios import load_scenarios

    return pipeline.replan(store, load_scenarios(scenarios_path), snapshot_date, region)


@task(name="plan-job")
def plan_job_task(store: str, job: Scenario) -> pipeline.PlanOutcome:
    return pipeline.replan(store, [job])[0]


@task(name="change-report")
def change_report_task(store: str, snapshot_date: str | None) -> pd.DataFrame:
    return pipeline.change_report(store, snapshot_date)


# --- flows -------------------------------------------------------------------------


@flow(name="refresh-prices", log_prints=True)
def refresh_prices(
    source: str = "snapshot",
    store: StoreUri = None,
    snapshot_date: str | None = None,
    regions: list[str] | None = None,
) -> dict[str, object]:
    """Fetch current prices into the store (stale fallback if the source fails)."""
    result = refresh_prices_task(_store(store), source, snapshot_date, regions)
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
def recommend(
    budget: Annotated[float, Field(gt=0, description="USD per hour for the whole cluster")] = 3.0,
    workload: str = "resnet50",
    checkpoint_gb: Annotated[float | None, Field(ge=0)] = None,
    objective: Objective = "throughput",
    policies: list[str] = ["all"],  # noqa: B006 - Prefect renders the default in the form
    top: Annotated[int, Field(ge=1, le=20)] = 3,
    total_work: Annotated[
        float | None, Field(gt=0, description="training FLOPs (objective cost needs it)")
    ] = None,
    deadline_hours: Annotated[
        float | None, Field(gt=0, description="objective cost: bound on the expected makespan")
    ] = None,
    scenario: str | None = None,
    store: StoreUri = None,
) -> list[dict[str, object]]:
    """One job, planned on the store's newest prices (or the shipped snapshot)."""
    uri = _store(store)
    job = Scenario(
        name=scenario or f"ui-{workload}-{objective}-b{budget:g}",
        workload=workload,
        budget=budget,
        checkpoint_gb=checkpoint_gb,
        objective=objective,
        policies=tuple(policies),
        top=top,
        deadline_hours=deadline_hours,
        total_work=total_work,
    )
    if not Store.open(uri).has("prices"):  # a fresh store: start from the snapshot
        refresh_prices_task(uri, "snapshot", None)
    outcome = plan_job_task(uri, job)
    if outcome.error:
        raise RuntimeError(outcome.error)
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
def benchmark(
    workloads: list[str] = ["resnet50"],  # noqa: B006
    instance_type: str | None = None,
    store: StoreUri = None,
) -> list[dict[str, object]]:
    """Measure the machine this flow runs on (its work pool's worker)."""
    from deepvm.bench.run import benchmark_frame, identify, run_benchmarks
    from deepvm.results import write_benchmarks

    hardware = identify(instance_type)
    results = task(name="run-benchmarks")(run_benchmarks)(workloads, progress=False)
    frame = benchmark_frame(results, hardware)
    write_benchmarks(frame, _store(store))
    return frame.to_dict("records")


@flow(name="fit-overhead", log_prints=True)
def fit_overhead(store: StoreUri = None) -> int | None:
    return refit_task(_store(store))


@flow(name="nightly", log_prints=True)
def nightly(
    store: StoreUri = None,
    scenarios_path: Annotated[
        str | None, Field(description="registered jobs (TOML); default: the shipped file")
    ] = None,
    price_source: str = "snapshot",
    price_regions: list[str] | None = None,
    snapshot_date: str | None = None,
) -> dict[str, object]:
    """Prices -> FLOPP -> refit when there are newer scaling runs -> re-plan every
    registered job -> change report (artifact)."""
    from deepvm.scenarios import load_scenarios

    logger = get_run_logger()
    uri = _store(store)
    date = snapshot_date or pipeline.today()
    jobs = load_scenarios(scenarios_path)  # validate before touching the store
    prices = refresh_prices_task(uri, price_source, date, price_regions)
    if prices.stale:
        logger.warning(
            "prices are STALE (%s); re-planning on %s's snapshot",
            prices.error,
            prices.fallback_from,
        )
    region = price_regions[0] if price_regions else None
    compute_flopp_task(uri, [j.workload for j in jobs], date, region)
    refitted = refit_task(uri)
    plans = replan_task(uri, scenarios_path, date, region)
    for p in plans:
        if p.error:
            logger.error("job %s not planned: %s", p.scenario, p.error)
    changes = cast(pd.DataFrame, change_report_task(uri, date))
    create_markdown_artifact(
        key="deepvm-nightly-changes",
        markdown=change_report_markdown(changes, stale=prices.stale),
        description=f"deepvm nightly {date}",
    )
    logger.info(
        "nightly %s: %d jobs planned, %d changed",
        date,
        sum(p.error is None for p in plans),
        int(changes["changed"].sum()),
    )
    return {
        "snapshot_date": date,
        "stale_prices": prices.stale,
        "refitted": refitted,
        "planned": [p.scenario for p in plans if p.error is None],
        "failed": {p.scenario: p.error for p in plans if p.error},
        "changed": changes[changes["changed"]]["scenario"].tolist(),
    }


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "nightly"
    flows: dict[str, Any] = {
        "nightly": nightly,
        "refresh-prices": refresh_prices,
        "recommend": recommend,
        "fit-overhead": fit_overhead,
        "benchmark": benchmark,
    }
    print(flows[name](store=os.environ.get("DEEPVM_STORE")))
