"""The limits a cluster must keep (docs/ARCHITECTURE.md, "Planning"), one object
each: the budget, a quota (per region, quota group and market, counted in vCPUs),
network saturation of the remote tier, and the remote tier's checkpoint memory.

Each knows whether a cluster breaks it (``broken``: written from the
architectures' node roles, apart from the vectorised planner, which these checks
verify), what it takes of a shared limit (``usage``: the fleet program's rows),
and its words for explanations (``words``). ``violations``, ``explain.binding``
and the fleet program's check and explanation all go through ``CONSTRAINTS``; a
new limit is one class here (and, where it should prune candidates before they
are scored, the vectorised planner's candidate set).

``remote_nodes_needed`` is the one formula for the least remote nodes that
carry a Tiering cluster, used by the single-job planner and the fleet's
candidates alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from deepvm.planner import architectures as arch
from deepvm.planner.candidates import (
    Candidates,
    CheckpointNeeds,
    Config,
    hourly_cost,
    within_budget,
)
from deepvm.planner.offers import REMOTE_MEMORY_FRACTION, FloatArray, Offers

# (region, quota group, market): what one quota limit counts.
QuotaKey = tuple[str, str, str]
QUOTA_UNIT = "vCPUs"


def remote_nodes_needed(
    n: npt.ArrayLike,
    worker_nsat: npt.ArrayLike,
    remote_nsat: npt.ArrayLike,
    usable_gb: npt.ArrayLike,
    need_gb: float,
) -> FloatArray:
    """The least remote nodes m of a type that carry n Tiering workers (arrays
    broadcast): max(1, ceil(n / N_sat(b_i)), ceil(n / N_sat(b_j)), ceil(kC / (0.8 M_j))).
    N_sat is monotone, so N_sat(min(b_i, b_j)) = min(N_sat(b_i), N_sat(b_j)) and
    n <= N_sat(min(b_i, b_j)) m splits into the first two terms; the last is the
    memory for the checkpoint versions (``usable_gb`` = 0.8 M_j)."""
    nodes = np.asarray(n, dtype=float)
    usable = np.asarray(usable_gb, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_worker = np.ceil(nodes / np.asarray(worker_nsat, dtype=float) - 1e-9)
        per_remote = np.ceil(nodes / np.asarray(remote_nsat, dtype=float) - 1e-9)
        memory = np.ceil(need_gb / usable - 1e-9) if need_gb > 0 else np.ones_like(usable)
    return np.maximum(np.maximum(per_worker, per_remote), np.maximum(memory, 1.0))


class Constraint(Protocol):
    """One limit. ``name`` is what ``violations`` reports. A limit the planner's
    candidates are not built to keep (the quotas, the remote tier's sizing and the
    budget are) also has ``admits(offers, job, candidates) -> bool array``, which
    the planner applies before scoring."""

    @property
    def name(self) -> str: ...

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool: ...

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]: ...

    def words(self, f: Offers, c: Config, budget: float) -> str: ...


def quota_words(key: QuotaKey, limit: float | None = None) -> str:
    """A quota by its key, e.g. ``the G spot quota in us-east-1 (128 vCPUs)``."""
    region, group, market = key
    where = f" in {region}" if region else ""
    amount = f" ({limit:g} {QUOTA_UNIT})" if limit is not None else ""
    return f"the {group} {market.replace('_', '-')} quota{where}{amount}"


@dataclass(frozen=True)
class Budget:
    """The whole cluster's hourly cost within the job's budget."""

    name: str = "budget"

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool:
        cost = hourly_cost(f, c)
        return not math.isfinite(cost) or not within_budget(cost, budget)

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]:
        return {}  # a job's own budget is no shared limit (the team budget is the fleet's)

    def words(self, f: Offers, c: Config, budget: float) -> str:
        return f"the budget (${budget:g}/h)"


@dataclass(frozen=True)
class WorkerQuota:
    """The workers' vCPUs in one market within their quota group's limit there."""

    market: str  # "spot" or "on_demand"

    @property
    def name(self) -> str:
        return "spot quota" if self.market == "spot" else "on-demand quota"

    def _vcpus(self, f: Offers, c: Config) -> float:
        roles = arch.architecture(c.architecture)
        count = roles.n_spot if self.market == "spot" else roles.n_on_demand
        return float(count(c.n_workers)) * float(f.gpu_vcpus[c.worker])

    def key(self, f: Offers, c: Config) -> QuotaKey:
        return (f.gpu_region_of(c.worker), f.gpu_group[c.worker], self.market)

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool:
        return self._vcpus(f, c) > f.gpu_quota(c.worker, self.market)

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]:
        used = self._vcpus(f, c)
        return {self.key(f, c): used} if used > 0 else {}

    def words(self, f: Offers, c: Config, budget: float) -> str:
        return quota_words(self.key(f, c), f.gpu_quota(c.worker, self.market))

    def usage_rows(
        self, f: Offers, codes: np.ndarray, worker: np.ndarray, n: np.ndarray, *_: np.ndarray
    ) -> tuple[list[QuotaKey], np.ndarray, FloatArray]:
        """``usage`` of many clusters: keys, per row its key's index, and vCPUs."""
        keys = [(f.gpu_region_of(i), f.gpu_group[i], self.market) for i in range(len(f.gpu_types))]
        nodes = np.zeros(len(n))
        for code, roles in enumerate(arch.REGISTRY):
            at = codes == code
            count = roles.n_spot if self.market == "spot" else roles.n_on_demand
            nodes[at] = count(n[at])
        return keys, np.asarray(worker, dtype=np.int64), nodes * f.gpu_vcpus[worker]


