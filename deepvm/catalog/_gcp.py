"""GCP: SkyPilot's public GCP catalog (``catalogs/v8/gcp/vms.csv``), from its
URL or a copy (``DEEPVM_GCP_PRICES_URL``: a URL or a path).

GCP sells GPUs attached to a host VM: the file has host rows (an InstanceType,
no accelerator) and GPU rows (an accelerator and count, no InstanceType), each
per zone. An instance's price in a zone is its host's plus its GPUs', on demand
and spot alike. Which host carries which GPUs, and each type's specs and quota
keys, come from the shipped ``catalog-gcp.csv`` (scripts/catalog_gcp.py): the
source names the same types as the shipped snapshot, at today's prices. A zone
whose GPU spot price is above its on-demand price (a defect of the source for
A100-80GB) gets no spot price there; both are counted in ``dropped``.
"""

from __future__ import annotations

import datetime as dt
import io
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from deepvm.base.datasets import dataset_path
from deepvm.catalog._price_data import INSTANCE_COLUMNS, PriceData
from deepvm.catalog.http import SourceUnavailable, get_text

__all__ = ["COLUMNS", "DEFAULT_URL", "ENV_URL", "GcpSource"]

DEFAULT_URL = (
    "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs/v8/gcp/vms.csv"
)
ENV_URL = "DEEPVM_GCP_PRICES_URL"
COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Region", "Price", "SpotPrice")


@dataclass(frozen=True)
class GcpSource:
    regions: tuple[str, ...] = ()  # empty: the shipped catalog's GCP regions
    name: str = "gcp"

    def fetch(self) -> PriceData:
        where = os.environ.get(ENV_URL, DEFAULT_URL)
        df = _read(where)
        shipped = _shipped()
        regions = set(self.regions or shipped["region"])
        df = df[df["Region"].isin(regions)]
        zone = df["AvailabilityZone"] if "AvailabilityZone" in df else df["Region"]
        df = df.assign(zone=zone)
        is_gpu = df["InstanceType"].isna() | (df["InstanceType"] == "")
        gpus, hosts = df[is_gpu], df[~is_gpu]
        host_price = {(r.InstanceType, r.zone): (r.Price, r.SpotPrice) for r in hosts.itertuples()}
        now = pd.Timestamp(dt.datetime.now(dt.UTC))
        rows, dropped = [], 0
        for s in shipped.itertuples():
            host, _, _ = str(s.instance_type).partition("+")
            if s.accelerator_count:
                pick = (gpus["AcceleratorName"] == s.accelerator_name) & (
                    pd.to_numeric(gpus["AcceleratorCount"]) == s.accelerator_count
                )
                parts = gpus[pick & (gpus["Region"] == s.region)]
            else:  # a CPU-only type: the host alone
                parts = hosts[(hosts["InstanceType"] == host) & (hosts["Region"] == s.region)]
            for part in parts.itertuples():
                base = (0.0, 0.0) if not s.accelerator_count else host_price.get((host, part.zone))
                if base is None:
                    continue  # the host is not sold in this zone
                for market, gpu_price, host_part in (
                    ("on_demand", part.Price, base[0]),
                    ("spot", part.SpotPrice, base[1]),
                ):
                    price = pd.to_numeric(gpu_price, errors="coerce")
                    extra = pd.to_numeric(host_part, errors="coerce")
                    bad = pd.isna(price) or price <= 0 or pd.isna(extra)
                    if market == "spot" and not bad and s.accelerator_count:
                        bad = price > pd.to_numeric(part.Price, errors="coerce")  # the defect
                    if bad:
                        dropped += 1
                        continue
                    rows.append(
                        {
                            "provider": "gcp",
                            "region": s.region,
                            "zone": part.zone,
                            "instance_type": s.instance_type,
                            "market": market,
                            "usd_per_hour": float(price + (extra if s.accelerator_count else 0)),
                            "fetched_at": now,
                            "source": self.name,
                            "stale": False,
                        }
                    )
        if not rows:
            raise SourceUnavailable(
                f"the GCP catalog at {where} prices none of the shipped GCP types in "
                f"{', '.join(sorted(regions))}"
            )
        prices = pd.DataFrame(rows)
        instances = shipped[shipped["region"].isin(set(prices["region"]))]
        return PriceData(
            instances.reindex(columns=INSTANCE_COLUMNS).reset_index(drop=True),
            prices,
            self.name,
            dropped=dropped,
        )


def _read(where: str) -> pd.DataFrame:
    from deepvm.base.errors import InputError

    if where.startswith(("http://", "https://")):
        text = get_text(where)
    else:
        try:
            text = Path(where).read_text()
        except OSError as exc:
            raise InputError(f"GCP catalog {where!r} cannot be read: {exc.strerror}") from None
    df = pd.read_csv(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SourceUnavailable(
            f"the GCP catalog at {where} lacks column(s) {', '.join(missing)}: "
            "is it SkyPilot's gcp/vms.csv?"
        )
    return df


def _shipped() -> pd.DataFrame:
    """The shipped GCP types: which host carries which GPUs, specs, quota keys."""
    from deepvm.catalog._snapshot import load_catalog

    return load_catalog(dataset_path("catalog-gcp.csv")).instances
