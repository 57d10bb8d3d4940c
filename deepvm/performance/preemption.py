"""Spot preemption: hazards, the Young/Daly checkpoint interval, the expected
makespan of a training run, and a Monte Carlo simulator that checks it.

Model (first order, exponential preemptions):

* A spot node reclaimed with monthly probability f has hourly hazard
  h = -ln(1 - f) / 730 (730 hours a month). Synchronous data-parallel training
  stops when any spot node goes, so a cluster of n spot nodes has rate
  lambda = n h (on-demand nodes are never reclaimed).
* Work is done in segments of tau seconds of useful work, each followed by a
  checkpoint stall of delta seconds. A preemption during a segment or its
  checkpoint loses that segment's progress and costs a restart of R seconds
  (re-acquire a node, reload the checkpoint). The analytic model ignores
  preemptions during a restart. The expected time of one segment is then
  E = (e^{lambda (tau + delta)} - 1) (1 / lambda + R), and the makespan of W
  seconds of work is (W / tau) E.
* Young/Daly: tau* = sqrt(2 delta / lambda) minimises the makespan to first
  order.

The simulator also lets a preemption strike during a restart, which then starts
over (expected restart (e^{lambda R} - 1) / lambda instead of R). Where is the
analytic model not valid? Where lambda R is not small (long restarts on large
or often-reclaimed clusters: it is ~0.7 % short at lambda R = 0.125, ~2 % at 0.2,
~19 % at 0.8), and where lambda (tau + delta) is not small (> ~0.3), where Young/Daly's
interval is no longer near-optimal. ``python benchmarks/preemption.py`` prints
the comparison over a grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from deepvm.catalog.advisor_buckets import INTERRUPTION_BUCKETS

__all__ = [
    "DEFAULT_INTERRUPTION_RATE",
    "HOURS_PER_MONTH",
    "Analytic",
    "FloatArray",
    "Simulated",
    "cluster_rate_per_s",
    "efficiency",
    "expected_makespan",
    "hourly_hazard",
    "simulate",
    "young_daly_interval_s",
]

FloatArray = npt.NDArray[np.float64]

HOURS_PER_MONTH = 730.0

# A type with a spot market but no published rate is planned as the worst bucket.
DEFAULT_INTERRUPTION_RATE = INTERRUPTION_BUCKETS[">20%"]


def hourly_hazard(monthly_fraction: float) -> float:
    """Per-node hourly preemption hazard from the fraction reclaimed per month."""
    if not 0 <= monthly_fraction < 1:
        raise ValueError("the monthly interruption fraction must be in [0, 1)")
    return -math.log1p(-monthly_fraction) / HOURS_PER_MONTH


def cluster_rate_per_s(n_spot: int, monthly_fraction: float) -> float:
    """Preemptions per second of a cluster with ``n_spot`` spot nodes."""
    return n_spot * hourly_hazard(monthly_fraction) / 3600.0


def young_daly_interval_s(stall_s: float, rate_per_s: float) -> float:
    """Young/Daly's first-order optimal seconds of work between checkpoints."""
    if rate_per_s <= 0:
        return math.inf
    return math.sqrt(2.0 * stall_s / rate_per_s)


