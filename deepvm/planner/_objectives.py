"""What the planner maximises (docs/ARCHITECTURE.md, "Objectives"), as one score per candidate.

* ``throughput``: F_i * s_i(n), FLOP/s of the cluster.
* ``paper``: the DeepVM paper's score FLOPP_i * s_i(n), FLOPP_i = 3600 F_i / p_i
  (FLOP per USD) with p_i the spot price (Single Anchor, Tiering) or, for
  On-Demand clusters, the on-demand price.
* ``goodput``: expected goodput, F_i * s_i(n) x efficiency under preemption
  (deepvm.planner._goodput).
* ``cost``: the least expected total cost of a given amount of work (optionally
  by a deadline); scored as minus that cost, computed by the Planner, which knows
  each candidate's cheapest remote side.
"""

from __future__ import annotations

import numpy as np

from deepvm.base.config import OBJECTIVES, Objective
from deepvm.base.errors import InputError
from deepvm.performance.flopp import SECONDS_PER_HOUR
from deepvm.planner.architectures import REGISTRY, architecture
from deepvm.planner.candidates import Candidates, Config, throughput
from deepvm.planner.offers import FloatArray, Offers

__all__ = ["RISK_OBJECTIVES", "candidate_scores", "check_objective", "config_objective"]

# Objectives that price preemption, and so may plan all-spot object-store clusters.
RISK_OBJECTIVES = (Objective.GOODPUT, Objective.COST)


def check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}")
    return objective


def candidate_scores(
    offers: Offers, candidates: Candidates, objective: str, *, linear_scaling: bool = False
) -> FloatArray:
    """The objective of every candidate; ``linear_scaling`` plans with s(n) = n."""
    i = candidates.worker
    s = candidates.n.astype(float) if linear_scaling else candidates.speedup
    flops = offers.gpu_flops[i] * s
    if objective in (
        Objective.THROUGHPUT,
        Objective.GOODPUT,
        Objective.COST,
    ):  # the Planner applies the risk
        return flops
    on_demand = [a.name for a in REGISTRY if a.market == "on_demand"]
    od = candidates.arch_mask(*on_demand)  # p_i: the workers' market price
    price = np.where(od, offers.gpu_ondemand[i], offers.gpu_spot[i])
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(SECONDS_PER_HOUR * flops / price, nan=0.0)


def config_objective(offers: Offers, config: Config, objective: str) -> float:
    """The objective of one configuration with the offers' (selected) speedup model."""
    flops = throughput(offers, config)
    if objective == Objective.THROUGHPUT:
        return flops
    i = config.worker
    market = architecture(config.architecture).market  # p_i: the workers' market price
    price = offers.gpu_ondemand[i] if market == "on_demand" else offers.gpu_spot[i]
    return float(SECONDS_PER_HOUR * flops / price)
