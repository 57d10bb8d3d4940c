"""What every catalog source returns: a validated :class:`Catalog`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from deepvm.base.config import MAX_PEAK_FLOPS, MIN_PEAK_FLOPS
from deepvm.base.errors import InputError
from deepvm.base.tables import (
    Table,
    numeric_column,
    optional_text,
    read_table,
    reject_duplicates,
    source_label,
    text_column,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ACCELERATOR_PEAK_FLOPS",
    "CATALOG_COLUMNS",
    "OPTIONAL_COLUMNS",
    "QUOTA_KEY_COLUMNS",
    "SPOT_OUTLIER_FRACTION",
    "SPOT_PRICE_BASES",
    "Catalog",
    "in_cloud",
    "load_interruptions",
    "spot_outliers",
    "spot_saving_pct",
    "validate_catalog",
    "with_interruptions",
    "with_rows_from",
    "with_spot_price",
]

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
    "interruption_bucket": None,
    # Where the rate or bucket is from (aws-spot-advisor, estimate) and its date.
    "interruption_source": None,
    "interruption_date": None,
    # The Spot Instance Advisor's average spot saving in the row's region, % of
    # on-demand (docs/ARCHITECTURE.md, "Interruptions and spot prices").
    "regional_saving_pct": float("nan"),
    # Where each row's prices come from and the date they refer to (ISO 8601, at the
    # precision the source gives: "2025" for a snapshot known only by its year).
    "price_source": None,
    "price_date": None,
    # What spot_price is: the zone's (spot_zone) or "regional": on-demand x (1 - the
    # regional average saving), from --spot-price regional.
    "spot_price_basis": None,
}
# A zone's spot price below this fraction of the regional-average spot price
# (on-demand x (1 - regional_saving_pct)) is an outlier: the zone is unusually
# cheap today and its price may not last (docs/ARCHITECTURE.md, "Interruptions and
# spot prices"). The shipped catalog has two: p4d.24xlarge in us-east-1 (0.34 of
# the regional average), p5.48xlarge in us-west-2 (0.43).
SPOT_OUTLIER_FRACTION = 0.5
SPOT_PRICE_BASES = ("zone", "regional")


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

    ``table`` has the columns of CATALOG_COLUMNS plus the OPTIONAL_COLUMNS
    (accelerator_memory_gib, peak_flops, spot_zone, interruption_rate; NaN or
    None where unknown); ``spot_price`` is NaN where a type has no spot market.
    ``snapshot`` labels the prices (recorded with every result).
    """

    table: Table
    snapshot: str

    @property
    def instances(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame (for display and the store)."""
        return self.table.to_frame()

    @property
    def gpu_rows(self) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.table["accelerator_count"] > 0)

    @property
    def cpu_rows(self) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.table["accelerator_count"] == 0)

    @property
    def gpu(self) -> pd.DataFrame:
        return self.table.take(self.gpu_rows).to_frame()

    @property
    def cpu(self) -> pd.DataFrame:
        return self.table.take(self.cpu_rows).to_frame()

    @property
    def regions(self) -> list[str]:
        return sorted(set(self.table["region"]))

    def __len__(self) -> int:
        return len(self.table)


QUOTA_KEY_COLUMNS = ("spot_quota_group", "regional_quota_group", "spot_regional_quota_group")


def validate_catalog(raw: Table | pd.DataFrame, *, region: str | None = None) -> Table:
    """Check a raw catalog table and return it normalised (types, optional columns)."""
    what = "catalog"
    table = raw if isinstance(raw, Table) else Table.from_frame(raw)
    missing = [c for c in CATALOG_COLUMNS if c not in table]
    if missing:
        raise InputError(
            f"catalog file {table.source_path or ''!r} lacks column(s) {', '.join(missing)}"
        )
    out: dict[str, npt.ArrayLike] = {}
    for column in ("provider", "region", "instance_type", "quota_group"):
        out[column] = text_column(table, column, what)
    names = optional_text(table["accelerator_name"])
    out["accelerator_name"] = np.where(names == None, "", names)  # noqa: E711 (elementwise)
    out["vcpus"] = numeric_column(table, "vcpus", what, strictly_positive=True)
    out["memory_gib"] = numeric_column(table, "memory_gib", what, strictly_positive=True)
    out["network_gbps"] = numeric_column(table, "network_gbps", what, strictly_positive=True)
    out["accelerator_count"] = numeric_column(
        table, "accelerator_count", what, minimum=0, integer=True
    )
    out["ondemand_price"] = numeric_column(table, "ondemand_price", what, strictly_positive=True)
    out["spot_price"] = numeric_column(
        table, "spot_price", what, strictly_positive=True, allow_missing=True
    )
    memory = (
        numeric_column(table, "accelerator_memory_gib", what, minimum=0, allow_missing=True)
        if "accelerator_memory_gib" in table
        else np.zeros(len(table))
    )
    out["accelerator_memory_gib"] = np.nan_to_num(memory, nan=0.0)
    out["peak_flops"] = (
        numeric_column(
            table, "peak_flops", what, minimum=MIN_PEAK_FLOPS, maximum=MAX_PEAK_FLOPS,
            allow_missing=True,
        )
        if "peak_flops" in table
        else np.full(len(table), np.nan)
    )  # fmt: skip
    out["spot_zone"] = (
        optional_text(table["spot_zone"])
        if "spot_zone" in table
        else np.full(len(table), None, dtype=object)
    )
    out["interruption_rate"] = _interruption_rates(table, what)
    out["regional_saving_pct"] = (
        numeric_column(table, "regional_saving_pct", what, maximum=99.99, allow_missing=True)
        if "regional_saving_pct" in table
        else np.full(len(table), np.nan)
    )
    for column in (
        "price_source",
        "price_date",
        "interruption_bucket",
        "interruption_source",
        "interruption_date",
        "spot_price_basis",
        # Quota keys beyond quota_group (deepvm.catalog.quotas): the spot market's own key
        # (GCP's PREEMPTIBLE_*, Azure's regional spot vCPUs; default quota_group)
        # and a regional vCPU key per market (GCP's CPUS; none by default).
        *QUOTA_KEY_COLUMNS,
    ):
        out[column] = (
            optional_text(table[column])
            if column in table
            else np.full(len(table), None, dtype=object)
        )
    # Columns beyond the schema (snapshot_date, sources' extras) ride along.
    extra = {name: table[name] for name in table.names if name not in out}
    checked = Table({**out, **extra}, table.source_path)
    if region is not None:
        known = sorted(set(checked["region"]))
        checked = checked.take(checked["region"] == region)
        if checked.empty:
            raise InputError(
                f"catalog has no instance types in region {region!r}; its regions: "
                + ", ".join(known)
            )
    reject_duplicates(checked, ["region", "instance_type"], what)
    _reject_long_names(checked, what)
    return checked


def in_cloud(catalog: Catalog, cloud: str) -> Catalog:
    """The catalog's rows of one cloud (its ``provider`` column)."""
    table = catalog.table
    clouds = sorted(set(str(p) for p in table["provider"]))
    if cloud not in clouds:
        raise InputError(
            f"the catalog has no instance types of cloud {cloud!r}; its clouds: "
            f"{', '.join(clouds)} (a catalog file with other clouds' rows: {{catalog}})",
            names=("catalog",),
        )
    rows = np.array([str(p) == cloud for p in table["provider"]], dtype=bool)
    return Catalog(table.take(rows), f"{catalog.snapshot} ({cloud})")


def spot_saving_pct(table: Table) -> npt.NDArray[np.float64]:
    """Each row's spot saving against on-demand in its spot zone, % (NaN: no spot)."""
    spot = table["spot_price"].astype(float)
    return 100.0 * (1.0 - spot / table["ondemand_price"].astype(float))


def spot_outliers(table: Table) -> npt.NDArray[np.bool_]:
    """Rows whose spot price is below SPOT_OUTLIER_FRACTION of the regional average
    spot price; False where either is unknown or the price is the regional one."""
    regional = table["ondemand_price"].astype(float) * (1 - table["regional_saving_pct"] / 100)
    with np.errstate(invalid="ignore"):
        low = table["spot_price"].astype(float) < SPOT_OUTLIER_FRACTION * regional
    basis = table["spot_price_basis"] if "spot_price_basis" in table else [None] * len(table)
    return low & np.array([b != "regional" for b in basis], dtype=bool)


def with_spot_price(catalog: Catalog, basis: str) -> Catalog:
    """The catalog planned on each zone's spot price (``zone``, as given) or on
    on-demand x (1 - the regional average saving) (``regional``) where the row has
    a regional saving; rows without one keep their zone's price."""
    if basis not in SPOT_PRICE_BASES:
        raise InputError(f"unknown spot price basis {basis!r}; known: zone, regional")
    table = catalog.table
    zone_basis = np.array(
        [None if np.isnan(p) else "zone" for p in table["spot_price"].astype(float)], dtype=object
    )
    if basis == "zone":
        return Catalog(table.with_columns(spot_price_basis=zone_basis), catalog.snapshot)
    saving = table["regional_saving_pct"].astype(float)
    has_spot = ~np.isnan(table["spot_price"].astype(float))
    regional = has_spot & ~np.isnan(saving)
    prices = np.where(regional, table["ondemand_price"] * (1 - saving / 100), table["spot_price"])
    bases = np.where(regional, "regional", zone_basis).astype(object)
    return Catalog(
        table.with_columns(spot_price=prices.astype(float), spot_price_basis=bases),
        f"{catalog.snapshot} (spot: regional averages)",
    )


def _reject_long_names(table: Table, what: str) -> None:
    """Instance types are writers' names in the store (benchmarks, scaling runs)."""
    from deepvm.base.config import MAX_NAME_LENGTH

    for name in dict.fromkeys(table["instance_type"]):
        if len(name) > MAX_NAME_LENGTH:
            raise InputError(
                f"{source_label(table, what)}: instance_type {name[:40]!r}... is longer than "
                f"{MAX_NAME_LENGTH} characters"
            )


def _interruption_rates(table: Table, what: str) -> npt.NDArray[np.float64]:
    """`interruption_rate` where given, else the value of `interruption_bucket`."""
    from deepvm.catalog.advisor_buckets import bucket_rate

    rates = (
        numeric_column(table, "interruption_rate", what, minimum=0, allow_missing=True)
        if "interruption_rate" in table
        else np.full(len(table), np.nan)
    )
    if "interruption_bucket" in table:
        labels = optional_text(table["interruption_bucket"])
        for i in np.flatnonzero(np.isnan(rates)):
            if labels[i] is None:
                continue
            try:
                rates[i] = bucket_rate(labels[i])
            except ValueError as exc:
                raise InputError(f"{what} row {table['instance_type'][i]!r}: {exc}") from None
    too_high = rates >= 1
    if too_high.any():
        first = int(np.flatnonzero(too_high)[0])
        raise InputError(
            f"{what} row {table['instance_type'][first]!r}: interruption_rate "
            f"{rates[first]:g} must be a "
            "monthly fraction below 1"
        )
    return rates


def load_interruptions(path: str | Path) -> Table:
    """An interruption-rate override file: instance_type and either
    interruption_rate (monthly fraction) or interruption_bucket (an Advisor label)."""
    table = read_table(path, ["instance_type"], "interruptions")
    if not {"interruption_rate", "interruption_bucket"} & set(table.names):
        raise InputError(
            f"interruptions file {str(path)!r} needs columns instance_type and "
            "interruption_rate or interruption_bucket"
        )
    table = table.with_columns(instance_type=text_column(table, "instance_type", "interruptions"))
    reject_duplicates(table, ["instance_type"], "interruptions")
    rates = _interruption_rates(table, f"interruptions file {str(path)!r}")
    return Table({"instance_type": table["instance_type"], "interruption_rate": rates})


def with_interruptions(catalog: Catalog, overrides: Table) -> Catalog:
    """The catalog with the override file's rates for the types it names."""
    if not isinstance(overrides, Table):
        overrides = Table.from_frame(overrides)
    at = {t: k for k, t in enumerate(overrides["instance_type"])}
    return with_rows_from(
        catalog,
        [at.get(t) for t in catalog.table["instance_type"]],
        {
            "interruption_rate": overrides["interruption_rate"].astype(float),
            "interruption_source": np.full(len(overrides), "file", dtype=object),
            "interruption_bucket": np.full(len(overrides), None, dtype=object),
            "interruption_date": np.full(len(overrides), None, dtype=object),
        },
    )


def with_rows_from(
    catalog: Catalog, rows: Sequence[int | None], values: Mapping[str, npt.ArrayLike]
) -> Catalog:
    """The catalog with each column of ``values`` taken from row ``rows[i]`` of
    ``values`` for catalog row i, where that is not None (its own value elsewhere):
    how an override file or an Advisor feed replaces some rows' figures."""
    found = np.array([r is not None for r in rows], dtype=bool)
    at = np.array([r if r is not None else 0 for r in rows], dtype=np.int64)
    table = catalog.table
    replaced = {}
    for column, given in values.items():
        new = np.asarray(given)
        old = table[column] if column in table else np.full(len(table), None)
        picked = new[at] if len(new) else old
        replaced[column] = np.where(found, picked, old).astype(new.dtype)
    return Catalog(table.with_columns(**replaced), catalog.snapshot)
