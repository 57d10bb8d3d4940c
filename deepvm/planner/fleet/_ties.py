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
and every shared limit (quotas, team budget) still holds (each exchange is checked).
"""

from __future__ import annotations

from collections.abc import Callable

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
    chosen: dict[int, int],  # job -> its column
    owner: npt.NDArray[np.int64],  # per column: its class, ascending (searched by class)
    weight: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
    usage: sp.spmatrix,  # limits' keys x columns
    capacity: npt.NDArray[np.float64],  # per row of usage: the quotas, the team budget
    order: list[int],
    key_of: Callable[[int], tuple[object, ...]],
) -> dict[int, int]:
    """Each job's column (``chosen``) moved to its first equal one (the module
    docstring). Columns are the program's: a class's clusters, shared by its alike
    jobs (5,000 jobs of the shipped mix: 3.5 million clusters by job, laid out one
    by one until 2026-12-07, when the plan's peak memory fell 589 -> 386 MiB);
    ``owner``: each column's class; ``order``: the jobs by name; ``key_of``: a
    column's place in the tie-break order (:func:`canonical_key`), asked only of
    columns that tie."""
    chosen = dict(chosen)
    columns = sp.csc_matrix(usage)
    by_column = abs(columns).T.tocsr()  # a row per column: which keys it uses
    taken = np.bincount(
        np.fromiter(chosen.values(), dtype=np.int64, count=len(chosen)),
        minlength=columns.shape[1],
    ).astype(float)
    used = np.asarray(columns @ taken).ravel()
    limit = capacity + 1e-9 * np.maximum(1.0, np.abs(capacity))
    ties = _ties(chosen, owner, weight, cost, key_of)
    position = {j: k for k, j in enumerate(order)}

    def use(column: int) -> npt.NDArray[np.float64]:  # its column of usage, dense
        out = np.zeros(columns.shape[0])
        lo, hi = columns.indptr[column], columns.indptr[column + 1]
        out[columns.indices[lo:hi]] = columns.data[lo:hi]
        return out

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
            swapped = _exchange(job, better, delta, used, limit, chosen, ties, position, use,
                                by_column)  # fmt: skip
            if swapped is not None:
                other, theirs, change = swapped
                used += change
                chosen[job], chosen[other] = better, theirs
                break
    return chosen


def _ties(
    chosen: dict[int, int],
    owner: npt.NDArray[np.int64],
    weight: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
    key_of: Callable[[int], tuple[object, ...]],
) -> dict[int, list[int]]:
    """Per job, the columns of its class equal to its pick in weight and cost, in
    tie-break order: once per distinct pick (alike jobs share them), over its
    class's columns, the order asked only where there is a tie."""
    by_pick: dict[int, list[int]] = {}
    for pick in set(chosen.values()):
        lo = int(np.searchsorted(owner, owner[pick], side="left"))
        hi = int(np.searchsorted(owner, owner[pick], side="right"))
        w, c = weight[lo:hi], cost[lo:hi]
        near = np.abs(w - weight[pick]) <= SAME * max(1.0, abs(float(weight[pick])))
        near &= np.abs(c - cost[pick]) <= SAME * max(1.0, abs(float(cost[pick])))
        group = lo + np.flatnonzero(near)
        by_pick[pick] = sorted(map(int, group), key=key_of) if len(group) > 1 else [pick]
    return {job: by_pick[pick] for job, pick in chosen.items()}


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
    by_column: sp.csr_matrix,
) -> tuple[int, int, npt.NDArray[np.float64]] | None:
    """A job later in name order that, moving to another of its equal clusters,
    makes room for ``job`` on ``better``: (that job, its new column, the change in
    use), or None. Only the jobs whose cluster uses a quota ``better`` would
    overrun can make room (asked of the jobs' picks, not of every column)."""
    short = (used + delta > limit).astype(float)
    jobs = np.fromiter(chosen.keys(), dtype=np.int64, count=len(chosen))
    picks = np.fromiter(chosen.values(), dtype=np.int64, count=len(chosen))
    # Each pick's use of the short keys, from its own column: the short keys' rows
    # can hold every column of the program (distinct jobs, 1,000: np.isin against
    # them was 5 s of the plan).
    on_short = by_column[picks] @ short > 0
    for other in sorted(map(int, jobs[on_short]), key=position.__getitem__):
        column = chosen[other]
        if position[other] <= position[job]:
            continue
        theirs = use(column)  # type: ignore[operator]
        for alternative in ties[other]:
            if alternative == column:
                continue
            change = delta + use(alternative) - theirs  # type: ignore[operator]
            if np.all(used + change <= limit):
                return other, alternative, change
    return None
