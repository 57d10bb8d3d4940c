"""Backtest: replay the store's price snapshots night by night for the registered
jobs, and compare how following the nightly plan would have gone (docs/
ARCHITECTURE.md, "Re-planning running jobs").

Each job is planned alone (deepvm's first cluster under its own budget and the
full quotas), every night on that night's prices, and runs 24 h a night under
four policies:

* ``once``: the first night's cluster, kept whatever the prices do;
* ``naive``: tonight's cluster whenever it differs, paying every move;
* ``aware``: tonight's cluster only where the move pays (deepvm.planner.fleet.migration,
  with ``min_gain``), or where the held cluster now costs more than the budget;
* ``hindsight``: tonight's cluster every night with moves that cost nothing:
  what following the plan would give if moving were free (the yardstick; not a
  bound on work for an objective that is not speed, such as ``paper``).

A night's cost is the held cluster's price that night (its types' spot and
on-demand prices in its region) for 24 h, plus the move's dollars; its work is
the cluster's useful FLOP/s (throughput x efficiency under preemptions) over the
24 h less the move's stall, less the work lost since the last checkpoint. A held
cluster whose type has no price tonight must move (every policy but once, which
then stops).

Synthetic price paths (``write_synthetic``) are labelled as such in every row's
source: seeded random walks of each spot price around the shipped snapshot, with
jumps, never above on-demand; for tests and the README's example, not for plans.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from deepvm.base.config import DEFAULT_MIN_GAIN, Objective
from deepvm.base.errors import DeepvmError, InputError
from deepvm.catalog.common import Catalog
from deepvm.catalog.sources import SnapshotSource
from deepvm.model.cluster import Cluster
from deepvm.planner import recommend
from deepvm.planner.fleet.migration import Side, decide, migration_cost, work_left
from deepvm.planner.fleet.types import RegisteredJob
from deepvm.planner.recommendation import Recommendation
from deepvm.store import Store

__all__ = [
    "DRIFT_SIGMA",
    "JUMP_CHANCE",
    "JUMP_RANGE",
    "NIGHT_S",
    "POLICIES",
    "REVERSION",
    "SYNTHETIC",
    "BacktestResult",
    "backtest",
    "write_synthetic",
]

POLICIES = ("once", "naive", "aware", "hindsight")
NIGHT_S = 24 * 3600.0
SYNTHETIC = "synthetic"
# A synthetic spot price's nightly log-step, its pull back to the snapshot's price
# (mean reversion: spot prices wander around a level), the chance of a jump and
# its range.
DRIFT_SIGMA = 0.08
REVERSION = 0.3
JUMP_CHANCE = 0.05
JUMP_RANGE = (0.5, 2.0)


@dataclass
class _Held:
    rec: Recommendation
    stopped: bool = False


@dataclass
class BacktestResult:
    nights: list[str]
    rows: pd.DataFrame  # job, policy, work_flops, cost_usd, moves, hours_lost
    series: pd.DataFrame  # night, policy, cumulative work_flops and cost_usd (all jobs)
    notes: list[str] = field(default_factory=list)


def write_synthetic(store: Store, days: int, *, seed: int, start: str) -> list[str]:
    """``days`` nights of synthetic prices from ``start`` into the store, every row's
    source ``synthetic:seed=S``: each spot price a seeded walk around the shipped
    snapshot's (in logs: a pull of REVERSION back to it, steps of DRIFT_SIGMA, a
    jump of x0.5-2 with chance JUMP_CHANCE a night), never above its on-demand
    price; on-demand unchanged."""
    if not 1 <= days <= 366:
        raise InputError(f"--synthetic {days} must be from 1 to 366 nights")
    base = SnapshotSource().fetch()
    rng = np.random.default_rng(seed)
    prices = base.prices.copy()
    spot = (prices["market"] == "spot").to_numpy()
    on_demand = prices.set_index(["region", "instance_type", "market"])["usd_per_hour"]
    cap = np.array(
        [
            on_demand.get((r, t, "on_demand"), math.inf)
            for r, t in zip(prices["region"], prices["instance_type"], strict=True)
        ]
    )
    level = np.log(prices["usd_per_hour"].to_numpy(dtype=float))
    home = level.copy()
    first = dt.date.fromisoformat(start)
    nights = []
    label = f"{SYNTHETIC}:seed={seed} (around the shipped snapshot; not real prices)"
    with store.transaction(command="synthetic prices") as tx:
        tx.write("instances", base.instances, partition=None, name=SYNTHETIC)
        for day in range(days):
            if day:
                step = REVERSION * (home - level) + rng.normal(0.0, DRIFT_SIGMA, len(level))
                jump = rng.random(len(level)) < JUMP_CHANCE
                step += np.where(jump, np.log(rng.uniform(*JUMP_RANGE, len(level))), 0.0)
                level = np.where(spot, level + step, level)
            night = prices.copy()
            night["usd_per_hour"] = np.where(spot, np.minimum(np.exp(level), cap), np.exp(level))
            night["source"] = label
            night["price_date"] = (first + dt.timedelta(days=day)).isoformat()
            date = (first + dt.timedelta(days=day)).isoformat()
            tx.write("prices", night, partition=date, name=SYNTHETIC)
            nights.append(date)
    return nights


def backtest(
    store: Store,
    jobs: Sequence[RegisteredJob],
    *,
    date_from: str | None = None,
    date_to: str | None = None,
    min_gain: float = DEFAULT_MIN_GAIN,
) -> BacktestResult:
    """Replay the store's nights in [date_from, date_to] for ``jobs`` (the module
    docstring); at least two nights are needed."""
    from deepvm.records.inputs import load_inputs

    nights = [
        d
        for d in store.partitions("prices")
        if (date_from is None or d >= date_from) and (date_to is None or d <= date_to)
    ]
    if len(nights) < 2:
        raise InputError(
            f"the store has {len(nights)} price night(s) in that range; a backtest needs "
            "two or more (refresh prices nightly, or fill a test store with --synthetic DAYS)"
        )
    totals = {p: {"work": 0.0, "cost": 0.0} for p in POLICIES}
    per_job: dict[tuple[str, str], dict[str, float]] = {}
    held: dict[tuple[str, str], _Held] = {}
    series = []
    notes: list[str] = []
    for night in nights:
        inputs = load_inputs(store=store, snapshot_date=night)
        for job in jobs:
            try:
                found = recommend(job.budget, job.spec, inputs=inputs, explain=False)
            except DeepvmError as exc:  # a night with no plan for it: said, skipped
                notes.append(f"{night} {job.name}: {exc}")
                continue
            best, checkpoint_gb = found.recommendations[0], found.checkpoint_gb
            for policy in POLICIES:
                key = (job.name, policy)
                acc = per_job.setdefault(key, {"work": 0.0, "cost": 0.0, "moves": 0, "lost_h": 0})
                work, cost = _night(
                    held, key, policy, best, inputs.catalog, job, checkpoint_gb, min_gain, acc
                )
                if job.spec.work_flops is not None and work > 0:  # it ends within the night
                    part = min(1.0, max(job.spec.work_flops - acc["work"], 0.0) / work)
                    work, cost = work * part, cost * part
                acc["work"] += work
                acc["cost"] += cost
                totals[policy]["work"] += work
                totals[policy]["cost"] += cost
        for policy in POLICIES:
            series.append(
                {
                    "night": night,
                    "policy": policy,
                    "work_flops": totals[policy]["work"],
                    "cost_usd": totals[policy]["cost"],
                }
            )
    rows = pd.DataFrame(
        [
            {
                "job": job,
                "policy": policy,
                "work_flops": acc["work"],
                "cost_usd": acc["cost"],
                "work_per_usd": acc["work"] / acc["cost"] if acc["cost"] > 0 else math.nan,
                "moves": int(acc["moves"]),
                "hours_lost": acc["lost_h"],
            }
            for (job, policy), acc in per_job.items()
        ]
    )
    return BacktestResult(nights, rows, pd.DataFrame(series), notes)


def _night(
    held: dict[tuple[str, str], _Held],
    key: tuple[str, str],
    policy: str,
    best: Recommendation,
    catalog: Catalog,
    job: RegisteredJob,
    checkpoint_gb: float,
    min_gain: float,
    acc: dict[str, float],
) -> tuple[float, float]:
    """One night of one policy for one job: its work and cost."""
    if job.spec.work_flops is not None and acc["work"] >= job.spec.work_flops:
        return 0.0, 0.0  # trained: it stops
    now = held.get(key)
    if now is None:
        held[key] = _Held(best)
        return _run(best, best.hourly_cost)
    if now.stopped:
        return 0.0, 0.0
    price = _price_tonight(now.rec, catalog)
    same = now.rec.identity() == best.identity()
    if policy == "once" or same:
        if price is None:  # its type has no price tonight
            if policy == "once":
                now.stopped = True
                return 0.0, 0.0
        else:
            return _run(now.rec, price)
    if policy == "hindsight":  # moves that cost nothing
        held[key] = _Held(best)
        acc["moves"] += 1
        return _run(best, best.hourly_cost)
    old = _side(now.rec, price if price is not None else now.rec.hourly_cost, catalog)
    new = _side(best, best.hourly_cost, catalog)
    # Past its budget at tonight's prices, a running cluster moves (as in the fleet).
    if policy == "aware" and price is not None and price <= job.budget * (1 + 1e-9):
        remaining = work_left(job.spec.work_flops, acc["work"], old)
        d = decide(
            Objective(job.spec.objective), old, new, remaining,
            checkpoint_gb=checkpoint_gb, restart_s=job.spec.restart_s, min_gain=min_gain,
        )  # fmt: skip
        if not d.move:
            return _run(now.rec, price)
    move = migration_cost(old, new, checkpoint_gb=checkpoint_gb, restart_s=job.spec.restart_s)
    held[key] = _Held(best)
    acc["moves"] += 1
    acc["lost_h"] += move.hours
    stall = move.transfer_s + move.restart_s
    work = max(new.useful_flops * (NIGHT_S - stall) - move.lost_flops, 0.0)
    return work, best.hourly_cost * 24 + move.usd


def _run(rec: Recommendation, price: float) -> tuple[float, float]:
    return rec.throughput_flops * _efficiency(rec) * NIGHT_S, price * 24


def _efficiency(rec: Recommendation) -> float:
    return rec.efficiency if rec.efficiency > 0 else 1.0


def _side(rec: Recommendation, price: float, catalog: Catalog) -> Side:
    gbps = catalog.table["network_gbps"][
        (catalog.table["region"] == rec.region)
        & (catalog.table["instance_type"] == rec.worker_type)
    ]
    return Side(
        rec.throughput_flops,
        price,
        float(gbps[0]) if len(gbps) else 10.0,
        _efficiency(rec),
        rec.checkpoint_interval_s,
    )


def _price_tonight(cluster: Cluster, catalog: Catalog) -> float | None:
    """The cluster's hourly price at tonight's prices (None: a type is not sold)."""
    t = catalog.table

    def row(itype: str) -> int | None:
        found = np.flatnonzero((t["region"] == cluster.region) & (t["instance_type"] == itype))
        return int(found[0]) if found.size else None

    worker = row(cluster.worker_type)
    if worker is None:
        return None
    spot, od = float(t["spot_price"][worker]), float(t["ondemand_price"][worker])
    if cluster.n_spot and math.isnan(spot):  # no spot price tonight
        return None
    total = cluster.n_spot * spot + cluster.n_on_demand * od
    if cluster.remote_type and cluster.n_remote:
        remote = row(cluster.remote_type)
        if remote is None:
            return None
        total += cluster.n_remote * float(t["ondemand_price"][remote])
    return total
