"""Why a recommended cluster is the size it is, and what the next cheaper and the
next faster cluster would be (docs/ARCHITECTURE.md, "For one job").

What binds a cluster is what stops it from growing by one worker node of its
type, in its architecture: the constraints that cluster with one node more
breaks (:meth:`deepvm.planner._policies.Planner.violations`), with its remote tier
grown by one node where that alone would carry it; or the node cap; or the
speedup model, where one node more adds no throughput.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from deepvm.planner.candidates import Config, cluster_of, hourly_cost, throughput
from deepvm.planner.recommendation import Alternative

if TYPE_CHECKING:
    from deepvm.planner._policies import Planner

__all__ = ["FASTER_BUDGET_STEPS", "binding", "cheaper", "faster"]

# Budgets tried, as multiples of the job's, for the next faster cluster.
FASTER_BUDGET_STEPS = (1.25, 1.5, 2.0, 4.0)


def binding(planner: Planner, config: Config, budget: float) -> str | None:
    """What stops ``config`` from growing by one worker node, in words ("; "
    between several); None when nothing does (a larger cluster would be no better)."""
    offers, n = planner.offers, config.n_workers
    reasons = []
    if n >= planner.max_nodes:
        reasons.append(f"the node cap (max_nodes = {planner.max_nodes} worker nodes)")
    grown = replace(config, n_workers=n + 1)
    broken = planner.violations(grown, budget)
    if config.remote is not None and any(v.relieved_by_remote_node for v in broken):
        wider = replace(grown, n_remote=config.n_remote + 1)
        broken_wider = planner.violations(wider, budget)
        if not any(v.relieved_by_remote_node for v in broken_wider):
            broken = broken_wider  # one remote node more would carry it: what that costs binds
            grown = wider
    reasons += [v.words(offers, grown, budget) for v in broken]
    if not reasons and throughput(offers, grown) <= throughput(offers, config) * (1 + 1e-9):
        reasons.append("scaling (one node more adds no throughput under the speedup model)")
    return "; ".join(dict.fromkeys(r for r in reasons if r)) or None


def cheaper(planner: Planner, policy: str, config: Config) -> Alternative | None:
    """The policy's best cluster that costs less than ``config``."""
    cost = hourly_cost(planner.offers, config)
    below = cost * (1 - 1e-6) - 1e-9
    if below <= 0:
        return None
    found = planner.optimise(policy, below, 1)
    if not found:
        return None
    return _alternative(planner, found[0][0], hourly_cost(planner.offers, found[0][0]))


def faster(planner: Planner, policy: str, config: Config, budget: float) -> Alternative | None:
    """The policy's best cluster at the first of :data:`FASTER_BUDGET_STEPS` times
    the budget that is faster than ``config``."""
    now = throughput(planner.offers, config)
    for step in FASTER_BUDGET_STEPS:
        found = planner.optimise(policy, budget * step, 1)
        if found and throughput(planner.offers, found[0][0]) > now * (1 + 1e-9):
            return _alternative(planner, found[0][0], budget * step)
    return None


def _alternative(planner: Planner, config: Config, budget: float) -> Alternative:
    offers = planner.offers
    return Alternative(**cluster_of(offers, config).as_dict(), budget=round(budget, 10))
