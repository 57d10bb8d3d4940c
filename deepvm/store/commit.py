"""The commit protocol (docs/ARCHITECTURE.md, "The store"): a commit appends its
rows to each table it writes, tagged with its ``commit_id`` and each row's writer;
then it appends one row per (table, date, writer) to the commits table, which is
its commit point; then it deletes the rows of the older completed commits it
superseded. A commit that fails before its commit point deletes what it appended
(readers never saw it); one killed there leaves rows no deepvm reader sees, which
compaction drops after the retention. Every step is one Delta commit, retried on
conflict with a bound."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from deepvm.errors import StoreError
from deepvm.schemas import (
    COMMIT_ID,
    COMMITS,
    COMMITS_SCHEMA,
    TABLES,
    WRITER,
    month_column,
    partition_columns,
    table_schema,
)
from deepvm.store import delta
from deepvm.store.location import Location

if TYPE_CHECKING:
    from deepvm.store.core import Store


Key = tuple[str, str | None, str]  # table, date (None: an undated table), writer
COMMIT_FILES_MAX = 32  # the commits table is rewritten into one file at this many


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
    """Append each table's rows, then the commits rows (the commit point), then
    delete the rows this commit superseded."""
    if not tx.staged:
        return
    versions: dict[str, int] = {}
    tried: list[str] = []
    try:
        for table in sorted({key[0] for key in tx.staged}):
            parts = [rows for key, rows in tx.staged.items() if key[0] == table]
            tried.append(table)  # an append may land and still raise (a kill, a timeout)
            versions[table] = append_rows(store.location, table, table_schema(table), parts)
    except BaseException:
        _roll_back(store, tx.commit_id, tried)
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
    append_rows(store.location, COMMITS, COMMITS_SCHEMA, [marker])  # the commit point
    replacing = [key for key in tx.staged if key not in tx.appended]
    if replacing:
        supersede(store, tx.commit_id, replacing)
    # every reader reads all of `commits` first, at a cost that grows with its files:
    # bounded here too, where `store compact` never runs (`nightly --no-compact`).
    # Best effort: the night is committed already; the next commit tries again.
    with contextlib.suppress(StoreError):
        compact_commits(store, COMMIT_FILES_MAX)


def compact_commits(store: Store, at_files: int) -> None:
    """Rewrite the commits table into one file once it holds ``at_files`` files."""
    found = store._table(COMMITS)
    if found is None or len(found.file_uris()) < at_files:
        return
    delta.retrying(
        store.location,
        "compacting the commits of",
        lambda: store._existing(COMMITS).optimize.compact(),
    )


def _roll_back(store: Store, commit_id: str, tables: list[str]) -> None:
    """Delete what a failed commit appended before its commit point. Readers never
    saw those rows; this only saves the space (compaction would drop them later)."""
    for table in tables:
        with contextlib.suppress(Exception):  # the first error is the one to report
            delete_rows(store, table, f"{COMMIT_ID} = {sql_text(commit_id)}")


def append_rows(location: Location, table: str, schema: pa.Schema, parts: list[pa.Table]) -> int:
    """Append rows to ``table`` (created when absent); its version after."""
    from deltalake import CommitProperties, write_deltalake

    partitions = [] if table == COMMITS else partition_columns(table)
    # one chunk: delta-rs writes a table's chunks in parallel, in no set order
    rows = pa.concat_tables(parts).combine_chunks()

    def append() -> int:  # a retry starts from the table as it is now
        target = delta.create_table(location, table, schema, partitions)
        write_deltalake(
            target,
            rows,
            mode="append",
            # a column a newer deepvm added (docs/ARCHITECTURE.md, "The store") is added
            # to an older table, nullable, rather than refused
            schema_mode="merge",
            commit_properties=CommitProperties(max_commit_retries=delta.COMMIT_RETRIES),
        )
        return int(target.version())

    return delta.retrying(location, f"committing {table!r} to", append)


def supersede(store: Store, commit_id: str, keys: list[Key]) -> None:
    """Delete the rows that completed commits older than ``commit_id`` wrote for
    the same (table, date, writer): readers already read ours instead."""
    store.refresh()
    done = store._commits()
    mine = done[done[COMMIT_ID] == commit_id]
    if mine.empty:
        return
    order = (mine["committed_at"].iloc[0], commit_id)
    for table in sorted({key[0] for key in keys}):
        predicate = _superseded(table, done, order, [k for k in keys if k[0] == table])
        if predicate:
            delete_rows(store, table, predicate)


def _superseded(
    table: str, done: pd.DataFrame, order: tuple[object, str], keys: list[Key]
) -> str | None:
    rows = done[done["table_name"] == table]
    older = rows[
        (rows["committed_at"] < order[0])
        | ((rows["committed_at"] == order[0]) & (rows[COMMIT_ID] < order[1]))
    ]
    column = TABLES[table][0]
    clauses = []
    for _, date, writer in keys:
        hit = older[(older[WRITER] == writer) & (older["date"] == (date or ""))]
        if hit.empty:
            continue
        ids = ", ".join(sql_text(c) for c in sorted(set(hit[COMMIT_ID])))
        clause = f"{WRITER} = {sql_text(writer)} AND {COMMIT_ID} IN ({ids})"
        if column is not None and date is not None:
            month = month_column(column)
            clause = f"{month} = {sql_text(date[:7])} AND {column} = {sql_text(date)} AND {clause}"
        clauses.append(f"({clause})")
    return " OR ".join(clauses) or None


def delete_rows(store: Store, table: str, predicate: str) -> None:
    """Delete the rows matching ``predicate`` (SQL) from ``table``, retried on conflict."""

    def delete() -> None:
        found = store._table(table)
        if found is not None:
            found.delete(predicate)

    delta.retrying(store.location, f"replacing rows of {table!r} in", delete)