def efficiency(
    rate_per_s: npt.ArrayLike,
    stall_s: npt.ArrayLike,
    restart_s: npt.ArrayLike,
    work_s: npt.ArrayLike | None = None,
    interval_s: float | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Expected efficiency (useful work / wall time) and the checkpoint interval,
    vectorised: the interval (default Young/Daly's, at most the whole work where
    given) and the segment time of the module doc. Never preempted (rate 0): 1."""
    rate = np.asarray(rate_per_s, dtype=float)
    stall = np.broadcast_to(np.asarray(stall_s, dtype=float), rate.shape)
    restart = np.broadcast_to(np.asarray(restart_s, dtype=float), rate.shape)
    safe = np.where(rate > 0, rate, 1.0)
    tau = np.where(rate > 0, np.sqrt(2.0 * stall / safe), np.inf)
    if interval_s is not None:
        tau = np.full(rate.shape, float(interval_s))
    if work_s is not None:
        tau = np.minimum(tau, np.asarray(work_s, dtype=float))
    with np.errstate(over="ignore", invalid="ignore"):
        segment = np.expm1(safe * (tau + stall)) * (1.0 / safe + restart)
        # No stall (an empty checkpoint): the interval tends to 0 and tau / segment
        # to 1 / (1 + rate x restart), its limit.
        limit = 1.0 / (1.0 + safe * restart)
        eff = np.where(rate > 0, np.where(tau > 0, tau / segment, limit), 1.0)
    return np.nan_to_num(eff, nan=0.0), tau


@dataclass(frozen=True)
class Analytic:
    makespan_h: float
    checkpoint_interval_s: float
    efficiency: float  # useful work / makespan


def expected_makespan(
    work_h: float, rate_per_s: float, interval_s: float | None, stall_s: float, restart_s: float
) -> Analytic:
    """Expected makespan of ``work_h`` hours of failure-free compute (see module doc)."""
    work_s = work_h * 3600.0
    if rate_per_s <= 0:  # no preemptions: only the checkpoints asked for cost time
        tau = math.inf if interval_s is None else min(interval_s, work_s)
        total = work_s + math.ceil(work_s / tau) * stall_s if math.isfinite(tau) else work_s
        return Analytic(total / 3600.0, tau, work_s / total)
    eff, taus = efficiency(rate_per_s, stall_s, restart_s, work_s, interval_s)
    return Analytic(work_s / float(eff) / 3600.0, float(taus), float(eff))


@dataclass(frozen=True)
class Simulated:
    makespan_h_mean: float
    makespan_h_std: float
    cost_mean: float
    runs: int


def simulate(
    work_h: float,
    rate_per_s: float,
    interval_s: float,
    stall_s: float,
    restart_s: float,
    *,
    hourly_cost: float = 0.0,
    runs: int = 2000,
    seed: int = 0,
    preemptible_restarts: bool = True,
) -> Simulated:
    """Discrete-event simulation of ``runs`` seeded training runs, vectorised over
    runs and segments: per segment, the number of preemptions before it completes
    is geometric, each costs the time it struck at (an exponential truncated to the
    segment) plus a restart. With ``preemptible_restarts`` a preemption may also
    strike a restart, which then starts over."""
    if not interval_s > 0:
        raise ValueError(f"the checkpoint interval must be > 0 s, not {interval_s!r}")
    rng = np.random.default_rng(seed)
    work_s = work_h * 3600.0
    n_full = int(work_s // interval_s)
    tail = work_s - n_full * interval_s
    # The segments: n_full of interval + stall, and the tail's (counts, not a list:
    # a long run with a short interval has billions).
    segments = [(interval_s + stall_s, n_full)] + ([(tail + stall_s, 1)] if tail > 1e-9 else [])
    total = np.full(runs, float(sum(length * count for length, count in segments)))
    preemptions = np.zeros(runs, dtype=np.int64)
    if rate_per_s > 0:
        for length, count in segments:
            if count == 0:
                continue
            p_ok = math.exp(-rate_per_s * length)
            failures = rng.negative_binomial(count, p_ok, size=runs)  # over `count` segments
            k = int(failures.sum())
            if k == 0:
                continue
            # Truncated exponential on [0, length) by inversion.
            u = rng.random(k)
            lost = -np.log1p(-u * -math.expm1(-rate_per_s * length)) / rate_per_s
            owner = np.repeat(np.arange(runs), failures)
            total += np.bincount(owner, weights=lost + restart_s, minlength=runs)
            preemptions += failures
    if rate_per_s > 0 and restart_s > 0 and preemptible_restarts and preemptions.any():
        # Each restart is retried until one runs R seconds without a preemption.
        p_ok = math.exp(-rate_per_s * restart_s)
        hit = preemptions > 0
        retries = np.zeros(runs, dtype=np.int64)
        retries[hit] = rng.negative_binomial(preemptions[hit], p_ok)
        k = int(retries.sum())
        if k:
            u = rng.random(k)
            lost = -np.log1p(-u * -math.expm1(-rate_per_s * restart_s)) / rate_per_s
            owner = np.repeat(np.arange(runs), retries)
            total += np.bincount(owner, weights=lost, minlength=runs)
    hours = total / 3600.0
    return Simulated(
        float(hours.mean()),
        float(hours.std(ddof=1)) if runs > 1 else 0.0,
        float(hours.mean() * hourly_cost),
        runs,
    )
