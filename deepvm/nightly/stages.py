"""The store-level stages the nightly run chains (docs/ARCHITECTURE.md, "Data
flow"): prices (deepvm.nightly.prices) -> FLOPP -> refit -> re-plan every registered job
-> change report. Each stage reads what the one before it wrote; the CLI (`deepvm
nightly`) and the Prefect flows in ``flows/`` call these same functions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pandas as pd

from deepvm.base.config import (
    DEFAULT_MIN_GAIN,
    DEFAULT_PRICE_TIMEOUT_S,
    DEFAULT_TIME_LIMIT_S,
)
from deepvm.base.errors import (
    DeepvmError,
    StoreError,
)
from deepvm.base.names import check_date
from deepvm.model.cluster import Cluster
from deepvm.nightly.prices import (
    DEFAULT_RETRIES,
    AdvisorRefresh,
    PriceRefresh,
    refresh_prices,
    refresh_spot_advisor,
    today,
)
from deepvm.planner.fleet.types import FleetPlan, RegisteredJob
from deepvm.planner.inputs import InputFiles, Inputs
from deepvm.store.core import Store
from deepvm.store.maintenance import CompactReport

__all__ = [
    "NightlyReport",
    "PlanOutcome",
    "change_report",
    "compute_flopp",
    "nightly",
    "plan_fleet_stage",
    "refit_if_new",
    "replan",
]

log = logging.getLogger("deepvm")
_T = TypeVar("_T")


# --- FLOPP, refit -------------------------------------------------------------------


def compute_flopp(
    store: Store,
    workloads: Sequence[str],
    snapshot_date: str | None = None,
    region: str | None = None,
) -> list[str]:
    """FLOPP rows per workload on the date's prices (every region, or ``region``)."""
    from deepvm.performance.flopp import flopp_table
    from deepvm.records.inputs import catalog_from_store, latest_measurements
    from deepvm.records.results import write_flopp

    date = snapshot_date or today()
    catalog = catalog_from_store(store, date, region)
    measured = latest_measurements(store)
    return [
        write_flopp(flopp_table(catalog, w, measured), store, catalog.snapshot, date)
        for w in sorted(set(workloads))
    ]


def refit_if_new(store: Store) -> list[object] | None:
    """Refit the overhead models when scaling rows are newer than the last fit."""
    from deepvm.performance.fitting import fit_all, fit_warnings
    from deepvm.records.inputs import store_scaling
    from deepvm.records.results import write_fits

    runs, fitted = store.partitions("scaling"), store.partitions("overhead_models")
    if not runs:
        return None
    if fitted and fitted[-1] > runs[-1]:  # partition dates alone: nothing is read
        return None
    report = fit_all(store_scaling(store))
    for warning in fit_warnings(report.fits):
        log.warning("overhead fit: %s", warning)
    for (itype, workload), why in report.skipped.items():
        log.warning("overhead fit: %s/%s not fitted: %s", itype, workload, why)
    if report.fits:
        write_fits(report.fits, store)
    return list(report.fits)


# --- re-planning and the change report ----------------------------------------------


@dataclass(frozen=True)
class PlanOutcome:
    scenario: str
    recommendations: pd.DataFrame | None  # the rows written, or None
    error: str | None = None


def replan(
    store: Store,
    scenarios: Sequence[RegisteredJob],
    snapshot_date: str | None = None,
    region: str | None = None,
    workloads: str | Path | None = None,
    inputs: Inputs | None = None,
    run_kind: str = "nightly",
) -> list[PlanOutcome]:
    """Re-plan every job on the store's newest prices; one job's failure (an
    infeasible budget, say) is reported and the others still run. ``run_kind``:
    the night's record, or a what-if beside it (deepvm.records.results)."""
    from deepvm.planner.api import recommend
    from deepvm.records.inputs import load_inputs
    from deepvm.records.results import write_recommendations

    date = snapshot_date or today()
    inputs = inputs or load_inputs(
        store=store, region=region, snapshot_date=date, workloads=workloads
    )
    outcomes = []
    for job in scenarios:
        try:
            result = recommend(job.budget, job.spec, inputs=inputs)
        except DeepvmError as exc:  # the library's names: the scenarios file's and the flows' too
            outcomes.append(PlanOutcome(job.name, None, str(exc)))
            continue
        _, frame = write_recommendations(
            result, store, scenario=job.name, snapshot_date=date, run_kind=run_kind
        )
        outcomes.append(PlanOutcome(job.name, frame))
    return outcomes


