"""The store: one Delta Lake table per table, plus the commits table that says
which commits are whole (docs/ARCHITECTURE.md, "The store").

A commit (one :meth:`Store.transaction`: a nightly run, one recommend, one
benchmark run) writes each table in one Delta commit whose rows, tagged with its
``commit_id`` and each row's ``writer`` (a job, a price source, ...), replace
that writer's rows of the same date; then it appends one row per (table, date,
writer) to ``commits``: that append is the commit point
(``deepvm.store._commit``). A plain Delta reader of a table's newest version sees
each date once per writer, whole. deepvm's readers read, per (table, date,
writer), the rows of the newest completed commit only, each table at the newest
version the commits table records for it (and, where a run killed before its
commit point had replaced those rows since, at the version that commit
recorded), so a reader sees every table of a date from one run, whatever other
writers are doing. Measurements are appends under a writer of their own, so any
number of machines can write at once.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from deepvm.base.config import MAX_NAME_LENGTH
from deepvm.base.errors import StoreError
from deepvm.base.names import check_date, check_name
from deepvm.model.schemas import (
    COMMIT_ID,
    COMMITS,
    COMMITS_SCHEMA,
    TABLES,
    WRITER,
    month_column,
    table_schema,
    to_arrow,
)
from deepvm.store import _delta as delta
from deepvm.store._commit import (
    Key,
    Transaction,
    commit,
    conform,
    key_rows,
    new_commit_id,
    row_dates,
)
from deepvm.store._legacy import check_not_legacy, legacy_files
from deepvm.store.location import Location, locate

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["Store", "StoreLike"]


class Store:
    """A store in a local folder or under an object-store prefix. Inside
    :meth:`transaction`, writes are held and reads see them; they are committed
    when the block ends."""

    def __init__(
        self, location: Location, tx: Transaction | None = None, *, check_legacy: bool = True
    ) -> None:
        self.location = location
        self._tx = tx
        self.check_legacy = check_legacy  # off for `store migrate` alone
        self._snapshot: pd.DataFrame | None = None  # the commits table, read once per view

    def __repr__(self) -> str:
        return f"Store({self.uri!r})"

    @classmethod
    def open(cls, uri: StoreLike | None = None) -> Store:
        """A store by URI (a Store is returned as it is, so that stages run inside
        a caller's transaction). Raises StoreError when the path cannot be a store."""
        if isinstance(uri, Store):
            return uri
        store = cls(locate(uri))
        store.check_path()
        return store

    @property
    def uri(self) -> str:
        """Where the store is (a folder or a URI)."""
        return self.location.uri

    @property
    def local(self) -> bool:
        return self.location.local

    def exists(self) -> bool:
        """Whether the store holds anything (a folder, or a commits table)."""
        if self.local:
            return self.location.root.is_dir()
        return self.delta_table(COMMITS) is not None or bool(legacy_files(self.location))

    # --- checks -------------------------------------------------------------------

    def check_path(self) -> None:
        if not self.local:
            return
        root = self.location.root
        if root.exists() and not root.is_dir():
            raise StoreError(
                f"store {str(root)!r} is a file, not a folder: give a folder with --store"
            )
        above = root.parent
        while not above.exists() and above != above.parent:
            above = above.parent
        if above.exists() and not above.is_dir():
            raise StoreError(
                f"store {str(root)!r} is under {str(above)!r}, which is a file: "
                "give a folder with --store"
            )

    def ensure_writable(self) -> Store:
        """Check, before any work, that commits can land here (a local folder that
        can be written; an object store that answers); leaves nothing behind."""
        self.check_path()
        if not self.local:  # a missing bucket or an unreachable endpoint fails here
            if delta.open_table(self.location, COMMITS) is None:
                self.completed_commits()  # a fresh store, or one of the earlier layout
            return self
        root = self.location.root
        target = root
        while not target.exists() and target != target.parent:
            target = target.parent
        if not os.access(target, os.W_OK | os.X_OK):
            raise StoreError(
                f"store {str(root)!r} is not writable ({str(target)!r} is read-only): "
                "fix its permissions or use another --store"
            )
        try:  # root bypasses permission bits: try for real
            fd, probe = tempfile.mkstemp(prefix=".deepvm-probe-", dir=target)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise delta.store_error(exc, self.location, "writing to") from None
        if root.is_dir() and delta.open_table(self.location, COMMITS) is None:
            self.completed_commits()  # an unmigrated store is named before any work
        return self

    # --- the commits table ----------------------------------------------------------

    def delta_table(self, table: str, version: int | None = None) -> DeltaTable | None:
        """The Delta table (at ``version``), or None when there is none."""
        return delta.open_table(self.location, table, version)

    def existing_table(self, table: str) -> DeltaTable:
        """The table, which this writer has seen exist; gone is a damaged store."""
        found = self.delta_table(table)
        if found is None:
            raise StoreError(
                f"store {self.uri!r}: table {table!r} vanished while in use: "
                f"run `deepvm store check --store {self.uri}` to see what is wrong"
            )
        return found

    def completed_commits(self) -> pd.DataFrame:
        """The completed commits, read once per store view (every read of one view
        sees the same commits)."""
        if self._snapshot is None:
            found = self.delta_table(COMMITS)
            if found is None:
                if self.check_legacy:
                    check_not_legacy(self.location)
                data = COMMITS_SCHEMA.empty_table()
            else:
                data = delta.call(
                    self.location, "reading the commits of", lambda: found.to_pyarrow_table()
                )
            # the date as text, "" for an undated table (instances)
            index = data.schema.get_field_index("date")
            dates = pc.fill_null(pc.cast(data.column(index), pa.string()), "")
            frame = data.set_column(index, "date", dates).to_pandas()
            self._snapshot = frame.sort_values(["committed_at", COMMIT_ID], kind="stable")
        return self._snapshot

    def newest_commits(self, table: str) -> pd.DataFrame:
        """Per (date, writer) of ``table``, the newest completed commit."""
        rows = self.completed_commits()
        rows = rows[rows["table_name"] == table]
        return rows.drop_duplicates(["date", WRITER], keep="last")

    def winners(self, table: str) -> dict[tuple[str, str], tuple[str, int]]:
        """(date, writer) of ``table`` -> the newest completed commit and the table
        version it recorded ("" is the date of an undated table)."""
        rows = self.newest_commits(table)
        return {
            (d, w): (c, int(v))
            for d, w, c, v in zip(
                rows["date"], rows[WRITER], rows[COMMIT_ID], rows["table_version"], strict=True
            )
        }

    def has_command(self, command: str) -> bool:
        """Whether a completed commit of ``command`` (e.g. "migrate") is in the store."""
        return bool((self.completed_commits()["command"] == command).any())

    def refresh(self) -> None:
        """Forget what was read, so that the next read sees commits made since."""
        self._snapshot = None

    # --- transactions -------------------------------------------------------------

    @contextmanager
    def transaction(self, command: str = "write") -> Iterator[Store]:
        """Hold every write made through the yielded store; commit them all when the
        block ends without an error, drop them all when it raises. A writer killed
        before its commit point leaves rows no deepvm reader sees."""
        if self._tx is not None:  # nested: part of the enclosing transaction
            yield self
            return
        self.ensure_writable()
        tx = Transaction(new_commit_id(), command)
        view = Store(self.location, tx, check_legacy=self.check_legacy)
        view._snapshot = self._snapshot
        yield view
        commit(self, tx)
        self.refresh()

    # --- writing ------------------------------------------------------------------

    def write(self, table: str, df: pd.DataFrame, *, partition: str | None, name: str = "0") -> str:
        """Write ``df`` as the date's rows of writer ``name``, replacing that
        writer's earlier rows of that date once committed; whole or not at all.
        Returns the table's location."""
        if self._tx is None:
            with self.transaction() as tx:
                return tx.write(table, df, partition=partition, name=name)
        column, _ = TABLES[table]
        if (column is None) != (partition is None):
            raise ValueError(
                f"table {table!r} partition must be {'None' if column is None else column}"
            )
        if partition is not None:
            check_date(partition, column or "partition")
        check_name(name, table)
        arrow = to_arrow(table, df, partition, name, self._tx.commit_id)  # before any commit
        self._tx.staged[(table, partition, name)] = arrow
        return self.location.table_uri(table)

    def append(self, table: str, df: pd.DataFrame, *, partition: str | None, writer: str) -> str:
        """Write ``df`` under a writer of its own (``writer`` plus a unique suffix):
        nothing is replaced, so any number of processes on any number of machines
        can append to one table at once without losing rows. Readers pick the newest
        row per key (docs/ARCHITECTURE.md, "The store")."""
        check_name(writer, table)
        name = f"{writer[: MAX_NAME_LENGTH - 14]}.{uuid.uuid4().hex[:12]}"
        if self._tx is None:
            with self.transaction(command="append") as tx:
                return tx.append(table, df, partition=partition, writer=writer)
        where = self.write(table, df, partition=partition, name=name)
        self._tx.appended.add((table, partition, name))
        return where

    # --- reading ------------------------------------------------------------------

    def partitions(self, table: str, *, writer: Callable[[str], bool] | None = None) -> list[str]:
        """The table's dates, sorted, from the commits table: no rows are read.
        Dates written in an open transaction count. ``writer``: only dates some
        writer it accepts wrote."""
        if TABLES[table][0] is None:
            return []
        done = self.completed_commits()
        mine = done["table_name"] == table
        if writer is not None:
            mine &= done[WRITER].map(writer).astype(bool)
        dates = set(done.loc[mine, "date"]) - {""}
        if self._tx is not None:
            dates |= {
                k[1]
                for k in self._tx.staged
                if k[0] == table and k[1] is not None and (writer is None or writer(k[2]))
            }
        return sorted(dates)

    def writers(self, table: str, date: str) -> list[str]:
        """The writers of ``table``'s ``date``, oldest commit first, those of an open
        transaction last (the last is the newest: a date refreshed twice reads as
        its last)."""
        won = self.newest_commits(table)
        done = [w for w in won.loc[won["date"] == date, WRITER] if isinstance(w, str)]
        staged = [k[2] for k in self._staged(table, {date})]
        return [w for w in done if w not in staged] + staged

    def has(self, table: str) -> bool:
        """Whether anything was committed to ``table`` (without reading it)."""
        done = self.completed_commits()
        staged = self._tx is not None and any(k[0] == table for k in self._tx.staged)
        return staged or bool((done["table_name"] == table).any())

    def rows(self, table: str, partitions: Collection[str] | None = None) -> pa.Table:
        """The table's rows of completed commits (of the given dates only) as Arrow,
        with the writer and commit columns; rows held in an open transaction replace
        their writer's."""
        column = TABLES[table][0]
        wanted = None if partitions is None or column is None else {*partitions}
        winners = self.newest_commits(table)
        if wanted is not None:
            winners = winners[winners["date"].isin(wanted)]
        staged = self._staged(table, wanted)
        result = table_schema(table).empty_table()
        if not winners.empty:
            result = self._read_winners(table, winners, wanted)
        if staged:
            mine = {(k[1] or "", k[2]) for k in staged}
            if result.num_rows and mine:
                keep = [
                    (d or "", w) not in mine
                    for d, w in zip(
                        row_dates(result, column), result.column(WRITER).to_pylist(), strict=True
                    )
                ]
                result = result.filter(pa.array(keep, pa.bool_()))
            result = pa.concat_tables([result, *staged.values()])
        return result

    def pinned(self, table: str) -> tuple[DeltaTable | None, pa.Table]:
        """``table`` at the newest version the completed commits record for it (None:
        no completed commit), and the rows of the newest completed commits that
        version does not hold (read where those commits recorded them): a reader
        that keeps the newest completed commit's rows per (date, writer) of the two
        together (:func:`deepvm.store.sql.whole_rows_sql`) reads what
        :meth:`rows` reads, without reading the pinned version's rows here."""
        column, empty = TABLES[table][0], table_schema(table).empty_table()
        found = self._pinned_version(table)
        if found is None:
            return None, empty
        columns = [c for c in (column, WRITER, COMMIT_ID) if c is not None]
        keys = delta.call(
            self.location,
            f"reading table {table!r} of",
            lambda: found.to_pyarrow_table(columns=columns),
        )
        winners = self.newest_commits(table)
        pairs, held = _held(keys, column, winners)
        parts = self._shadowed_rows(table, winners, pairs, held)
        return found, pa.concat_tables(parts) if parts else empty

    def _pinned_version(self, table: str) -> DeltaTable | None:
        """``table`` at the newest version the completed commits record (None: none)."""
        done = self.completed_commits()
        versions = done.loc[done["table_name"] == table, "table_version"]
        if not len(versions):
            return None
        found = self.delta_table(table, int(versions.max()))
        if found is None:
            raise StoreError(
                f"store {self.uri!r}: the commits table names table {table!r}, which is "
                "missing: restore it, or run `deepvm store check`"
            )
        return found

    def _staged(self, table: str, wanted: set[str] | None) -> dict[Key, pa.Table]:
        if self._tx is None:
            return {}
        return {
            k: v
            for k, v in self._tx.staged.items()
            if k[0] == table and (wanted is None or k[1] in wanted)
        }

    def _read_winners(self, table: str, winners: pd.DataFrame, wanted: set[str] | None) -> pa.Table:
        column = TABLES[table][0]
        found = self._pinned_version(table)
        assert found is not None  # ``winners`` are completed commits: they pin a version
        filters = None
        if column is not None and wanted is not None:
            months = sorted({d[:7] for d in wanted})
            days = [dt.date.fromisoformat(d) for d in sorted(wanted)]
            # the month prunes partitions; the date prunes the month's files by their
            # statistics (a month not yet compacted holds a file per night)
            filters = [(month_column(column), "in", months), (column, "in", days)]
        data = delta.call(
            self.location,
            f"reading table {table!r} of",
            lambda: found.to_pyarrow_table(filters=filters),
        )
        pairs, held = _held(data, column, winners)
        parts = [conform(data.filter(pa.array(held, pa.bool_())), table_schema(table))]
        parts.extend(self._shadowed_rows(table, winners, pairs, held))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _shadowed_rows(
        self,
        table: str,
        winners: pd.DataFrame,
        pairs: Sequence[tuple[str, str]],
        held: Sequence[bool],
    ) -> list[pa.Table]:
        """The winners' rows of the (date, writer) pairs that the pinned version holds
        only another commit's rows of (``pairs``: each pinned row's pair; ``held``:
        whether that row is its pair's winner's), read at the version each winner
        recorded. Two writes leave a winner's rows there only: a run killed after its
        write and before its commit point, once a later commit's version pins past
        it (compaction restores them in place); and a run of the same date at once
        whose write landed after the winner's, which the winner writes over after
        its own commit point (``_keep_winning``), in a version no commit records."""
        shadowed = set(pairs) - {pair for pair, k in zip(pairs, held, strict=True) if k}
        lost = winners[
            [(d, w) in shadowed for d, w in zip(winners["date"], winners[WRITER], strict=True)]
        ]
        return [
            self._rows_at(table, int(version), group)
            for version, group in lost.groupby("table_version")
        ]

    def _rows_at(self, table: str, version: int, winners: pd.DataFrame) -> pa.Table:
        """The winners' rows of ``table`` as its ``version`` holds them."""
        found = self.delta_table(table, version)
        if found is None:
            raise StoreError(
                f"store {self.uri!r}: table {table!r} has no version {version}, which the "
                "commits table names: run `deepvm store check`"
            )
        pairs: list[Key] = [
            (table, d or None, w) for d, w in zip(winners["date"], winners[WRITER], strict=True)
        ]
        data = delta.call(
            self.location, f"reading table {table!r} of", lambda: key_rows(found, table, pairs)
        )
        mine = set(winners[COMMIT_ID])
        data = data.filter(pc.is_in(data.column(COMMIT_ID), value_set=pa.array(sorted(mine))))
        return conform(data, table_schema(table))

    def read(
        self, table: str, partitions: Collection[str] | None = None, *, writer: str | None = None
    ) -> pd.DataFrame:
        """All rows of a table (or of the given dates only; of one ``writer`` only) as
        one DataFrame, the date column as ISO strings; the table's own columns only.
        Empty, with the schema's columns, when nothing was committed."""
        column, schema = TABLES[table]
        rows = self.rows(table, partitions)
        if writer is not None:
            rows = rows.filter(pc.equal(rows.column(WRITER), writer))
        names = [*schema.names, *([column] if column else [])]
        rows = rows.select(names)
        if column is not None:
            index = rows.schema.get_field_index(column)
            rows = rows.set_column(index, column, pc.cast(rows.column(index), pa.string()))
        out = rows.to_pandas()
        if column is not None and not len(out):
            out[column] = pd.Series(dtype="object")
        return out


def _held(
    data: pa.Table, column: str | None, winners: pd.DataFrame
) -> tuple[list[tuple[str, str]], list[bool]]:
    """Each row's (date, writer) pair, and whether the row is that pair's newest
    completed commit's (``winners``)."""
    won = dict(
        zip(zip(winners["date"], winners[WRITER], strict=True), winners[COMMIT_ID], strict=True)
    )
    pairs = [
        (d or "", w)
        for d, w in zip(row_dates(data, column), data.column(WRITER).to_pylist(), strict=True)
    ]
    held = [
        won.get(pair) == c
        for pair, c in zip(pairs, data.column(COMMIT_ID).to_pylist(), strict=True)
    ]
    return pairs, held


StoreLike = str | os.PathLike[str] | Store
