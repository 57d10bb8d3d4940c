"""Single-node throughput per instance type and FLOPP (FLOP per USD).

Throughput F_i of one node on a workload comes, in order, from a measurement (a
``--throughput`` file, else the store's latest benchmark), a published figure
(``datasets/throughput-published.csv``: Lambda's mixed-precision training
throughput mapped onto AWS types), or an estimate: the accelerators' peak dense
FP16/BF16 FLOP/s times the fraction of peak the published rows reach on that
workload (``datasets/utilisation-estimates.csv``). Every value says which
(``flops_source``, one of deepvm.model.provenance.SOURCE_KINDS: ``measured``, ``file``,
``published``, ``transferred``, ``estimate``), from what (``flops_basis``) and of
what date (``flops_date``). scripts/build_catalog.py builds both files and
documents the mapping.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from deepvm.base.config import MAX_PEAK_FLOPS
from deepvm.base.tables import (
    Table,
    as_table,
    concat,
    numeric_column,
    read_table,
    reject_duplicates,
    text_column,
)
from deepvm.model.provenance import measured_kind

if TYPE_CHECKING:
    import pandas as pd

    from deepvm.catalog.common import Catalog

__all__ = [
    "ANY_WORKLOAD",
    "FLOPP_COLUMNS",
    "PUBLISHED_FILE",
    "SECONDS_PER_HOUR",
    "THROUGHPUT_COLUMNS",
    "UTILISATION_FILE",
    "MeasurementUse",
    "NodeThroughput",
    "Published",
    "flopp_table",
    "load_throughput",
    "measurement_use",
    "merge_measurements",
    "node_throughput",
    "shipped_published",
]

PUBLISHED_FILE = "throughput-published.csv"
UTILISATION_FILE = "utilisation-estimates.csv"
ANY_WORKLOAD = "*"


@dataclass(frozen=True)
class Published:
    """Published throughput per (instance type, workload) and, for the rest, the
    fraction of peak FLOP/s each workload reaches on each published GPU."""

    table: Table  # instance_type, workload, flops, source, basis, source_date
    # workload ("*": any other) -> (peak FLOP/s of a published GPU, fraction reached,
    # what the fraction is from)
    utilisation: Mapping[str, Sequence[tuple[float, float, str]]]

    def share(self, workload: str, peak_per_accelerator: float) -> tuple[float, str]:
        """The fraction of peak a GPU of this peak reaches on ``workload``: that of
        the published GPU nearest in peak (faster GPUs reach smaller fractions),
        and its basis."""
        points = self.utilisation.get(workload) or self.utilisation.get(ANY_WORKLOAD) or ()
        if not points or not peak_per_accelerator > 0:
            return math.nan, ""
        distance = [abs(math.log(p / peak_per_accelerator)) for p, _, _ in points]
        _, share, basis = points[distance.index(min(distance))]
        return float(share), basis


@functools.cache
def shipped_published() -> Published:
    """The shipped published-throughput and utilisation tables (built from their
    public sources by scripts/build_catalog.py)."""
    from deepvm.base.datasets import dataset_path

    table = read_table(dataset_path(PUBLISHED_FILE), ("instance_type", "workload", "flops"), "t")
    shares = read_table(
        dataset_path(UTILISATION_FILE), ("workload", "peak_flops", "utilisation", "basis"), "u"
    )
    points: dict[str, list[tuple[float, float, str]]] = {}
    for workload, peak, share, basis in zip(
        text_column(shares, "workload", "utilisation", key=""),
        numeric_column(shares, "peak_flops", "utilisation", strictly_positive=True, key=""),
        numeric_column(shares, "utilisation", "utilisation", minimum=0, key=""),
        text_column(shares, "basis", "utilisation", key=""),
        strict=True,
    ):
        points.setdefault(workload, []).append((float(peak), float(share), basis))
    return Published(
        Table(
            {
                "instance_type": text_column(table, "instance_type", "published"),
                "workload": text_column(table, "workload", "published"),
                "flops": numeric_column(table, "flops", "published", strictly_positive=True),
                "source": text_column(table, "source", "published"),
                "basis": text_column(table, "basis", "published"),
                "source_date": text_column(table, "source_date", "published"),
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
            "flops": numeric_column(
                raw, "flops", "throughput", strictly_positive=True, maximum=MAX_PEAK_FLOPS
            ),
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
    columns = [*THROUGHPUT_COLUMNS, "source", "source_date"]
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
    """F_i of the catalog's GPU rows that have one: ``row`` indexes ``catalog.table``;
    per row, where F_i is from (a SOURCE_KIND, the basis, the date)."""

    row: npt.NDArray[np.int64]
    flops: npt.NDArray[np.float64]
    flops_source: tuple[str, ...]
    flops_basis: tuple[str, ...] = ()
    flops_date: tuple[str | None, ...] = ()

    def __len__(self) -> int:
        return len(self.row)

    def take(self, keep: npt.NDArray[np.bool_]) -> NodeThroughput:
        def kept(values: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(v for v, k in zip(values, keep, strict=True) if k)

        return NodeThroughput(
            self.row[keep],
            self.flops[keep],
            kept(self.flops_source),
            kept(self.flops_basis),
            kept(self.flops_date),
        )


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
    # A few accelerator models in many rows: each peak's share is found once.
    per_gpu = np.nan_to_num(peak / count, nan=-1.0).tolist()  # -1: no peak, no share
    by_peak = {p: published.share(workload, p) for p in set(per_gpu)}
    shares = [by_peak[p] for p in per_gpu]
    flops = peak * np.array([share for share, _ in shares])
    source = ["estimate"] * len(rows)
    basis = [f"peak FLOP/s x the share of peak reached by {b}" for _, b in shares]
    date: list[str | None] = [None] * len(rows)
    mine = published.table.take(published.table["workload"] == workload)
    by_type: dict[str, tuple[float, str, str, str | None]] = {
        t: (float(f), str(s), str(b), str(d))
        for t, f, s, b, d in zip(
            *(mine[c] for c in ("instance_type", "flops", "source", "basis", "source_date")),
            strict=True,
        )
    }
    if measured is not None and len(measured):  # measurements win over published figures
        measured = as_table(measured)
        mine = measured.take(measured["workload"] == workload)
        labels = mine["source"] if "source" in mine else ["measured"] * len(mine)
        dates = mine["source_date"] if "source_date" in mine else [None] * len(mine)
        for t, f, label, when in zip(
            mine["instance_type"], mine["flops"], labels, dates, strict=True
        ):
            label = str(label)
            by_type[t] = (float(f), measured_kind(label), label, when if when else None)
    for k, itype in enumerate(types):
        if itype in by_type:
            flops[k], source[k], basis[k], date[k] = by_type[itype]
    keep = np.isfinite(flops) & (flops > 0)
    return NodeThroughput(rows, flops, tuple(source), tuple(basis), tuple(date)).take(keep)


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
