"""SkyPilot catalogs: a ``vms.csv`` (InstanceType, AcceleratorName,
AcceleratorCount, vCPUs, MemoryGiB, GpuInfo, Price, SpotPrice, Region,
AvailabilityZone[, Arch]) from a path or URL.

The file has no network bandwidth or quota group: bandwidth comes from the
shipped AWS snapshot where it lists the type, else DEFAULT_NETWORK_GBPS; the
quota group is the AWS family group (G, P, standard) for AWS names, else the
family letters. Peak FLOP/s come from the shipped per-accelerator table.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from deepvm.base.errors import InputError
from deepvm.catalog._price_data import INSTANCE_COLUMNS, PriceData
from deepvm.catalog._snapshot import load_catalog
from deepvm.catalog.common import ACCELERATOR_PEAK_FLOPS
from deepvm.catalog.http import get_text

__all__ = ["COLUMNS", "DEFAULT_NETWORK_GBPS", "SkyPilotSource"]

COLUMNS = (
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "Price",
    "SpotPrice",
    "Region",
    "AvailabilityZone",
)
DEFAULT_NETWORK_GBPS = 10.0


def _quota_group(instance_type: str) -> str:
    family = re.match(r"[a-z]+", instance_type)
    if family and "." in instance_type:  # an AWS name such as g5.xlarge
        letter = family.group()[0]
        return {"g": "G", "p": "P", "v": "G"}.get(letter, "standard")
    return (
        re.sub(
            r"[^A-Za-z]", "", instance_type.split("_")[1] if "_" in instance_type else instance_type
        )[:8]
        or "default"
    )


@dataclass(frozen=True)
class SkyPilotSource:
    path: str
    provider: str = "aws"
    name: str = "skypilot"

    def _read(self) -> pd.DataFrame:
        if self.path.startswith(("http://", "https://")):
            text = get_text(self.path)
        else:
            try:
                text = Path(self.path).read_text()
            except FileNotFoundError:
                raise InputError(f"SkyPilot catalog {self.path!r} does not exist") from None
        df = pd.read_csv(io.StringIO(text))
        missing = [c for c in COLUMNS if c not in df.columns]
        if missing:
            raise InputError(f"SkyPilot catalog {self.path!r} lacks column(s) {', '.join(missing)}")
        return df

    def fetch(self) -> PriceData:
        df = self._read()
        now = pd.Timestamp(dt.datetime.now(dt.UTC))
        shipped = load_catalog().instances.drop_duplicates("instance_type")
        known = shipped.set_index("instance_type")["network_gbps"]
        memory = shipped.set_index("instance_type")["accelerator_memory_gib"]
        rows, dropped = [], 0
        for r in df.to_dict("records"):
            for market, column in (("on_demand", "Price"), ("spot", "SpotPrice")):
                price = pd.to_numeric(r.get(column), errors="coerce")
                if pd.isna(price) or price <= 0:
                    dropped += 1
                    continue
                zone = r.get("AvailabilityZone")
                rows.append(
                    {
                        "provider": self.provider,
                        "region": r["Region"],
                        "zone": zone if isinstance(zone, str) and zone else None,
                        "instance_type": r["InstanceType"],
                        "market": market,
                        "usd_per_hour": float(price),
                        "fetched_at": now,
                        "source": self.name,
                        "stale": False,
                    }
                )
        specs = df.drop_duplicates(["InstanceType", "Region"])
        accel = specs["AcceleratorName"].fillna("").astype(str)
        count = pd.to_numeric(specs["AcceleratorCount"], errors="coerce").fillna(0)
        instances = pd.DataFrame(
            {
                "provider": self.provider,
                "region": specs["Region"],
                "instance_type": specs["InstanceType"],
                "quota_group": specs["InstanceType"].map(_quota_group),
                "vcpus": pd.to_numeric(specs["vCPUs"], errors="coerce"),
                "memory_gib": pd.to_numeric(specs["MemoryGiB"], errors="coerce"),
                "network_gbps": specs["InstanceType"].map(known).fillna(DEFAULT_NETWORK_GBPS),
                "accelerator_name": accel,
                "accelerator_count": count.astype(int),
                "accelerator_memory_gib": specs["InstanceType"].map(memory).fillna(0.0),
                "peak_flops": [
                    ACCELERATOR_PEAK_FLOPS.get(a, float("nan")) * c if c else float("nan")
                    for a, c in zip(accel, count, strict=True)
                ],
            }
        )
        return PriceData(
            instances.reindex(columns=INSTANCE_COLUMNS).reset_index(drop=True),
            pd.DataFrame(rows),
            self.name,
            dropped=dropped,
        )
