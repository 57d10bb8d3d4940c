"""A cluster as deepvm's answers name it: one value type from which every listing,
JSON contract, store table and text rendering of a cluster derives
(docs/ARCHITECTURE.md, "Layers": the data model). A recommendation, an
alternative to it, a job's cluster in the fleet plan and the store's rows all
carry these fields, under these names.

A new cluster field is one line here; the store's tables, the fleet rows and
the JSON contracts follow (``deepvm.model.schemas`` builds its columns from
:data:`CLUSTER_COLUMNS`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["CLUSTER_COLUMNS", "CLUSTER_FIELDS", "Cluster", "cluster_words", "parse_words"]


@dataclass(frozen=True)
class Cluster:
    """Where and what: region and the spot nodes' zone (None where prices are per
    region or nothing is spot), architecture, the GPU worker type and its node
    counts by market, the remote tier (Tiering's CPU nodes), and what it costs
    and delivers."""

    region: str
    zone: str | None
    architecture: str
    worker_type: str
    n_workers: int
    n_spot: int
    n_on_demand: int
    remote_type: str | None
    n_remote: int
    hourly_cost: float  # USD per hour, the whole cluster
    throughput_flops: float  # FLOP/s of the workers together
    # The cloud (the catalog's provider: aws, gcp, azure); every node of a cluster is
    # in it (the remote tier and the anchor stay in the workers' region).
    # (Keyword-only with a default, so the subclasses' own fields may follow it.)
    cloud: str = field(default="", kw_only=True)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> Cluster | None:
        """The cluster of a row (a JSON object, a store row); None where the row
        has none (an unplanned job: no worker type)."""
        worker = row.get("worker_type")
        if not isinstance(worker, str) or not worker:
            return None

        def text(name: str) -> str | None:
            value = row.get(name)
            return value if isinstance(value, str) and value else None

        def count(name: str) -> int:
            value = row.get(name)
            return 0 if value is None or _missing(value) else int(value)

        def number(name: str) -> float:
            value = row.get(name)
            return math.nan if value is None or _missing(value) else float(value)

        return cls(
            region=text("region") or "",
            zone=text("zone"),
            architecture=str(row.get("architecture")),
            worker_type=worker,
            n_workers=count("n_workers"),
            n_spot=count("n_spot"),
            n_on_demand=count("n_on_demand"),
            remote_type=text("remote_type"),
            n_remote=count("n_remote"),
            hourly_cost=number("hourly_cost"),
            throughput_flops=number("throughput_flops"),
            cloud=text("cloud") or "",
        )

    def identity(self) -> tuple[object, ...]:
        """What makes two clusters the same cluster (prices and throughput aside):
        the change report compares these."""
        return (
            self.region,
            self.architecture,
            self.worker_type,
            self.n_workers,
            self.n_spot,
            self.remote_type,
            self.n_remote,
        )

    def words(self, *, architecture: bool = False, region: bool = False) -> str:
        """e.g. ``2 x p4d.24xlarge spot + 1 x t3.xlarge``, ``33 x g4dn.xlarge (32
        spot, 1 od)``; with ``architecture`` it leads (``tiering: ...``), with
        ``region`` it ends the text (``... in us-east-1``)."""
        if not self.n_on_demand:
            market = "spot"
        elif not self.n_spot:
            market = "on-demand"
        else:
            market = f"({self.n_spot} spot, {self.n_on_demand} od)"
        text = f"{self.n_workers} x {self.worker_type} {market}"
        if self.remote_type:
            text += f" + {self.n_remote} x {self.remote_type}"
        if architecture:
            text = f"{self.architecture}: {text}"
        if region and self.region:
            text += f" in {self.region}"
        return text


def _missing(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)


CLUSTER_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Cluster))
# Each field's column type in the store (Arrow names), derived from its annotation.
_COLUMN_TYPES = {"str": "string", "str | None": "string", "int": "int64", "float": "float64"}
CLUSTER_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (f.name, _COLUMN_TYPES[str(f.type)]) for f in fields(Cluster)
)


def cluster_words(row: Mapping[str, Any], **options: bool) -> str:
    """``Cluster.words`` of a row; ``unplanned`` where the row has no cluster."""
    cluster = Cluster.from_mapping(row)
    return "unplanned" if cluster is None else cluster.words(**options)


# Cluster.words(architecture=True, region=True), read back (the zone aside).
_WORDS = re.compile(
    r"^\s*(?P<arch>[a-z_]+):\s*(?P<n>\d+) x (?P<type>\S+) "
    r"(?:(?P<spot>spot)|(?P<od>on-demand)|\((?P<s>\d+) spot, (?P<o>\d+) od\))"
    r"(?: \+ (?P<m>\d+) x (?P<remote>\S+))? in (?P<region>\S+)\s*$"
)


def parse_words(text: str) -> Cluster:
    """A cluster from its words as deepvm writes them with its architecture and
    region (``tiering: 2 x p4d.24xlarge spot + 1 x t3.xlarge in us-east-1``); its
    cost and throughput are unknown here (NaN). A ValueError says what is expected."""
    found = _WORDS.match(text)
    if found is None:
        raise ValueError(
            f"{text!r} is not a cluster as deepvm writes it, e.g. 'tiering: 2 x "
            "p4d.24xlarge spot + 1 x t3.xlarge in us-east-1' or 'single_anchor: 9 x "
            "g5.xlarge (8 spot, 1 od) in us-west-2'"
        )
    n = int(found["n"])
    spot = n if found["spot"] else 0 if found["od"] else int(found["s"])
    if not found["spot"] and not found["od"] and spot + int(found["o"]) != n:
        raise ValueError(f"{text!r}: {found['s']} spot + {found['o']} od is not {n} nodes")
    return Cluster(
        region=found["region"],
        zone=None,
        architecture=found["arch"],
        worker_type=found["type"],
        n_workers=n,
        n_spot=spot,
        n_on_demand=n - spot,
        remote_type=found["remote"],
        n_remote=int(found["m"] or 0),
        hourly_cost=math.nan,
        throughput_flops=math.nan,
    )
