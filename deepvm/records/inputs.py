"""What the store holds, read as planning inputs: the newest price snapshot as a
catalog, the latest successful benchmarks as throughput rows, the selected
overhead fits, the newest scaling points; and :func:`load_inputs`, which joins
them with the user's files into the planner's :class:`~deepvm.planner.Inputs`.

This layer sits above the planner (docs/ARCHITECTURE.md, "Layers"): the planner
takes what is read here and never opens the store itself.
"""

from __future__ import annotations

import json
from typing import Unpack

import numpy as np
import pandas as pd

from deepvm.base.errors import DeepvmError, InputError
from deepvm.base.tables import Table
from deepvm.catalog.common import Catalog
from deepvm.catalog.sources import catalog_from_tables
from deepvm.catalog.spot_advisor import shipped_advisor, with_advisor
from deepvm.performance.fitting import scaling_points
from deepvm.performance.flopp import THROUGHPUT_COLUMNS
from deepvm.planner.inputs import InputFiles, Inputs, StoredInputs
from deepvm.store import Store

__all__ = [
    "advisor_feed",
    "catalog_from_store",
    "fitted_overhead_table",
    "latest_measurements",
    "load_inputs",
    "price_snapshot",
    "read_stored",
    "store_scaling",
]


def load_inputs(
    *,
    store: Store | str | None = None,
    snapshot_date: str | None = None,
    **files: Unpack[InputFiles],
) -> Inputs:
    """The planner's inputs from the user's files and, with ``store`` (a Store, or
    its URI for callers of the public API), what the store holds (see
    :meth:`Inputs.load` for which wins). ``snapshot_date`` picks the store's
    newest prices at or before that date."""
    if store is None:
        return Inputs.load(**files)
    store = Store.open(store)  # the public entry point: a URI is opened here, once
    with_catalog = files.get("catalog") is None
    stored = read_stored(store, snapshot_date, files.get("region"), with_catalog=with_catalog)
    return Inputs.load(stored=stored, **files)


def read_stored(
    store: Store, snapshot_date: str | None, region: str | None, *, with_catalog: bool
) -> StoredInputs:
    """The store's part of the inputs: prices (when it has any and ``with_catalog``),
    benchmarks and fits."""
    planned = (
        catalog_from_store(store, snapshot_date, region)
        if with_catalog and store.has("prices")
        else None
    )
    fitted = fitted_overhead_table(store)
    return StoredInputs(
        planned,
        Table.from_frame(latest_measurements(store)),
        Table.from_frame(fitted) if fitted is not None else None,
    )


def catalog_from_store(
    store: Store, snapshot_date: str | None = None, region: str | None = None
) -> Catalog:
    """The catalog of the newest price snapshot (at or before ``snapshot_date``)."""
    # Only the snapshot used is read (docs/ARCHITECTURE.md, "The store"): a year of
    # nights costs no more than one.
    dates = store.partitions("prices")
    if not dates or not store.has("instances"):
        raise DeepvmError(
            f"store {store.uri!r} has no prices yet: run "
            "`deepvm nightly` or the refresh-prices flow first"
        )
    candidates = [d for d in dates if snapshot_date is None or d <= snapshot_date]
    if not candidates:
        raise InputError(
            f"store {store.uri!r} has no prices on or before {snapshot_date}; its "
            f"first snapshot is of {dates[0]}: plan on a later date or refresh prices "
            f"for {snapshot_date}"
        )
    newest = candidates[-1]
    snap, _ = price_snapshot(store, newest)
    instances = store.read("instances")
    label = f"store:prices@{newest}"
    if "price_date" in snap and snap["price_date"].notna().any():
        dates = sorted(set(snap["price_date"].dropna().astype(str)))
        label += f" (prices of {dates[-1] if len(dates) == 1 else dates[0] + '..' + dates[-1]})"
    label += " (stale)" if snap["stale"].any() else ""
    return with_advisor(
        catalog_from_tables(instances, snap, label, region), advisor_feed(store, snapshot_date)
    )


def price_snapshot(store: Store, date: str) -> tuple[pd.DataFrame, str]:
    """The prices of ``date`` that are in use, and their writer: a date refreshed
    from several sources (``prices refresh``, then the nightly) reads as its newest
    refresh, whole, never a mix (deepvm.nightly.prices.refresh_prices)."""
    writers = store.writers("prices", date)
    newest = writers[-1] if writers else None
    return store.read("prices", partitions=[date], writer=newest), newest or ""


def advisor_feed(store: Store, snapshot_date: str | None = None) -> pd.DataFrame:
    """The store's newest Spot Instance Advisor snapshot (at or before
    ``snapshot_date``), else the shipped catalog's (deepvm.catalog.spot_advisor)."""
    dates = [
        d for d in store.partitions("spot_advisor") if snapshot_date is None or d <= snapshot_date
    ]
    if not dates:
        return shipped_advisor()
    return store.read("spot_advisor", partitions=dates[-1:])


def latest_measurements(store: Store) -> pd.DataFrame:
    """The latest successful benchmark per (instance type, workload) in a store,
    as throughput rows: instance_type, workload, flops, source. Failed rows and
    rows without a positive FLOP/s are never used."""
    df = store.read("benchmarks")
    ok = df[(df["status"] == "ok") & (df["achieved_flops"].astype(float) > 0)]
    if ok.empty:
        return pd.DataFrame(columns=[*THROUGHPUT_COLUMNS, "source", "source_date"])
    latest = ok.sort_values("measured_at").groupby(["instance_type", "workload"]).tail(1)
    out = latest.rename(columns={"achieved_flops": "flops"})
    dates = out["run_date"].astype(str)
    out = out.assign(source="benchmark " + dates, source_date=dates)
    return out[[*THROUGHPUT_COLUMNS, "source", "source_date"]].reset_index(drop=True)


def fitted_overhead_table(store: Store) -> pd.DataFrame | None:
    """The selected models of the newest fit per group in a store, as an overhead
    table (instance_type, workload, model, a, b, c, p, alpha, beta, source)."""
    df = store.read("overhead_models")
    df = df[df["selected"]]
    if df.empty:
        return None
    df = df.sort_values(["fitted_date", "fitted_at"], na_position="first", kind="stable")
    df = df.groupby(["instance_type", "workload"]).tail(1)
    rows = []
    for r in df.to_dict("records"):
        params = json.loads(r["params"])
        rows.append(
            {
                "instance_type": r["instance_type"],
                "workload": r["workload"],
                "model": r["model"],
                **params,
                "source": "measured",
                "basis": f"fitted to deepvm's scaling runs ({r['model']}, rmse {r['rmse']:.3g})",
                "source_date": str(r["fitted_date"]),
            }
        )
    table = pd.DataFrame(rows)
    for column in ("a", "b", "c", "p", "alpha", "beta"):
        if column not in table:
            table[column] = np.nan
    return table.reset_index(drop=True)


def store_scaling(store: Store) -> pd.DataFrame:
    """The newest run's scaling rows of each (instance type, workload) in a store."""
    df = store.read("scaling")
    if df.empty:
        raise InputError(
            f"store {store.uri!r} has no scaling rows; run "
            "`deepvm benchmark-scaling --store ...` first"
        )
    df = df.sort_values(["run_date", "measured_at"])
    latest = df.groupby(["instance_type", "workload"])["run_id"].transform("last")
    return scaling_points(df[df["run_id"] == latest].reset_index(drop=True))
