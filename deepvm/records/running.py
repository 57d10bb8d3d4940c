"""What runs now: the cluster each registered job was started on (the store's
``running`` table, written by ``deepvm adopt``), and whether tonight's plan for it
is worth moving to (docs/ARCHITECTURE.md, "Re-planning running jobs").

A job is adopted from a plan in the store: by default its cluster in the newest
fleet plan, or deepvm's recommendation of rank N. The row keeps the cluster, the
checkpoint interval and efficiency it was planned with, and the work done so far
(given, or estimated from the start time at the cluster's goodput).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from deepvm.base.errors import InputError, ParameterError
from deepvm.model.cluster import Cluster
from deepvm.planner.fleet.types import DECISION_COLUMNS, RegisteredJob, Running
from deepvm.store import Store

__all__ = [
    "TABLE",
    "Adopted",
    "adopt",
    "finish",
    "moves_tonight",
    "running_jobs",
    "started_time",
    "with_running",
]

TABLE = "running"


@dataclass(frozen=True)
class Adopted:
    """One job's running cluster, as stored."""

    scenario: str
    cluster: Cluster
    plan_date: str
    source: str  # "fleet" or "deepvm #N"
    checkpoint_interval_s: float
    efficiency: float
    work_done_flops: float | None
    started_at: pd.Timestamp | None


def adopt(
    store: Store,
    job: str,
    *,
    rank: int | None = None,
    work_done_flops: float | None = None,
    started_at: dt.datetime | None = None,
    date: str | None = None,
    cluster_words: str | None = None,
) -> Adopted:
    """Mark ``job``'s plan (the newest fleet plan's cluster, or deepvm's
    recommendation of ``rank``) as the cluster it runs on, written to ``running``;
    or ``cluster_words``, a cluster as deepvm writes it, found in that night's
    catalog. An unknown job, rank or cluster is an InputError, and nothing is
    written."""
    row, plan_date, source = _plan_row(store, job, rank, date)
    if cluster_words is not None:
        row, source = _given(store, row, plan_date, cluster_words), "given"
    cluster = Cluster.from_mapping(row)
    if cluster is None:
        raise InputError(f"job {job!r} is unplanned on {plan_date}: there is no cluster to adopt")
    interval = _float(row.get("checkpoint_interval_s"))
    efficiency = _float(row.get("efficiency"))
    efficiency = efficiency if efficiency > 0 else 1.0
    now = pd.Timestamp(dt.datetime.now(dt.UTC))
    started = pd.Timestamp(started_at) if started_at is not None else None
    if started is not None:
        if started.tzinfo is None:
            started = started.tz_localize("UTC")
        if started > now:
            raise InputError(f"--started {started.isoformat()} is in the future")
        if work_done_flops is None:  # estimated: the time since, at the cluster's goodput
            seconds = (now - started).total_seconds()
            work_done_flops = seconds * cluster.throughput_flops * efficiency
    adopted = Adopted(
        job, cluster, plan_date, source, interval, efficiency, work_done_flops, started
    )
    record: dict[str, Any] = {
        "scenario": job,
        "adopted_at": now,
        "plan_date": plan_date,
        "source": source,
        **cluster.as_dict(),
        "checkpoint_interval_s": interval,
        "efficiency": efficiency,
        "work_done_flops": work_done_flops,
        "started_at": started,
        "finished_at": None,
    }
    store.write(TABLE, pd.DataFrame([record]), partition=now.date().isoformat(), name=_writer(job))
    return adopted


def with_running(store: Store, jobs: Sequence[RegisteredJob]) -> list[RegisteredJob]:
    """The jobs, each with the cluster it runs on (its newest adoption), if any."""
    running = running_jobs(store)
    return [
        replace(
            job,
            running=Running(a.cluster, a.checkpoint_interval_s, a.efficiency, a.work_done_flops),
        )
        if (a := running.get(job.name)) is not None
        else job
        for job in jobs
    ]


def running_jobs(store: Store) -> dict[str, Adopted]:
    """Each job's newest adoption, unless a later ``finish`` ended it."""
    if not store.has(TABLE):
        return {}
    rows = store.read(TABLE)
    out: dict[str, Adopted] = {}
    for r in rows.sort_values("adopted_at").to_dict("records"):
        if r.get("finished_at") is not None and not pd.isna(r["finished_at"]):
            out.pop(str(r["scenario"]), None)
            continue
        cluster = Cluster.from_mapping(r)
        if cluster is None:
            continue
        done = _float(r.get("work_done_flops"))
        started = r.get("started_at")
        out[str(r["scenario"])] = Adopted(
            str(r["scenario"]),
            cluster,
            str(r["plan_date"]),
            str(r["source"]),
            _float(r.get("checkpoint_interval_s")),
            _float(r.get("efficiency")) or 1.0,
            None if math.isnan(done) else done,
            None if started is None or pd.isna(started) else pd.Timestamp(started),
        )
    return out


def started_time(text: str) -> dt.datetime:
    """An ISO 8601 start time (``2026-12-01T08:00Z``); a ParameterError (``started``)
    names the parameter as each front end spells it."""
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ParameterError(
            "started", text, "is not a time; give ISO 8601, e.g. 2026-12-01T08:00Z"
        ) from None


