"""Compaction, retention and checks of a store (docs/ARCHITECTURE.md, "The
store"): `deepvm store compact` and `deepvm store check`, and the nightly's
compaction after it commits."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from deepvm.base.config import DEFAULT_RETAIN_HOURS
from deepvm.base.errors import ParameterError, StoreError
from deepvm.base.names import check_date
from deepvm.model.schemas import COMMIT_ID, COMMITS, COMMITS_SCHEMA, TABLES, WRITER, month_column
from deepvm.store import _delta as delta
from deepvm.store._commit import (
    COMMIT_KEY,
    KEYS_KEY,
    Key,
    commit_started,
    commits_present,
    compact_commits,
    new_commit_id,
    restore,
    sql_text,
)
from deepvm.store.core import Store

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["OPEN_MONTH_FILES", "CompactReport", "StoreCheck", "check_store", "compact"]

_COMPACT_WRITER = "compact"


@dataclass(frozen=True)
class CompactReport:
    """What :func:`compact` did: per table, the finished months whose files were
    merged, the files merged, the rows of superseded or abandoned commits removed,
    and the files past the retention deleted."""

    before: str
    retain_hours: float
    months: dict[str, list[str]]
    files_merged: dict[str, int]
    rows_dropped: dict[str, int]
    files_vacuumed: dict[str, int]

    @property
    def changed(self) -> bool:
        return any(
            any(v.values()) if isinstance(v, dict) else False
            for v in (self.files_merged, self.rows_dropped, self.files_vacuumed)
        )


def compact(
    store: Store, before: str | None = None, retain_hours: float = DEFAULT_RETAIN_HOURS
) -> CompactReport:
    """Merge the files of every month that ended before ``before`` (default: today,
    UTC), drop rows no reader can see (superseded commits; commits that never
    completed and started more than ``retain_hours`` ago), record each table's
    version in the commits table, then delete files removed more than
    ``retain_hours`` ago. Every step is a Delta commit of its own, so writers
    running meanwhile lose nothing."""
    cutoff = check_date(before, "before") if before else dt.datetime.now(dt.UTC).date().isoformat()
    if not 0 <= retain_hours < 1e6:
        raise ParameterError("retain_hours", retain_hours, "must be a number of hours >= 0")
    store.ensure_writable()
    horizon = pd.Timestamp(dt.datetime.now(dt.UTC) - dt.timedelta(hours=retain_hours))
    months: dict[str, list[str]] = {}
    merged: dict[str, int] = {}
    dropped: dict[str, int] = {}
    vacuumed: dict[str, int] = {}
    versions: dict[str, int] = {}
    for table in TABLES:
        months[table], merged[table], dropped[table] = [], 0, 0
        found = store.delta_table(table)
        if found is None:
            continue
        _upgrade_properties(store, table, found)
        dropped[table] = _reconcile(store, table, horizon, retain_hours)
        months[table], merged[table] = _merge_months(store, table, cutoff)
        versions[table] = int(store.existing_table(table).version())
    _record(store, versions)
    _prune_commits(store, horizon)
    for table in [*TABLES, COMMITS]:
        found = store.delta_table(table)
        vacuumed[table] = 0 if found is None else _vacuum(store, table, found, retain_hours)
    return CompactReport(cutoff, retain_hours, months, merged, dropped, vacuumed)


def _months_to_check(
    store: Store, table: str, found: DeltaTable, retain_hours: float
) -> list[str] | None:
    """The month partitions where compaction can find rows to drop or put back,
    from the table's log, not its rows. Each table commit's info names the
    (date, writer) pairs it wrote, and its last write holds a pair's rows; among
    the commits since the last compaction (less the retention, so a killed run's
    rows are looked at again once they are old enough), a pair needs compaction
    where its last write is a commit that never completed, or a completed one that
    is not the newest (two runs at once). None: read every month (no compaction
    yet, an undated table, or a write deepvm did not make)."""
    column = TABLES[table][0]
    if column is None:
        return None
    done = store.completed_commits()
    last = done.loc[(done["command"] == "compact") & (done["table_name"] == table), "committed_at"]
    if last.empty:
        return None
    since = last.max() - pd.Timedelta(hours=retain_hours) - pd.Timedelta(hours=1)
    entries = _history_since(found, int(since.timestamp() * 1000))
    if entries is None:
        return None
    last_write: dict[tuple[str, str], str] = {}
    for entry in sorted(entries, key=lambda e: int(e.get("version", 0))):
        commit = entry.get(COMMIT_KEY)
        if commit is None:
            if entry.get("operation") in ("WRITE", "MERGE", "UPDATE", "STREAMING UPDATE"):
                return None  # rows deepvm cannot place: read them all
            continue  # optimize, delete, vacuum, properties: no rows of a commit
        for date, writer in json.loads(entry.get(KEYS_KEY) or "[]"):
            last_write[(date, writer)] = commit
    completed = set(done[COMMIT_ID])
    won = {key: commit for key, (commit, _) in store.winners(table).items()}
    return sorted(
        {
            date[:7]
            for (date, writer), commit in last_write.items()
            if commit  # "": rows put back, a winner's
            and (commit not in completed or won.get((date, writer)) != commit)
        }
    )


def _history_since(found: DeltaTable, since_ms: int) -> list[dict] | None:
    """The table's commit infos at or after ``since_ms`` (None: the log no longer
    reaches back that far)."""
    limit = 64
    while True:
        entries = found.history(limit)
        if any(int(e.get("timestamp", 0)) < since_ms for e in entries):
            return [e for e in entries if int(e.get("timestamp", 0)) >= since_ms]
        if len(entries) < limit:
            return None if entries and int(entries[-1].get("version", 0)) > 0 else entries
        limit *= 4


def _reconcile(store: Store, table: str, horizon: pd.Timestamp, retain_hours: float) -> int:
    """Make the newest version of ``table`` hold, per (date, writer), the newest
    completed commit's rows only: delete rows of superseded commits and of commits
    that never completed and started before ``horizon``; where such a commit had
    replaced the winner's rows (a run killed between its table commits and its
    commit point), put the winner's rows back from the version it recorded. Only
    the months written since the last compaction are read. The rows removed."""
    column = TABLES[table][0]
    found = store.existing_table(table)
    months = _months_to_check(store, table, found, retain_hours)
    if months == []:
        return 0
    keys = [c for c in (column, WRITER, COMMIT_ID) if c is not None]
    filters = None if months is None else [(month_column(column or ""), "in", months)]
    data = delta.call(
        store.location,
        "reading",
        lambda: found.to_pyarrow_table(columns=keys, filters=filters),
    )
    if not data.num_rows:
        return 0
    counts = commits_present(data, column)
    completed = set(store.completed_commits()[COMMIT_ID])
    winner = store.winners(table)

    def finished(commit: str) -> bool:  # completed, or abandoned long enough ago
        if commit in completed:
            return True
        started = commit_started(commit)
        return started is not None and started < horizon

    deletes: list[str] = []
    restores: dict[int, list[Key]] = {}
    removed = 0
    for (date, writer), present in counts.items():
        best = winner.get((date, writer))
        others = [c for c in present if best is None or c != best[0]]
        if not others or not all(finished(c) for c in others):
            continue  # nothing to drop, or a writer perhaps still at work
        removed += int(sum(present[c] for c in others))
        if best is not None and best[0] not in present:
            restores.setdefault(best[1], []).append((table, date or None, writer))
            continue
        ids = ", ".join(sql_text(c) for c in sorted(others))
        clause = f"{WRITER} = {sql_text(writer)} AND {COMMIT_ID} IN ({ids})"
        if column is not None:
            clause = f"{column} = {sql_text(date)} AND {clause}"
        deletes.append(f"({clause})")
    if deletes:
        delta.retrying(
            store.location,
            f"dropping unread rows of {table!r} in",
            lambda: store.existing_table(table).delete(" OR ".join(deletes)),
        )
    for version, pairs in sorted(restores.items()):
        restore(store, table, pairs, version)
    return removed


def _upgrade_properties(store: Store, table: str, found: DeltaTable) -> None:
    """Give a table created by an earlier deepvm the statistics columns deepvm now
    sets (compaction rewrites its old files with them)."""
    wanted = delta.stats_columns(table)
    if found.metadata().configuration.get(delta.STATS_PROPERTY) == wanted:
        return
    delta.retrying(
        store.location,
        f"setting the properties of {table!r} in",
        lambda: store.existing_table(table).alter.set_table_properties(
            {delta.STATS_PROPERTY: wanted}, raise_if_not_exists=False
        ),
    )


OPEN_MONTH_FILES = 8  # a month not yet finished is merged once it holds this many files


def _merge_months(store: Store, table: str, cutoff: str) -> tuple[list[str], int]:
    """Merge each finished month's files into one; a month not finished (the
    current one) once it holds OPEN_MONTH_FILES files, so a reader on the 31st
    opens at most that many more files than on the 1st."""
    column = TABLES[table][0]
    if column is None:
        return [], 0
    month = month_column(column)
    found = store.existing_table(table)
    adds = pa.table(found.get_add_actions(flatten=True)).to_pandas()
    values = (
        adds[f"partition.{month}"] if f"partition.{month}" in adds else pd.Series([], dtype=str)
    )
    counts = values.value_counts()
    done, files = [], 0
    for value, count in sorted(counts.items()):
        if count < (OPEN_MONTH_FILES if value >= cutoff[:7] else 2):
            continue

        def optimize(value: str = value) -> dict:
            return store.existing_table(table).optimize.compact(
                partition_filters=[(month, "=", value)]
            )

        result = delta.retrying(store.location, f"compacting {table!r} of", optimize)
        done.append(value)
        files += int(result.get("numFilesRemoved", count))
    return done, files


def _record(store: Store, versions: dict[str, int]) -> None:
    """Each table's version after compaction, in the commits table: readers read at
    least that version, so files the vacuum deletes are never needed."""
    if not versions:
        return
    from deltalake import write_deltalake

    now = pd.Timestamp(dt.datetime.now(dt.UTC))
    commit_id = new_commit_id()  # unique: pruning deletes commits rows by id
    marker = pa.Table.from_pylist(
        [
            {
                COMMIT_ID: commit_id,
                "committed_at": now,
                "command": "compact",
                "table_name": table,
                "table_version": version,
                "date": None,
                WRITER: _COMPACT_WRITER,
            }
            for table, version in sorted(versions.items())
        ],
        schema=COMMITS_SCHEMA,
    )
    target = delta.create_table(store.location, COMMITS, COMMITS_SCHEMA, [])
    delta.retrying(
        store.location,
        "recording compaction in",
        lambda: write_deltalake(target, marker, mode="append"),
    )
    store.refresh()


def _prune_commits(store: Store, horizon: pd.Timestamp) -> None:
    """Drop commits rows that no reader uses any more: those superseded for their
    (table, date, writer) before ``horizon``; then merge the commits table's files."""
    done = store.completed_commits()
    if done.empty:
        return
    newest = done.drop_duplicates(["table_name", "date", WRITER], keep="last")
    stale = done[~done.index.isin(newest.index) & (done["committed_at"] < horizon)]
    if not stale.empty:
        keys = zip(stale[COMMIT_ID], stale["table_name"], stale["date"], stale[WRITER], strict=True)
        ids = " OR ".join(  # one commit (a migration) may hold other, current dates
            f"({COMMIT_ID} = {sql_text(c)} AND table_name = {sql_text(t)} "
            f"AND {WRITER} = {sql_text(w)} AND "
            + (f"date = {sql_text(d)})" if d else "date IS NULL)")
            for c, t, d, w in sorted(set(keys))
        )
        delta.retrying(
            store.location, "pruning commits of", lambda: store.existing_table(COMMITS).delete(ids)
        )
    compact_commits(store, at_files=2)
    store.refresh()


