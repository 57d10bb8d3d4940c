"""What every catalog source returns: a validated :class:`Catalog`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from deepvm.errors import InputError
from deepvm.inputs import (
    numeric_column,
    read_table,
    reject_duplicates,
    source_label,
    text_column,
)

CATALOG_COLUMNS = (
    "provider",
    "region",
    "instance_type",
    "quota_group",
    "vcpus",
    "memory_gib",
    "network_gbps",
    "accelerator_name",
    "accelerator_count",
    "ondemand_price",
    "spot_price",
)
# Optional columns and their fill values.
OPTIONAL_COLUMNS: dict[str, object] = {
    "accelerator_memory_gib": 0.0,
    "peak_flops": float("nan"),
    "spot_zone": None,  # the zone of the spot price, where the source has zones
    # Fraction of spot instances reclaimed per month (NaN: unknown); a catalog may
    # give Spot Instance Advisor buckets instead, in `interruption_bucket`.
    "interruption_rate": float("nan"),
}


# Dense FP16/BF16 peak FLOP/s of one accelerator (FP32 where it has no tensor cores),
# for sources that name accelerators but not their speed.
ACCELERATOR_PEAK_FLOPS = {
    "T4": 6.5e13,
    "A10G": 7.0e13,
    "A10": 1.25e14,
    "L4": 1.21e14,
    "L40S": 3.62e14,
    "V100": 1.25e14,
    "V100-32GB": 1.25e14,
    "A100": 3.12e14,
    "A100-80GB": 3.12e14,
    "H100": 9.89e14,
    "H200": 9.89e14,
    "M60": 4.8e12,
    "K80": 4.4e12,
}


@dataclass(frozen=True)
class Catalog:
    """Instance types with their specs and prices, one row per (region, type); a
    catalog may span regions (each planned with its own quotas).

    ``instances`` has the columns of CATALOG_COLUMNS plus accelerator_memory_gib
    and peak_flops (NaN where unknown); ``spot_price`` is NaN where a type has no
    spot market. ``snapshot`` labels the prices (recorded with every result).
    """

    instances: pd.DataFrame
    snapshot: str

    @property
    def gpu(self) -> pd.DataFrame:
        return self.instances[self.instances["accelerator_count"] > 0]

    @property
    def cpu(self) -> pd.DataFrame:
        return self.instances[self.instances["accelerator_count"] == 0]

    @property
    def regions(self) -> list[str]:
        return sorted(set(self.instances["region"]))

    def __len__(self) -> int:
        return len(self.instances)


# Plausible peak FLOP/s of one node: below 1 GFLOP/s or above 100 PFLOP/s (about
# 50 eight-GPU B200 nodes) is a unit mistake (TFLOP/s given as FLOP/s, say).
MIN_PEAK_FLOPS = 1e9
MAX_PEAK_FLOPS = 1e17


def validate_catalog(df: pd.DataFrame, *, region: str | None = None) -> pd.DataFrame:
    """Check a raw catalog table and return it normalised (types, optional columns)."""
    what = "catalog"
    missing = [c for c in CATALOG_COLUMNS if c not in df.columns]
    if missing:
        path = df.attrs.get("source_path", "")
        raise InputError(f"catalog file {path!r} lacks column(s) {', '.join(missing)}")
    out = df.copy()
    for column, fill in OPTIONAL_COLUMNS.items():
        if column not in out.columns:
            out[column] = fill
    for column in ("provider", "region", "instance_type", "quota_group"):
        out[column] = text_column(out, column, what)
    out["accelerator_name"] = out["accelerator_name"].fillna("").astype(str).str.strip()
    out["vcpus"] = numeric_column(out, "vcpus", what, strictly_positive=True)
    out["memory_gib"] = numeric_column(out, "memory_gib", what, strictly_positive=True)
    out["network_gbps"] = numeric_column(out, "network_gbps", what, strictly_positive=True)
    out["accelerator_count"] = numeric_column(
        out, "accelerator_count", what, minimum=0, integer=True
    )
    out["accelerator_memory_gib"] = numeric_column(
        out, "accelerator_memory_gib", what, minimum=0, allow_missing=True
    ).fillna(0.0)
    out["peak_flops"] = numeric_column(
        out, "peak_flops", what, minimum=MIN_PEAK_FLOPS, maximum=MAX_PEAK_FLOPS, allow_missing=True
    )
    out["ondemand_price"] = numeric_column(out, "ondemand_price", what, strictly_positive=True)
    out["spot_price"] = numeric_column(
        out, "spot_price", what, strictly_positive=True, allow_missing=True
    )
    out["interruption_rate"] = _interruption_rates(out, what)
    if region is not None:
        known = sorted(set(out["region"]))
        out = out[out["region"] == region]
        if out.empty:
            raise InputError(
                f"catalog has no instance types in region {region!r}; its regions: "
                + ", ".join(known)
            )
    reject_duplicates(out, ["region", "instance_type"], what)
    _reject_colliding_names(out, what)
    return out.reset_index(drop=True)


def _reject_colliding_names(df: pd.DataFrame, what: str) -> None:
    """Instance types name store files (benchmarks, scaling): two that map to one
    file name would overwrite each other's measurements."""
    from deepvm.names import MAX_NAME_LENGTH, file_safe

    seen: dict[str, str] = {}
    for name in df["instance_type"].unique():
        if len(name) > MAX_NAME_LENGTH:
            raise InputError(
                f"{source_label(df, what)}: instance_type {name[:40]!r}... is longer than "
                f"{MAX_NAME_LENGTH} characters"
            )
        other = seen.setdefault(file_safe(name), name)
        if other != name:
            raise InputError(
                f"{source_label(df, what)}: instance types {other!r} and {name!r} are one name "
                "once made file-safe; rename one"
            )


