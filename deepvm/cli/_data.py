"""Data commands: catalog, flopp, workloads, prices."""

from __future__ import annotations

import argparse
import json
from typing import Any

from deepvm.base.config import (
    DEFAULT_WORKLOAD,
)
from deepvm.base.config import SPOT_ADVISOR_URL as ADVISOR_URL
from deepvm.base.errors import DeepvmError
from deepvm.cli._arguments import NON_NEGATIVE, date_text, path_text
from deepvm.cli._common import (
    add_store_timeout,
    add_timeout,
    price_timeout,
    regions_list,
    store_location,
    writable_store,
)
from deepvm.cli._listing import add_format, output_format, print_listing
from deepvm.cli._output import print_json, progress, tflops

__all__ = [
    "add_parsers",
    "add_prices_parser",
    "cmd_catalog",
    "cmd_flopp",
    "cmd_prices",
    "cmd_workloads",
]


def add_parsers(sub: Any) -> None:
    cat = sub.add_parser("catalog", help="list instance types and prices")
    cat.add_argument("--kind", choices=("all", "gpu", "cpu"), default="all")
    cat.add_argument("--match", metavar="TEXT", help="instance types whose name contains TEXT")
    cat.add_argument(
        "--max-price", type=NON_NEGATIVE, metavar="USD", help="on-demand price at most this"
    )
    add_format(cat, json_help="print JSON")
    cat.add_argument(
        "--catalog", metavar="FILE", type=path_text, help="a catalog file instead of the snapshot"
    )
    cat.add_argument("--region")

    fl = sub.add_parser("flopp", help="FLOP per dollar per instance type and market")
    fl.add_argument("--workload", default=DEFAULT_WORKLOAD)
    fl.add_argument("--market", choices=("all", "spot", "on_demand"), default="all")
    add_format(fl, json_help="print JSON")
    fl.add_argument(
        "--store",
        metavar="URI",
        help="use the latest benchmarks in this store and write the flopp rows to it",
    )
    add_store_timeout(fl)
    fl.add_argument("--catalog", metavar="FILE", type=path_text)
    fl.add_argument("--throughput", metavar="FILE", type=path_text)
    fl.add_argument("--region")

    wl = sub.add_parser("workloads", help="list the sample workloads (and your own)")
    wl.add_argument(
        "--workloads",
        metavar="FILE",
        type=path_text,
        help="also list the workloads this file declares",
    )
    add_format(wl, json_help="print JSON")


def add_prices_parser(sub: Any) -> None:
    pr = sub.add_parser("prices", help="refresh or show the store's price snapshots")
    prs = pr.add_subparsers(dest="prices_command", required=True, metavar="ACTION")
    ref = prs.add_parser("refresh", help="fetch current prices and specs into the store")
    ref.add_argument(
        "--source",
        default="snapshot",
        help="snapshot (default), aws, gcp, azure, skypilot, a catalog file, or spot-advisor "
        "(AWS's Spot Instance Advisor feed: interruption buckets and regional spot savings)",
    )
    ref.add_argument(
        "--spot-advisor-url",
        metavar="URL_OR_PATH",
        type=path_text,
        help="the Spot Instance Advisor feed for --source spot-advisor (default: AWS's "
        "public feed, " + ADVISOR_URL + "; or a saved copy)",
    )
    ref.add_argument("--regions", metavar="R,R", help="regions to fetch (aws, azure)")
    ref.add_argument(
        "--skypilot-csv",
        metavar="PATH_OR_URL",
        type=path_text,
        help="a SkyPilot vms.csv (with --source skypilot)",
    )
    ref.add_argument("--store", metavar="URI")
    ref.add_argument("--date", type=date_text, metavar="YYYY-MM-DD")
    add_timeout(ref)
    ref.add_argument("--json", action="store_true")
    show = prs.add_parser("show", help="list the newest snapshot's prices")
    show.add_argument("--store", metavar="URI")
    add_store_timeout(show)
    show.add_argument("--match", metavar="TEXT", help="instance types containing TEXT")
    add_format(show, json_help="print JSON")


