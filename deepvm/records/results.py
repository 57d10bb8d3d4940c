"""Planner results as store rows (docs/ARCHITECTURE.md, "The store").

A night's record is written only by the nightly (``run_kind`` nightly); an
on-demand run (``recommend --store``, the recommend and fleet flows) is a what-if:
its rows carry ``run_kind`` what-if and a writer of their own (``whatif-...``), so
they sit beside the night's rows, never replace or add to them, and the readers
of the night (:func:`read_nightly`: the change report, adopt, launch) skip them.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from deepvm.base.output_files import atomic_output
from deepvm.performance.fitting import Fit, fits_frame
from deepvm.planner.api import RecommendResult
from deepvm.planner.fleet.types import FleetPlan
from deepvm.store import Store

__all__ = [
    "NIGHTLY",
    "RUN_KINDS",
    "WHATIF_WRITER",
    "WHAT_IF",
    "default_scenario",
    "fleet_frame",
    "read_nightly",
    "recommendations_frame",
    "today_utc",
    "write_benchmarks",
    "write_fits",
    "write_fleet",
    "write_flopp",
    "write_parquet_atomic",
    "write_recommendations",
    "write_scaling",
]

NIGHTLY = "nightly"
WHAT_IF = "what-if"
RUN_KINDS = (NIGHTLY, WHAT_IF)
WHATIF_WRITER = "whatif-"  # a what-if's writer name starts so


def today_utc() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def default_scenario(result: RecommendResult) -> str:
    return f"{result.workload}-{result.objective}-b{result.budget:g}"


def recommendations_frame(
    result: RecommendResult, *, scenario: str, run_id: str, created_at: dt.datetime
) -> pd.DataFrame:
    rows = [r.as_dict() for r in result.recommendations]
    df = pd.DataFrame(rows)
    df["run_id"] = run_id
    df["created_at"] = pd.Timestamp(created_at)
    df["scenario"] = scenario
    df["workload"] = result.workload
    df["objective"] = result.objective
    df["budget"] = result.budget
    df["checkpoint_gb"] = result.checkpoint_gb
    df["work_flops"] = result.work_flops
    df["deadline_h"] = result.deadline_h
    df["prices_snapshot"] = result.prices_snapshot
    return df


def write_recommendations(
    result: RecommendResult,
    store: Store,
    *,
    run_kind: str,
    scenario: str | None = None,
    snapshot_date: str | None = None,
) -> tuple[str, pd.DataFrame]:
    """Write one recommend run as the date's rows of its scenario (``run_kind``
    nightly) or of a what-if of it: the same scenario and kind on the same date
    replaces its rows, others stay. Returns the table and the rows written."""
    name = scenario or default_scenario(result)
    now = dt.datetime.now(dt.UTC)
    df = recommendations_frame(result, scenario=name, run_id=uuid.uuid4().hex, created_at=now)
    df["run_kind"] = _kind(run_kind)
    path = store.write(
        "recommendations", df, partition=snapshot_date or today_utc(), name=_writer(name, run_kind)
    )
    return path, df


def fleet_frame(plan: FleetPlan, *, run_id: str, created_at: dt.datetime) -> pd.DataFrame:
    """One row per job of a fleet plan (the ``fleet`` table's columns)."""
    df = pd.DataFrame([j.as_dict() for j in plan.jobs])
    df["run_id"] = run_id
    df["created_at"] = pd.Timestamp(created_at)
    df["status"] = plan.status
    df["tie_break_status"] = plan.tie_break_status
    df["objective_value"] = plan.objective_value
    df["team_budget"] = plan.team_budget
    df["prices_snapshot"] = plan.prices_snapshot
    return df


def write_fleet(
    plan: FleetPlan, store: Store, *, run_kind: str, snapshot_date: str | None = None
) -> tuple[str, pd.DataFrame]:
    """Write a fleet plan as the date's night (``run_kind`` nightly) or a what-if
    beside it; a re-run of the date and kind replaces it."""
    now = dt.datetime.now(dt.UTC)
    df = fleet_frame(plan, run_id=uuid.uuid4().hex, created_at=now)
    df["run_kind"] = _kind(run_kind)
    date = snapshot_date or today_utc()
    return store.write("fleet", df, partition=date, name=_writer("fleet", run_kind)), df


def read_nightly(
    store: Store, table: str, *, on_or_before: str | None = None, nights: int = 1
) -> tuple[list[str], pd.DataFrame]:
    """The newest ``nights`` dates of the night's record in ``table`` (at or before
    ``on_or_before``) and their nightly rows: what-ifs are neither counted nor read."""
    dates = [
        d
        for d in store.partitions(table, writer=lambda w: not w.startswith(WHATIF_WRITER))
        if on_or_before is None or d <= on_or_before
    ][-nights:]
    if not dates:
        return [], pd.DataFrame()
    rows = store.read(table, partitions=dates)
    if "run_kind" in rows:
        rows = rows[rows["run_kind"].fillna(NIGHTLY) == NIGHTLY]
    return dates, rows


def _kind(run_kind: str) -> str:
    if run_kind not in RUN_KINDS:
        raise ValueError(f"run_kind {run_kind!r} is not one of {', '.join(RUN_KINDS)}")
    return run_kind


def _writer(name: str, run_kind: str) -> str:
    return name if run_kind == NIGHTLY else f"{WHATIF_WRITER}{name}"


def write_flopp(
    df: pd.DataFrame,
    store: Store,
    snapshot: str,
    snapshot_date: str | None = None,
) -> str:
    workload = str(df["workload"].iloc[0]) if len(df) else "empty"
    return store.write("flopp", df, partition=snapshot_date or today_utc(), name=workload)


def write_parquet_atomic(df: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a single Parquet file atomically (temporary name in the same folder)."""
    with atomic_output(path) as tmp:
        df.to_parquet(tmp, index=False)
    return Path(path)


# Measurements and fits are appended, one file per run (Store.append): machines
# benchmarking at once never overwrite each other; readers take the newest row per
# key (deepvm.records.inputs).


def write_benchmarks(df: pd.DataFrame, store: Store) -> str:
    """One file per benchmark run; the newest run of a workload on a type is used."""
    name = str(df["instance_type"].iloc[0])
    return store.append("benchmarks", df, partition=today_utc(), writer=name)


def write_scaling(df: pd.DataFrame, store: Store) -> str:
    """One file per scaling run; the newest run of a group is fitted."""
    name = f"{df['instance_type'].iloc[0]}-{df['workload'].iloc[0]}"
    return store.append("scaling", df, partition=today_utc(), writer=name)


def write_fits(fits: Sequence[Fit], store: Store) -> str:
    """``overhead_models`` rows of one fit run; the newest fit of a group is used."""
    df = fits_frame(fits)
    df["fitted_at"] = pd.Timestamp(dt.datetime.now(dt.UTC))
    return store.append("overhead_models", df, partition=today_utc(), writer="fits")
