"""AWS through boto3: specs from ``ec2.describe_instance_types``, spot prices per
zone from ``ec2.describe_spot_price_history`` (Linux/UNIX, newest per type and
zone), on-demand prices from the Pricing API (``pricing.get_products``: Linux,
shared tenancy, no pre-installed software, capacity status Used). Every call is
paginated. botocore honours ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_EC2`` and
``AWS_ENDPOINT_URL_PRICING``, which is how tests point it at a local server.
Needs ``pip install 'deepvm[aws]'`` and AWS credentials.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from deepvm.base.errors import InputError
from deepvm.catalog._price_data import INSTANCE_COLUMNS, PriceData
from deepvm.catalog.common import ACCELERATOR_PEAK_FLOPS
from deepvm.catalog.http import request_timeout_s

__all__ = ["NETWORK_WORDS", "PRICING_REGION", "AwsSource", "network_gbps", "quota_group"]

# The Pricing API answers from us-east-1 (and ap-south-1) for every region.
PRICING_REGION = "us-east-1"
# "Up to 25 Gigabit" -> 25; the words AWS uses for older types, in Gbps.
NETWORK_WORDS = {"very low": 0.1, "low": 0.3, "low to moderate": 0.5, "moderate": 1.0, "high": 10.0}


def network_gbps(text: str) -> float:
    t = text.strip().lower()
    m = re.search(r"(?:(\d+)x\s*)?([\d.]+)\s*gigabit", t)
    if m:
        return float(m.group(2)) * (int(m.group(1)) if m.group(1) else 1)
    return NETWORK_WORDS.get(t, 1.0)


def quota_group(instance_type: str) -> str:
    family = re.match(r"[a-z]+", instance_type)
    prefix = family.group() if family else ""
    for start, group in (
        ("vt", "G"),
        ("g", "G"),
        ("p", "P"),
        ("inf", "Inf"),
        ("trn", "Trn"),
        ("dl", "DL"),
        ("f", "F"),
        ("x", "X"),
    ):
        if prefix.startswith(start):
            return group
    return "standard"


def _client(service: str, region: str) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise InputError("the aws price source needs boto3: pip install 'deepvm[aws]'") from None
    # One attempt per call within the fetch's deadline: the caller retries the
    # whole fetch on transient failures (deepvm.catalog.http).
    timeout = request_timeout_s()
    config = Config(
        connect_timeout=timeout, read_timeout=timeout, retries={"total_max_attempts": 1}
    )
    return boto3.client(service, region_name=region, config=config)


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in client.get_paginator(operation).paginate(**kwargs):
        items.extend(page.get(key, []))
    return items


def _specs(ec2: Any, region: str) -> pd.DataFrame:
    rows = []
    for t in _pages(ec2, "describe_instance_types", "InstanceTypes"):
        gpus = (t.get("GpuInfo") or {}).get("Gpus") or []
        name = gpus[0]["Name"] if gpus else ""
        count = sum(int(g.get("Count", 0)) for g in gpus)
        memory = (
            sum(int(g.get("Count", 0)) * g.get("MemoryInfo", {}).get("SizeInMiB", 0) for g in gpus)
            / 1024
        )
        rows.append(
            {
                "provider": "aws",
                "region": region,
                "instance_type": t["InstanceType"],
                "quota_group": quota_group(t["InstanceType"]),
                "vcpus": float(t["VCpuInfo"]["DefaultVCpus"]),
                "memory_gib": t["MemoryInfo"]["SizeInMiB"] / 1024,
                "network_gbps": network_gbps(
                    t.get("NetworkInfo", {}).get("NetworkPerformance", "")
                ),
                "accelerator_name": name,
                "accelerator_count": count,
                "accelerator_memory_gib": memory,
                "peak_flops": ACCELERATOR_PEAK_FLOPS.get(name, float("nan")) * count
                if count
                else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=INSTANCE_COLUMNS)


def _spot(ec2: Any, region: str, now: pd.Timestamp) -> tuple[list[dict[str, Any]], int]:
    history = _pages(
        ec2,
        "describe_spot_price_history",
        "SpotPriceHistory",
        ProductDescriptions=["Linux/UNIX"],
        StartTime=now.to_pydatetime(),
    )
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for h in history:
        key = (h["InstanceType"], h["AvailabilityZone"])
        if key not in newest or h["Timestamp"] > newest[key]["Timestamp"]:
            newest[key] = h
    rows, dropped = [], 0
    for (itype, zone), h in newest.items():
        price = float(h.get("SpotPrice") or 0)
        if price <= 0:
            dropped += 1
            continue
        rows.append(
            {
                "provider": "aws",
                "region": region,
                "zone": zone,
                "instance_type": itype,
                "market": "spot",
                "usd_per_hour": price,
            }
        )
    return rows, dropped


def _on_demand(pricing: Any, region: str) -> tuple[list[dict[str, Any]], int]:
    filters = [
        {"Type": "TERM_MATCH", "Field": f, "Value": v}
        for f, v in (
            ("regionCode", region),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
        )
    ]
    rows, dropped = [], 0
    for text in _pages(
        pricing, "get_products", "PriceList", ServiceCode="AmazonEC2", Filters=filters
    ):
        product = json.loads(text) if isinstance(text, str) else text
        itype = product.get("product", {}).get("attributes", {}).get("instanceType")
        prices = [
            float(dim["pricePerUnit"].get("USD", 0))
            for term in product.get("terms", {}).get("OnDemand", {}).values()
            for dim in term.get("priceDimensions", {}).values()
            if dim.get("unit", "Hrs") in ("Hrs", "Hours")
        ]
        if not itype or not prices or max(prices) <= 0:
            dropped += 1
            continue
        rows.append(
            {
                "provider": "aws",
                "region": region,
                "zone": None,
                "instance_type": itype,
                "market": "on_demand",
                "usd_per_hour": max(prices),
            }
        )
    return rows, dropped


@dataclass(frozen=True)
class AwsSource:
    regions: tuple[str, ...] = ("us-east-1",)
    name: str = "aws"

    def fetch(self) -> PriceData:
        now = pd.Timestamp(dt.datetime.now(dt.UTC))
        pricing = _client("pricing", PRICING_REGION)
        specs, rows, dropped = [], [], 0
        for region in self.regions:
            ec2 = _client("ec2", region)
            specs.append(_specs(ec2, region))
            for part, lost in (_spot(ec2, region, now), _on_demand(pricing, region)):
                rows += part
                dropped += lost
        prices = pd.DataFrame(rows)
        if not prices.empty:
            prices["fetched_at"] = now
            prices["source"] = self.name
            prices["stale"] = False
        return PriceData(pd.concat(specs, ignore_index=True), prices, self.name, dropped=dropped)