def cmd_catalog(args: argparse.Namespace) -> int:
    from deepvm.catalog import load_catalog
    from deepvm.catalog.common import QUOTA_KEY_COLUMNS, spot_outliers, spot_saving_pct

    catalog = load_catalog(args.catalog, region=args.region)
    df = catalog.instances.assign(
        spot_saving_pct=spot_saving_pct(catalog.table), spot_outlier=spot_outliers(catalog.table)
    )
    if args.kind != "all":
        df = df[(df["accelerator_count"] > 0) == (args.kind == "gpu")]
    if args.match:
        df = df[df["instance_type"].str.contains(args.match, regex=False)]
    if args.max_price is not None:
        df = df[df["ondemand_price"] <= args.max_price]
    columns = [
        "region",
        "instance_type",
        "quota_group",
        "vcpus",
        "memory_gib",
        "network_gbps",
        "accelerator_name",
        "accelerator_count",
        "peak_flops",
        "ondemand_price",
        "spot_price",
        "spot_zone",
        "price_source",
        "price_date",
        # the spot price in context and the interruption bucket (deepvm.catalog.spot_advisor)
        "spot_saving_pct",
        "regional_saving_pct",
        "spot_outlier",
        "interruption_bucket",
        "interruption_source",
        "interruption_date",
    ]
    df = df.sort_values(["accelerator_count", "ondemand_price", "region"])
    # Every column --catalog reads (the quota keys of GCP and Azure among them), so
    # a catalog written as CSV plans as the one it came from.
    keys = ["provider", *columns[:3], *QUOTA_KEY_COLUMNS, *columns[3:8]]
    keys += ["accelerator_memory_gib", *columns[8:], "interruption_rate"]
    records = json.loads(df[keys].to_json(orient="records", date_format="iso"))
    fmt = output_format(args)
    if fmt == "json":
        print_json({"snapshot": catalog.snapshot, "instances": records})
        return 0
    types, regions = df["instance_type"].nunique(), df["region"].nunique()
    header = (
        f"{len(df)} rows: {types} instance types in {regions} region"
        f"{'s' if regions != 1 else ''} ({catalog.snapshot})"
    )
    for r in records:
        r["saving"] = _saving_words(r)
        r["gpus"] = (
            f"{r['accelerator_count']:g} x {r['accelerator_name']}"
            if r["accelerator_count"]
            else ""
        )
    shown = [
        ("provider", "cloud"),
        ("region", "region"),
        ("instance_type", "instance_type"),
        ("quota_group", "group"),
        ("vcpus", "vCPUs"),
        ("gpus", "GPUs"),
        ("ondemand_price", "on-demand $/h"),
        ("spot_price", "spot $/h"),
        ("spot_zone", "spot zone"),
        ("saving", "spot saving"),
        ("interruption_bucket", "interrupted"),
        ("price_date", "price date"),
    ]
    print_listing(args, records, shown, keys, header=header)
    return 0


def _saving_words(row: dict[str, Any]) -> str:
    """``89% (region 67%) !``: the zone's spot saving, the region's average, and a
    mark where the zone's price is an outlier."""
    zone, region = row.get("spot_saving_pct"), row.get("regional_saving_pct")
    if zone is None:
        return ""
    text = f"{zone:.0f}%" + (f" (region {region:.0f}%)" if region is not None else "")
    return text + (" outlier" if row.get("spot_outlier") else "")


def cmd_flopp(args: argparse.Namespace) -> int:
    from deepvm.catalog import load_catalog
    from deepvm.catalog.quotas import load_quotas
    from deepvm.performance.flopp import flopp_table, load_throughput, merge_measurements
    from deepvm.planner.offers import build_offers
    from deepvm.records.inputs import latest_measurements
    from deepvm.store import Store

    written = writable_store(args.store)
    catalog = load_catalog(args.catalog, region=args.region)
    uri = store_location(args, required=False)
    store = written or (Store.open(uri) if uri else None)
    measured = merge_measurements(
        latest_measurements(store) if store else None,
        load_throughput(args.throughput) if args.throughput else None,
    )
    build_offers(catalog, args.workload, quotas=load_quotas(), measured=measured)  # validates
    df = flopp_table(catalog, args.workload, measured)
    if args.market != "all":
        df = df[df["market"] == args.market]
    if written:
        from deepvm.records.results import write_flopp

        progress(f"wrote {write_flopp(df, written, catalog.snapshot)}")
    records = json.loads(df.to_json(orient="records", date_format="iso"))
    if output_format(args) == "json":
        print_json({"workload": args.workload, "rows": records})
        return 0
    for r in records:
        r["tflops"] = tflops(r["achieved_flops"])
        r["pflop_per_usd"] = f"{r['flopp'] / 1e15:.1f}"
    print_listing(
        args,
        records,
        [
            ("region", "region"),
            ("instance_type", "instance_type"),
            ("market", "market"),
            ("tflops", "TFLOP/s"),
            ("usd_per_hour", "$/h"),
            ("pflop_per_usd", "PFLOP/$"),
            ("flops_source", "F from"),
        ],
        list(df.columns),
    )
    return 0


def cmd_workloads(args: argparse.Namespace) -> int:
    from deepvm.performance.workloads import WORKLOADS, load_workloads

    registry = load_workloads(args.workloads) if args.workloads else WORKLOADS
    rows: list[dict[str, Any]] = [
        {
            "name": w.name,
            "parameters": w.parameters,
            # what a job's `work_flops` needs: work = epochs x samples x this
            "train_flops_per_sample": w.train_flops_per_sample,
            "samples_per_epoch": w.samples_per_epoch,
            "checkpoint_gb": w.checkpoint_gb,
            "accelerator_memory_gib": w.accelerator_memory_gib,
            "description": w.description,
        }
        for w in registry.values()
    ]
    if output_format(args) == "json":
        print_json({"workloads": rows})
        return 0
    shown = [
        {
            **r,
            "params": f"{r['parameters'] / 1e6:.1f}M",
            "per_sample": f"{r['train_flops_per_sample']:.3g}",
            "checkpoint": f"{r['checkpoint_gb']:.3f}",
            "memory": f"{r['accelerator_memory_gib']:g}",
        }
        for r in rows
    ]
    print_listing(
        args,
        shown,
        [
            ("name", "name"),
            ("params", "parameters"),
            ("per_sample", "train FLOPs/sample"),
            ("checkpoint", "checkpoint GB"),
            ("memory", "GPU GiB needed"),
            ("description", "description"),
        ],
        list(rows[0]) if rows else ["name"],
    )
    return 0


