"""The nightly as Prefect flows: prices, FLOPP, refit, each job's plan and the fleet
as tasks (``deepvm.nightly.stages.nightly`` itself, each stage a task), and the
price refresh and refit on their own."""

from __future__ import annotations

from typing import Annotated

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from pydantic import Field

from deepvm.base.config import (
    DEFAULT_MIN_GAIN,
    DEFAULT_TIME_LIMIT_S,
)
from deepvm.base.errors import SourceUnavailableError
from deepvm.nightly import stages as pipeline
from deepvm.nightly.prices import refresh_spot_advisor, today
from deepvm.render.report import change_report_markdown, fleet_markdown
from flows import runs
from flows.forms import (
    ONE_TYPE,
    DateText,
    FleetTimeLimit,
    MinGain,
    NightlySource,
    PriceSource,
    RegionName,
    SkyPilotCsv,
    SpotAdvisorUrl,
    StoreUri,
    TeamBudget,
    WorkloadsPath,
)
from flows.runs import refusals_fail_in_one_line, store_of
from flows.tasks import (
    refit_task,
    refresh_prices_task,
)

__all__ = ["fit_overhead", "nightly", "refresh_prices"]


# --- flows -------------------------------------------------------------------------


@flow(name="refresh-prices", log_prints=True)
@refusals_fail_in_one_line
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
        advisor = refresh_spot_advisor(
            store_of(store),
            spot_advisor_url,
            snapshot_date=snapshot_date,
            timeout_s=price_timeout_s,
        )
        if advisor.failed:
            raise SourceUnavailableError(
                f"the Spot Instance Advisor feed failed ({advisor.error}); "
                f"planning keeps {advisor.kept or 'the shipped'} feed"
            )
        get_run_logger().info("%d Spot Instance Advisor rows", advisor.rows)
        return {"rows": advisor.rows, "source": advisor.source}
    result = refresh_prices_task(
        store_of(store), source, snapshot_date, regions, price_timeout_s, skypilot_csv
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


@flow(name="fit-overhead", log_prints=True)
@refusals_fail_in_one_line
def fit_overhead(store: StoreUri = None) -> int | None:
    return refit_task(store_of(store))


@flow(name="nightly", log_prints=True)
@refusals_fail_in_one_line
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
    fleet_time_limit_s: FleetTimeLimit = DEFAULT_TIME_LIMIT_S,
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
        fleet_time_limit_s: the fleet solve's time limit, seconds; past it, the best plan
            so far (the log says what is not proven).
    """
    from deepvm.catalog.sources import get_source
    from deepvm.performance.workloads import load_workloads
    from deepvm.records.jobs import load_jobs

    logger = get_run_logger()
    date = snapshot_date or today()
    registry = load_workloads(workloads_path) if workloads_path else None
    jobs = load_jobs(scenarios_path, registry)  # validate before touching the store
    get_source(price_source or "snapshot", regions=price_regions, skypilot_csv=skypilot_csv)
    report = pipeline.nightly(
        store_of(store),
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
        run=runs.as_task,
        fleet_time_limit_s=fleet_time_limit_s,
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
    unproven = (
        report.fleet.unproven_words("fleet_time_limit_s") if report.fleet is not None else None
    )
    if unproven is not None:
        logger.warning("%s", unproven)
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
