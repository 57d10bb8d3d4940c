"""The commit protocol (docs/ARCHITECTURE.md, "The store"). A commit writes each
table it touches in one Delta commit that both removes the rows it supersedes
(the same date and writer, whichever commit wrote them) and adds its own, so a
plain Delta reader of the newest version sees each date once per writer, whole;
then it appends one row per (table, date, writer) to the commits table, which is
its commit point for readers that want every table from one run (deepvm's own);
then it checks that no other writer's table commit of the same date landed over
its own after it (two runs of one date at once), and writes its rows again where
it won. A commit that fails before its commit point puts back the rows it
replaced. Every step is one Delta commit, retried on conflict with a bound."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import uuid
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from deepvm.base.errors import StoreError
from deepvm.model.schemas import (
    COMMIT_ID,
    COMMITS,
    COMMITS_SCHEMA,
    TABLES,
    WRITER,
    month_column,
    partition_columns,
    table_schema,
)
from deepvm.store import _delta as delta
from deepvm.store.location import Location

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from deepvm.store.core import Store

__all__ = [
    "COMMIT_FILES_MAX",
    "COMMIT_KEY",
    "KEYS_KEY",
    "Key",
    "Transaction",
    "commit",
    "commit_started",
    "commits_present",
    "compact_commits",
    "conform",
    "key_rows",
    "keys_predicate",
    "new_commit_id",
    "restore",
    "row_dates",
    "sql_text",
    "write_table",
]


Key = tuple[str, str | None, str]  # table, date (None: an undated table), writer
COMMIT_FILES_MAX = 32  # the commits table is rewritten into one file at this many
_CONVERGE_ROUNDS = 5  # rounds of writing the winners' rows where a concurrent run landed


def new_commit_id() -> str:
    """Unique, and sortable by when the commit started (compaction drops the rows of
    commits that never completed once they are older than the retention)."""
    return f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}Z-{uuid.uuid4().hex[:12]}"


def commit_started(commit_id: str) -> dt.datetime | None:
    """When the commit started, from its id (None: not a deepvm commit id)."""
    try:
        return dt.datetime.strptime(commit_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


@dataclass
class Transaction:
    """One commit in the making: its id, its command and its staged rows."""

    commit_id: str
    command: str
    staged: dict[Key, pa.Table] = field(default_factory=dict)
    appended: set[Key] = field(default_factory=set)  # writers of their own: nothing to replace


def sql_text(value: str) -> str:
    """``value`` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def commit(store: Store, tx: Transaction) -> None:
    """Write each table in one Delta commit (its rows replace the same date's and
    writer's), then the commits rows (the commit point), then write again where
    a concurrent run of the same date landed over this one and this one won."""
    if not tx.staged:
        return
    versions: dict[str, int] = {}
    before: dict[str, int | None] = {}
    try:
        for table in sorted({key[0] for key in tx.staged}):
            found = store.delta_table(table)
            before[table] = None if found is None else int(found.version())
            keys = [key for key in tx.staged if key[0] == table]
            versions[table] = write_table(
                store.location,
                table,
                [tx.staged[key] for key in keys],
                keys,
                replace=any(key not in tx.appended for key in keys),
                commit_id=tx.commit_id,
            )
    except BaseException:
        _put_back(store, tx, before)
        raise
    now = pd.Timestamp(dt.datetime.now(dt.UTC))
    marker = pa.Table.from_pylist(
        [
            {
                COMMIT_ID: tx.commit_id,
                "committed_at": now,
                "command": tx.command,
                "table_name": table,
                "table_version": versions[table],
                "date": None if date is None else dt.date.fromisoformat(date),
                WRITER: writer,
            }
            for table, date, writer in sorted(tx.staged, key=lambda k: (k[0], k[1] or "", k[2]))
        ],
        schema=COMMITS_SCHEMA,
    )
    write_table(store.location, COMMITS, [marker], [], replace=False)  # the commit point
    _keep_winning(store, tx, versions)
    # every reader reads all of `commits` first, at a cost that grows with its files:
    # bounded here too, where `store compact` never runs (`nightly --no-compact`).
    # Best effort: the night is committed already; the next commit tries again.
    with contextlib.suppress(StoreError):
        compact_commits(store, COMMIT_FILES_MAX)


