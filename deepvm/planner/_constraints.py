"""The limits a cluster must keep (docs/ARCHITECTURE.md, "Planning"), one object
each: the budget, a quota (per region, quota key and market, in its unit: vCPUs or GPUs),
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

from deepvm.catalog.quotas import NodeQuota, QuotaKey
from deepvm.planner import architectures as arch
from deepvm.planner.candidates import (
    Candidates,
    CheckpointNeeds,
    Config,
    hourly_cost,
    within_budget,
)
from deepvm.planner.offers import REMOTE_MEMORY_FRACTION, FloatArray, Offers

__all__ = [
    "CONSTRAINTS",
    "Budget",
    "CheckpointMemory",
    "Constraint",
    "Limit",
    "NetworkSaturation",
    "RemoteQuota",
    "UsageRows",
    "Violation",
    "WorkerQuota",
    "admitted_by_constraints",
    "quota_of",
    "remote_nodes_needed",
    "usage",
    "usage_matrix",
    "violations",
]


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


UsageRows = list[tuple[list[QuotaKey], np.ndarray, FloatArray]]


class Constraint(Protocol):
    """One limit: whether a cluster breaks it (``name`` is how a violation is
    named), what it takes of shared limits (one cluster: ``usage``; many at once:
    ``usage_rows``, the fleet program's rows), which candidates it lets through
    before they are scored (``admits``: a limit the candidates are not built to
    keep), whether one more remote node can relieve it, and its words."""

    @property
    def name(self) -> str: ...

    relieved_by_remote_node: bool

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool: ...

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]: ...

    def usage_rows(
        self,
        f: Offers,
        codes: np.ndarray,
        worker: np.ndarray,
        n: np.ndarray,
        remote: np.ndarray,
        m: np.ndarray,
    ) -> UsageRows: ...

    def admits(self, f: Offers, job: CheckpointNeeds, candidates: Candidates) -> np.ndarray: ...

    def words(self, f: Offers, c: Config, budget: float) -> str: ...


class Limit:
    """What a constraint does unless it says otherwise: it takes nothing shared,
    admits every candidate (the candidates are built to keep it), and one more
    remote node does not relieve it. A new limit subclasses this and writes
    ``name``, ``broken`` and ``words``."""

    relieved_by_remote_node = False

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]:
        return {}

    def usage_rows(
        self,
        f: Offers,
        codes: np.ndarray,
        worker: np.ndarray,
        n: np.ndarray,
        remote: np.ndarray,
        m: np.ndarray,
    ) -> UsageRows:
        return []

    def admits(self, f: Offers, job: CheckpointNeeds, candidates: Candidates) -> np.ndarray:
        return np.ones(len(candidates), dtype=bool)


@dataclass(frozen=True)
class Violation:
    """A limit a configuration breaks: the constraint (None where the
    configuration is no cluster of its architecture at all) and its name."""

    name: str
    constraint: Constraint | None = None

    def __str__(self) -> str:
        return self.name

    def words(self, f: Offers, c: Config, budget: float) -> str:
        """The limit in words for explanations."""
        return self.name if self.constraint is None else self.constraint.words(f, c, budget)

    @property
    def relieved_by_remote_node(self) -> bool:
        return self.constraint is not None and self.constraint.relieved_by_remote_node


@dataclass(frozen=True)
class Budget(Limit):
    """The whole cluster's hourly cost within the job's budget."""

    name: str = "budget"

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool:
        cost = hourly_cost(f, c)
        return not math.isfinite(cost) or not within_budget(cost, budget)

    def words(self, f: Offers, c: Config, budget: float) -> str:
        return f"the budget (${budget:g}/h)"


def _broken_uses(f: Offers, uses: tuple[NodeQuota, ...], nodes: float) -> list[NodeQuota]:
    return [u for u in uses if nodes * u.per_node > f.quotas.key_limit(u.key)]


def _usage_parts(
    uses: list[tuple[NodeQuota, ...]], type_of_row: np.ndarray, nodes: FloatArray
) -> UsageRows:
    """``usage_rows`` of types whose nodes count against several quotas: one part
    per slot (a type's first quota, its second, ...), rows of a type without that
    slot at -1."""
    parts = []
    for slot in range(max((len(u) for u in uses), default=0)):
        keys = [u[slot].key if len(u) > slot else ("", "", "") for u in uses]
        per_node = np.array([u[slot].per_node if len(u) > slot else 0.0 for u in uses])
        has = np.array([len(u) > slot for u in uses], dtype=bool)
        rows = np.asarray(type_of_row, dtype=np.int64)
        valid = rows >= 0
        key_of_row = np.where(valid & has[np.maximum(rows, 0)], rows, -1)
        amount = np.where(valid, nodes * per_node[np.maximum(rows, 0)], 0.0)
        parts.append((keys, key_of_row, amount))
    return parts


@dataclass(frozen=True)
class WorkerQuota(Limit):
    """The workers' nodes in one market within every quota they count against
    there (each in its own unit: vCPUs, or GPUs of a model)."""

    market: str  # "spot" or "on_demand"

    @property
    def name(self) -> str:
        return "spot quota" if self.market == "spot" else "on-demand quota"

    def _nodes(self, c: Config) -> float:
        roles = arch.architecture(c.architecture)
        count = roles.n_spot if self.market == "spot" else roles.n_on_demand
        return float(count(c.n_workers))

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool:
        return bool(_broken_uses(f, f.gpu_quota_uses(c.worker, self.market), self._nodes(c)))

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]:
        nodes = self._nodes(c)
        uses = f.gpu_quota_uses(c.worker, self.market)
        return {u.key: nodes * u.per_node for u in uses if nodes * u.per_node > 0}

    def words(self, f: Offers, c: Config, budget: float) -> str:
        uses = f.gpu_quota_uses(c.worker, self.market)
        named = _broken_uses(f, uses, self._nodes(c)) or list(uses[:1])
        return "; ".join(u.words(f.quotas.key_limit(u.key)) for u in named)

    def usage_rows(
        self, f: Offers, codes: np.ndarray, worker: np.ndarray, n: np.ndarray, *_: np.ndarray
    ) -> UsageRows:
        """``usage`` of many clusters: per quota slot, keys, per row its key's index
        (-1: none) and the amount in the key's unit."""
        nodes = np.zeros(len(n))
        for code, roles in enumerate(arch.REGISTRY):
            at = codes == code
            count = roles.n_spot if self.market == "spot" else roles.n_on_demand
            nodes[at] = count(n[at])
        uses = [f.gpu_quota_uses(i, self.market) for i in range(len(f.gpu_types))]
        return _usage_parts(uses, np.asarray(worker, dtype=np.int64), nodes)


@dataclass(frozen=True)
class RemoteQuota(Limit):
    """The remote tier's on-demand nodes within every quota they count against."""

    name: str = "remote on-demand quota"

    def _nodes(self, c: Config) -> float:
        if c.remote is None or not arch.architecture(c.architecture).remote_tier:
            return 0.0
        return float(c.n_remote)

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool:
        if c.remote is None:
            return False
        return bool(_broken_uses(f, f.cpu_quota_uses(c.remote), self._nodes(c)))

    def usage(self, f: Offers, c: Config) -> dict[QuotaKey, float]:
        nodes = self._nodes(c)
        if c.remote is None or nodes == 0:
            return {}
        return {u.key: nodes * u.per_node for u in f.cpu_quota_uses(c.remote) if u.per_node > 0}

    def words(self, f: Offers, c: Config, budget: float) -> str:
        assert c.remote is not None
        uses = f.cpu_quota_uses(c.remote)
        named = _broken_uses(f, uses, self._nodes(c)) or list(uses[:1])
        return "; ".join(u.words(f.quotas.key_limit(u.key)) + " (remote tier)" for u in named)

    def usage_rows(
        self,
        f: Offers,
        codes: np.ndarray,
        worker: np.ndarray,
        n: np.ndarray,
        remote: np.ndarray,
        m: np.ndarray,
    ) -> UsageRows:
        tiered = np.array([a.remote_tier for a in arch.REGISTRY])[codes] & (remote >= 0)
        uses = [f.cpu_quota_uses(j) for j in range(len(f.cpu_types))]
        type_of_row = np.where(tiered, remote, -1).astype(np.int64)
        return _usage_parts(uses, type_of_row, np.asarray(m, dtype=float))


@dataclass(frozen=True)
class _RemoteTierLimit(Limit):
    """A limit of a Tiering cluster's remote tier alone: it takes nothing shared,
    and one more remote node can relieve it."""

    name: str
    text: str
    relieved_by_remote_node = True

    def broken(self, f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> bool:
        if c.remote is None or not arch.architecture(c.architecture).remote_tier:
            return False
        return self.breaks(f, job, c, c.remote)

    def breaks(self, f: Offers, job: CheckpointNeeds, c: Config, j: int) -> bool:
        raise NotImplementedError

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


def admitted_by_constraints(f: Offers, job: CheckpointNeeds, candidates: Candidates) -> np.ndarray:
    """Per candidate worker side, whether every constraint admits it."""
    kept = np.ones(len(candidates), dtype=bool)
    for constraint in CONSTRAINTS:
        kept &= np.asarray(constraint.admits(f, job, candidates), dtype=bool)
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


def violations(f: Offers, job: CheckpointNeeds, c: Config, budget: float) -> list[Violation]:
    """Every limit the configuration breaks (empty: feasible). Written from the
    architectures' node roles, apart from the vectorised planner, to check its
    answers."""
    problems, checkable = _not_a_cluster(f, c)
    found = [Violation(p) for p in problems]
    if not checkable:
        return found
    return found + [Violation(k.name, k) for k in CONSTRAINTS if k.broken(f, job, c, budget)]


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
    matrix of each key's amount (in its unit) and its keys, only keys some row uses."""
    keys: dict[QuotaKey, int] = {}
    parts = []
    for constraint in CONSTRAINTS:
        for part_keys, key_of_row, amount in constraint.usage_rows(f, codes, worker, n, remote, m):
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
    """The cluster's use of every shared limit (quota keys, each in its unit)."""
    out: dict[QuotaKey, float] = {}
    for constraint in CONSTRAINTS:
        for key, used in constraint.usage(f, c).items():
            out[key] = out.get(key, 0.0) + used
    return out


def quota_of(f: Offers, c: Config, key: QuotaKey) -> NodeQuota | None:
    """The quota ``key`` as the cluster's nodes count against it (its unit and name)."""
    uses = [*f.gpu_quota_uses(c.worker, "spot"), *f.gpu_quota_uses(c.worker, "on_demand")]
    if c.remote is not None:
        uses += f.cpu_quota_uses(c.remote)
    return next((u for u in uses if u.key == key), None)
