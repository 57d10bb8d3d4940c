"""Store commands: check, compact."""

from __future__ import annotations

import argparse
from typing import Any

from deepvm.cli.common import (
    print_json,
    progress,
    store_location,
)
from deepvm.errors import DeepvmError


def add_parsers(sub: Any) -> None:
    st = sub.add_parser("store", help="check or compact a store")
    sts = st.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    chk = sts.add_parser(
        "check",
        help="read every file, check its schema version, name the bad ones",
        description="Read every file of every table of the store and check that it is that "
        "table's, of this schema version. Exit status 1 when a file is bad (each is named, "
        "with how to fix it).",
    )
    chk.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")
    chk.add_argument("--json", action="store_true", help="print one JSON object")
    cpt = sts.add_parser(
        "compact",
        help="merge each finished month's daily files into one file per table",
        description="Merge each month that ended before --before (default: today, so every "
        "finished month) into one Parquet file per table, atomically; every row keeps its "
        "date column, and DuckDB, pandas and polars read the store as before. Files in the "
        "old day-folder layout are moved into month folders.",
    )
    cpt.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")
    cpt.add_argument(
        "--before",
        metavar="YYYY-MM-DD",
        help="compact the months that ended before this date (default: today, UTC)",
    )
    cpt.add_argument("--json", action="store_true", help="print one JSON object")


def cmd_store(args: argparse.Namespace) -> int:
    from deepvm.store import Store

    store = Store.open(store_location(args, required=True))
    if not store.exists():
        raise DeepvmError(f"store {store.uri!r} does not exist: give --store or $DEEPVM_STORE")
    if args.store_command == "compact":
        return _store_compact(store, args)
    return _store_check(store, args)


def _store_check(store: Any, args: argparse.Namespace) -> int:
    from deepvm.store import check_store

    found = check_store(store)
    if args.json:
        print_json(
            {
                "store": store.uri,
                "ok": found.ok,
                "files": found.files,
                "rows": found.rows,
                "bad": found.bad,
                "dead_staging": found.dead_staging,
                "legacy_files": found.legacy_files,
            }
        )
    else:
        for table, count in found.files.items():
            if count:
                print(f"{table}: {count} files, {found.rows[table]} rows")
        for line in found.bad:
            print(f"BAD {line}")
        if found.dead_staging:
            print(
                f"{found.dead_staging} staging folder(s) of dead writers: the next write "
                "removes them"
            )
        if found.legacy_files:
            print(
                f"{found.legacy_files} file(s) in the old day-folder layout: "
                "`deepvm store compact` moves them (plain DuckDB globs need one layout)"
            )
        print("ok" if found.ok else f"{len(found.bad)} bad file(s)")
    return 0 if found.ok else 1


def _store_compact(store: Any, args: argparse.Namespace) -> int:
    store.ensure_writable()
    progress(f"compacting {store.uri} ...")
    done = store.compact(before=args.before)
    if args.json:
        print_json(
            {
                "store": store.uri,
                "before": done.before,
                "months": done.months,
                "files_merged": done.files_merged,
                "legacy_moved": done.legacy_moved,
            }
        )
        return 0
    for table, months in done.months.items():
        if months:
            print(
                f"{table}: {done.files_merged[table]} files -> {len(months)} ({', '.join(months)})"
            )
        if done.legacy_moved[table]:
            print(f"{table}: {done.legacy_moved[table]} file(s) moved out of day folders")
    if not done.changed:
        print(f"nothing to compact: every month before {done.before[:7]} is one file already")
    return 0
