"""Ties in the fleet plan, broken one documented way (docs/ARCHITECTURE.md, "For
the fleet").

The fleet program's optimum is exact in value and then in cost, but clusters of
equal value and cost are often several: the same type at the same price in two
regions. Which one the solver returns depends on the order of its columns and its
search, so adopting another job, or listing the jobs in another order, could move
a job from eastus2 to westus3 at the same $/h and TFLOP/s. Tonight's plan must not
move a job for nothing, so among a job's equal clusters one is preferred, by
(cloud, region, zone, architecture, worker type, nodes, remote type, remote nodes):
jobs in name order each take the first of their equal clusters that the others'
quota use leaves room for, exchanging with a job later in name order whose equal
clusters can make room. Value and cost are unchanged (only equals are exchanged),
and so is every quota's feasibility (each exchange is checked).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from deepvm.planner.candidates import Config
from deepvm.planner.offers import Offers

__all__ = ["canonical_key", "prefer_canonical"]

SAME = 1e-9  # relative: two weights or costs this close are equal


def canonical_key(offers: Offers, config: Config) -> tuple[object, ...]:
    """A cluster's place in the tie-break order."""
    remote = "" if config.remote is None else offers.cpu_types[config.remote]
    cloud = offers.gpu_cloud[config.worker] if len(offers.gpu_cloud) else ""
    return (
        cloud,
        offers.gpu_region_of(config.worker),
        config.architecture,
        offers.gpu_types[config.worker],
        config.n_workers,
        remote,
        config.n_remote,
    )


def prefer_canonical(
    picked: npt.NDArray[np.bool_],
    owner: npt.NDArray[np.int64],
    weight: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
    usage: sp.csr_matrix,
    quota: npt.NDArray[np.float64],
    order: list[int],
    rank: npt.NDArray[np.int64],
) -> npt.NDArray[np.bool_]:
    """The plan ``picked`` with each job on its first equal cluster (the module
    docstring). ``owner``: each column's job; ``order``: the jobs by name; ``rank``:
    each column's place in the tie-break order among its job's columns."""
    picked = picked.copy()
    columns = usage.tocsc()
    used = np.asarray(usage @ picked.astype(float)).ravel()
    limit = quota + 1e-9 * np.maximum(1.0, np.abs(quota))
    chosen = {int(j): int(c) for c, j in zip(np.flatnonzero(picked), owner[picked], strict=True)}
    ties = {j: _equals(chosen[j], owner, weight, cost, rank) for j in chosen}
    position = {j: k for k, j in enumerate(order)}

    def use(column: int) -> npt.NDArray[np.float64]:
        return np.asarray(columns[:, column].todense()).ravel()

    for job in order:
        if job not in chosen:
            continue
        for better in ties[job]:
            if better == chosen[job]:
                break  # the first that fits is the one it has
            delta = use(better) - use(chosen[job])
            if np.all(used + delta <= limit):
                used += delta
                chosen[job] = better
                break
            swapped = _exchange(
                job, better, delta, used, limit, chosen, ties, position, use, usage, owner
            )
            if swapped is not None:
                other, theirs, change = swapped
                used += change
                chosen[job], chosen[other] = better, theirs
                break
    out = np.zeros_like(picked)
    out[list(chosen.values())] = True
    return out


def _equals(
    column: int,
    owner: npt.NDArray[np.int64],
    weight: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
    rank: npt.NDArray[np.int64],
) -> list[int]:
    """The job's columns equal to ``column`` in weight and cost, in tie-break order."""
    job = owner[column]  # a job's columns are contiguous
    mine = np.arange(
        np.searchsorted(owner, job, side="left"), np.searchsorted(owner, job, side="right")
    )
    near = (np.abs(weight[mine] - weight[column]) <= SAME * max(1.0, abs(weight[column]))) & (
        np.abs(cost[mine] - cost[column]) <= SAME * max(1.0, abs(cost[column]))
    )
    found = mine[near]
    return [int(c) for c in found[np.argsort(rank[found], kind="stable")]]


def _exchange(
    job: int,
    better: int,
    delta: npt.NDArray[np.float64],
    used: npt.NDArray[np.float64],
    limit: npt.NDArray[np.float64],
    chosen: dict[int, int],
    ties: dict[int, list[int]],
    position: dict[int, int],
    use: object,
    rows: sp.csr_matrix,
    owner: npt.NDArray[np.int64],
) -> tuple[int, int, npt.NDArray[np.float64]] | None:
    """A job later in name order that, moving to another of its equal clusters,
    makes room for ``job`` on ``better``: (that job, its new column, the change in
    use), or None. Only the jobs whose cluster uses a quota ``better`` would
    overrun can make room."""
    short = used + delta > limit
    users = {int(owner[c]) for c in rows[np.flatnonzero(short)].indices}
    for other in sorted(users, key=position.__getitem__):
        column = chosen.get(other)
        if column is None or position[other] <= position[job]:
            continue
        theirs = use(column)  # type: ignore[operator]
        for alternative in ties[other]:
            if alternative == column:
                continue
            change = delta + use(alternative) - theirs  # type: ignore[operator]
            if np.all(used + change <= limit):
                return other, alternative, change
    return None