def _interruption_rates(df: pd.DataFrame, what: str) -> pd.Series:
    """`interruption_rate` where given, else the value of `interruption_bucket`."""
    from deepvm.preemption import bucket_rate

    rates = numeric_column(df, "interruption_rate", what, minimum=0, allow_missing=True)
    if "interruption_bucket" in df.columns:
        for index in df.index[rates.isna() & df["interruption_bucket"].notna()]:
            label = str(df.at[index, "interruption_bucket"])
            if not label.strip():
                continue
            try:
                rates.at[index] = bucket_rate(label)
            except ValueError as exc:
                raise InputError(f"{what} row {df.at[index, 'instance_type']!r}: {exc}") from None
    too_high = rates >= 1
    if too_high.any():
        row = df.loc[too_high.idxmax(), "instance_type"]
        raise InputError(
            f"{what} row {row!r}: interruption_rate {rates[too_high].iloc[0]:g} must be a "
            "monthly fraction below 1"
        )
    return rates


def load_interruptions(path: str | Path) -> pd.DataFrame:
    """An interruption-rate override file: instance_type and either
    interruption_rate (monthly fraction) or interruption_bucket (an Advisor label)."""
    df = read_table(path, ["instance_type"], "interruptions")
    if not {"interruption_rate", "interruption_bucket"} & set(df.columns):
        raise InputError(
            f"interruptions file {str(path)!r} needs columns instance_type and "
            "interruption_rate or interruption_bucket"
        )
    df = df.copy()
    df["instance_type"] = text_column(df, "instance_type", "interruptions")
    reject_duplicates(df, ["instance_type"], "interruptions")
    if "interruption_rate" not in df.columns:
        df["interruption_rate"] = float("nan")
    df["interruption_rate"] = _interruption_rates(df, f"interruptions file {str(path)!r}")
    return df[["instance_type", "interruption_rate"]]


def with_interruptions(catalog: Catalog, overrides: pd.DataFrame) -> Catalog:
    """The catalog with the override file's rates for the types it names."""
    df = catalog.instances.copy()
    rates = overrides.set_index("instance_type")["interruption_rate"]
    named = df["instance_type"].isin(rates.index)
    df.loc[named, "interruption_rate"] = df.loc[named, "instance_type"].map(rates)
    return Catalog(df, catalog.snapshot)