@dataclass(frozen=True)
class RemoteQuota:
    """The remote tier's on-demand vCPUs within its quota group's limit."""

    name: str = "remote on-demand quota"

    def key(self, f: Offers, c: Config) -> QuotaKey:
        assert c.remote is not None
        return (f.cpu_region_of(c.remote), f.cpu_group[c.remote], "on_demand")

    def _vcpus(self, f: Offers, c: Config) -> float:
        if c.remote is None or not arch.architecture(c.architecture).remote_tier:
            return 0.0
        return c.n_remote * float(f.cpu_vcpus[c.remote])

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool:
        if c.remote is None:
            return False
        return self._vcpus(f, c) > f.cpu_quota(c.remote, "on_demand")

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]:
        used = self._vcpus(f, c)
        return {self.key(f, c): used} if used > 0 else {}

    def words(self, f: Offers, c: Config, budget: float) -> str:
        assert c.remote is not None
        return quota_words(self.key(f, c), f.cpu_quota(c.remote, "on_demand")) + " (remote tier)"

    def usage_rows(
        self,
        f: Offers,
        codes: np.ndarray,
        worker: np.ndarray,
        n: np.ndarray,
        remote: np.ndarray,
        m: np.ndarray,
    ) -> tuple[list[QuotaKey], np.ndarray, FloatArray]:
        keys = [(f.cpu_region_of(j), f.cpu_group[j], "on_demand") for j in range(len(f.cpu_types))]
        tiered = np.array([a.remote_tier for a in arch.REGISTRY])[codes] & (remote >= 0)
        key_of_row = np.where(tiered, remote, -1).astype(np.int64)
        vcpus = np.where(tiered, f.cpu_vcpus[np.maximum(remote, 0)] if len(f.cpu_types) else 0, 0)
        return keys, key_of_row, np.asarray(m, dtype=float) * vcpus


@dataclass(frozen=True)
class _RemoteTierLimit:
    """A limit of a Tiering cluster's remote tier alone: it takes nothing shared."""

    name: str
    text: str

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool:
        if c.remote is None or not arch.architecture(c.architecture).remote_tier:
            return False
        return self.breaks(f, job, c, c.remote)

    def breaks(self, f: Offers, job: CheckpointNeeds, c: Config, j: int) -> bool:
        raise NotImplementedError

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]:
        return {}

    def words(self, f: Offers, c: Config, budget: float) -> str:
        return self.text


@dataclass(frozen=True)
class NetworkSaturation(_RemoteTierLimit):
    """n <= N_sat(min(b_i, b_j)) m: the remote tier's links carry the workers."""

    name: str = "network saturation"
    text: str = "network saturation (the remote tier's bandwidth)"

    def breaks(self, f: Offers, job: CheckpointNeeds, c: Config, j: int) -> bool:
        beta = min(f.gpu_gbps[c.worker], f.cpu_gbps[j])
        return c.n_workers > int(f.saturation(beta)) * c.n_remote


@dataclass(frozen=True)
class CheckpointMemory(_RemoteTierLimit):
    """m x 0.8 M_j >= kC: the remote tier holds the job's checkpoint versions."""

    name: str = "checkpoint memory"
    text: str = "remote memory (checkpoint versions the remote tier must hold)"

    def breaks(self, f: Offers, job: CheckpointNeeds, c: Config, j: int) -> bool:
        usable = c.n_remote * REMOTE_MEMORY_FRACTION * f.cpu_memory_gb[j]
        return bool(usable < job.remote_memory_needed_gb)


