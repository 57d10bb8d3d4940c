"""Calls into delta-rs, each turned into one line a user can act on
(docs/ARCHITECTURE.md, "The store"): open or create a table, append, delete by
predicate, with a bounded number of retries when another writer commits first."""

from __future__ import annotations

import errno
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from deepvm.base.errors import StoreError
from deepvm.model.schemas import COMMIT_ID, COMMITS, SCHEMA_PROPERTY, SCHEMA_VERSION, TABLES, WRITER
from deepvm.store.location import Location

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = [
    "COMMIT_RETRIES",
    "STATS_PROPERTY",
    "T",
    "call",
    "check_version",
    "create_table",
    "is_conflict",
    "open_table",
    "retrying",
    "stats_columns",
    "store_error",
    "table_properties",
]

T = TypeVar("T")
COMMIT_RETRIES = 20  # commits that lose a race to another writer are retried this often
_FIX = "run `deepvm store check` to see what is wrong"


def store_error(exc: BaseException, location: Location, doing: str) -> StoreError:
    """A delta-rs or OS failure as one line that says what to do."""
    text = re.sub(r"\x1b\[[0-9;]*m|↳", " ", str(exc))
    text = " ".join(text.split()) or type(exc).__name__
    lower = text.lower()
    where = location.uri
    if (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or (
        "no space left" in lower
    ):
        return StoreError(
            f"no space left on the device while {doing} {where!r}: free space there or use "
            "another --store; nothing was committed"
        )
    if (isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)) or (
        "read-only file system" in lower or "permission denied" in lower
    ):
        return StoreError(
            f"store {where!r} is not writable ({text[:120]}): fix its permissions or use "
            "another --store"
        )
    if "nosuchbucket" in lower or "bucket does not exist" in lower or "bucket not found" in lower:
        bucket = where.split("://", 1)[-1].split("/", 1)[0]
        return StoreError(
            f"store {where!r}: bucket {bucket!r} does not exist; create it or give another --store"
        )
    if any(
        word in lower
        for word in ("connect", "timed out", "timeout", "dns", "resolve", "unreachable")
    ):
        return StoreError(
            f"store {where!r} cannot be reached while {doing} ({text[:160]}): check the "
            "endpoint (AWS_ENDPOINT_URL), the network and $DEEPVM_STORE_TIMEOUT"
        )
    if any(word in lower for word in ("credential", "accessdenied", "forbidden", "403", "401")):
        return StoreError(
            f"store {where!r} refused the request while {doing} ({text[:160]}): check the "
            "credentials and their permissions on the bucket"
        )
    return StoreError(
        f"store {where!r}: {doing} failed ({text[:200]}): run `deepvm store check --store "
        f"{where}` to see what is wrong"
    )


def call(location: Location, doing: str, fn: Callable[[], T]) -> T:
    """``fn()``, with any failure of the store below it as a StoreError."""
    try:
        return fn()
    except StoreError:
        raise
    except Exception as exc:  # delta-rs raises OSError, DeltaError and panics alike
        raise store_error(exc, location, doing) from None


def is_conflict(exc: BaseException) -> bool:
    from deltalake.exceptions import CommitFailedError

    text = str(exc).lower()
    return isinstance(exc, CommitFailedError) or any(
        word in text for word in ("conflict", "concurrent", "changed since last commit")
    )


def retrying(location: Location, doing: str, fn: Callable[[], T]) -> T:
    """``fn()``, retried (with a short growing pause) while another writer's commit
    conflicts with it, at most COMMIT_RETRIES times."""
    for attempt in range(COMMIT_RETRIES + 1):
        try:
            return fn()
        except StoreError:
            raise
        except Exception as exc:
            if not is_conflict(exc) or attempt == COMMIT_RETRIES:
                raise store_error(exc, location, doing) from None
            time.sleep(min(0.05 * 2**attempt, 1.0))
    raise AssertionError("unreachable")


def open_table(location: Location, table: str, version: int | None = None) -> DeltaTable | None:
    """The Delta table (at ``version``), or None when there is none; a table of
    another schema version is a StoreError naming the fix."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri = location.table_uri(table)
    try:
        found = DeltaTable(uri, version=version, storage_options=location.options)
    except TableNotFoundError:
        return None
    except Exception as exc:
        raise store_error(exc, location, f"reading table {table!r} of") from None
    check_version(location, table, found)
    return found


def check_version(location: Location, table: str, found: DeltaTable) -> None:
    version = found.metadata().configuration.get(SCHEMA_PROPERTY)
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"store {location.uri!r}: table {table!r} is not a deepvm table of schema "
            f"version {SCHEMA_VERSION} (its {SCHEMA_PROPERTY} is {version!r}): move it out of "
            "the store, or use the deepvm that wrote it"
        )


STATS_PROPERTY = "delta.dataSkippingStatsColumns"


def stats_columns(table: str) -> str:
    """The columns whose statistics each file's log entry keeps: the date, the
    writer and the commit. delta-rs's default is the first 32 columns, which put
    none of these in a wide table's statistics, so a write that replaces one
    date's rows opened every file of its month, and a reader paid for 32
    columns' filter expressions per file."""
    if table == COMMITS:
        return f"table_name,date,{WRITER},{COMMIT_ID}"
    column = TABLES[table][0]
    return ",".join(c for c in (column, WRITER, COMMIT_ID) if c is not None)


def table_properties(table: str) -> dict[str, str]:
    """The Delta table properties deepvm sets on every table it creates."""
    return {
        SCHEMA_PROPERTY: SCHEMA_VERSION,
        # a checkpoint every 10 commits: opening a table reads at most 10 log
        # files (on an object store, one request each) however busy it is
        "delta.checkpointInterval": "10",
        STATS_PROPERTY: stats_columns(table),
    }


def create_table(
    location: Location, table: str, schema: pa.Schema, partition_by: list[str]
) -> DeltaTable:
    """The table, created when absent; two writers creating it at once both get it."""
    from deltalake import CommitProperties, DeltaTable

    for _ in range(5):
        found = open_table(location, table)
        if found is not None:
            return found
        try:
            return DeltaTable.create(
                location.table_uri(table),
                schema,
                mode="error",
                partition_by=partition_by or None,
                configuration=table_properties(table),
                storage_options=location.options,
                raise_if_key_not_exists=False,
                # never retried as a later version: a second creator must find the first's
                commit_properties=CommitProperties(max_commit_retries=0),
            )
        except Exception as exc:
            text = str(exc).lower()
            if "already exists" not in text and not is_conflict(exc):
                raise store_error(exc, location, f"creating table {table!r} in") from None
    raise StoreError(f"store {location.uri!r}: table {table!r} could not be created: {_FIX}")