def plan_fleet_stage(
    store: Store,
    scenarios: Sequence[RegisteredJob],
    snapshot_date: str | None = None,
    region: str | None = None,
    team_budget: float | None = None,
    workloads: str | Path | None = None,
    inputs: Inputs | None = None,
    min_gain: float = DEFAULT_MIN_GAIN,
    run_kind: str = "nightly",
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> FleetPlan:
    """One plan for every registered job under the shared quotas (and the team
    budget), on the store's newest prices; written to the ``fleet`` table as the
    night's plan or (``run_kind`` what-if) beside it. ``time_limit_s``: the fleet
    solve's time limit; past it, the best plan so far (its status and bound say so)."""
    from deepvm.planner.fleet.plan import plan_fleet
    from deepvm.records.inputs import load_inputs
    from deepvm.records.results import write_fleet

    date = snapshot_date or today()
    inputs = inputs or load_inputs(
        store=store, region=region, snapshot_date=date, workloads=workloads
    )
    from deepvm.records.running import with_running

    jobs = with_running(store, scenarios)
    plan = plan_fleet(
        jobs, inputs, team_budget=team_budget, min_gain=min_gain, time_limit_s=time_limit_s
    )
    write_fleet(plan, store, snapshot_date=date, run_kind=run_kind)
    return plan


CHANGE_COLUMNS = [
    "scenario",
    "changed",
    "previous_date",
    "old_cluster",
    "new_cluster",
    "old_hourly_cost",
    "new_hourly_cost",
    "old_throughput_flops",
    "new_throughput_flops",
    "value",
    "binding",
    # For a job that runs (deepvm adopt): its cluster, and whether tonight's is worth
    # the move (deepvm.planner.fleet.migration); null for jobs not adopted.
    "running_cluster",
    "decision",
    "gain",
    "migration_h",
    "migration_usd",
    "break_even_h",
    "decision_reason",
]


def _cluster(row: pd.Series) -> Cluster | None:
    if not row.get("planned", True):
        return None
    return Cluster.from_mapping(row.to_dict())


def _words(cluster: Cluster | None) -> str:
    return "unplanned" if cluster is None else cluster.words(architecture=True, region=True)


def _changed(old: Cluster | None, new: Cluster | None) -> bool:
    if old is None or new is None:
        return old is not new
    return old.identity() != new.identity()


def _number(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]


def change_report(store: Store, snapshot_date: str | None = None) -> pd.DataFrame:
    """Per job: tonight's fleet plan against the previous night's (the ``fleet``
    table): its cluster, cost and throughput, its value and what holds it back; a
    running job's stay or move as the plan decided it."""
    date = snapshot_date or today()
    from deepvm.records.results import read_nightly

    # Tonight's plan and the previous night's: two nights, whatever the history, and
    # never a what-if (an on-demand fleet run) in place of either.
    _, plans = read_nightly(store, "fleet", on_or_before=date, nights=2)
    if plans.empty:
        return pd.DataFrame(columns=CHANGE_COLUMNS)
    from deepvm.records.running import moves_tonight

    moves = moves_tonight(plans[plans["snapshot_date"] == date])
    rows = []
    for scenario, group in plans.groupby("scenario", sort=True):
        now = group[group["snapshot_date"] == date]
        if now.empty:
            continue
        new = now.iloc[-1]
        before = group[group["snapshot_date"] < date]
        old = (
            before[before["snapshot_date"] == before["snapshot_date"].max()].iloc[-1]
            if not before.empty
            else None
        )
        now_cluster = _cluster(new)
        was_cluster = None if old is None else _cluster(old)
        rows.append(
            {
                "scenario": scenario,
                # A first plan is not a change: there is nothing to compare it with.
                "changed": old is not None and _changed(was_cluster, now_cluster),
                "previous_date": None if old is None else old["snapshot_date"],
                "old_cluster": None if old is None else _words(was_cluster),
                "new_cluster": _words(now_cluster),
                "old_hourly_cost": None if old is None else _number(old["hourly_cost"]),
                "new_hourly_cost": _number(new["hourly_cost"]),
                "old_throughput_flops": None if old is None else _number(old["throughput_flops"]),
                "new_throughput_flops": _number(new["throughput_flops"]),
                "value": _number(new["value"]),
                "binding": new["binding"] if isinstance(new["binding"], str) else None,
                **moves.get(str(scenario), {}),
            }
        )
    return pd.DataFrame(rows, columns=CHANGE_COLUMNS)


# --- the whole night ----------------------------------------------------------------


@dataclass
class NightlyReport:
    snapshot_date: str
    prices: PriceRefresh
    flopp_files: list[str] = field(default_factory=list)
    refitted: int | None = None
    plans: list[PlanOutcome] = field(default_factory=list)
    fleet: FleetPlan | None = None
    changes: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CHANGE_COLUMNS))
    compacted: CompactReport | None = None
    compact_error: str | None = None  # the night is published even when compaction fails
    advisor: AdvisorRefresh | None = None  # the Spot Instance Advisor feed, when fetched