# In the order violations reports them.
CONSTRAINTS: tuple[Constraint, ...] = (
    WorkerQuota("spot"),
    WorkerQuota("on_demand"),
    NetworkSaturation(),
    CheckpointMemory(),
    RemoteQuota(),
    Budget(),
)
BY_NAME: dict[str, Constraint] = {c.name: c for c in CONSTRAINTS}
# The limits one more remote node can relieve (explain.binding).
REMOTE_LIMITS = (NetworkSaturation.name, CheckpointMemory.name)


def admitted_by_constraints(f: Offers, job: CheckpointNeeds, candidates: Candidates) -> np.ndarray:
    """Per candidate worker side, whether every constraint with ``admits`` allows it."""
    kept = np.ones(len(candidates), dtype=bool)
    for constraint in CONSTRAINTS:
        admits = getattr(constraint, "admits", None)
        if admits is not None:
            kept &= np.asarray(admits(f, job, candidates), dtype=bool)
    return kept


def _not_a_cluster(f: Offers, c: Config) -> tuple[list[str], bool]:
    """What makes a configuration no cluster of its architecture (too few workers,
    a remote tier it cannot have or lacks, remote nodes in another region, no
    spot market), and whether its limits can be checked at all."""
    if c.architecture not in arch.BY_NAME:
        return [f"unknown architecture {c.architecture!r}"], False
    a, i = arch.architecture(c.architecture), c.worker
    if a.uses_spot and not np.isfinite(f.gpu_spot[i]):
        return ["worker type has no spot price"], False
    problems = []
    if c.n_workers < a.min_workers:
        problems.append(f"{a.name} needs n >= {a.min_workers}")
    if a.remote_tier:
        if c.remote is None or c.n_remote < 1:
            return [*problems, f"{a.name} needs m >= 1 remote nodes"], False
        if f.cpu_region_of(c.remote) != f.gpu_region_of(i):
            problems.append("remote nodes in another region")
    elif c.remote is not None:
        problems.append(f"{a.name} has no remote tier")
    return problems, True


def violations(f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> list[str]:
    """Every constraint the configuration breaks (empty: feasible), by name.
    Written from the architectures' node roles, apart from the vectorised planner,
    to check its answers."""
    problems, checkable = _not_a_cluster(f, c)
    if not checkable:
        return problems
    return problems + [k.name for k in CONSTRAINTS if k.broken(f, job, c, budget)]


def usage_matrix(
    f: Offers,
    codes: np.ndarray,
    worker: np.ndarray,
    n: np.ndarray,
    remote: np.ndarray,
    m: np.ndarray,
) -> tuple[FloatArray, list[QuotaKey]]:
    """``usage`` of many clusters at once (arrays: architecture codes, GPU types,
    worker counts, remote types with -1 for none, remote counts): a rows x keys
    matrix of vCPUs and its keys, only keys some row uses."""
    keys: dict[QuotaKey, int] = {}
    parts = []
    for constraint in CONSTRAINTS:
        rows = getattr(constraint, "usage_rows", None)
        if rows is None:
            continue
        part_keys, key_of_row, amount = rows(f, codes, worker, n, remote, m)
        ids = np.array([keys.setdefault(k, len(keys)) for k in part_keys], dtype=np.int64)
        parts.append((ids, key_of_row, amount))
    matrix = np.zeros((len(n), len(keys)))
    for ids, key_of_row, amount in parts:
        at = np.flatnonzero((key_of_row >= 0) & (amount > 0))
        np.add.at(matrix, (at, ids[key_of_row[at]]), amount[at])
    used = np.flatnonzero(matrix.any(axis=0))
    names = list(keys)
    return matrix[:, used], [names[u] for u in used]


def usage(f: Offers, c: Config) -> dict[QuotaKey, float]:
    """The cluster's use of every shared limit (quota keys, in vCPUs)."""
    out: dict[QuotaKey, float] = {}
    for constraint in CONSTRAINTS:
        for key, used in constraint.usage(f, c).items():
            out[key] = out.get(key, 0.0) + used
    return out


def words(f: Offers, c: Config, broken: str, budget: float) -> str:
    """A broken constraint (a name ``violations`` gave) in words for explanations."""
    constraint = BY_NAME.get(broken)
    return constraint.words(f, c, budget) if constraint is not None else broken
