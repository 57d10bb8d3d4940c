"""Account vCPU quotas per quota group and market (AWS counts running vCPUs per
instance-family group, separately for Spot and On-Demand)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from deepvm._datasets import dataset_path
from deepvm.errors import InputError
from deepvm.tables import (
    Table,
    numeric_column,
    optional_text,
    read_table,
    reject_duplicates,
    text_column,
)

MARKETS = ("spot", "on_demand")
QUOTA_COLUMNS = ("quota_group", "market", "vcpus")


@dataclass(frozen=True)
class Quotas:
    """vCPU limits per quota group and market, each region counted on its own (AWS
    counts vCPUs per region). ``limits``, keyed by (quota_group, market), apply to
    every region separately; ``regional``, keyed by (region, quota_group, market),
    override them for one region. A group neither names is unlimited."""

    limits: Mapping[tuple[str, str], float] = field(default_factory=dict)
    regional: Mapping[tuple[str, str, str], float] = field(default_factory=dict)

    def limit(self, group: str, market: str, region: str = "") -> float:
        regional = self.regional.get((region, group, market))
        return regional if regional is not None else self.limits.get((group, market), math.inf)


def load_quotas(path: str | Path | None = None) -> Quotas:
    """The quota table from a file, or the shipped defaults (docs/ARCHITECTURE.md,
    "Reference scenario"). An optional ``region`` column: a row with a region
    overrides the regionless row of its group and market there; a row without
    one applies to every region."""
    source = Path(path) if path is not None else dataset_path("quotas-default.csv")
    raw = read_table(source, QUOTA_COLUMNS, "quotas")
    regions = optional_text(raw["region"]) if "region" in raw else [None] * len(raw)
    table = Table(
        {
            "region": np.array([r or "" for r in regions], dtype=object),
            "quota_group": text_column(raw, "quota_group", "quotas", key="quota_group"),
            "market": text_column(raw, "market", "quotas", key="quota_group"),
        },
        raw.source_path,
    )
    for i, market in enumerate(table["market"]):
        if market not in MARKETS:
            raise InputError(
                f"quotas file {str(source)!r}: row {i + 1}: market={market!r} "
                f"must be one of {', '.join(MARKETS)}"
            )
    vcpus = numeric_column(raw, "vcpus", "quotas", minimum=0, integer=True, key="quota_group")
    reject_duplicates(table, ["region", "quota_group", "market"], "quotas")
    rows = zip(table["region"], table["quota_group"], table["market"], vcpus, strict=True)
    limits: dict[tuple[str, str], float] = {}
    regional: dict[tuple[str, str, str], float] = {}
    for region, group, market, value in rows:
        if region:
            regional[region, group, market] = float(value)
        else:
            limits[group, market] = float(value)
    return Quotas(limits, regional)