def compact_commits(store: Store, at_files: int) -> None:
    """Rewrite the commits table into one file once it holds ``at_files`` files."""
    found = store.delta_table(COMMITS)
    if found is None or len(found.file_uris()) < at_files:
        return
    delta.retrying(
        store.location,
        "compacting the commits of",
        lambda: store.existing_table(COMMITS).optimize.compact(),
    )


def keys_predicate(table: str, keys: Iterable[Key]) -> str:
    """SQL that selects the rows of the given (date, writer) pairs of ``table``,
    whichever commit wrote them (a date's clause names its month partition, so a
    Delta engine opens that month's files only)."""
    column = TABLES[table][0]
    by_date: dict[str | None, set[str]] = {}
    for _, date, writer in keys:
        by_date.setdefault(date, set()).add(writer)
    clauses = []
    for date, writers in sorted(by_date.items(), key=lambda item: item[0] or ""):
        names = ", ".join(sql_text(w) for w in sorted(writers))
        clause = f"{WRITER} IN ({names})"
        if column is not None and date is not None:
            clause = (
                f"{month_column(column)} = {sql_text(date[:7])} AND "
                f"{column} = {sql_text(date)} AND {clause}"
            )
        clauses.append(f"({clause})")
    return " OR ".join(clauses)


COMMIT_KEY = "deepvm.commit"  # in a table commit's info: the deepvm commit ("": none)
KEYS_KEY = "deepvm.keys"  # in a table commit's info: the (date, writer) pairs it wrote (JSON)


def write_table(
    location: Location,
    table: str,
    parts: list[pa.Table],
    keys: list[Key],
    *,
    replace: bool,
    commit_id: str = "",
) -> int:
    """One Delta commit to ``table`` (created when absent): the rows in ``parts``
    replace every row of the (date, writer) pairs in ``keys`` when ``replace``
    (delta-rs's overwrite with a predicate), else are appended. The Delta commit's
    info names the deepvm commit whose rows it adds (``commit_id``; "" for rows put
    back) and the (date, writer) pairs it wrote, so compaction finds unfinished commits in the log
    without reading rows. Its version after."""
    from deltalake import CommitProperties, write_deltalake

    schema = COMMITS_SCHEMA if table == COMMITS else table_schema(table)
    partitions = [] if table == COMMITS else partition_columns(table)
    # one chunk: delta-rs writes a table's chunks in parallel, in no set order
    rows = pa.concat_tables(parts).combine_chunks() if parts else schema.empty_table()
    predicate = keys_predicate(table, keys) if replace and keys else None
    pairs = sorted({(k[1] or "", k[2]) for k in keys})
    info = {COMMIT_KEY: commit_id, KEYS_KEY: json.dumps(pairs, separators=(",", ":"))}

    def write() -> int:  # a retry starts from the table as it is now
        target = delta.create_table(location, table, schema, partitions)
        retries = CommitProperties(max_commit_retries=delta.COMMIT_RETRIES, custom_metadata=info)
        # a column a newer deepvm added (docs/ARCHITECTURE.md, "The store") is added
        # to an older table, nullable, rather than refused: schema_mode="merge"
        if predicate:
            write_deltalake(
                target,
                rows,
                mode="overwrite",
                predicate=predicate,
                schema_mode="merge",
                commit_properties=retries,
            )
        else:
            write_deltalake(
                target, rows, mode="append", schema_mode="merge", commit_properties=retries
            )
        return int(target.version())

    doing = f"replacing rows of {table!r} in" if predicate else f"committing {table!r} to"
    return delta.retrying(location, doing, write)


def key_rows(
    found: DeltaTable, table: str, keys: Collection[Key], columns: list[str] | None = None
) -> pa.Table:
    """The rows of ``found`` (a table at some version) of the (date, writer) pairs
    in ``keys``: only their months' files are opened."""
    column = TABLES[table][0]
    dates = {key[1] for key in keys if key[1] is not None}
    filters = None
    if column is not None and dates:
        filters = [(month_column(column), "in", sorted({d[:7] for d in dates}))]
    data = found.to_pyarrow_table(columns=columns, filters=filters)
    wanted = {(key[1] or "", key[2]) for key in keys}
    days = row_dates(data, column)
    keep = [
        (d or "", w) in wanted for d, w in zip(days, data.column(WRITER).to_pylist(), strict=True)
    ]
    return data.filter(pa.array(keep, pa.bool_()))


