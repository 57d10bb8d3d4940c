"""Single-node throughput per instance type and FLOPP (FLOP per USD).

Throughput F_i of one node on a workload comes from a measurement where there is
one, else from the accelerators' peak dense FP16/BF16 FLOP/s times
PEAK_UTILISATION; every value says which (``flops_source``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from deepvm.catalog import Catalog
from deepvm.inputs import numeric_column, read_table, reject_duplicates, text_column

# Fraction of peak dense FP16/BF16 FLOP/s that data-parallel training of a
# mid-size model reaches on one node. Published model-FLOPs-utilisation figures
# for ResNet/ViT/GPT-2/BERT training sit between 0.3 and 0.5; 0.4 is their middle.
PEAK_UTILISATION = 0.4

THROUGHPUT_COLUMNS = ("instance_type", "workload", "flops")
SECONDS_PER_HOUR = 3600.0


def load_throughput(path: str | Path) -> pd.DataFrame:
    """A measured-throughput file: instance_type, workload, flops (FLOP/s of one node)."""
    df = read_table(path, THROUGHPUT_COLUMNS, "throughput")
    df["instance_type"] = text_column(df, "instance_type", "throughput")
    df["workload"] = text_column(df, "workload", "throughput")
    df["flops"] = numeric_column(df, "flops", "throughput", strictly_positive=True)
    reject_duplicates(df, ["instance_type", "workload"], "throughput")
    df["source"] = f"file {Path(path).name}"
    return df[[*THROUGHPUT_COLUMNS, "source"]].reset_index(drop=True)


def merge_measurements(*tables: pd.DataFrame | None) -> pd.DataFrame | None:
    """Throughput tables combined; a later table's row wins for the same key."""
    present = [t for t in tables if t is not None and not t.empty]
    if not present:
        return None
    both = pd.concat(present, ignore_index=True)
    return both.drop_duplicates(["instance_type", "workload"], keep="last").reset_index(drop=True)


@dataclass(frozen=True)
class MeasurementUse:
    """Which measured rows one plan used, and which of the workload's it left out."""

    used: tuple[dict[str, object], ...] = ()
    not_used: tuple[dict[str, object], ...] = ()

    def describe(self) -> str | None:
        if not self.used and not self.not_used:
            return None
        parts = []
        if self.used:
            parts.append(
                "measurements used: "
                + ", ".join(f"{u['instance_type']} ({u['source']})" for u in self.used)
            )
        if self.not_used:
            parts.append(
                "not used: "
                + ", ".join(f"{u['instance_type']} ({u['reason']})" for u in self.not_used)
            )
        return "; ".join(parts)


def measurement_use(
    catalog: Catalog, workload: str, measured: pd.DataFrame | None
) -> MeasurementUse:
    """The measured rows of ``workload`` split into those the plan uses (the type
    is a GPU type of the catalog) and those it cannot (a machine the catalog does
    not list, such as ``local:<cpu>``, or a CPU type)."""
    if measured is None or measured.empty:
        return MeasurementUse()
    mine = measured[measured["workload"] == workload]
    gpu = set(catalog.gpu["instance_type"])
    listed = set(catalog.instances["instance_type"])
    used, not_used = [], []
    for row in mine.to_dict("records"):
        source = str(row.get("source") or "measured")
        if row["instance_type"] in gpu:
            used.append(
                {
                    "instance_type": row["instance_type"],
                    "flops": float(row["flops"]),
                    "source": source,
                }
            )
        else:
            reason = "a CPU type" if row["instance_type"] in listed else "not in the catalog"
            not_used.append(
                {"instance_type": row["instance_type"], "reason": reason, "source": source}
            )
    return MeasurementUse(tuple(used), tuple(not_used))


def node_throughput(
    catalog: Catalog, workload: str, measured: pd.DataFrame | None = None
) -> pd.DataFrame:
    """F_i for every GPU row (region, instance type) of the catalog on ``workload``.

    Returns the GPU rows' index (``row``, into ``catalog.instances``), region,
    instance_type, flops, flops_source (``measured`` or ``peak``); rows with
    neither a measurement nor a peak figure are left out. A measurement of a type
    holds in every region. Measurements of other workloads or of machines the
    catalog does not list are not used.
    """
    gpu = catalog.gpu[["region", "instance_type", "peak_flops"]].copy()
    gpu["row"] = gpu.index
    gpu["flops"] = gpu["peak_flops"].astype(float) * PEAK_UTILISATION
    gpu["flops_source"] = "peak"
    if measured is not None and not measured.empty:
        mine = measured[measured["workload"] == workload]
        by_type = mine.drop_duplicates("instance_type", keep="last").set_index("instance_type")
        hit = gpu["instance_type"].map(by_type["flops"].astype(float))
        gpu["flops"] = hit.where(hit.notna(), gpu["flops"]).astype(float)
        gpu["flops_source"] = gpu["flops_source"].where(hit.isna(), "measured")
    gpu = gpu[np.isfinite(gpu["flops"]) & (gpu["flops"] > 0)]
    columns = ["row", "region", "instance_type", "flops", "flops_source"]
    return gpu[columns].reset_index(drop=True)


FLOPP_COLUMNS = [
    "region",
    "instance_type",
    "workload",
    "market",
    "achieved_flops",
    "usd_per_hour",
    "flopp",
    "flops_source",
]


def flopp_table(
    catalog: Catalog, workload: str, measured: pd.DataFrame | None = None
) -> pd.DataFrame:
    """FLOPP = 3600 * F_i / price per region, type and market, long format, best first."""
    f = node_throughput(catalog, workload, measured)
    rows = []
    for market, column in (("spot", "spot_price"), ("on_demand", "ondemand_price")):
        part = f.copy()
        part["market"] = market
        part["usd_per_hour"] = catalog.instances.loc[f["row"], column].to_numpy(dtype=float)
        rows.append(part[part["usd_per_hour"].notna()])
    out = pd.concat(rows, ignore_index=True)
    out["workload"] = workload
    out = out.rename(columns={"flops": "achieved_flops"})
    out["flopp"] = SECONDS_PER_HOUR * out["achieved_flops"] / out["usd_per_hour"]
    out = out.sort_values(["flopp", "instance_type", "region"], ascending=[False, True, True])
    return out[FLOPP_COLUMNS].reset_index(drop=True)
