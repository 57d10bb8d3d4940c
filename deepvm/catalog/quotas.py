"""Account quotas per quota key and market, each in its own unit. AWS counts
running vCPUs per instance-family group, separately for Spot and On-Demand; GCP
counts GPUs per GPU model (``NVIDIA_A100_GPUS``, ``PREEMPTIBLE_NVIDIA_A100_GPUS``)
and vCPUs per region (``CPUS``); Azure vCPUs per VM family and one regional Spot
vCPU quota. A catalog row names the keys its nodes count against
(``deepvm.catalog``: quota_group, spot_quota_group, regional_quota_group,
spot_regional_quota_group); the quota's unit says what one node takes of it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from deepvm.base.datasets import dataset_path
from deepvm.base.errors import InputError
from deepvm.base.tables import (
    Table,
    numeric_column,
    optional_text,
    read_table,
    reject_duplicates,
    text_column,
)

__all__ = [
    "MARKETS",
    "QUOTA_COLUMNS",
    "UNITS",
    "UNIT_WORDS",
    "NodeQuota",
    "QuotaKey",
    "Quotas",
    "load_quotas",
]

MARKETS = ("spot", "on_demand")
# The limit's column is ``limit`` (or ``vcpus``, its name before units).
QUOTA_COLUMNS = ("quota_group", "market")
UNITS = ("vcpus", "gpus")
# How a unit is written in explanations.
UNIT_WORDS = {"vcpus": "vCPUs", "gpus": "GPUs"}
# (region, quota key, market): what one quota limit counts; "" region: every region.
QuotaKey = tuple[str, str, str]


@dataclass(frozen=True)
class NodeQuota:
    """What one node takes of one quota: the key, the amount (in the key's unit)
    and how explanations name the quota."""

    key: QuotaKey
    per_node: float
    unit: str = "vcpus"
    label: str = ""  # e.g. "G spot" (AWS) or "PREEMPTIBLE_NVIDIA_A100_GPUS" (GCP)

    def words(self, limit: float | None = None) -> str:
        """E.g. ``the PREEMPTIBLE_NVIDIA_A100_GPUS quota in us-central1 (16 GPUs)``."""
        region = self.key[0]
        where = f" in {region}" if region else ""
        amount = f" ({limit:g} {UNIT_WORDS[self.unit]})" if limit is not None else ""
        return f"the {self.label or self.key[1]} quota{where}{amount}"


@dataclass(frozen=True)
class Quotas:
    """vCPU limits per quota group and market, each region counted on its own (AWS
    counts vCPUs per region). ``limits``, keyed by (quota_group, market), apply to
    every region separately; ``regional``, keyed by (region, quota_group, market),
    override them for one region. A group neither names is unlimited."""

    limits: Mapping[tuple[str, str], float] = field(default_factory=dict)
    regional: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    # Per quota key, its unit (UNITS); a key not named counts vCPUs.
    units: Mapping[str, str] = field(default_factory=dict)

    def limit(self, group: str, market: str, region: str = "") -> float:
        regional = self.regional.get((region, group, market))
        return regional if regional is not None else self.limits.get((group, market), math.inf)

    def unit(self, group: str) -> str:
        return self.units.get(group, "vcpus")

    def key_limit(self, key: QuotaKey) -> float:
        region, group, market = key
        return self.limit(group, market, region)

    def uses(
        self,
        region: str,
        market: str,
        keys: tuple[str | None, str | None],
        vcpus: float,
        gpus: float,
        *,
        named_by_market: bool,
    ) -> tuple[NodeQuota, ...]:
        """What one node of a type takes of each quota it counts against in
        ``market``: its key (``keys[0]``, in that key's unit) and its regional vCPU
        key (``keys[1]``), where given. ``named_by_market``: the key's name already
        says the market (GCP's PREEMPTIBLE_*), so explanations do not repeat it."""
        out = []
        for k, group in enumerate(keys):
            if not group:
                continue
            unit = self.unit(group) if k == 0 else "vcpus"
            label = group if named_by_market or k == 1 else f"{group} {market.replace('_', '-')}"
            amount = gpus if unit == "gpus" else vcpus
            out.append(NodeQuota((region, group, market), float(amount), unit, label))
        return tuple(out)


def load_quotas(path: str | Path | None = None) -> Quotas:
    """The quota table from a file, or the shipped defaults (docs/ARCHITECTURE.md,
    "Reference scenario"). Columns: quota_group, market, limit (or vcpus), and
    optionally region (a row with a region overrides the regionless row of its key
    and market there; one without applies to every region), unit (vcpus, the
    default, or gpus), cloud and source (where the figure is from)."""
    source = Path(path) if path is not None else dataset_path("quotas-default.csv")
    raw = read_table(source, QUOTA_COLUMNS, "quotas")
    column = "limit" if "limit" in raw else "vcpus"
    if column not in raw:
        raise InputError(f"quotas file {str(source)!r} lacks column limit (or vcpus)")
    regions = optional_text(raw["region"]) if "region" in raw else [None] * len(raw)
    units = optional_text(raw["unit"]) if "unit" in raw else [None] * len(raw)
    table = Table(
        {
            "region": np.array([r or "" for r in regions], dtype=object),
            "quota_group": text_column(raw, "quota_group", "quotas", key="quota_group"),
            "market": text_column(raw, "market", "quotas", key="quota_group"),
            "unit": np.array([u or "vcpus" for u in units], dtype=object),
        },
        raw.source_path,
    )
    for i, (market, unit) in enumerate(zip(table["market"], table["unit"], strict=True)):
        if market not in MARKETS:
            raise InputError(
                f"quotas file {str(source)!r}: row {i + 1}: market={market!r} "
                f"must be one of {', '.join(MARKETS)}"
            )
        if unit not in UNITS:
            raise InputError(
                f"quotas file {str(source)!r}: row {i + 1}: unit={unit!r} "
                f"must be one of {', '.join(UNITS)}"
            )
    values = numeric_column(raw, column, "quotas", minimum=0, integer=True, key="quota_group")
    reject_duplicates(table, ["region", "quota_group", "market"], "quotas")
    key_units: dict[str, str] = {}
    for i, (group, unit) in enumerate(zip(table["quota_group"], table["unit"], strict=True)):
        if key_units.setdefault(group, unit) != unit:
            raise InputError(
                f"quotas file {str(source)!r}: row {i + 1}: quota_group={group!r} is counted "
                f"in {key_units[group]} on another row and in {unit} here: one unit per key"
            )
    rows = zip(table["region"], table["quota_group"], table["market"], values, strict=True)
    limits: dict[tuple[str, str], float] = {}
    regional: dict[tuple[str, str, str], float] = {}
    for region, group, market, value in rows:
        if region:
            regional[region, group, market] = float(value)
        else:
            limits[group, market] = float(value)
    return Quotas(limits, regional, key_units)