def _refresh_spot_advisor(args: argparse.Namespace, uri: str) -> int:
    from deepvm.nightly.prices import refresh_spot_advisor

    store = writable_store(uri)
    url = args.spot_advisor_url or ADVISOR_URL
    progress(f"fetching the Spot Instance Advisor feed from {url} ...")
    r = refresh_spot_advisor(store, url, snapshot_date=args.date, timeout_s=price_timeout(args))
    summary = {
        "snapshot_date": r.snapshot_date,
        "source": r.source,
        "rows": r.rows,
        "failed": r.failed,
        "attempts": r.attempts,
        "error": r.error,
        "kept": r.kept,
        "store": uri,
    }
    if args.json:
        print_json(summary)
    elif r.failed:
        keeps = f"the {r.kept} snapshot" if r.kept else "the shipped catalog's buckets"
        print(f"spot-advisor FAILED ({r.error}); planning keeps {keeps}")
    else:
        print(f"{r.rows} Spot Instance Advisor rows into {uri} ({r.snapshot_date})")
    return 1 if r.failed else 0


def cmd_prices(args: argparse.Namespace) -> int:
    from deepvm.store import Store

    uri = str(store_location(args, required=True))
    if args.prices_command == "refresh" and (
        args.spot_advisor_url is not None and args.source != "spot-advisor"
    ):
        raise DeepvmError(
            f"--spot-advisor-url is the feed of --source spot-advisor (the source is "
            f"{args.source!r}): add --source spot-advisor, or drop --spot-advisor-url"
        )
    if args.prices_command == "refresh" and args.source == "spot-advisor":
        return _refresh_spot_advisor(args, uri)
    if args.prices_command == "refresh":
        from deepvm.catalog.sources import get_source
        from deepvm.nightly.prices import refresh_prices

        store = writable_store(uri)
        regions = regions_list(args.regions)
        get_source(args.source, regions=regions, skypilot_csv=args.skypilot_csv)  # validates
        progress(f"fetching prices from {args.source} ...")
        r = refresh_prices(
            store,
            args.source,
            snapshot_date=args.date,
            regions=regions,
            skypilot_csv=args.skypilot_csv,
            timeout_s=price_timeout(args),
        )
        summary = {
            "snapshot_date": r.snapshot_date,
            "source": r.source,
            "rows": r.rows,
            "carried": r.carried,
            "dropped": r.dropped,
            "stale": r.stale,
            "failed": r.failed,
            "attempts": r.attempts,
            "error": r.error,
            "store": uri,
        }
        if args.json:
            print_json(summary)
        elif r.failed and r.fallback_from == r.snapshot_date:
            print(f"{r.source} FAILED ({r.error}); {r.snapshot_date} keeps the prices it has")
        elif r.failed:
            print(
                f"{r.source} FAILED ({r.error}); carried the {r.fallback_from} snapshot "
                f"forward as stale into {r.snapshot_date}"
            )
        else:
            print(
                f"{r.rows} prices from {r.source} into {uri} ({r.snapshot_date}); "
                f"{r.dropped} rows without a usable price dropped"
            )
            if r.carried:
                print(r.carried)
        return 1 if r.failed else 0
    from deepvm.records.inputs import price_snapshot

    store = Store.open(uri)
    dates = store.partitions("prices")
    if not dates:
        raise DeepvmError(f"store {uri!r} has no prices: run `deepvm prices refresh`")
    newest, in_use = price_snapshot(store, dates[-1])  # the snapshot planned on, only
    others = [w for w in store.writers("prices", dates[-1]) if w != in_use]
    if args.match:
        newest = newest[newest["instance_type"].str.contains(args.match, regex=False)]
    newest = newest.sort_values(["instance_type", "market", "usd_per_hour"])
    columns = [
        "snapshot_date",
        "provider",
        "region",
        "zone",
        "instance_type",
        "market",
        "usd_per_hour",
        "source",
        "price_date",
        "stale",
    ]
    records = json.loads(newest[columns].to_json(orient="records", date_format="iso"))
    if output_format(args) == "json":
        print_json({"snapshot_date": dates[-1], "in_use": in_use, "replaced": others,
                    "prices": records})  # fmt: skip
        return 0
    if output_format(args) == "table":
        replaced = f"; it replaced {', '.join(others)} of that date" if others else ""
        print(f"snapshot {dates[-1]} from {in_use} (in use: what plans read){replaced}")
    print_listing(args, records, [(c, c) for c in columns if c != "provider"], columns)
    return 0
