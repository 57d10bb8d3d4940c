"""What a plan is made from (docs/ARCHITECTURE.md, "Planning"): the catalog, the
throughput and overhead tables, quotas, workloads and interruptions, from files or
the shipped data, with what the store measured (``StoredInputs``, given by the
store's readers: the planner reads no store)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from deepvm.base.tables import Table
from deepvm.catalog import Catalog, load_catalog, load_interruptions, with_interruptions
from deepvm.catalog.common import in_cloud, with_spot_price
from deepvm.catalog.quotas import Quotas, load_quotas
from deepvm.performance.flopp import (
    Published,
    load_throughput,
    merge_measurements,
    shipped_published,
)
from deepvm.performance.overhead import (
    SaturationModel,
    load_overhead_table,
    load_saturation,
    shipped_overhead_table,
)
from deepvm.performance.workloads import WORKLOADS, Workload, load_workloads
from deepvm.planner.offers import Offers, build_offers

if TYPE_CHECKING:
    pass

__all__ = ["InputFiles", "Inputs", "StoredInputs"]


class InputFiles(TypedDict, total=False):
    """The user's input files (CSV or Parquet; None or absent: the shipped data) and
    the region to plan in (None: every region)."""

    catalog: str | Path | None
    throughput: str | Path | None
    overhead: str | Path | None
    quotas: str | Path | None
    saturation: str | Path | None
    interruptions: str | Path | None
    workloads: str | Path | None
    region: str | None
    # The cloud to plan in (the catalog's provider: aws, gcp, azure; None: every one).
    cloud: str | None
    # What spot prices to plan on: "zone" (each zone's, default) or "regional"
    # (on-demand x (1 - the Advisor's regional average saving)).
    spot_price: str | None


@dataclass(frozen=True)
class StoredInputs:
    """What a store adds to the input files: its newest prices as a catalog, its
    latest benchmarks as throughput rows, its selected overhead fits. Read above
    the planner (deepvm.records.inputs); the planner never opens a store."""

    catalog: Catalog | None = None
    measured: Table | None = None
    fitted_overhead: Table | None = None


@dataclass(frozen=True)
class Inputs:
    """Everything the planner reads, loaded and validated."""

    catalog: Catalog
    quotas: Quotas
    measured: Table | None = None
    overhead_tables: tuple[Table, ...] = ()
    saturation: SaturationModel = field(default_factory=SaturationModel)
    published: Published = field(default_factory=shipped_published)
    workloads: Mapping[str, Workload] = field(default_factory=lambda: dict(WORKLOADS))
    # Offers per workload, built once: Inputs never change and Offers are immutable
    # (a sweep or a fleet plans one workload many times).
    _offers: dict[str, Offers] = field(default_factory=dict, init=False, compare=False, repr=False)

    @classmethod
    def load(cls, *, stored: StoredInputs | None = None, **files: Unpack[InputFiles]) -> Inputs:
        """Read the input files (None: the shipped data) and join what a store
        holds (``stored``, read by :func:`deepvm.records.inputs.load_inputs`).
        Precedence: a catalog file, else the store's prices, else the shipped
        snapshot; user overhead rows, then the store's fits, then the shipped
        defaults; ``throughput`` rows over the store's benchmarks.
        ``interruptions`` overrides the catalog's spot interruption rates;
        ``spot_price`` says which spot prices to plan on (zone, regional)."""
        stored = stored or StoredInputs()
        catalog, region = files.get("catalog"), files.get("region")
        overhead, throughput = files.get("overhead"), files.get("throughput")
        interruptions, saturation = files.get("interruptions"), files.get("saturation")
        declared = files.get("workloads")
        tables = [load_overhead_table(overhead)] if overhead is not None else []
        if stored.fitted_overhead is not None:
            tables.append(stored.fitted_overhead)
        tables.append(shipped_overhead_table())
        planned = (
            stored.catalog
            if catalog is None and stored.catalog is not None
            else load_catalog(catalog, region=region)
        )
        if files.get("cloud") is not None:
            planned = in_cloud(planned, str(files.get("cloud")))
        if interruptions is not None:
            planned = with_interruptions(planned, load_interruptions(interruptions))
        planned = with_spot_price(planned, files.get("spot_price") or "zone")
        return cls(
            catalog=planned,
            quotas=load_quotas(files.get("quotas")),
            measured=merge_measurements(
                stored.measured,
                load_throughput(throughput) if throughput is not None else None,
            ),
            overhead_tables=tuple(tables),
            saturation=(
                load_saturation(saturation) if saturation is not None else SaturationModel()
            ),
            workloads=load_workloads(declared) if declared is not None else dict(WORKLOADS),
        )

    def offers(self, workload: str) -> Offers:
        if workload not in self._offers:
            self._offers[workload] = build_offers(
                self.catalog,
                workload,
                quotas=self.quotas,
                measured=self.measured,
                published=self.published,
                workloads=self.workloads,
                overhead_tables=self.overhead_tables,
                saturation=self.saturation,
            )
        return self._offers[workload]
