"""Expected goodput of a cluster under spot preemption, per architecture.

The paper guards against preemption by architecture; this prices the risk.
First-order model (``deepvm simulate preemption`` checks it by Monte Carlo):

* Hazard. A type whose spot instances are reclaimed with monthly fraction f has
  per-node hazard h = -ln(1 - f) / 730 per hour. Synchronous data-parallel
  training stops when any spot node goes, so a cluster's rate is
  lambda = n_spot * h (on-demand nodes are never reclaimed).
* Checkpoint stall delta and restart R (re-acquire a node, then reload the
  checkpoint of C GB), by where the checkpoint lives:

  - single_anchor: the on-demand anchor writes its own replica to its local
    volume, delta = C / disk rate; a replacement pulls it from the anchor over
    its link, R = R0 + 8 C / b_i.
  - tiering: the workers stream the checkpoint to the remote tier's memory. The
    N_sat constraint keeps the remote links below saturation, so the worker's
    link b_i is the bottleneck: delta = 8 C / b_i, R = R0 + 8 C / b_i.
  - spot_object_store: every node is spot; the checkpoint is uploaded to object
    storage at r = min(b_i / 8, object-store rate) GB/s, delta = C / r, and
    downloaded on restart, R = R0 + C / r. It pays for k C GB stored and its
    requests every hour (DeepVM rejects it on cost and risk; here the comparison
    is computed).
  - on_demand: never preempted; efficiency 1.

* Checkpoint interval tau: Young/Daly, sqrt(2 delta / lambda). A segment of tau
  seconds of work and its checkpoint takes (e^{lambda (tau + delta)} - 1)(1/lambda + R)
  seconds in expectation, so efficiency = tau / that, goodput = throughput x efficiency.
* With total work W (FLOPs): expected makespan = W / goodput, expected total
  cost = makespan x hourly cost.

The model is first order: it is accurate while lambda (tau + delta) is small
and restarts are short next to 1 / lambda (see deepvm.performance.preemption).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from deepvm.performance.preemption import DEFAULT_INTERRUPTION_RATE, efficiency
from deepvm.planner.architectures import REGISTRY, Checkpoints, code
from deepvm.planner.candidates import CheckpointNeeds, Config
from deepvm.planner.offers import FloatArray, Offers

__all__ = [
    "HOURS_PER_MONTH",
    "CheckpointCosts",
    "Risk",
    "config_risk",
    "hourly_hazards",
    "object_store_usd_per_hour",
    "risk",
]

HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class CheckpointCosts:
    """Where the time and money of checkpointing go; defaults are AWS us-east-1."""

    restart_s: float = 300.0  # re-acquire a spot node and rejoin, before reloading
    disk_gb_per_s: float = 0.125  # the anchor's EBS gp3 volume at its baseline
    object_store_gb_per_s: float = 0.5  # one multipart upload/download stream to S3
    object_store_usd_per_gb_month: float = 0.023  # S3 Standard
    object_store_usd_per_1000_requests: float = 0.005  # PUT (GET is cheaper)
    object_store_part_gb: float = 0.1  # multipart part size: one request per part
    # Request cost is priced at this many checkpoints per hour (an upper bound for
    # the Young/Daly intervals of realistic clusters, which are minutes or more).
    object_store_checkpoints_per_hour: float = 12.0

    def __post_init__(self) -> None:
        for name in ("restart_s", "disk_gb_per_s", "object_store_gb_per_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0) or (name != "restart_s" and value == 0):
                raise ValueError(f"{name} {value:g} must be a positive number")


def object_store_usd_per_hour(job: CheckpointNeeds, costs: CheckpointCosts) -> float:
    """Hourly cost of keeping k checkpoints of C GB in object storage and writing them."""
    stored = job.remote_memory_needed_gb * costs.object_store_usd_per_gb_month / HOURS_PER_MONTH
    parts = max(1, math.ceil(job.checkpoint_gb / costs.object_store_part_gb))
    requests = (
        costs.object_store_checkpoints_per_hour
        * parts
        * costs.object_store_usd_per_1000_requests
        / 1000
    )
    return stored + requests


@dataclass(frozen=True)
class Risk:
    """Per candidate (arrays) or per configuration (0-d arrays)."""

    rate_per_s: FloatArray  # cluster preemption rate
    stall_s: FloatArray  # checkpoint stall
    restart_s: FloatArray
    interval_s: FloatArray  # seconds of work between checkpoints (inf: none needed)
    efficiency: FloatArray  # expected useful work / wall time


def hourly_hazards(offers: Offers) -> FloatArray:
    """Per GPU type, the per-node hourly hazard (unknown rates: the worst bucket)."""
    f = np.where(
        np.isnan(offers.gpu_interruption), DEFAULT_INTERRUPTION_RATE, offers.gpu_interruption
    )
    return -np.log1p(-f) / HOURS_PER_MONTH


def risk(
    offers: Offers,
    architecture: np.ndarray,
    worker: np.ndarray,
    n: np.ndarray,
    job: CheckpointNeeds,
    costs: CheckpointCosts,
    work_s: FloatArray | None = None,
) -> Risk:
    """The preemption model (see the module doc) for arrays of worker sides."""
    n = n.astype(float)
    c = job.checkpoint_gb
    link_s = 8.0 * c / offers.gpu_gbps[worker]
    object_s = c / np.minimum(offers.gpu_gbps[worker] / 8.0, costs.object_store_gb_per_s)
    n_spot = np.zeros(len(n))
    stall = np.zeros(len(n))
    restart = np.zeros(len(n))
    for position, a in enumerate(REGISTRY):
        at = architecture == position
        if not at.any():
            continue
        n_spot[at] = a.n_spot(n[at])
        # A checkpoint stalls training while it is written; a restart reloads it
        # (over the worker's link unless it lives in object storage).
        if a.checkpoints == Checkpoints.ANCHOR_DISK:
            stall[at] = c / costs.disk_gb_per_s
        elif a.checkpoints == Checkpoints.REMOTE_MEMORY:
            stall[at] = link_s[at]
        elif a.checkpoints == Checkpoints.OBJECT_STORE:
            stall[at] = object_s[at]
        if a.uses_spot:
            reload = object_s if a.checkpoints == Checkpoints.OBJECT_STORE else link_s
            restart[at] = costs.restart_s + reload[at]
    rate = n_spot * hourly_hazards(offers)[worker] / 3600.0
    # With work given, the interval is capped by the run's own length.
    eff, tau = efficiency(rate, stall, restart, work_s)
    return Risk(rate, stall, restart, tau, eff)


def config_risk(
    offers: Offers,
    config: Config,
    job: CheckpointNeeds,
    costs: CheckpointCosts,
    work_s: float | None = None,
) -> Risk:
    arrays = (
        np.array([code(config.architecture)]),
        np.array([config.worker]),
        np.array([config.n_workers]),
    )
    work = None if work_s is None else np.array([work_s])
    return risk(offers, *arrays, job, costs, work)
