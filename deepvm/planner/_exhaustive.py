"""A plain-Python exhaustive enumerator of the same model, over (i, n, j, m).

It is the reference the MILP is tested and benchmarked against: slow, obvious,
and sharing nothing with the MILP but the inputs and the model's definitions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from deepvm.base.config import DEFAULT_MAX_NODES
from deepvm.catalog.quotas import NodeQuota
from deepvm.planner._enumeration import SCORE_RTOL
from deepvm.planner.candidates import (
    BUDGET_RTOL,
    DESIGN_ARCHITECTURES,
    OBJECT_STORE,
    ON_DEMAND,
    SINGLE_ANCHOR,
    TIERING,
    CheckpointNeeds,
    Config,
)
from deepvm.planner.offers import REMOTE_MEMORY_FRACTION, Offers

__all__ = ["best_configs", "enumerate_feasible"]


def enumerate_feasible(
    offers: Offers,
    job: CheckpointNeeds,
    budget: float,
    *,
    architectures: Iterable[str] = DESIGN_ARCHITECTURES,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> list[tuple[Config, float]]:
    """Every feasible configuration with its hourly cost; for Tiering every
    (j, m), not only the cheapest."""
    archs = set(architectures)
    q = offers.quotas
    limit = budget * (1 + BUDGET_RTOL) + 1e-12
    gpu_region = offers.gpu_region or ("",) * len(offers.gpu_types)
    cpu_region = offers.cpu_region or ("",) * len(offers.cpu_types)
    out: list[tuple[Config, float]] = []

    def fits(uses: tuple[NodeQuota, ...], nodes: int) -> bool:
        """``nodes`` nodes within every quota they count against (in its unit)."""
        return all(nodes * u.per_node <= q.key_limit(u.key) for u in uses)

    # Per (i, j) facts of the remote side, computed once: (j, N_sat, usable GB, price, its
    # quotas), for the remote types of i's region (quotas count per region).
    remotes = [
        [
            (
                j,
                int(offers.saturation(min(offers.gpu_gbps[i], offers.cpu_gbps[j]))),
                REMOTE_MEMORY_FRACTION * float(offers.cpu_memory_gb[j]),
                float(offers.cpu_ondemand[j]),
                offers.cpu_quota_uses(j),
            )
            for j in range(len(offers.cpu_types))
            if cpu_region[j] == gpu_region[i]
        ]
        for i in range(len(offers.gpu_types))
    ]
    for i in range(len(offers.gpu_types)):
        spot = float(offers.gpu_spot[i])
        od = float(offers.gpu_ondemand[i])
        spot_uses = offers.gpu_quota_uses(i, "spot")
        od_uses = offers.gpu_quota_uses(i, "on_demand")
        has_spot = not math.isnan(spot)
        for n in range(1, max_nodes + 1):
            if SINGLE_ANCHOR in archs and has_spot and n >= 2:
                cost = od + (n - 1) * spot
                if cost <= limit and fits(spot_uses, n - 1) and fits(od_uses, 1):
                    out.append((Config(SINGLE_ANCHOR, i, n), cost))
            if ON_DEMAND in archs:
                cost = n * od
                if cost <= limit and fits(od_uses, n):
                    out.append((Config(ON_DEMAND, i, n), cost))
            if OBJECT_STORE in archs and has_spot:
                cost = n * spot + offers.object_store_usd_per_hour
                if cost <= limit and fits(spot_uses, n):
                    out.append((Config(OBJECT_STORE, i, n), cost))
            if TIERING in archs and has_spot and fits(spot_uses, n):
                for j, nsat, mem, price, remote_uses in remotes[i]:
                    m = 1
                    while True:
                        cost = n * spot + m * price
                        if cost > limit or not fits(remote_uses, m):
                            break
                        if n <= nsat * m and m * mem >= job.remote_memory_needed_gb:
                            out.append((Config(TIERING, i, n, j, m), cost))
                        m += 1
    return out


def best_configs(
    scored: list[tuple[Config, float, float]], top: int = 1
) -> list[tuple[Config, float, float]]:
    """From (config, cost, score) triples: the ``top`` best distinct configurations,
    best score first, ties (within the planner's SCORE_RTOL) to the cheaper."""
    cheapest: dict[tuple[str, int, int], tuple[Config, float, float]] = {}
    for config, cost, score in scored:
        key = config.key()
        if key not in cheapest or cost < cheapest[key][1]:
            cheapest[key] = (config, cost, score)
    remaining = list(cheapest.values())
    chosen: list[tuple[Config, float, float]] = []
    while remaining and len(chosen) < top:
        best = max(s for _, _, s in remaining)
        tied = [r for r in remaining if r[2] >= best - SCORE_RTOL * max(abs(best), 1e-300)]
        pick = min(tied, key=lambda r: r[1])
        chosen.append(pick)
        remaining.remove(pick)
    return chosen
