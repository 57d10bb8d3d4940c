"""Store commands: check, compact, migrate, schema, export, sql."""

from __future__ import annotations

import argparse
from typing import Any

from deepvm.base.config import DEFAULT_RETAIN_HOURS
from deepvm.base.errors import DeepvmError, ParameterError
from deepvm.base.names import check_date
from deepvm.cli._common import add_store_timeout, store_location
from deepvm.cli._output import print_json, progress

__all__ = ["add_parsers", "cmd_store"]


def add_parsers(sub: Any) -> None:
    st = sub.add_parser(
        "store", help="check, compact, migrate, describe or export a store's tables"
    )
    sts = st.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    chk = sts.add_parser(
        "check",
        help="open every table, check its schema version, read every file",
        description="Open every Delta table of the store, check its schema version (the "
        "table property deepvm.schemaVersion) and columns, read every active file, and count "
        "the rows no reader sees (of unfinished or superseded commits; compaction drops them). "
        "Exit status 1 when something is wrong (each is named, with how to fix it).",
    )
    chk.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")
    add_store_timeout(chk)
    chk.add_argument("--json", action="store_true", help="print one JSON object")
    cpt = sts.add_parser(
        "compact",
        help="merge finished months' files, drop rows no reader sees, remove old files",
        description="Merge the files of each month that ended before --before (default: "
        "today, so every finished month) into one file per table (Delta's optimize), and a "
        "month not yet ended once it holds 8 files; where a commit that never completed and "
        "started more than --retain-hours ago replaced a date's rows, put the newest "
        "completed commit's rows back (and drop rows of superseded commits an earlier deepvm "
        "left), reading only the months written since the last compaction; then delete "
        "files removed more than --retain-hours ago (Delta's vacuum). Each step is a commit "
        "of its own: readers and writers running meanwhile see and lose nothing.",
    )
    cpt.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")
    add_store_timeout(cpt)
    cpt.add_argument(
        "--before",
        metavar="YYYY-MM-DD",
        help="compact the months that ended before this date (default: today, UTC)",
    )
    cpt.add_argument(
        "--retain-hours",
        type=float,
        default=DEFAULT_RETAIN_HOURS,
        metavar="H",
        help="keep removed files, and unfinished commits' rows, this long (default: "
        f"{DEFAULT_RETAIN_HOURS:g}, 7 days); no writer may take longer than this",
    )
    cpt.add_argument("--json", action="store_true", help="print one JSON object")
    mig = sts.add_parser(
        "migrate",
        help="turn a store of deepvm's earlier Parquet layout into Delta tables",
        description="Read every table of a store in deepvm's earlier layout (schema 1 day "
        "folders, schema 2 month folders) and commit its rows to Delta tables, each row with "
        "its date and writer; then delete the old files. deepvm reads the same rows before "
        "and after. Safe to run again: a second run finishes one that was killed.",
    )
    mig.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")
    add_store_timeout(mig)
    mig.add_argument("--json", action="store_true", help="print one JSON object")
    sch = sts.add_parser(
        "schema",
        help="the tables' contract: columns, types, units, meanings, partitioning",
        description="Print every table's columns (or TABLE's) with type, unit and meaning, "
        "its date column and partitioning, and the schema version. Needs no store. "
        "Columns are only ever added, never renamed in place.",
    )
    sch.add_argument("table", nargs="?", metavar="TABLE", help="one table (default: all)")
    sch.add_argument("--format", choices=("markdown", "json"), default="markdown")
    exp = sts.add_parser(
        "export",
        help="write a table's whole nights as plain Parquet or CSV files",
        description="Write the rows deepvm reads of TABLE (the newest completed commit per "
        "date and writer) as plain files for tools that do not read Delta: OUT/TABLE/DATE.EXT, "
        "one per date (OUT/TABLE.EXT for an undated table), each written whole or not at all; "
        "an existing file of a date is replaced.",
    )
    exp.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")
    add_store_timeout(exp)
    exp.add_argument("--table", required=True, metavar="TABLE", help="the table to export")
    exp.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    exp.add_argument("--since", metavar="YYYY-MM-DD", help="the first date (default: the first)")
    exp.add_argument("--until", metavar="YYYY-MM-DD", help="the last date (default: the last)")
    exp.add_argument("--out", required=True, metavar="DIR", help="the folder to write to")
    exp.add_argument("--json", action="store_true", help="print one JSON object")
    sql = sts.add_parser(
        "sql",
        help="SQL to paste into DuckDB, Spark or polars for a table's nights",
        description="Print SQL over the store's Delta table: --view history (every night; "
        "recommendations and fleet: the nightly record), current (the newest night), or "
        "whole (the newest completed deepvm commit per date and writer, through the commits "
        "table: for joining two tables from the same run). DuckDB reads Delta with its delta "
        "extension (delta_scan), Spark with delta.`path`; for polars the table is the name a "
        "frame is registered under: pl.SQLContext(TABLE=pl.scan_delta(path)).",
    )
    sql.add_argument("table", metavar="TABLE")
    sql.add_argument("--view", choices=("history", "current", "whole"), default="history")
    sql.add_argument("--dialect", choices=("duckdb", "spark", "polars"), default="duckdb")
    sql.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")


