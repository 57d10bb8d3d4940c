"""AWS's Spot Instance Advisor feed: per region and instance type, the monthly
interruption-frequency bucket and the average spot saving against on-demand
(docs/ARCHITECTURE.md, "Interruptions and spot prices").

The feed is the public JSON behind the Advisor page::

    {"ranges": [{"index": 0, "label": "<5%", ...}, ...],
     "spot_advisor": {"us-east-1": {"Linux": {"p4d.24xlarge": {"r": 2, "s": 67}}}}}

``r`` indexes ``ranges`` (the bucket), ``s`` is the saving in percent. It names
no date: a live fetch is dated by the day it was fetched; the shipped copy by
the date it was captured.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from deepvm.base.config import SPOT_ADVISOR_URL as PUBLIC_URL
from deepvm.base.errors import InputError, SourceUnavailableError
from deepvm.catalog.common import Catalog, with_rows_from

__all__ = [
    "COLUMNS",
    "OS",
    "SOURCE_NAME",
    "FeedError",
    "SpotAdvisorSource",
    "parse_feed",
    "shipped_advisor",
    "with_advisor",
]

SOURCE_NAME = "aws-spot-advisor"
OS = "Linux"
# The store's spot_advisor rows (deepvm.model.schemas), in order.
COLUMNS = (
    "region",
    "instance_type",
    "interruption_bucket",
    "interruption_rate",
    "savings_pct",
    "feed_date",
    "source",
)


class FeedError(SourceUnavailableError, ValueError):  # ValueError: as before
    """The feed does not have the Advisor's shape."""


def parse_feed(feed: Any, *, feed_date: str, source: str = SOURCE_NAME) -> pd.DataFrame:
    """The Linux rows of a feed as COLUMNS, one per (region, instance type); the
    bucket label is the feed's own (``ranges``), its rate deepvm's (bucket_rate)."""
    from deepvm.catalog.advisor_buckets import bucket_rate

    if not isinstance(feed, dict) or not isinstance(feed.get("spot_advisor"), dict):
        raise FeedError("not a Spot Instance Advisor feed: no 'spot_advisor' object")
    try:
        labels = {int(r["index"]): str(r["label"]) for r in feed["ranges"]}
        rates = {i: bucket_rate(label) for i, label in labels.items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise FeedError(f"the feed's 'ranges' are not the Advisor's buckets ({exc})") from None
    rows = []
    for region, by_os in sorted(feed["spot_advisor"].items()):
        types = by_os.get(OS, {}) if isinstance(by_os, dict) else {}
        for itype, entry in sorted(types.items()):
            try:
                index, saving = int(entry["r"]), float(entry["s"])
            except (KeyError, TypeError, ValueError):
                raise FeedError(
                    f"{region} {itype}: entry {entry!r} lacks a numeric r and s"
                ) from None
            if index not in labels or not saving < 100:  # a few are < 0: spot dearer
                raise FeedError(f"{region} {itype}: bucket {index} or saving {saving:g} % unknown")
            rows.append((region, itype, labels[index], rates[index], saving, feed_date, source))
    if not rows:
        raise FeedError(f"the feed has no {OS} rows")
    return pd.DataFrame(rows, columns=list(COLUMNS))


@dataclass(frozen=True)
class SpotAdvisorSource:
    """The live feed (``url``, the public one by default) or a saved copy (a path)."""

    url: str = PUBLIC_URL
    name: str = SOURCE_NAME

    def fetch(self) -> pd.DataFrame:
        from deepvm.catalog.http import SourceUnavailable, get_json

        if self.url.startswith(("http://", "https://")):
            feed = get_json(self.url)
            feed_date = dt.datetime.now(dt.UTC).date().isoformat()
        else:
            path = Path(self.url)
            if not path.is_file():
                raise InputError(
                    f"spot advisor feed {self.url!r} is neither an http(s) URL nor a file"
                )
            try:
                feed = json.loads(path.read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise InputError(f"spot advisor feed {self.url!r} is not JSON ({exc})") from None
            # a saved copy is dated by its name (...-2025-06-28.json), else its file's day
            named = re.search(r"\d{4}-\d{2}-\d{2}", path.name)
            feed_date = (
                named.group()
                if named
                else dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).date().isoformat()
            )
        try:
            return parse_feed(feed, feed_date=feed_date, source=f"{SOURCE_NAME}:{self.url}")
        except FeedError as exc:
            raise SourceUnavailable(f"{self.url}: {exc}") from None


def shipped_advisor() -> pd.DataFrame:
    """The shipped catalog's Advisor columns as feed rows (region, instance_type,
    interruption_bucket, interruption_rate, savings_pct, feed_date, source): what
    a store without an Advisor snapshot plans with."""
    return _shipped_advisor().copy()


@functools.cache
def _shipped_advisor() -> pd.DataFrame:  # read once per process: every plan may ask
    from deepvm.catalog._snapshot import load_catalog

    df = load_catalog().instances
    df = df[df["interruption_source"] == SOURCE_NAME]
    return pd.DataFrame(
        {
            "region": df["region"],
            "instance_type": df["instance_type"],
            "interruption_bucket": df["interruption_bucket"],
            "interruption_rate": df["interruption_rate"].astype(float),
            "savings_pct": df["regional_saving_pct"].astype(float),
            "feed_date": df["interruption_date"],
            "source": SOURCE_NAME,
        }
    ).reset_index(drop=True)


def with_advisor(catalog: Catalog, feed: pd.DataFrame) -> Catalog:
    """The catalog with the feed's bucket, rate and regional saving for every
    (region, type) the feed has; other rows keep theirs."""
    import numpy as np

    table = catalog.table
    at = {key: k for k, key in enumerate(zip(feed["region"], feed["instance_type"], strict=True))}
    keys = zip(table["region"], table["instance_type"], strict=True)
    return with_rows_from(
        catalog,
        [at.get(key) for key in keys],
        {
            "interruption_rate": feed["interruption_rate"].to_numpy(dtype=float),
            "interruption_bucket": feed["interruption_bucket"].to_numpy(dtype=object),
            "interruption_source": np.full(len(feed), SOURCE_NAME, dtype=object),
            "interruption_date": feed["feed_date"].to_numpy(dtype=object),
            "regional_saving_pct": feed["savings_pct"].to_numpy(dtype=float),
        },
    )