def _vacuum(store: Store, table: str, found: DeltaTable, retain_hours: float) -> int:
    def vacuum() -> list[str]:
        return found.vacuum(
            retention_hours=int(retain_hours), dry_run=False, enforce_retention_duration=False
        )

    return len(delta.retrying(store.location, f"removing old files of {table!r} in", vacuum))


@dataclass(frozen=True)
class StoreCheck:
    """What `deepvm store check` found: per table its files and rows as deepvm
    reads them, the problems (each with how to fix it), and rows no reader sees
    (unfinished or superseded commits; compaction removes them)."""

    files: dict[str, int]
    rows: dict[str, int]
    bad: list[str]
    unread_rows: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.bad


def check_store(store: Store) -> StoreCheck:
    """Open every table, check its schema version and columns, read every active
    file; nothing stops the check, so every problem is named."""
    from deepvm.store._legacy import legacy_files, stray_partitions

    files: dict[str, int] = {}
    rows: dict[str, int] = {}
    unread: dict[str, int] = {}
    bad: list[str] = []
    old = legacy_files(store.location)
    if old:
        count = sum(len(v) for v in old.values())
        bad.append(
            f"{count} file(s) of deepvm's earlier layout (schema 1 or 2): run "
            f"`deepvm store migrate --store {store.uri}`"
        )
    for folder, count in sorted(stray_partitions(store.location).items()):
        bad.append(
            f"folder {folder!r} is not a month partition: no reader sees its {count} "
            "file(s); move it out of the store (its rows are not part of any table)"
        )
    for table in [COMMITS, *TABLES]:
        files[table] = rows[table] = unread[table] = 0
        try:
            found = store.delta_table(table)
        except StoreError as exc:
            bad.append(str(exc))
            continue
        if found is None:
            continue
        expected = COMMITS_SCHEMA if table == COMMITS else None
        if expected is None:
            from deepvm.model.schemas import table_schema

            expected = table_schema(table)
        have = pa.schema(found.schema().to_arrow())
        for fld in expected:
            if fld.name not in have.names:
                bad.append(
                    f"table {store.location.table_uri(table)!r} lacks column {fld.name!r}: "
                    "move it out of the store and re-run the stage that wrote it"
                )
        total = 0
        dataset = found.to_pyarrow_dataset()
        for fragment in dataset.get_fragments():
            files[table] += 1
            try:
                total += fragment.to_table().num_rows
            except Exception as exc:  # pyarrow raises several kinds; all mean "unreadable"
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                bad.append(
                    f"store file {fragment.path!r} of table {table!r} cannot be read "
                    f"({first}): restore it from a backup, or run `deepvm store compact` "
                    "after the rows it held are written again"
                )
        if table == COMMITS:
            rows[table] = total
            continue
        try:
            rows[table] = store.rows(table).num_rows
        except StoreError as exc:
            bad.append(str(exc))
        unread[table] = max(0, total - rows[table])
    return StoreCheck(files, rows, bad, unread)