def cmd_store(args: argparse.Namespace) -> int:
    from deepvm.store import Store
    from deepvm.store.location import locate

    if args.store_command == "schema":
        return _store_schema(args)
    if args.store_command == "sql":
        return _store_sql(args)

    store = Store(locate(store_location(args, required=True)), check_legacy=False)
    store.check_path()
    if not store.exists():
        raise DeepvmError(f"store {store.uri!r} does not exist: give --store or $DEEPVM_STORE")
    if args.store_command == "migrate":
        return _store_migrate(store, args)
    if args.store_command == "compact":
        return _store_compact(store, args)
    if args.store_command == "export":
        return _store_export(store, args)
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
                "unread_rows": found.unread_rows,
            }
        )
    else:
        for table, count in found.files.items():
            if count:
                print(f"{table}: {count} files, {found.rows[table]} rows")
        for table, count in found.unread_rows.items():
            if count:
                print(
                    f"{table}: {count} rows of unfinished or superseded commits (no reader sees "
                    "them; `deepvm store compact` removes them)"
                )
        for line in found.bad:
            print(f"BAD {line}")
        print("ok" if found.ok else f"{len(found.bad)} problem(s)")
    return 0 if found.ok else 1


def _store_compact(store: Any, args: argparse.Namespace) -> int:
    from deepvm.store.maintenance import compact

    store.check_legacy = True
    if not 0 <= args.retain_hours < 1e6:
        raise ParameterError("retain_hours", args.retain_hours, "must be a number of hours >= 0")
    if args.before:
        check_date(args.before, "before")
    progress(f"compacting {store.uri} ...")
    done = compact(store, before=args.before, retain_hours=args.retain_hours)
    if args.json:
        print_json(
            {
                "store": store.uri,
                "before": done.before,
                "retain_hours": done.retain_hours,
                "months": done.months,
                "files_merged": done.files_merged,
                "rows_dropped": done.rows_dropped,
                "files_vacuumed": done.files_vacuumed,
            }
        )
        return 0
    for table, months in done.months.items():
        if months:
            print(f"{table}: {done.files_merged[table]} files merged ({', '.join(months)})")
    for table, rows in done.rows_dropped.items():
        if rows:
            print(f"{table}: {rows} rows of superseded or abandoned commits dropped")
    vacuumed = sum(done.files_vacuumed.values())
    if vacuumed:
        print(f"{vacuumed} file(s) removed more than {done.retain_hours:g} h ago deleted")
    if not done.changed:
        print(f"nothing to compact: every month before {done.before[:7]} is merged already")
    return 0


def _store_migrate(store: Any, args: argparse.Namespace) -> int:
    from deepvm.store import migrate_store

    progress(f"migrating {store.uri} to Delta tables ...")
    done = migrate_store(store.uri)
    if args.json:
        print_json({"store": store.uri, "files": done.files, "rows": done.rows})
        return 0
    if not done.changed:
        print(f"nothing to migrate: {store.uri} has no files of the earlier layout")
        return 0
    for table, count in done.files.items():
        if count:
            print(f"{table}: {count} files -> {done.rows[table]} rows")
    print("migrated: every table is a Delta table now")
    return 0


def _known_table(table: str, *, commits: bool) -> None:
    from deepvm.model.schemas import COMMITS, TABLES

    names = [*([COMMITS] if commits else []), *TABLES]
    if table not in names:
        raise ParameterError("table", table, f"is not a table; the tables: {', '.join(names)}")


def _store_schema(args: argparse.Namespace) -> int:
    from deepvm.model.columns import contract, contract_markdown, contracts

    if args.table:
        _known_table(args.table, commits=True)
    tables = [contract(args.table)] if args.table else contracts()
    if args.format == "json":
        from deepvm.model.schemas import SCHEMA_VERSION

        print_json({"schema_version": SCHEMA_VERSION, "tables": [t.as_dict() for t in tables]})
    else:
        print(contract_markdown(tables), end="")
    return 0


def _store_sql(args: argparse.Namespace) -> int:
    from deepvm.model.schemas import TABLES
    from deepvm.store.location import locate
    from deepvm.store.sql import current_night_sql, delta_source, history_sql, whole_rows_sql

    _known_table(args.table, commits=False)
    if args.view == "current" and TABLES[args.table][0] is None:
        raise ParameterError(
            "view", "current", f"needs a dated table; {args.table!r} has no dates: use history"
        )
    uri = locate(store_location(args, required=True)).uri
    if args.view == "whole":
        if args.dialect == "polars":
            print(f"-- pl.SQLContext({args.table}=pl.scan_delta(...), commits=pl.scan_delta(...))")
            print(whole_rows_sql(args.table).strip())
            return 0
        source = delta_source(uri, args.table, args.dialect)
        print(whole_rows_sql(args.table, source, delta_source(uri, "commits", args.dialect)))
        return 0
    source = delta_source(uri, args.table, args.dialect)
    view = current_night_sql if args.view == "current" else history_sql
    if args.dialect == "polars":
        print(
            f"-- pl.SQLContext({args.table}=pl.scan_delta({uri.rstrip('/') + '/' + args.table!r}))"
        )
    print(view(args.table, source))
    return 0


def _store_export(store: Any, args: argparse.Namespace) -> int:
    from deepvm.store.export import export_table

    store.check_legacy = True
    # export_table checks the table and dates before it reads or writes anything
    done = export_table(
        store,
        args.table,
        args.out,
        args.format,
        since=args.since,
        until=args.until,
        on_date=lambda day: progress(f"exported {args.table} of {day} to {args.out}"),
    )
    if args.json:
        print_json(
            {
                "store": store.uri,
                "table": done.table,
                "format": done.format,
                "folder": done.folder,
                "dates": done.dates,
                "files": done.files,
                "rows": done.rows,
            }
        )
        return 0
    print(f"{done.table}: {done.rows} rows in {len(done.files)} file(s) under {done.folder}")
    return 0
