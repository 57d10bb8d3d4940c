"""The fleet program's arrays (docs/ARCHITECTURE.md, "For the fleet"), as each of
its steps reads them: the rounding, the relaxation, the neighbourhoods, the face
and the integer programs. Columns are candidate clusters of a class of identical
jobs (``count`` jobs each); rows are the shared limits' keys (the quotas in
their units, the team budget in USD/h), each with its capacity."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepvm.planner.offers import FloatArray

__all__ = ["TOLERANCE", "ProgramArrays", "best_per_class"]

TOLERANCE = 1e-9  # relative: a limit this close to full still holds


def best_per_class(score: FloatArray, owner: np.ndarray, among: np.ndarray, k: int) -> np.ndarray:
    """Of the columns ``among``, each class's ``k`` of highest ``score`` (ties: the
    lower column), ascending."""
    order = among[np.lexsort((-score[among], owner[among]))]
    groups = owner[order]
    rank = np.arange(len(order)) - np.searchsorted(groups, groups, side="left")
    return np.sort(order[rank < k])


@dataclass(frozen=True)
class ProgramArrays:
    weight: FloatArray  # per column: what a job on it is worth (priority x value)
    owner: np.ndarray  # per column: its class
    count: FloatArray  # per class: its jobs
    resources: Any  # csc: the shared limits' keys x columns
    capacity: FloatArray  # per key (each finite)

    @functools.cached_property
    def by_key(self) -> Any:
        """``resources`` by rows (csr)."""
        return self.resources.tocsr()

    @functools.cached_property
    def key_groups(self) -> list[np.ndarray]:
        """The keys in groups linked by columns that take from several of them (a
        cloud region's quotas: a cluster takes its GPUs, its vCPUs and, on Azure,
        its family's), each group ascending. A key every column uses (a team
        budget's row) is in none: it would link them all."""
        from scipy.sparse.csgraph import connected_components

        linkable = [k for k in range(len(self.capacity)) if not self.every_column_uses(k)]
        keys = np.array(linkable, dtype=np.int64)
        pattern = self.by_key[keys].astype(bool).astype(np.int64)
        groups, label = connected_components(pattern @ pattern.T, directed=False)
        return [keys[label == group] for group in range(groups)]

    def every_column_uses(self, key: int) -> bool:
        """Whether every column takes something of ``key`` (a team budget's row:
        every cluster costs something)."""
        return bool(self.by_key[key].nnz == len(self.weight))

    def value(self, plan: np.ndarray) -> float:
        """What ``plan`` (columns, one per job that takes it) is worth."""
        return float(self.weight[plan].sum())

    def better(self, plan: np.ndarray, other: np.ndarray) -> np.ndarray:
        """The plan worth more (``plan`` on a tie)."""
        return other if self.value(other) > self.value(plan) else plan

    def used_by(self, plan: np.ndarray) -> FloatArray:
        """What ``plan`` takes of each key."""
        return np.asarray(self.resources[:, plan].sum(axis=1)).ravel()

    def holds(self, plan: np.ndarray) -> bool:
        """Whether ``plan`` keeps every class within its count and every key within
        its capacity, to TOLERANCE."""
        per_class = np.bincount(self.owner[plan], minlength=len(self.count))
        room = self.capacity + TOLERANCE * np.maximum(np.abs(self.capacity), 1.0)
        within = (per_class <= self.count + TOLERANCE).all()
        return bool(within and (self.used_by(plan) <= room).all())
