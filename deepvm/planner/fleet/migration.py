"""Moving a running job to another cluster, and whether it pays (docs/ARCHITECTURE.md,
"Re-planning running jobs").

A move stops the job on its current cluster and starts it on the new one; the two
do not run at the same time (no overlap is modelled: the old cluster stops when
its checkpoint is saved). It costs, in wall time:

* saving the checkpoint and restoring it: the checkpoint (GB) over the slower
  side's network bandwidth, once each way (save from the old cluster's node,
  restore onto the new one's);
* the restart (``restart_s``: scheduling, container start, warm-up);
* the progress since the last checkpoint, lost: on average half the old
  cluster's checkpoint interval of its work, done again on the new cluster;

and in dollars, the old cluster's rate while it saves and the new one's while it
restores and restarts, plus the new cluster's cost of redoing the lost work.

The gain of a move is over the work that is left, net of that cost, for the
job's objective: for ``throughput`` and ``goodput`` the fraction of the remaining
wall time saved (goodput counts each cluster's efficiency under preemptions);
for ``cost`` and ``paper`` (FLOPs per dollar times speedup: the work bought per
dollar) the fraction of the remaining cost saved. A job moves only when the gain
exceeds ``min_gain`` (DEFAULT_MIN_GAIN), so a plan does not flip on price noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deepvm.base.config import DEFAULT_MIN_GAIN, Objective

__all__ = [
    "GB_TO_GBIT",
    "HORIZON_H",
    "MigrationCost",
    "MoveDecision",
    "Side",
    "decide",
    "migration_cost",
    "work_left",
]

GB_TO_GBIT = 8.0
# Where a job gives no total work: the work a night's plan is for, the next 24 h on
# its running cluster (the nightly plans again tomorrow).
HORIZON_H = 24.0


@dataclass(frozen=True)
class Side:
    """One cluster as a move sees it: what it delivers and costs, its slowest node
    link, and (for the old side) its checkpoint interval."""

    throughput_flops: float  # FLOP/s of the workers together
    hourly_cost: float  # USD/h, the whole cluster
    network_gbps: float  # one node's bandwidth: the checkpoint goes through it
    efficiency: float = 1.0  # useful work / wall time under preemptions (goodput)
    checkpoint_interval_s: float = math.nan  # NaN: never checkpoints (no spot nodes)

    @property
    def useful_flops(self) -> float:
        return self.throughput_flops * self.efficiency


@dataclass(frozen=True)
class MigrationCost:
    """What one move costs: its terms in seconds, and in all hours and dollars."""

    transfer_s: float  # save + restore of the checkpoint
    restart_s: float
    lost_flops: float  # the work since the last checkpoint, done again
    lost_s: float  # that work's time on the new cluster
    usd: float

    @property
    def hours(self) -> float:
        return (self.transfer_s + self.restart_s + self.lost_s) / 3600.0


@dataclass(frozen=True)
class MoveDecision:
    """Stay or move, with the figures behind it."""

    move: bool
    gain: float  # fraction of the remaining time (or cost) saved, net of the move
    cost: MigrationCost
    break_even_h: float  # hours on the new cluster before the move has paid (inf: never)
    reason: str

    @property
    def verdict(self) -> str:
        return "move" if self.move else "stay"


def work_left(total_flops: float | None, done_flops: float | None, old: Side) -> float:
    """The work a move is weighed over: the job's total less what is done, or, with
    no total, HORIZON_H hours on its running cluster."""
    if total_flops is None:
        return HORIZON_H * 3600 * old.useful_flops
    return max(total_flops - (done_flops or 0.0), 0.0)


def migration_cost(
    old: Side, new: Side, *, checkpoint_gb: float, restart_s: float
) -> MigrationCost:
    """The cost of moving from ``old`` to ``new`` (see the module docstring)."""
    slower = min(old.network_gbps, new.network_gbps)
    one_way = checkpoint_gb * GB_TO_GBIT / slower if checkpoint_gb > 0 else 0.0
    interval = old.checkpoint_interval_s
    lost = 0.5 * interval * old.useful_flops if math.isfinite(interval) else 0.0
    lost_s = lost / new.useful_flops
    usd = (
        old.hourly_cost * one_way / 3600.0
        + new.hourly_cost * (one_way + restart_s + lost_s) / 3600.0
    )
    return MigrationCost(2 * one_way, restart_s, lost, lost_s, usd)


def decide(
    objective: Objective | str,
    old: Side,
    new: Side,
    remaining_flops: float,
    *,
    checkpoint_gb: float,
    restart_s: float,
    min_gain: float = DEFAULT_MIN_GAIN,
) -> MoveDecision:
    """Whether a job with ``remaining_flops`` of work left should move from ``old``
    to ``new`` under ``objective`` (see the module docstring)."""
    cost = migration_cost(old, new, checkpoint_gb=checkpoint_gb, restart_s=restart_s)
    if not remaining_flops > 0:
        return MoveDecision(False, 0.0, cost, math.inf, "no work left: stay")
    stall_s = cost.transfer_s + cost.restart_s
    objective = Objective(objective)
    if objective in (Objective.THROUGHPUT, Objective.GOODPUT):
        rate_old = old.useful_flops if objective == Objective.GOODPUT else old.throughput_flops
        rate_new = new.useful_flops if objective == Objective.GOODPUT else new.throughput_flops
        stay = remaining_flops / rate_old
        go = stall_s + (remaining_flops + cost.lost_flops) / rate_new
        gain = (stay - go) / stay
        # Wall hours after which the new cluster has done as much as the old would:
        # rate_new (t - stall) - lost = rate_old t.
        ahead = rate_new - rate_old
        behind = rate_new * stall_s + cost.lost_flops
        break_even = behind / ahead / 3600 if ahead > 0 else math.inf
        what = "of the remaining time"
    else:  # cost, paper: the work bought per dollar
        per_flop_old = old.hourly_cost / 3600.0 / old.useful_flops
        per_flop_new = new.hourly_cost / 3600.0 / new.useful_flops
        stay = remaining_flops * per_flop_old
        go = cost.usd + remaining_flops * per_flop_new
        gain = (stay - go) / stay
        saving = per_flop_old - per_flop_new
        # Work on the new cluster before the savings repay the move, in its hours.
        break_even = cost.usd / saving / new.useful_flops / 3600 if saving > 0 else math.inf
        what = "of the remaining cost"
    move = gain > min_gain
    if move:
        reason = f"moving saves {gain:.1%} {what} net of the move (more than {min_gain:.0%})"
    elif gain >= 0:
        reason = f"moving saves {gain:.1%} {what} net of the move (at most {min_gain:.0%}): stay"
    else:
        reason = f"moving would add {-gain:.1%} {what}, the move included: stay"
    return MoveDecision(move, gain, cost, break_even, reason)
