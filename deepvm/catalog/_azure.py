"""Azure: the public Retail Prices REST API (no credentials).

Pages are followed through ``NextPageLink`` as given. Spot rows are those whose
meter or SKU name says Spot; Windows, Low Priority and reservation rows are
skipped. The API has no hardware specs, so instance specs come from the shipped
``datasets/azure-specs.csv`` (GPU and remote-node SKUs); prices of SKUs it does
not list are kept in ``prices`` but cannot be planned with.
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from dataclasses import dataclass

import pandas as pd

from deepvm.base.datasets import dataset_path
from deepvm.catalog._price_data import INSTANCE_COLUMNS, PriceData
from deepvm.catalog.http import get_json

__all__ = ["DEFAULT_URL", "ENV_URL", "AzureSource", "classify"]

DEFAULT_URL = "https://prices.azure.com/api/retail/prices"
ENV_URL = "DEEPVM_AZURE_PRICES_URL"


def _filter(region: str) -> str:
    return (
        f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' "
        "and priceType eq 'Consumption'"
    )


def classify(item: dict[str, object]) -> str | None:
    """'spot', 'on_demand', or None for rows that are not Linux pay-as-you-go."""
    meter = str(item.get("meterName", ""))
    sku = str(item.get("skuName", ""))
    product = str(item.get("productName", ""))
    if item.get("type") != "Consumption" or "Windows" in product:
        return None
    if "Low Priority" in meter or "Low Priority" in sku:
        return None
    return "spot" if ("Spot" in meter or "Spot" in sku) else "on_demand"


@dataclass(frozen=True)
class AzureSource:
    regions: tuple[str, ...] = ("eastus",)
    name: str = "azure"

    def fetch(self) -> PriceData:
        base = os.environ.get(ENV_URL, DEFAULT_URL)
        now = pd.Timestamp(dt.datetime.now(dt.UTC))
        rows, dropped = [], 0
        for region in self.regions:
            url: str | None = base + "?" + urllib.parse.urlencode({"$filter": _filter(region)})
            while url:
                page = get_json(url)
                for item in page.get("Items", []):
                    market = classify(item)
                    if market is None:
                        continue
                    price = item.get("retailPrice")
                    if not isinstance(price, int | float) or price <= 0:
                        dropped += 1
                        continue
                    rows.append(
                        {
                            "provider": "azure",
                            "region": item.get("armRegionName", region),
                            "zone": None,
                            "instance_type": item.get("armSkuName"),
                            "market": market,
                            "usd_per_hour": float(price),
                            "fetched_at": now,
                            "source": self.name,
                            "stale": False,
                        }
                    )
                url = page.get("NextPageLink") or None
        prices = pd.DataFrame(rows)
        if not prices.empty:
            prices = prices[prices["instance_type"].notna() & (prices["instance_type"] != "")]
            prices = prices.sort_values("usd_per_hour").drop_duplicates(
                ["region", "instance_type", "market"]
            )
        specs = pd.read_csv(dataset_path("azure-specs.csv"))
        instances = specs[specs["instance_type"].isin(set(prices.get("instance_type", [])))]
        return PriceData(
            instances.reindex(columns=INSTANCE_COLUMNS).reset_index(drop=True),
            prices.reset_index(drop=True),
            self.name,
            dropped=dropped,
        )