def compact_finished_months(store: Store, snapshot_date: str) -> CompactReport:
    """Merge the files of every month that ended before the night's date and remove
    files past the retention (docs/ARCHITECTURE.md, "The store"): a year of nights
    stays a few files per month."""
    from deepvm.store.maintenance import compact

    return compact(store, before=snapshot_date)


class StageRunner(Protocol):
    """How a front end runs one stage of the night: ``run(name, stage, *args,
    **kwargs)`` must call ``stage(*args, **kwargs)`` once and return its result
    (the Prefect flow wraps it as a task, for its logs, state and retries)."""

    def __call__(self, name: str, stage: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T: ...


def run_directly(name: str, stage: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """The CLI's stage runner: just the call."""
    del name
    return stage(*args, **kwargs)


def nightly(
    store: Store,
    scenarios: Sequence[RegisteredJob],
    *,
    source: str | None = None,
    snapshot_date: str | None = None,
    retries: int = DEFAULT_RETRIES,
    backoff_s: float | None = None,
    regions: Sequence[str] | None = None,
    skypilot_csv: str | None = None,
    timeout_s: float = DEFAULT_PRICE_TIMEOUT_S,
    team_budget: float | None = None,
    workloads: str | Path | None = None,
    compact: bool = True,
    spot_advisor_url: str | None = None,
    min_gain: float = DEFAULT_MIN_GAIN,
    run: StageRunner = run_directly,
    planning: InputFiles | None = None,
    fleet_time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> NightlyReport:
    """The night's stages in order: the one sequence the CLI (``deepvm nightly``)
    and the Prefect flow both run; ``run`` runs each stage (the flow's makes it a
    task). Every table's rows are computed first and committed together at the
    end (one store commit): a night that fails part-way, or is killed while it
    commits, leaves what deepvm reads as it was. Then finished months are
    compacted (``compact``). With ``spot_advisor_url`` the night also fetches the
    Spot Instance Advisor feed (a failure keeps the store's newest) before planning.
    ``planning``: the input files and filters the plans take (quotas, cloud,
    region, ...: deepvm.planner.inputs.InputFiles), as ``deepvm fleet`` takes them.
    ``fleet_time_limit_s``: the fleet solve's time limit (a team of a few hundred
    jobs, or of jobs that all differ, may need minutes for a proof)."""
    from deepvm.records.inputs import load_inputs

    date = check_date(snapshot_date or today(), "snapshot_date")
    with store.transaction(command="nightly") as tx:
        prices = run(
            "refresh-prices",
            refresh_prices,
            tx,
            source,
            snapshot_date=date,
            retries=retries,
            backoff_s=backoff_s,
            regions=regions,
            skypilot_csv=skypilot_csv,
            timeout_s=timeout_s,
        )
        report = NightlyReport(date, prices)
        if spot_advisor_url is not None:
            report.advisor = run(
                "refresh-spot-advisor", refresh_spot_advisor, tx, spot_advisor_url,
                snapshot_date=date, retries=retries, backoff_s=backoff_s, timeout_s=timeout_s,
            )  # fmt: skip
        # Every region of the snapshot is planned, each with its own quotas.
        workload_names = sorted({s.spec.workload for s in scenarios})
        report.flopp_files = run("compute-flopp", compute_flopp, tx, workload_names, date)
        fits = run("refit-overhead", refit_if_new, tx)
        report.refitted = None if fits is None else len(fits)
        # The night's inputs, read once for the solo plans and the fleet plan.
        inputs = run(
            "load-inputs", load_inputs, store=tx, snapshot_date=date, workloads=workloads,
            **(planning or {}),
        )  # fmt: skip
        report.plans = run("replan", replan, tx, scenarios, date, inputs=inputs)
        report.fleet = run(
            "plan-fleet", plan_fleet_stage, tx, scenarios, date, team_budget=team_budget,
            inputs=inputs, min_gain=min_gain, time_limit_s=fleet_time_limit_s,
        )  # fmt: skip
        report.changes = run("change-report", change_report, tx, date)
    if compact:
        try:  # after the night is published: a failure here loses nothing of it
            report.compacted = run("compact-store", compact_finished_months, store, date)
        except StoreError as exc:
            report.compact_error = str(exc)
    return report