def commits_present(data: pa.Table, column: str | None) -> dict[tuple[str, str], Counter[str]]:
    """Per (date, writer) of ``data`` (rows with the date, writer and commit
    columns), its rows per commit ("" is the date of an undated table)."""
    out: dict[tuple[str, str], Counter[str]] = {}
    for d, w, c in zip(
        row_dates(data, column),
        data.column(WRITER).to_pylist(),
        data.column(COMMIT_ID).to_pylist(),
        strict=True,
    ):
        out.setdefault((d or "", w), Counter())[c] += 1
    return out


def row_dates(data: pa.Table, column: str | None) -> list[str | None]:
    """Each row's date as ISO text (None for an undated table)."""
    if column is None:
        return [None] * data.num_rows
    return pc.cast(data.column(column), pa.string()).to_pylist()


def restore(store: Store, table: str, keys: list[Key], version: int | None) -> None:
    """Make the (date, writer) pairs in ``keys`` hold again the rows they held at
    ``version`` (None: before the table existed, so none), in one Delta commit."""
    if not keys:
        return
    rows = table_schema(table).empty_table()
    if version is not None:
        old = store.delta_table(table, version)
        if old is not None:
            rows = delta.call(
                store.location, f"reading table {table!r} of", lambda: key_rows(old, table, keys)
            )
            rows = conform(rows, table_schema(table))
    write_table(store.location, table, [rows], keys, replace=True)


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with ``schema``'s columns, in its order; a column added since those
    rows were written is null."""
    for name in schema.names:
        if name not in rows.column_names:
            rows = rows.append_column(
                schema.field(name), pa.nulls(rows.num_rows, schema.field(name).type)
            )
    return rows.select(schema.names).cast(schema)


def _put_back(store: Store, tx: Transaction, before: dict[str, int | None]) -> None:
    """After a failure before the commit point: each table this commit wrote holds
    again the rows it held before (a plain reader of the newest version never keeps
    a failed run's rows). Best effort: compaction restores what this cannot."""
    for table, version in before.items():
        with contextlib.suppress(Exception):  # the first error is the one to report
            now = store.delta_table(table)
            if now is None or (version is not None and int(now.version()) == version):
                continue  # this commit's write never landed
            restore(store, table, [key for key in tx.staged if key[0] == table], version)


def _keep_winning(store: Store, tx: Transaction, versions: dict[str, int]) -> None:
    """Where another run's write of the same (table, date, writer) landed after this
    commit's, make the newest version hold the newest completed commit's rows (this
    one's, or the other's as it recorded them): a plain reader then reads the run
    that won, as deepvm does. A write made on a view of the commits that a third
    run's commit point has since changed is checked again, so the runs converge."""
    check: dict[str, int | None] = {
        table: version
        for table, version in versions.items()
        if any(k[0] == table and k not in tx.appended for k in tx.staged)
    }
    for _ in range(_CONVERGE_ROUNDS):
        store.refresh()
        wrote: dict[str, int | None] = {}
        for table, version in sorted(check.items()):
            found = store.delta_table(table)
            if found is None or int(found.version()) == version:
                continue  # nothing landed since this run's write (the usual case)
            if _winners_in_place(store, tx, table, found):
                wrote[table] = None
        if not wrote:
            return
        check = wrote  # None: read again, whatever the version


def _winners_in_place(store: Store, tx: Transaction, table: str, found: DeltaTable) -> bool:
    """Write the winners' rows over the keys of this commit whose rows in ``found``
    (the newest version) are another commit's; whether anything was written."""
    keys = [k for k in tx.staged if k[0] == table and k not in tx.appended]
    column = TABLES[table][0]
    columns = [c for c in (column, WRITER, COMMIT_ID) if c is not None]
    present_rows = delta.call(
        store.location, f"reading table {table!r} of", lambda: key_rows(found, table, keys, columns)
    )
    present = commits_present(present_rows, column)
    won = store.winners(table)
    mine: list[Key] = []
    theirs: dict[int, list[Key]] = {}
    for key in keys:
        pair = (key[1] or "", key[2])
        winner = won.get(pair)
        if winner is None or set(present.get(pair, ())) == {winner[0]}:
            continue
        if winner[0] == tx.commit_id:
            mine.append(key)
        else:
            theirs.setdefault(winner[1], []).append(key)
    if mine:
        write_table(
            store.location,
            table,
            [tx.staged[k] for k in mine],
            mine,
            replace=True,
            commit_id=tx.commit_id,
        )
    for version, pairs in sorted(theirs.items()):
        restore(store, table, pairs, version)
    return bool(mine or theirs)
