"""Price sources by name (``get_source``): the shipped snapshot or a catalog file,
and AWS, GCP, Azure and SkyPilot, each a module of its own that speaks the
interface of ``deepvm.catalog._price_data``; and the planner's catalog from stored
specs and prices (docs/ARCHITECTURE.md, "The store": ``instances`` and ``prices``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from deepvm.catalog._price_data import INSTANCE_COLUMNS, PriceData, PriceSource
from deepvm.catalog._snapshot import load_catalog
from deepvm.catalog.common import Catalog, validate_catalog

__all__ = [
    "EXTRA_SOURCES",
    "SnapshotSource",
    "catalog_from_tables",
    "catalog_to_price_data",
    "fill_interruption_rates",
    "fill_price_dates",
    "get_source",
]


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
        part["interruption_rate"] = (
            df.loc[part.index, "interruption_rate"].astype(float) if market == "spot" else None
        )
        part["zone"] = df.loc[part.index, "spot_zone"] if market == "spot" else None
        part["price_date"] = df.loc[part.index, "price_date"]
        part["source"] = [
            f"{source}:{origin}" if isinstance(origin, str) and origin else source
            for origin in df.loc[part.index, "price_source"]
        ]
        parts.append(part)
    prices = pd.concat(parts, ignore_index=True)
    prices["fetched_at"] = when
    prices["stale"] = False
    prices["interruption_rate"] = prices["interruption_rate"].astype(float)
    instances = df.reindex(columns=INSTANCE_COLUMNS)
    instances["accelerator_count"] = instances["accelerator_count"].astype(int)
    return PriceData(instances.reset_index(drop=True), prices, source)


@dataclass(frozen=True)
class SnapshotSource:
    """The shipped snapshot, or a catalog file in the same layout."""

    path: str | None = None
    name: str = "snapshot"

    def fetch(self) -> PriceData:
        return catalog_to_price_data(load_catalog(self.path), self.name)


def get_source(
    name: str, *, regions: Sequence[str] | None = None, skypilot_csv: str | None = None
) -> PriceSource:
    """A source by name: snapshot, aws, gcp, azure, skypilot, or a catalog file path."""
    from deepvm.base.errors import InputError, ParameterError

    if skypilot_csv is not None and name != "skypilot":  # refused, not ignored
        raise ParameterError(
            "skypilot_csv",
            skypilot_csv,
            f"is the file of the skypilot price source, and the source is {name!r}: "
            "choose the skypilot source, or give no SkyPilot file",
        )
    if name == "snapshot":
        return SnapshotSource()
    if name == "azure":
        from deepvm.catalog._azure import AzureSource

        return AzureSource(tuple(regions or ("eastus",)))
    if name == "gcp":
        from deepvm.catalog._gcp import GcpSource

        return GcpSource(tuple(regions or ()))
    if name == "aws":
        from deepvm.catalog._aws import AwsSource

        return AwsSource(tuple(regions or ("us-east-1",)))
    if name == "skypilot":
        from deepvm.catalog._skypilot import SkyPilotSource

        if not skypilot_csv:
            raise ParameterError(
                "skypilot_csv",
                ParameterError.MISSING,
                "is needed by the skypilot price source: the SkyPilot catalog CSV "
                "(vms.csv, a path or an http(s) URL)",
            )
        return SkyPilotSource(skypilot_csv)
    if name in EXTRA_SOURCES:
        return EXTRA_SOURCES[name]()
    if Path(name).suffix.lower() in (".csv", ".parquet", ".pq"):
        return SnapshotSource(name, name=f"file:{Path(name).name}")
    raise InputError(
        f"unknown price source {name!r}; known: snapshot, aws, gcp, azure, skypilot "
        "or a catalog file (.csv/.parquet)"
    )


# Sources registered at run time (plugins, tests): name -> factory.
EXTRA_SOURCES: dict[str, Callable[[], PriceSource]] = {}


def catalog_from_tables(
    instances: pd.DataFrame, prices: pd.DataFrame, label: str, region: str | None = None
) -> Catalog:
    """The planner's wide catalog from stored specs and one snapshot of prices, in
    every region (or ``region`` alone). Spot prices are per zone where the source
    has zones: the catalog takes the cheapest zone per type and region and names
    it (``spot_zone``)."""
    from deepvm.base.errors import InputError

    if region is not None:
        known = sorted(set(prices["region"].dropna()))
        prices = prices[prices["region"] == region]
        if prices.empty:
            raise InputError(
                f"no prices for region {region!r}; the snapshot has: {', '.join(known)}"
            )
    key = ["region", "instance_type"]
    cheapest = prices.sort_values("usd_per_hour").drop_duplicates([*key, "market"])
    wide_prices = cheapest.pivot(index=key, columns="market", values="usd_per_hour")
    spot = cheapest[cheapest["market"] == "spot"].set_index(key)
    specs = instances.drop_duplicates(key, keep="last").set_index(key)
    wide = specs.join(wide_prices, how="inner").reset_index()
    wide = wide.rename(columns={"on_demand": "ondemand_price", "spot": "spot_price"})
    for column in ("ondemand_price", "spot_price"):
        if column not in wide:
            wide[column] = float("nan")
    wide = wide[wide["ondemand_price"].notna()]
    index = pd.MultiIndex.from_frame(wide[key])
    wide["spot_zone"] = spot["zone"].reindex(index).to_numpy()
    rates = spot.get("interruption_rate")
    wide["interruption_rate"] = (
        rates.reindex(index).to_numpy(dtype=float) if rates is not None else float("nan")
    )
    on_demand = cheapest[cheapest["market"] == "on_demand"].set_index(key)
    for column, target in (("price_date", "price_date"), ("source", "price_source")):
        values = on_demand[column] if column in on_demand else pd.Series(dtype=object)
        wide[target] = values.reindex(index).to_numpy(dtype=object)
    if wide.empty:
        raise InputError(f"the {label} prices match no instance type the store describes")
    return Catalog(validate_catalog(wide.reset_index(drop=True)), snapshot=label)


def fill_price_dates(prices: pd.DataFrame) -> pd.DataFrame:
    """Rows without a ``price_date`` (live APIs: prices as of the fetch) take the
    day they were fetched, so every stored price says what date it is from."""
    out = prices.copy()
    fetched = pd.to_datetime(out["fetched_at"], utc=True).dt.strftime("%Y-%m-%d")
    if "price_date" not in out:
        out["price_date"] = None
    missing = out["price_date"].isna() | (out["price_date"].astype(str) == "")
    out["price_date"] = out["price_date"].astype(object).where(~missing, fetched)
    return out


def fill_interruption_rates(prices: pd.DataFrame) -> pd.DataFrame:
    """Spot rows without a rate (live price APIs do not publish one) take the
    shipped Spot Instance Advisor rate of their region and type, so every stored
    snapshot carries the rates it was planned with."""
    from deepvm.catalog.spot_advisor import shipped_advisor

    # Buckets differ by region (p4d.24xlarge: 10-15 % in us-east-1, >20 % in us-west-2).
    shipped = shipped_advisor().set_index(["region", "instance_type"])["interruption_rate"]
    out = prices.copy()
    if "interruption_rate" not in out:
        out["interruption_rate"] = float("nan")
    out["interruption_rate"] = out["interruption_rate"].astype(float)
    missing = (out["market"] == "spot") & out["interruption_rate"].isna()
    if missing.any():
        keys = pd.MultiIndex.from_frame(out.loc[missing, ["region", "instance_type"]])
        out.loc[missing, "interruption_rate"] = shipped.reindex(keys).to_numpy(dtype=float)
    return out
