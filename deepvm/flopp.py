"""Single-node throughput per instance type and FLOPP (FLOP per USD).

Throughput F_i of one node on a workload comes, in order, from a measurement (a
``--throughput`` file, else the store's latest benchmark), a published figure
(``datasets/throughput-published.csv``: Lambda's mixed-precision training
throughput mapped onto AWS types), or an estimate: the accelerators' peak dense
FP16/BF16 FLOP/s times the fraction of peak the published rows reach on that
workload (``datasets/utilisation-estimates.csv``). Every value says which
(``flops_source``: ``measured``, ``published:<source>``, ``estimate``).
scripts/build_catalog.py builds both files and documents the mapping.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from deepvm.catalog import Catalog
from deepvm.tables import (
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

PUBLISHED_FILE = "throughput-published.csv"
UTILISATION_FILE = "utilisation-estimates.csv"
ANY_WORKLOAD = "*"


@dataclass(frozen=True)
class Published:
    """Published throughput per (instance type, workload) and, for the rest, the
    fraction of peak FLOP/s each workload reaches on each published GPU."""

    table: Table  # instance_type, workload, flops, source
    # workload ("*": any other) -> (peak FLOP/s of a published GPU, fraction reached)
    utilisation: Mapping[str, Sequence[tuple[float, float]]]

    def share(self, workload: str, peak_per_accelerator: float) -> float:
        """The fraction of peak a GPU of this peak reaches on ``workload``: that of
        the published GPU nearest in peak (faster GPUs reach smaller fractions)."""
        points = self.utilisation.get(workload) or self.utilisation.get(ANY_WORKLOAD) or ()
        if not points or not peak_per_accelerator > 0:
            return math.nan
        distance = [abs(math.log(p / peak_per_accelerator)) for p, _ in points]
        return float(points[distance.index(min(distance))][1])


@functools.cache
def shipped_published() -> Published:
    """The shipped published-throughput and utilisation tables (built from their
    public sources by scripts/build_catalog.py)."""
    from deepvm._datasets import dataset_path

    table = read_table(dataset_path(PUBLISHED_FILE), ("instance_type", "workload", "flops"), "t")
    shares = read_table(
        dataset_path(UTILISATION_FILE), ("workload", "peak_flops", "utilisation"), "u"
    )
    points: dict[str, list[tuple[float, float]]] = {}
    for workload, peak, share in zip(
        text_column(shares, "workload", "utilisation", key=""),
        numeric_column(shares, "peak_flops", "utilisation", strictly_positive=True, key=""),
        numeric_column(shares, "utilisation", "utilisation", minimum=0, key=""),
        strict=True,
    ):
        points.setdefault(workload, []).append((float(peak), float(share)))
    return Published(
        Table(
            {
                "instance_type": text_column(table, "instance_type", "published"),
                "workload": text_column(table, "workload", "published"),
                "flops": numeric_column(table, "flops", "published", strictly_positive=True),
                "source": text_column(table, "source", "published"),
            }
        ),
        points,
    )


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
    catalog: Catalog,
    workload: str,
    measured: Table | pd.DataFrame | None = None,
    published: Published | None = None,
) -> NodeThroughput:
    """F_i for every GPU row (region, instance type) of the catalog on ``workload``:
    a measurement, else a published figure (``published``, default the shipped
    one), else peak_flops x the workload's calibrated share of peak; rows with none
    are left out. A figure for a type holds in every region. Measurements of other
    workloads or of machines the catalog does not list are not used."""
    published = published if published is not None else shipped_published()
    rows = catalog.gpu_rows
    types = catalog.table["instance_type"][rows]
    peak = catalog.table["peak_flops"][rows].astype(float)
    count = np.maximum(catalog.table["accelerator_count"][rows].astype(float), 1.0)
    flops = peak * np.array([published.share(workload, p) for p in peak / count])
    source = ["estimate"] * len(rows)
    layers: list[tuple[Table, str | None]] = [(published.table, None)]
    if measured is not None and len(measured):
        layers.append((as_table(measured), "measured"))
    for table, label in layers:  # later layers win
        mine = table.take(table["workload"] == workload)
        labels = mine["source"] if label is None else [label] * len(mine)
        by_type = {
            t: (float(f), str(s))
            for t, f, s in zip(mine["instance_type"], mine["flops"], labels, strict=True)
        }
        for k, itype in enumerate(types):
            if itype in by_type:
                flops[k], source[k] = by_type[itype]
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
    catalog: Catalog,
    workload: str,
    measured: Table | pd.DataFrame | None = None,
    published: Published | None = None,
) -> pd.DataFrame:
    """FLOPP = 3600 * F_i / price per region, type and market, long format, best first."""
    import pandas as pd

    f = node_throughput(catalog, workload, measured, published)
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
