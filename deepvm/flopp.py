"""Single-node throughput per instance type and FLOPP (FLOP per USD).

Throughput F_i of one node on a workload comes from a measurement where there is
one, else from the accelerators' peak dense FP16/BF16 FLOP/s times
PEAK_UTILISATION; every value says which (``flops_source``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from deepvm.catalog import Catalog
from deepvm.inputs import (
    Table,
    as_table,
    concat,
    numeric_column,
    read_table,
    reject_duplicates,
    text_column,
)

if TYPE_CHECKING:
    import pandas as pd

# Fraction of peak dense FP16/BF16 FLOP/s that data-parallel training of a
# mid-size model reaches on one node. Published model-FLOPs-utilisation figures
# for ResNet/ViT/GPT-2/BERT training sit between 0.3 and 0.5; 0.4 is their middle.
PEAK_UTILISATION = 0.4

THROUGHPUT_COLUMNS = ("instance_type", "workload", "flops")
SECONDS_PER_HOUR = 3600.0


def load_throughput(path: str | Path) -> Table:
    """A measured-throughput file: instance_type, workload, flops (FLOP/s of one node)."""
    raw = read_table(path, THROUGHPUT_COLUMNS, "throughput")
    table = Table(
        {
            "instance_type": text_column(raw, "instance_type", "throughput"),
            "workload": text_column(raw, "workload", "throughput"),
            "flops": numeric_column(raw, "flops", "throughput", strictly_positive=True),
            "source": np.full(len(raw), f"file {Path(path).name}", dtype=object),
        },
        raw.source_path,
    )
    reject_duplicates(table, ["instance_type", "workload"], "throughput")
    return table


def merge_measurements(*tables: Table | pd.DataFrame | None) -> Table | None:
    """Throughput tables combined; a later table's row wins for the same key."""
    present = [as_table(t) for t in tables if t is not None and len(t)]
    if not present:
        return None
    columns = [*THROUGHPUT_COLUMNS, "source"]
    both = concat([t.select([c for c in columns if c in t]) for t in present])
    last = {
        key: i for i, key in enumerate(zip(both["instance_type"], both["workload"], strict=True))
    }
    return both.take(np.array(sorted(last.values()), dtype=np.int64))


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
    catalog: Catalog, workload: str, measured: Table | pd.DataFrame | None
) -> MeasurementUse:
    """The measured rows of ``workload`` split into those the plan uses (the type
    is a GPU type of the catalog) and those it cannot (a machine the catalog does
    not list, such as ``local:<cpu>``, or a CPU type)."""
    if measured is None or not len(measured):
        return MeasurementUse()
    measured = as_table(measured)
    mine = measured.take(measured["workload"] == workload)
    types = catalog.table["instance_type"]
    gpu = set(types[catalog.gpu_rows])
    listed = set(types)
    used, not_used = [], []
    for row in mine.records():
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


@dataclass(frozen=True)
class NodeThroughput:
    """F_i of the catalog's GPU rows that have one: ``row`` indexes ``catalog.table``."""

    row: npt.NDArray[np.int64]
    flops: npt.NDArray[np.float64]
    flops_source: tuple[str, ...]  # "measured" or "peak"

    def __len__(self) -> int:
        return len(self.row)


def node_throughput(
    catalog: Catalog, workload: str, measured: Table | pd.DataFrame | None = None
) -> NodeThroughput:
    """F_i for every GPU row (region, instance type) of the catalog on ``workload``:
    a measurement where there is one, else peak_flops x PEAK_UTILISATION; rows with
    neither are left out. A measurement of a type holds in every region.
    Measurements of other workloads or of machines the catalog does not list are
    not used."""
    rows = catalog.gpu_rows
    types = catalog.table["instance_type"][rows]
    flops = catalog.table["peak_flops"][rows].astype(float) * PEAK_UTILISATION
    source = ["peak"] * len(rows)
    if measured is not None and len(measured):
        measured = as_table(measured)
        mine = measured.take(measured["workload"] == workload)
        by_type = dict(zip(mine["instance_type"], mine["flops"].astype(float), strict=True))
        for k, itype in enumerate(types):
            if itype in by_type:
                flops[k] = by_type[itype]
                source[k] = "measured"
    keep = np.isfinite(flops) & (flops > 0)
    return NodeThroughput(
        rows[keep], flops[keep], tuple(s for s, k in zip(source, keep, strict=True) if k)
    )


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
    catalog: Catalog, workload: str, measured: Table | pd.DataFrame | None = None
) -> pd.DataFrame:
    """FLOPP = 3600 * F_i / price per region, type and market, long format, best first."""
    import pandas as pd

    f = node_throughput(catalog, workload, measured)
    table = catalog.table
    parts = []
    for market, column in (("spot", "spot_price"), ("on_demand", "ondemand_price")):
        part = pd.DataFrame(
            {
                "region": table["region"][f.row],
                "instance_type": table["instance_type"][f.row],
                "achieved_flops": f.flops,
                "flops_source": f.flops_source,
                "usd_per_hour": table[column][f.row].astype(float),
            }
        )
        part["market"] = market
        parts.append(part[part["usd_per_hour"].notna()])
    out = pd.concat(parts, ignore_index=True)
    out["workload"] = workload
    out["flopp"] = SECONDS_PER_HOUR * out["achieved_flops"] / out["usd_per_hour"]
    out = out.sort_values(["flopp", "instance_type", "region"], ascending=[False, True, True])
    return out[FLOPP_COLUMNS].reset_index(drop=True)
