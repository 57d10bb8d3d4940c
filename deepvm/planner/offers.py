"""The offers: what the instance types on sale offer one workload, as arrays
(prices, vCPUs, network, the quotas a node counts against, throughput, speedup
model), one entry per (region, instance type): docs/ARCHITECTURE.md, "Inputs".
("Fleet" is the team's registered jobs, deepvm.planner.fleet.plan; these are one
job's offers.)"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from deepvm.base.errors import InputError, UnknownWorkloadError
from deepvm.base.tables import Table, as_table
from deepvm.catalog import Catalog
from deepvm.catalog.common import spot_outliers, spot_saving_pct
from deepvm.catalog.quotas import NodeQuota, QuotaKey, Quotas
from deepvm.performance.flopp import Published, node_throughput
from deepvm.performance.overhead import SaturationModel, SpeedupModel, resolve_models
from deepvm.performance.workloads import WORKLOADS, Workload

__all__ = [
    "DEFAULT_INTERRUPTION_BUCKET",
    "GIB_TO_GB",
    "REMOTE_MEMORY_FRACTION",
    "FloatArray",
    "IntArray",
    "Offers",
    "build_offers",
]

GIB_TO_GB = 1.073741824
# What a spot type without a published rate is planned as (deepvm.performance.preemption).
DEFAULT_INTERRUPTION_BUCKET = ">20%"
# Remote nodes may fill this fraction of their memory with checkpoints ("Architectures").
REMOTE_MEMORY_FRACTION = 0.8

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Offers:
    """The offers of one workload: GPU worker types (index i) and CPU remote types
    (index j), one entry per (region, instance type). Quotas count per region, and
    a Tiering cluster's remote nodes are in its workers' region."""

    gpu_types: tuple[str, ...]
    gpu_spot: FloatArray  # USD/h, NaN = no spot market
    gpu_ondemand: FloatArray
    gpu_vcpus: FloatArray
    gpu_gbps: FloatArray
    # What one node takes of each quota it counts against (deepvm.catalog.quotas), per
    # type: GPU types per market, CPU types on demand (the remote tier's market).
    gpu_quota_spot: tuple[tuple[NodeQuota, ...], ...]
    gpu_quota_on_demand: tuple[tuple[NodeQuota, ...], ...]
    gpu_flops: FloatArray  # F_i, FLOP/s of one node on the workload
    gpu_flops_source: tuple[str, ...]
    gpu_models: tuple[SpeedupModel, ...]
    cpu_types: tuple[str, ...]
    cpu_ondemand: FloatArray
    cpu_memory_gb: FloatArray
    cpu_vcpus: FloatArray
    cpu_gbps: FloatArray
    cpu_quota_on_demand: tuple[tuple[NodeQuota, ...], ...]
    quotas: Quotas
    saturation: SaturationModel
    workload: str
    snapshot: str
    gpu_region: tuple[str, ...] = ()  # empty: one unnamed region
    gpu_cloud: tuple[str, ...] = ()  # the catalog's provider per GPU row; empty: unnamed
    cpu_region: tuple[str, ...] = ()
    gpu_spot_zone: tuple[str | None, ...] = ()
    # Monthly fraction of spot instances reclaimed, per GPU type (NaN: unknown).
    gpu_interruption: FloatArray = field(default_factory=lambda: np.zeros(0))
    # Storage and requests of an all-spot cluster's checkpoints (spot_object_store).
    object_store_usd_per_hour: float = 0.0
    # The workload's facts (checkpoint size, memory per GPU), where it is declared.
    workload_spec: Workload | None = None
    # GPU rows left out, and why (their accelerators cannot hold the workload).
    left_out: tuple[dict[str, str], ...] = ()
    # Where each F_i is from, and the GPU types' catalog rows (prices' and
    # interruption buckets' provenance, the regional spot saving): deepvm.model.provenance.
    gpu_flops_basis: tuple[str, ...] = ()
    gpu_flops_date: tuple[str | None, ...] = ()
    gpu_rows: Table | None = None
    # most_nodes' answers per market (init=False: dataclasses.replace starts afresh).
    _most_nodes: dict[str, FloatArray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def speedups(self, i: int, n: npt.ArrayLike) -> FloatArray:
        return self.gpu_models[i](n)

    def gpu_region_of(self, i: int) -> str:
        return self.gpu_region[i] if self.gpu_region else ""

    def gpu_cloud_of(self, i: int) -> str:
        return self.gpu_cloud[i] if self.gpu_cloud else ""

    def cpu_region_of(self, j: int) -> str:
        return self.cpu_region[j] if self.cpu_region else ""

    def gpu_quota_uses(self, i: int, market: str) -> tuple[NodeQuota, ...]:
        """The quotas one node of GPU type i counts against in ``market``."""
        return (self.gpu_quota_spot if market == "spot" else self.gpu_quota_on_demand)[i]

    def cpu_quota_uses(self, j: int) -> tuple[NodeQuota, ...]:
        """The quotas one (on-demand) node of CPU type j counts against."""
        return self.cpu_quota_on_demand[j]

    def within(self, *, clouds: Sequence[str] = (), regions: Sequence[str] = ()) -> Offers:
        """The offers of the given clouds (the catalog's provider) and regions only
        (empty: any); remote CPU types stay those of the kept GPU types' regions."""
        from dataclasses import fields, replace

        providers = list(self.gpu_cloud) or [""] * len(self.gpu_types)
        gpu_keep = np.array(
            [
                (not clouds or providers[i] in clouds)
                and (not regions or self.gpu_region_of(i) in regions)
                for i in range(len(self.gpu_types))
            ],
            dtype=bool,
        )
        if not gpu_keep.any():
            from deepvm.base.errors import ParameterError

            where = ", ".join([*clouds, *regions])
            raise ParameterError(
                "clouds" if clouds else "regions",
                where,
                f"leaves no GPU instance type of {self.workload} in the catalog",
            )
        kept_regions = {self.gpu_region_of(int(i)) for i in np.flatnonzero(gpu_keep)}
        cpu_keep = np.array(
            [self.cpu_region_of(j) in kept_regions for j in range(len(self.cpu_types))],
            dtype=bool,
        )
        changes: dict[str, Any] = {}
        for f in fields(self):
            keep = gpu_keep if f.name.startswith("gpu_") else cpu_keep
            value = getattr(self, f.name)
            if not f.name.startswith(("gpu_", "cpu_")) or value is None or len(value) != len(keep):
                continue  # empty optional columns stay empty
            if isinstance(value, Table):
                changes[f.name] = value.take(keep)
            elif isinstance(value, np.ndarray):
                changes[f.name] = value[keep]
            else:
                changes[f.name] = tuple(v for v, k in zip(value, keep, strict=True) if k)
        return replace(self, **changes)

    def max_nodes(self, uses: tuple[NodeQuota, ...]) -> float:
        """The most nodes the quotas ``uses`` name allow (inf: none limits)."""
        most = math.inf
        for use in uses:
            limit = self.quotas.key_limit(use.key)
            if use.per_node > 0 and math.isfinite(limit):
                most = min(most, math.floor(limit / use.per_node + 1e-9))
        return most

    def most_nodes(self, market: str) -> FloatArray:
        """Per GPU type, the most nodes its quotas allow in ``market`` (each quota in
        its own unit). Types share quota keys (a region's GPU quota, its regional
        vCPU quota): each key's limit is looked up once, and the answer is kept
        (offers never change)."""
        if market in self._most_nodes:
            return self._most_nodes[market]
        key_limits: dict[QuotaKey, float] = {}
        out = np.full(len(self.gpu_types), math.inf)
        for i in range(len(self.gpu_types)):
            for use in self.gpu_quota_uses(i, market):
                limit = key_limits.get(use.key)
                if limit is None:
                    limit = key_limits[use.key] = self.quotas.key_limit(use.key)
                if use.per_node > 0 and limit < math.inf:
                    out[i] = min(out[i], math.floor(limit / use.per_node + 1e-9))
        self._most_nodes[market] = out
        return out

    def gpu_max_nodes(self, i: int, market: str) -> float:
        return self.max_nodes(self.gpu_quota_uses(i, market))

    def cpu_max_nodes(self, j: int) -> float:
        return self.max_nodes(self.cpu_quota_uses(j))

    @property
    def regions(self) -> list[str]:
        """The regions of its GPU and CPU types ([""] for an unnamed one)."""
        return sorted(set(self.gpu_region) | set(self.cpu_region)) or [""]

    def speedup_table(self, max_nodes: int) -> FloatArray:
        """s_i(n) for every GPU type i and n = 0..max_nodes (column 0 unused),
        each distinct model evaluated once."""
        nodes = np.arange(1, max_nodes + 1)
        table = np.zeros((len(self.gpu_types), max_nodes + 1))
        rows: dict[tuple[str, tuple[tuple[str, float], ...]], list[int]] = {}
        for i, model in enumerate(self.gpu_models):
            rows.setdefault((model.kind, tuple(sorted(model.params.items()))), []).append(i)
        for members in rows.values():
            table[members, 1:] = self.gpu_models[members[0]](nodes)
        return table

    def inputs_of(self, i: int, *, spot: bool) -> dict[str, Any]:
        """Where GPU type i's figures are from (deepvm.model.provenance), as the
        Recommendation fields of that name: its throughput's and speedup model's
        basis and date, its price's source and date, and, for a cluster with spot
        nodes, its interruption bucket's source and the zone's and the region's
        spot savings (``spot_outlier``: the zone's price is an outlier)."""
        model = self.gpu_models[i]
        out: dict[str, Any] = {
            "flops_basis": self.gpu_flops_basis[i] if self.gpu_flops_basis else "",
            "flops_date": self.gpu_flops_date[i] if self.gpu_flops_date else None,
            "overhead_basis": model.basis,
            "overhead_date": model.date,
        }
        rows = self.gpu_rows
        if rows is None:
            return out
        row = rows.take(np.array([i]))

        def text(column: str) -> str | None:
            value = row[column][0] if column in row else None
            return value if isinstance(value, str) and value else None

        out["price_source"] = text("price_source")
        out["price_date"] = text("price_date")
        if spot:
            known = not math.isnan(float(row["interruption_rate"][0]))
            out["interruption_source"] = text("interruption_source") or (
                "file" if known else "estimate"
            )
            out["interruption_bucket"] = text("interruption_bucket") or (
                None if known else f"{DEFAULT_INTERRUPTION_BUCKET} (no published rate)"
            )
            out["interruption_date"] = text("interruption_date")
            out["spot_saving_pct"] = float(spot_saving_pct(row)[0])
            out["regional_saving_pct"] = float(row["regional_saving_pct"][0])
            out["spot_outlier"] = bool(spot_outliers(row)[0])
            if text("spot_price_basis") == "regional":
                out["price_source"] = f"{out['price_source'] or 'catalog'} (spot: regional average)"
        return out

    def with_prices(
        self, gpu_spot: FloatArray, gpu_ondemand: FloatArray, cpu_ondemand: FloatArray
    ) -> Offers:
        from dataclasses import replace

        return replace(
            self, gpu_spot=gpu_spot, gpu_ondemand=gpu_ondemand, cpu_ondemand=cpu_ondemand
        )


def build_offers(
    catalog: Catalog,
    workload: str,
    *,
    quotas: Quotas,
    measured: Table | None = None,
    overhead_tables: Sequence[Table] = (),
    saturation: SaturationModel | None = None,
    published: Published | None = None,
    workloads: Mapping[str, Workload] | None = None,
) -> Offers:
    """Resolve throughput and speedup models for ``workload``; raise on unknown
    workloads. GPU types whose accelerator memory (where the catalog gives it) is
    below what the workload needs per GPU are left out, and named in ``left_out``."""
    registry = workloads if workloads is not None else WORKLOADS
    known = set(registry)
    if measured is not None:
        measured = as_table(measured)
        known |= set(measured["workload"]) if len(measured) else set()
    overhead_tables = [as_table(t) for t in overhead_tables]
    for table in overhead_tables:
        known |= set(table["workload"]) - {"*"} if len(table) else set()
    if workload not in known:
        raise UnknownWorkloadError(
            f"unknown workload {workload!r}; known: {', '.join(sorted(known))} "
            "(or give its throughput with {throughput})",
            names=("throughput",),
        )
    f = node_throughput(catalog, workload, measured, published)
    spec = registry.get(workload)
    need = spec.accelerator_memory_gib if spec is not None else 0.0
    memory = catalog.table["accelerator_memory_gib"][f.row].astype(float)
    fits = ~((memory > 0) & (memory < need))
    left_out = tuple(
        {
            "instance_type": str(catalog.table["instance_type"][r]),
            "region": str(catalog.table["region"][r]),
            "reason": f"{m:g} GiB per GPU < the {need:g} GiB {workload} needs",
        }
        for r, m, ok in zip(f.row, memory, fits, strict=True)
        if not ok
    )
    if not fits.all():
        f = f.take(fits)
    if not len(f):
        if left_out:
            raise InputError(
                f"no GPU instance type in the catalog can hold {workload}: it needs {need:g} GiB "
                "per GPU; add larger GPUs to the catalog or lower accelerator_memory_gib"
            )
        raise InputError(
            "no GPU instance type in the catalog has a throughput: give peak_flops "
            "in the catalog or measurements with {throughput}",
            names=("throughput",),
        )
    g = catalog.table.take(f.row)
    c = catalog.table.take(catalog.cpu_rows)
    types = tuple(str(t) for t in g["instance_type"])
    models = resolve_models(types, workload, overhead_tables)

    def floats(t: Table, column: str) -> FloatArray:
        return t[column].astype(float)

    return Offers(
        gpu_types=types,
        gpu_spot=floats(g, "spot_price"),
        gpu_ondemand=floats(g, "ondemand_price"),
        gpu_vcpus=floats(g, "vcpus"),
        gpu_gbps=floats(g, "network_gbps"),
        gpu_flops=f.flops.astype(float),
        gpu_flops_source=f.flops_source,
        gpu_flops_basis=f.flops_basis,
        gpu_flops_date=f.flops_date,
        gpu_rows=g,
        gpu_models=tuple(models[t] for t in types),
        cpu_types=tuple(str(t) for t in c["instance_type"]),
        cpu_ondemand=floats(c, "ondemand_price"),
        cpu_memory_gb=floats(c, "memory_gib") * GIB_TO_GB,
        cpu_vcpus=floats(c, "vcpus"),
        cpu_gbps=floats(c, "network_gbps"),
        quotas=quotas,
        saturation=saturation or SaturationModel(),
        workload=workload,
        snapshot=catalog.snapshot,
        gpu_region=tuple(g["region"]),
        gpu_cloud=tuple(str(p) for p in g["provider"]),
        cpu_region=tuple(c["region"]),
        gpu_spot_zone=tuple(z if isinstance(z, str) else None for z in g["spot_zone"]),
        gpu_interruption=floats(g, "interruption_rate"),
        workload_spec=spec,
        left_out=left_out,
        gpu_quota_spot=_quota_uses(g, quotas, "spot"),
        gpu_quota_on_demand=_quota_uses(g, quotas, "on_demand"),
        cpu_quota_on_demand=_quota_uses(c, quotas, "on_demand"),
    )


def _quota_uses(rows: Table, quotas: Quotas, market: str) -> tuple[tuple[NodeQuota, ...], ...]:
    """Per catalog row, what one node takes of each quota in ``market`` (the
    catalog's quota key columns, deepvm.catalog.common.QUOTA_KEY_COLUMNS)."""

    def column(name: str) -> list[str | None]:
        if name not in rows:
            return [None] * len(rows)
        return [v if isinstance(v, str) and v else None for v in rows[name]]

    group, spot_group = list(rows["quota_group"]), column("spot_quota_group")
    regional = column("spot_regional_quota_group" if market == "spot" else "regional_quota_group")
    gpus = rows["accelerator_count"].astype(float).tolist()
    vcpus, regions = rows["vcpus"].astype(float).tolist(), [str(r) for r in rows["region"]]
    seen: dict[tuple[object, ...], tuple[NodeQuota, ...]] = {}  # types share their quotas
    out = []
    for args in zip(regions, group, spot_group, regional, vcpus, gpus, strict=True):
        uses = seen.get(args)
        if uses is None:
            region, own, spot, extra, cpu, gpu = args
            by_market = spot is not None and spot != own
            key = (spot or own) if market == "spot" else own
            uses = seen[args] = quotas.uses(
                region, market, (key, extra), cpu, gpu, named_by_market=by_market
            )
        out.append(uses)
    return tuple(out)
