"""The nightly's first stage: prices and specs from a source into the store
(``prices``, ``instances``), and AWS's Spot Instance Advisor feed
(``spot_advisor``), under one deadline with retries, with the store's newest
snapshot carried forward where a source fails (docs/ARCHITECTURE.md, "Data flow").
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pandas as pd

from deepvm.base.config import (
    DEFAULT_PRICE_BACKOFF_S,
    DEFAULT_PRICE_RETRIES,
    DEFAULT_PRICE_TIMEOUT_S,
)
from deepvm.base.errors import InputError, ParameterError, SourceUnavailableError
from deepvm.base.names import check_date
from deepvm.catalog.sources import (
    fill_interruption_rates,
    fill_price_dates,
    get_source,
)
from deepvm.store.core import Store

__all__ = [
    "DEFAULT_BACKOFF_S",
    "DEFAULT_RETRIES",
    "AdvisorRefresh",
    "PriceRefresh",
    "PriceSourceError",
    "refresh_prices",
    "refresh_spot_advisor",
    "today",
]

log = logging.getLogger("deepvm")
_T = TypeVar("_T")

DEFAULT_RETRIES = DEFAULT_PRICE_RETRIES
DEFAULT_BACKOFF_S = DEFAULT_PRICE_BACKOFF_S  # a module attribute: tests shorten it


class PriceSourceError(SourceUnavailableError):
    """A price source failed and the store has no earlier snapshot to fall back to."""


def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


# --- prices -------------------------------------------------------------------------


@dataclass(frozen=True)
class PriceRefresh:
    snapshot_date: str
    source: str
    stale: bool
    rows: int
    attempts: int
    error: str | None = None
    fallback_from: str | None = None
    dropped: int = 0
    # The clouds this source does not price, kept from the newest snapshot before
    # (one line that says which, from where); None: the source priced them all.
    carried: str | None = None
    kept: bool = False  # the date's own earlier refresh, planned on as it is

    @property
    def failed(self) -> bool:
        """The source did not deliver: the date's prices are an earlier snapshot."""
        return self.error is not None

    def words(self) -> str:
        """What the night's prices are, in one line."""
        if self.kept:
            return f"prices: {self.snapshot_date}'s refreshed snapshot from {self.source}, kept"
        line = f"prices: {self.rows} rows from {self.source} for {self.snapshot_date}"
        return line + (f"; {self.carried}" if self.carried else "")


def refresh_prices(
    store: Store,
    source: str | None = "snapshot",
    *,
    snapshot_date: str | None = None,
    retries: int = DEFAULT_RETRIES,
    backoff_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    regions: Sequence[str] | None = None,
    skypilot_csv: str | None = None,
    timeout_s: float = DEFAULT_PRICE_TIMEOUT_S,
) -> PriceRefresh:
    """Fetch prices and specs from ``source`` into the store's ``prices`` (partition
    ``snapshot_date``) and ``instances`` tables.

    The fetch, its retries and their backoff (backoff_s, 2x, 4x, ...) share one
    deadline of ``timeout_s`` seconds; only transient failures (timeouts,
    throttling, 5xx) are retried. When the source still fails, the newest
    earlier snapshot is carried into this date with ``stale = true`` (a date that
    already has a snapshot keeps it) and the result says the refresh failed.
    Bad input (an unknown source, an invalid catalog) is raised at once.

    A source that prices some clouds only (a file of AWS prices, the aws source)
    makes a snapshot of those clouds and keeps every other cloud's rows from the
    newest snapshot before (else the shipped one), and says so (``carried``): a
    night never loses a cloud because its source did not price it. ``source``
    None (the nightly's default): the date's own refresh if it has one, kept as it
    is (``kept``), else the shipped snapshot. A date refreshed twice is read as
    its newest refresh (deepvm.records.inputs.price_snapshot).
    """
    _check_fetch(timeout_s, retries)
    date = check_date(snapshot_date or today(), "snapshot_date")
    store.ensure_writable()
    if source is None:
        if store.writers("prices", date):
            from deepvm.records.inputs import price_snapshot

            rows, writer = price_snapshot(store, date)
            stale = bool(rows["stale"].any())
            return PriceRefresh(date, writer, stale, len(rows), 0, kept=True)
        source = "snapshot"
    src = get_source(source, regions=regions, skypilot_csv=skypilot_csv)
    data, error, attempts = _fetch(src.fetch, src.name, retries, backoff_s, sleep, timeout_s)
    if data is not None and data.prices.empty:  # nothing usable: never a snapshot
        error, data = f"source {src.name!r} returned no usable prices", None
    if data is not None:
        prices = fill_price_dates(fill_interruption_rates(data.prices))
        instances, prices, carried = _with_other_clouds(store, date, data.instances, prices)
        with store.transaction(command="prices") as tx:
            tx.write("instances", instances, partition=None, name=src.name)
            tx.write("prices", prices, partition=date, name=src.name)
        return PriceRefresh(
            date, src.name, False, len(data.prices), attempts, dropped=data.dropped,
            carried=carried,
        )  # fmt: skip
    return _fall_back(store, date, src.name, attempts, error or "unknown error")


