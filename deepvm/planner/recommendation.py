"""What the planner answers for one job: a ranked cluster with its figures and
provenance (:class:`Recommendation`), and the next cheaper or faster cluster
beside it (:class:`Alternative`). Plain values at the bottom of the planner, so
the fleet and the store's readers use them without the policies' machinery."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from deepvm.model.cluster import CLUSTER_FIELDS, Cluster

__all__ = ["Alternative", "Recommendation"]


@dataclass(frozen=True)
class Alternative(Cluster):
    """Another cluster of the same policy: cheaper than the recommended one, or
    faster at a larger budget."""

    budget: float  # what it needs: its own cost (cheaper), the larger budget tried (faster)


@dataclass(frozen=True)
class Recommendation(Cluster):
    """One ranked cluster of one policy, with everything needed to act on it: the
    cluster (deepvm.model.cluster.Cluster's fields) and what the planner knows of it."""

    policy: str
    rank: int
    objective_value: float
    # Preemption (deepvm.planner._goodput): expected rate, Young/Daly interval (NaN:
    # never preempted), efficiency, goodput; makespan and total cost given the work.
    preemptions_per_h: float
    checkpoint_interval_s: float
    efficiency: float
    goodput_flops: float
    expected_makespan_h: float
    expected_total_cost: float
    overhead_model: str
    overhead_source: str
    flops_source: str
    status: str
    solver: str
    solve_s: float
    # Why it is this size, and the next cheaper / faster cluster (deepvm.planner._explain).
    binding: str | None = None
    cheaper: Alternative | None = None
    faster: Alternative | None = None
    # Where the figures behind it are from (deepvm.model.provenance; Offers.inputs_of):
    # flops_source/overhead_source say what kind, these from what and of what date.
    flops_basis: str = ""
    flops_date: str | None = None
    overhead_basis: str = ""
    overhead_date: str | None = None
    price_source: str | None = None
    price_date: str | None = None
    # Spot nodes only: the interruption bucket and its source, and the spot price
    # in context: the zone's saving, the region's average, whether it is an outlier.
    interruption_source: str | None = None
    interruption_bucket: str | None = None
    interruption_date: str | None = None
    spot_saving_pct: float = math.nan
    regional_saving_pct: float = math.nan
    spot_outlier: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The JSON contract: policy and rank, the cluster, then the rest."""
        row = asdict(self)
        order = ("policy", "rank", *CLUSTER_FIELDS)
        return {**{k: row[k] for k in order}, **{k: v for k, v in row.items() if k not in order}}
