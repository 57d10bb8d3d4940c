"""The cluster architectures (docs/ARCHITECTURE.md, "Planning") as a registry:
one object per architecture that knows its node roles, and from them its hourly
cost, quota use, node limits, checkpoint stall and restart. Candidates carry an
architecture's position in REGISTRY; every rule is looked up from the object, so
the order of the registry decides nothing but that code.

* single_anchor: one on-demand anchor keeps the checkpoints on its disk, the
  other n - 1 workers are spot.
* tiering: n spot workers; on-demand CPU nodes (the remote tier) hold the
  checkpoints in memory.
* on_demand: n on-demand workers, never preempted.
* spot_object_store: n spot workers, checkpoints in object storage; planned only
  under the objectives that price preemption (the DeepVM paper rejects it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

__all__ = [
    "BY_NAME",
    "OBJECT_STORE",
    "ON_DEMAND",
    "REGISTRY",
    "SINGLE_ANCHOR",
    "TIERING",
    "Architecture",
    "Checkpoints",
    "FloatArray",
    "architecture",
    "code",
]

FloatArray = npt.NDArray[np.float64]


class Checkpoints(StrEnum):
    """Where an architecture keeps its checkpoints (what a checkpoint and a
    restart cost, deepvm.planner._goodput)."""

    ANCHOR_DISK = "anchor_disk"
    REMOTE_MEMORY = "remote_memory"
    OBJECT_STORE = "object_store"
    NONE = "none"  # never preempted: nothing to restore


@dataclass(frozen=True)
class Architecture:
    name: str
    market: str  # the market of the workers beyond the anchors: "spot" or "on_demand"
    anchors: int  # on-demand workers kept whatever n
    checkpoints: Checkpoints
    remote_tier: bool = False  # on-demand CPU nodes hold the checkpoints
    risk_only: bool = False  # planned only where preemption risk is priced

    @property
    def min_workers(self) -> int:
        return self.anchors + 1

    @property
    def uses_spot(self) -> bool:
        return self.market == "spot"

    def n_spot(self, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
        nodes = np.asarray(n, dtype=float)
        return nodes - self.anchors if self.uses_spot else np.zeros_like(nodes)

    def n_on_demand(self, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
        nodes = np.asarray(n, dtype=float)
        return nodes - self.n_spot(nodes)

    def worker_cost(
        self, spot: FloatArray, on_demand: FloatArray, n: npt.ArrayLike, object_store: float
    ) -> FloatArray:
        """Hourly cost of the workers (and of object storage, where it keeps checkpoints)."""
        cost = self.n_on_demand(n) * on_demand
        if self.uses_spot:
            cost = cost + self.n_spot(n) * spot
        if self.checkpoints == Checkpoints.OBJECT_STORE:
            cost = cost + object_store
        return cost

    def max_workers(
        self,
        spot_nodes: FloatArray,
        on_demand_nodes: FloatArray,
        has_spot: np.ndarray,
        cap: int,
    ) -> npt.NDArray[np.int64]:
        """The most workers the quotas (as the most nodes each market's quotas allow,
        per type) and ``cap`` allow, per type; 0 where the architecture cannot run."""
        if not self.uses_spot:
            most = on_demand_nodes
        else:
            runs = has_spot & (on_demand_nodes >= self.anchors)
            most = np.where(runs, spot_nodes + self.anchors, 0)
        return np.minimum(most, cap).astype(np.int64)


SINGLE_ANCHOR = Architecture("single_anchor", "spot", 1, Checkpoints.ANCHOR_DISK)
TIERING = Architecture("tiering", "spot", 0, Checkpoints.REMOTE_MEMORY, remote_tier=True)
ON_DEMAND = Architecture("on_demand", "on_demand", 0, Checkpoints.NONE)
OBJECT_STORE = Architecture(
    "spot_object_store", "spot", 0, Checkpoints.OBJECT_STORE, risk_only=True
)

REGISTRY: tuple[Architecture, ...] = (SINGLE_ANCHOR, TIERING, ON_DEMAND, OBJECT_STORE)
BY_NAME = {a.name: a for a in REGISTRY}


def architecture(name: str) -> Architecture:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(BY_NAME)}") from None


def code(name: str) -> int:
    """An architecture's position in REGISTRY (what candidates carry)."""
    return REGISTRY.index(architecture(name))