def finish(store: Store, job: str) -> Adopted:
    """Record that ``job`` no longer runs (the nightly stops weighing its moves);
    the cluster it ran on. A job that does not run is an InputError, and nothing
    is written."""
    running = running_jobs(store)
    if job not in running:
        known = ", ".join(sorted(running)) or "none"
        raise InputError(f"job {job!r} does not run (the running jobs: {known})")
    now = pd.Timestamp(dt.datetime.now(dt.UTC))
    from deepvm.model.schemas import table_schema

    record: dict[str, Any] = dict.fromkeys(table_schema(TABLE).names)
    record.update(scenario=job, adopted_at=now, source="finished", finished_at=now)
    store.write(TABLE, pd.DataFrame([record]), partition=now.date().isoformat(), name=_writer(job))
    return running[job]


def _plan_row(
    store: Store, job: str, rank: int | None, date: str | None
) -> tuple[dict[str, Any], str, str]:
    from deepvm.records.results import read_nightly

    table = "fleet" if rank is None else "recommendations"
    dates, rows = read_nightly(store, table, on_or_before=date)
    if not dates:
        raise InputError(
            f"the store has no {table} plan{' on or before ' + date if date else ''}: "
            "run `deepvm nightly --store URI` first"
        )
    mine = rows[rows["scenario"] == job]
    if mine.empty:
        known = ", ".join(sorted(set(rows["scenario"].astype(str))))
        raise InputError(f"job {job!r} has no plan on {dates[-1]}; its jobs: {known}")
    if rank is None:
        return mine.iloc[-1].to_dict(), dates[-1], "fleet"
    mine = mine[mine["policy"] == "deepvm"]
    ranks = sorted(int(r) for r in mine["rank"])
    picked = mine[mine["rank"] == rank]
    if picked.empty:
        raise InputError(
            f"job {job!r} has deepvm ranks {', '.join(map(str, ranks))} on {dates[-1]}; "
            f"--rank {rank} is not one"
        )
    return picked.iloc[-1].to_dict(), dates[-1], f"deepvm #{rank}"


def _given(store: Store, plan: dict[str, Any], date: str, words: str) -> dict[str, Any]:
    """The row of a cluster given in words: found in the catalog of ``date`` for the
    job's workload, with the throughput, cost, efficiency and checkpoint interval
    deepvm plans it with."""
    from deepvm.base.config import JobSpec, Policy
    from deepvm.model.cluster import parse_words
    from deepvm.planner import architectures as arch
    from deepvm.planner.api import job_planner
    from deepvm.planner.candidates import hourly_cost
    from deepvm.planner.fleet.running import config_of
    from deepvm.records.inputs import load_inputs

    try:
        given = parse_words(words)
    except ValueError as exc:
        raise InputError(f"--cluster {exc}") from None
    known = [a.name for a in arch.REGISTRY]
    if given.architecture not in known:
        raise InputError(
            f"--cluster: architecture {given.architecture!r} is not one of {', '.join(known)}"
        )
    workload = plan.get("workload")
    if not isinstance(workload, str):  # a fleet row: the job's own recommendations say
        recs = store.read("recommendations", partitions=[date])
        mine = recs[recs["scenario"] == plan["scenario"]]
        workload = str(mine["workload"].iloc[0]) if not mine.empty else "resnet50"
    offers = load_inputs(store=store, snapshot_date=date).offers(workload)
    config = config_of(offers, given)
    if config is None:
        remote = f" or no {given.remote_type}" if given.remote_type else ""
        raise InputError(
            f"--cluster: the catalog of {date} has no {given.worker_type}{remote} in "
            f"{given.region} for {workload}"
        )
    if config.n_spot != given.n_spot:
        raise InputError(
            f"--cluster: {given.architecture} with {given.n_workers} workers has "
            f"{config.n_spot} spot nodes, not {given.n_spot}"
        )
    spec = JobSpec(workload=workload, max_nodes=max(given.n_workers, 1))
    planner = job_planner(spec, offers, hourly_cost(offers, config) * 1.01 + 1.0, None)[0]
    return planner.describe(Policy.DEEPVM, 1, config, "adopt", 0.0).as_dict()


def _writer(job: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in job)[:60] or "job"


def _float(value: object) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return out


def _cluster_of(row: dict[str, Any]) -> tuple[object, ...] | None:
    cluster = Cluster.from_mapping(row)
    return None if cluster is None else cluster.identity()


def moves_tonight(tonight: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per running job: tonight's one decision, as the fleet plan made it and wrote
    it in the night's ``fleet`` rows (deepvm.planner.fleet.types.RunningDecision);
    the change report shows these columns, nothing decides again."""
    if tonight.empty or "decision" not in tonight:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for row in tonight[tonight["decision"].notna()].to_dict("records"):
        out[str(row["scenario"])] = {
            k: (_optional_number(row[k]) if k in _NUMBERS else row[k]) for k in DECISION_COLUMNS
        }
    return out


_NUMBERS = {"gain", "migration_h", "migration_usd", "break_even_h"}


def _optional_number(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]
