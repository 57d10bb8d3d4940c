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
    picked: npt.NDArray[np.bool_],
    owner: npt.NDArray[np.int64],
    weight: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
    usage: sp.spmatrix,  # limits' keys x the program's columns (one per class's cluster)
    usage_column: npt.NDArray[np.int64],  # per column (a job's cluster): its column of usage
    capacity: npt.NDArray[np.float64],  # per row of usage: the quotas, the team budget
    order: list[int],
    key_of: Callable[[int], tuple[object, ...]],
) -> npt.NDArray[np.bool_]:
    """The plan ``picked`` with each job on its first equal cluster (the module
    docstring). ``owner``: each column's job, a job's columns contiguous; alike jobs
    share their clusters' columns of ``usage`` (5,000 jobs: 3.5 million job columns,
    not to be laid out one by one); ``order``: the jobs by name; ``key_of``: a
    column's place in the tie-break order (:func:`canonical_key`), asked only of
    columns that tie."""
    picked = picked.copy()
    columns = sp.csc_matrix(usage)
    by_column = abs(columns).T.tocsr()  # a row per column of usage: which keys it uses
    taken = np.bincount(usage_column[picked], minlength=columns.shape[1]).astype(float)
    used = np.asarray(columns @ taken).ravel()
    limit = capacity + 1e-9 * np.maximum(1.0, np.abs(capacity))
    chosen = {int(j): int(c) for c, j in zip(np.flatnonzero(picked), owner[picked], strict=True)}
    ties = _ties(chosen, owner, weight, cost, key_of)
    position = {j: k for k, j in enumerate(order)}

    def use(job_column: int) -> npt.NDArray[np.float64]:  # its column of usage, dense
        out = np.zeros(columns.shape[0])
        column = usage_column[job_column]
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
            swapped = _exchange(
                job, better, delta, used, limit, chosen, ties, position, use, by_column,
                usage_column,
            )  # fmt: skip
            if swapped is not None:
                other, theirs, change = swapped
                used += change
                chosen[job], chosen[other] = better, theirs
                break
    out = np.zeros_like(picked)
    out[list(chosen.values())] = True
    return out


def _ties(
    chosen: dict[int, int],
    owner: npt.NDArray[np.int64],
    weight: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
    key_of: Callable[[int], tuple[object, ...]],
) -> dict[int, list[int]]:
    """Per job, its columns equal to its pick in weight and cost, in tie-break
    order: one pass over every column, the order asked only where there is a tie."""
    pick = np.full(int(owner.max()) + 1, -1)
    pick[list(chosen)] = list(chosen.values())
    ref = pick[owner]
    has = ref >= 0
    ref = np.where(has, ref, 0)
    near = has & (np.abs(weight - weight[ref]) <= SAME * np.maximum(1.0, np.abs(weight[ref])))
    near &= np.abs(cost - cost[ref]) <= SAME * np.maximum(1.0, np.abs(cost[ref]))
    columns = np.flatnonzero(near)
    out: dict[int, list[int]] = {j: [c] for j, c in chosen.items()}
    jobs = owner[columns]
    for group in np.split(columns, np.flatnonzero(np.diff(jobs)) + 1):  # per job, in order
        if len(group) > 1:
            out[int(owner[group[0]])] = sorted((int(c) for c in group), key=key_of)
    return out


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
    usage_column: npt.NDArray[np.int64],
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
    on_short = by_column[usage_column[picks]] @ short > 0
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
