"""Account vCPU quotas per quota group and market (AWS counts running vCPUs per
instance-family group, separately for Spot and On-Demand)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deepvm._datasets import dataset_path
from deepvm.errors import InputError
from deepvm.inputs import numeric_column, read_table, reject_duplicates, text_column

MARKETS = ("spot", "on_demand")
QUOTA_COLUMNS = ("quota_group", "market", "vcpus")


@dataclass(frozen=True)
class Quotas:
    """vCPU limits keyed by (quota_group, market). A group the table does not
    name is unlimited in that market."""

    limits: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def limit(self, group: str, market: str) -> float:
        return self.limits.get((group, market), math.inf)


def load_quotas(path: str | Path | None = None) -> Quotas:
    """The quota table from a file, or the shipped defaults (DESIGN §7)."""
    source = Path(path) if path is not None else dataset_path("quotas-default.csv")
    df = read_table(source, QUOTA_COLUMNS, "quotas")
    df["quota_group"] = text_column(df, "quota_group", "quotas", key="quota_group")
    df["market"] = text_column(df, "market", "quotas", key="quota_group")
    bad = df[~df["market"].isin(MARKETS)]
    if not bad.empty:
        i = int(bad.index[0])
        raise InputError(
            f"quotas file {str(source)!r}: row {i + 1}: market={df['market'].iloc[i]!r} "
            f"must be one of {', '.join(MARKETS)}"
        )
    vcpus = numeric_column(df, "vcpus", "quotas", minimum=0, key="quota_group")
    reject_duplicates(df, ["quota_group", "market"], "quotas")
    return Quotas(
        {(g, m): float(v) for g, m, v in zip(df["quota_group"], df["market"], vcpus, strict=True)}
    )