def _with_other_clouds(
    store: Store, date: str, instances: pd.DataFrame, prices: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """The source's rows and, for every cloud it does not price, the rows of the
    newest snapshot on or before ``date`` (else the shipped snapshot's, with their
    specs); and the line that says what was kept, or None."""
    from deepvm.catalog.sources import SnapshotSource
    from deepvm.records.inputs import price_snapshot

    covered = set(prices["provider"].dropna())
    earlier = [d for d in store.partitions("prices") if d <= date]
    if earlier:
        base, writer = price_snapshot(store, earlier[-1])
        base = base.drop(columns="snapshot_date")
        where = f"the {earlier[-1]} snapshot ({writer})"
        specs = instances.iloc[:0]
    else:
        shipped = SnapshotSource().fetch()
        base = fill_price_dates(fill_interruption_rates(shipped.prices))
        where = "the shipped snapshot"
        specs = shipped.instances
    others = base[~base["provider"].isin(covered)]
    if others.empty:
        return instances, prices, None
    kept = sorted(set(others["provider"].dropna()))
    specs = specs[specs["provider"].isin(kept)] if "provider" in specs else specs.iloc[:0]
    line = (
        f"{', '.join(kept)} kept from {where} ({len(others)} rows): this source prices "
        f"{', '.join(sorted(covered)) or 'no cloud'} only"
    )
    log.info("prices: %s", line)
    return (
        pd.concat([instances, specs], ignore_index=True),
        pd.concat([prices, others[prices.columns]], ignore_index=True),
        line,
    )


def _check_fetch(timeout_s: float, retries: int) -> None:
    if not timeout_s > 0 or not math.isfinite(timeout_s):
        raise ParameterError("timeout_s", timeout_s, "must be a positive number of seconds")
    if retries < 0:
        raise ParameterError("retries", retries, "must be >= 0")


def _fetch(
    fetch: Callable[[], _T],
    name: str,
    retries: int,
    backoff_s: float | None,
    sleep: Callable[[float], None],
    timeout_s: float,
) -> tuple[_T | None, str | None, int]:
    """``fetch()`` under one deadline of ``timeout_s`` for every attempt and pause;
    only transient failures are retried (backoff_s, 2x, 4x, ...); bad input is
    raised at once. Returns (what it fetched or None, the last error, attempts)."""
    from deepvm.catalog.http import fetch_with_deadline, is_transient

    backoff = DEFAULT_BACKOFF_S if backoff_s is None else backoff_s
    error: str | None = None
    attempts = 0
    end = time.monotonic() + timeout_s
    while attempts <= retries:
        attempts += 1
        try:
            return fetch_with_deadline(fetch, max(0.0, end - time.monotonic())), None, attempts
        except InputError:
            raise
        except Exception as exc:  # classified below: retry only what may mend
            error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            log.warning("source %s failed (attempt %d): %s", name, attempts, error)
            pause = backoff * 2 ** (attempts - 1)
            if not is_transient(exc) or time.monotonic() + pause >= end:
                break
            if attempts <= retries:
                sleep(pause)
    return None, error, attempts


@dataclass(frozen=True)
class AdvisorRefresh:
    snapshot_date: str
    source: str
    rows: int
    attempts: int
    error: str | None = None
    kept: str | None = None  # on failure: the snapshot the store keeps using

    @property
    def failed(self) -> bool:
        return self.error is not None


def refresh_spot_advisor(
    store: Store,
    url: str | None = None,
    *,
    snapshot_date: str | None = None,
    retries: int = DEFAULT_RETRIES,
    backoff_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    timeout_s: float = DEFAULT_PRICE_TIMEOUT_S,
) -> AdvisorRefresh:
    """Fetch AWS's Spot Instance Advisor feed (``url``: the public one by default,
    or a saved copy) into the store's ``spot_advisor`` table (partition
    ``snapshot_date``), under the price sources' timeout and retry rules. A
    failure writes nothing: planning keeps the newest earlier snapshot (or the
    shipped catalog's buckets), and the result names it."""
    from deepvm.catalog.spot_advisor import PUBLIC_URL, SpotAdvisorSource

    _check_fetch(timeout_s, retries)
    date = check_date(snapshot_date or today(), "snapshot_date")
    store.ensure_writable()
    src = SpotAdvisorSource(url or PUBLIC_URL)
    rows, error, attempts = _fetch(src.fetch, src.name, retries, backoff_s, sleep, timeout_s)
    if rows is None:
        earlier = [d for d in store.partitions("spot_advisor") if d <= date]
        kept = earlier[-1] if earlier else None
        return AdvisorRefresh(date, src.url, 0, attempts, error or "unknown error", kept)
    rows = rows.assign(fetched_at=pd.Timestamp(dt.datetime.now(dt.UTC)))
    store.write("spot_advisor", rows, partition=date, name=src.name)
    return AdvisorRefresh(date, src.url, len(rows), attempts)


def _fall_back(store: Store, date: str, source: str, attempts: int, error: str) -> PriceRefresh:
    from deepvm.records.inputs import price_snapshot

    dates = store.partitions("prices")
    if not dates:
        raise PriceSourceError(
            f"price source {source!r} failed after {attempts} attempt(s) ({error}) and the "
            "store has no earlier snapshot to fall back to; check the network or the "
            "source's credentials, or run `deepvm prices refresh --source snapshot` first"
        )
    if date in dates:  # this date has prices already: keep them exactly as they are
        same_day, _ = price_snapshot(store, date)
        log.warning("price source %s failed; keeping %s's snapshot", source, date)
        return PriceRefresh(date, source, True, len(same_day), attempts, error, fallback_from=date)
    earlier = [d for d in dates if d < date]
    newest = earlier[-1] if earlier else dates[-1]
    carried = price_snapshot(store, newest)[0].drop(columns="snapshot_date").copy()
    carried["stale"] = True
    store.write("prices", carried, partition=date, name=source)
    log.warning("price source %s failed; carried %s's snapshot forward as stale", source, newest)
    return PriceRefresh(date, source, True, len(carried), attempts, error, fallback_from=newest)
