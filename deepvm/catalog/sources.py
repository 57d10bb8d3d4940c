"""Price sources: one interface, one module per source (snapshot today; AWS,
Azure and SkyPilot plug in the same way). Each returns instance specs and
long-format prices (DESIGN §3 ``instances`` and ``prices``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pandas as pd

from deepvm.catalog.common import Catalog, validate_catalog
from deepvm.catalog.snapshot import load_catalog

INSTANCE_COLUMNS = [
    "provider",
    "region",
    "instance_type",
    "quota_group",
    "vcpus",
    "memory_gib",
    "network_gbps",
    "accelerator_name",
    "accelerator_count",
    "accelerator_memory_gib",
    "peak_flops",
]


@dataclass(frozen=True)
class PriceData:
    instances: pd.DataFrame  # INSTANCE_COLUMNS
    prices: pd.DataFrame  # provider, region, zone, instance_type, market, usd_per_hour, ...
    source: str


class PriceSource(Protocol):
    @property
    def name(self) -> str: ...

    def fetch(self) -> PriceData: ...


def catalog_to_price_data(
    catalog: Catalog, source: str, fetched_at: dt.datetime | None = None
) -> PriceData:
    """A wide catalog (one row per type, two price columns) as specs + long prices."""
    df = catalog.instances
    when = pd.Timestamp(fetched_at or dt.datetime.now(dt.UTC))
    parts = []
    for market, column in (("on_demand", "ondemand_price"), ("spot", "spot_price")):
        part = df[df[column].notna()][["provider", "region", "instance_type"]].copy()
        part["zone"] = None
        part["market"] = market
        part["usd_per_hour"] = df.loc[part.index, column].astype(float)
        parts.append(part)
    prices = pd.concat(parts, ignore_index=True)
    prices["fetched_at"] = when
    prices["source"] = source
    prices["stale"] = False
    instances = df[INSTANCE_COLUMNS].copy()
    instances["accelerator_count"] = instances["accelerator_count"].astype(int)
    return PriceData(instances.reset_index(drop=True), prices, source)


@dataclass(frozen=True)
class SnapshotSource:
    """The shipped snapshot, or a catalog file in the same layout."""

    path: str | None = None
    name: str = "snapshot"

    def fetch(self) -> PriceData:
        return catalog_to_price_data(load_catalog(self.path), self.name)


SOURCES: dict[str, Callable[[], PriceSource]] = {"snapshot": SnapshotSource}


def get_source(name: str) -> PriceSource:
    from deepvm.errors import InputError

    if name in SOURCES:
        return SOURCES[name]()
    if Path(name).suffix.lower() in (".csv", ".parquet", ".pq"):
        return SnapshotSource(name, name=f"file:{Path(name).name}")
    raise InputError(
        f"unknown price source {name!r}; known: {', '.join(SOURCES)} "
        "or a catalog file (.csv/.parquet)"
    )


def catalog_from_tables(instances: pd.DataFrame, prices: pd.DataFrame, label: str) -> Catalog:
    """The planner's wide catalog from stored specs and one snapshot of prices
    (the cheapest zone per type and market where prices are per zone)."""
    best = prices.groupby(["instance_type", "market"])["usd_per_hour"].min().unstack()
    wide = instances.set_index("instance_type").join(best, how="inner").reset_index()
    wide = wide.rename(columns={"on_demand": "ondemand_price", "spot": "spot_price"})
    for column in ("ondemand_price", "spot_price"):
        if column not in wide:
            wide[column] = float("nan")
    wide = wide[wide["ondemand_price"].notna()]
    return Catalog(validate_catalog(wide), snapshot=label)
